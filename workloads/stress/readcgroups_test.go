package main

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestFindDirsWalksOnceForEveryPart(t *testing.T) {
	root := t.TempDir()
	pod := filepath.Join(root, "kubepods.slice", "kubepods-burstable.slice", "kubepods-burstable-pod1_2_3.slice")
	first := filepath.Join(pod, "cri-containerd-0123456789abcdef.scope")
	write(t, filepath.Join(first, "memory.max"), "67108864\n")
	write(t, filepath.Join(pod, "cri-containerd-fedcba9876543210.scope", "memory.max"), "max\n")

	got := findDirs(root, []string{"0123456789abcdef", "pod1-2-3", ".", "ffffffffffffffff"})
	want := map[string]string{
		"0123456789abcdef": first,
		"pod1-2-3":         pod, // the API's UID spelling finds the systemd driver's slice
		".":                root,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("findDirs = %v, want %v", got, want)
	}
}

func TestAPartWithASlashIsAPathBelowTheRoot(t *testing.T) {
	root := t.TempDir()
	qos := filepath.Join(root, "kubepods", "burstable")
	write(t, filepath.Join(qos, "memory.swap.max"), "max\n")
	write(t, filepath.Join(root, "other", "kubepods", "burstable", "memory.swap.max"), "0\n")

	got := findDirs(root, []string{"/kubepods/burstable", "kubepods/burstable", "/kubepods/gone"})
	want := map[string]string{"/kubepods/burstable": qos, "kubepods/burstable": qos}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("findDirs = %v, want %v", got, want)
	}
	var out bytes.Buffer
	if err := readCgroups(&out, []string{root, "memory.swap.max", "/kubepods"}); err != nil {
		t.Fatalf("a short path is no short name: %v", err)
	}
}

func TestReadCgroupsEveryForIsASeriesOnTheNodesClock(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "memory.swap.current"), "4096\n")
	var out bytes.Buffer
	start := time.Now()
	if err := readCgroups(&out, []string{"--every", "20ms", "--for", "200ms", root, "memory.swap.current,memory.absent", "."}); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	// One read at once, then one per tick until the window ends: about 11, never 1 (a loaded
	// machine may drop ticks, so the floor is a series, not a count).
	if len(lines) < 2 || len(lines) > 12 || took < 200*time.Millisecond {
		t.Fatalf("%d reads in %v:\n%s", len(lines), took, out.String())
	}
	var last int64
	closest := int64(-1) // the smallest gap between two reads, in ms: the tick, where ticks are not dropped
	for _, line := range lines {
		var doc readCgroupsOutput
		if err := json.Unmarshal([]byte(line), &doc); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		if doc.UnixMilli < last || doc.UnixMilli < start.UnixMilli() {
			t.Fatalf("read times go back: %d after %d (start %d)", doc.UnixMilli, last, start.UnixMilli())
		}
		if gap := doc.UnixMilli - last; last > 0 && (closest < 0 || gap < closest) {
			closest = gap
		}
		last = doc.UnixMilli
		files := doc.Cgroups["."].Files
		if got := files["memory.swap.current"]; got == nil || *got != "4096\n" || files["memory.absent"] != nil {
			t.Fatalf("files = %v", files)
		}
	}
	if closest >= 60 { // at 20 ms; a 100 ms tick, say, would never bring two reads this close
		t.Fatalf("no two reads within 60ms of each other (closest %dms): not every 20ms\n%s", closest, out.String())
	}
}

func TestReadCgroupsEveryAndForGoTogether(t *testing.T) {
	for _, args := range [][]string{{"--every", "1s"}, {"--for", "1s"}, {"--every", "-1s", "--for", "1s"}} {
		err := readCgroups(&bytes.Buffer{}, append(args, t.TempDir(), "memory.max", "."))
		if err == nil || !strings.Contains(err.Error(), "go together") {
			t.Fatalf("%v: err = %v", args, err)
		}
	}
}
