package main

import (
	"fmt"
	"syscall"
	"testing"
)

func TestNoswapVerdict(t *testing.T) {
	if ok, err := noswapVerdict(nil); !ok || err != nil {
		t.Fatalf("a successful mount: got %v %v", ok, err)
	}
	if ok, err := noswapVerdict(fmt.Errorf("mount: %w", syscall.EINVAL)); ok || err != nil {
		t.Fatalf("EINVAL (the kernel rejects noswap): got %v %v", ok, err)
	}
	for _, errno := range []syscall.Errno{syscall.EPERM, syscall.EACCES, syscall.ENOENT} {
		if _, err := noswapVerdict(errno); err == nil {
			t.Fatalf("%v says nothing of the kernel, yet was taken as an answer", errno)
		}
	}
}
