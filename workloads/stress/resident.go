package main

import (
	"fmt"
	"os"
	"syscall"
	"unsafe"
)

// runResident reports how many bytes of each file are resident in memory, as mincore(2) sees
// them. For a tmpfs file a page swapped out (and no longer in the swap cache) is not resident,
// so this tells whether a memory-backed volume's pages were pushed to swap. Mapping the file
// read-only and asking mincore faults nothing in.
// Prints `resident B size=S path="P"` per file; exit 1 if one could not be measured.
func runResident(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("resident: want at least one FILE")
	}
	failed := false
	for _, path := range args {
		resident, size, err := residentBytes(path)
		if err != nil {
			fmt.Fprintf(os.Stderr, "resident: %s: %v\n", path, err)
			failed = true
			continue
		}
		emit("resident %d size=%d path=%s", resident, size, quote(path))
	}
	if failed {
		return exitError{1}
	}
	return nil
}

func residentBytes(path string) (resident, size uint64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return 0, 0, err
	}
	size = uint64(info.Size())
	if size == 0 {
		return 0, 0, nil // nothing to map
	}
	mem, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return 0, size, fmt.Errorf("mmap: %w", err)
	}
	defer syscall.Munmap(mem)
	pages := (size + uint64(page) - 1) / uint64(page)
	vec := make([]byte, pages)
	if _, _, errno := syscall.Syscall(syscall.SYS_MINCORE, uintptr(unsafe.Pointer(&mem[0])), uintptr(len(mem)),
		uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		return 0, size, fmt.Errorf("mincore: %w", errno)
	}
	for i, v := range vec {
		if v&1 == 0 {
			continue
		}
		// The last page may be partial: count only the file's bytes.
		resident += min(uint64(page), size-uint64(i)*uint64(page))
	}
	return resident, size, nil
}
