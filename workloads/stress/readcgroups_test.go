package main

import (
	"path/filepath"
	"reflect"
	"testing"
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
	if findDir(root, "pod1-2-3") != pod {
		t.Fatalf("findDir disagrees with findDirs")
	}
}
