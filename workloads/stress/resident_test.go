package main

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// A file just written is in the page cache; after fsync and POSIX_FADV_DONTNEED a disk-backed
// file's clean pages are dropped. The partial last page counts only the file's own bytes.
func TestResidentBytes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "data")
	size := uint64(3*page + 100)
	if _, err := writeFile(path, size, 1<<20); err != nil {
		t.Fatal(err)
	}
	resident, got, err := residentBytes(path)
	if err != nil || got != size || resident != size {
		t.Fatalf("after write: resident %d size %d err %v; want %d %d", resident, got, err, size, size)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const fadvDontneed = 4
	if _, _, errno := syscall.Syscall6(syscall.SYS_FADVISE64, f.Fd(), 0, 0, fadvDontneed, 0, 0); errno != 0 {
		t.Fatal(errno)
	}
	var statfs syscall.Statfs_t
	if err := syscall.Statfs(path, &statfs); err == nil && statfs.Type == 0x01021994 { // TMPFS_MAGIC
		t.Skip("TMPDIR is a tmpfs: its pages cannot be dropped")
	}
	if resident, _, err = residentBytes(path); err != nil || resident != 0 {
		t.Errorf("after DONTNEED: resident %d err %v; want 0", resident, err)
	}
	if resident, got, err = residentBytes(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Errorf("missing file: resident %d size %d, want an error", resident, got)
	}
}
