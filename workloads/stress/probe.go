package main

import (
	"fmt"
	"os"
	"syscall"
)

// runProbeNoswap does what the kubelet does to decide whether memory-backed volumes get the
// tmpfs `noswap` option on kernels older than 6.4: mount a tmpfs with it and see whether the
// kernel accepts it. It needs CAP_SYS_ADMIN in the initial user namespace (a privileged
// container): unprivileged tmpfs mounts reject `noswap` whatever the kernel.
// Prints `noswap-supported true|false error="..."` and exits 0 either way.
func runProbeNoswap(args []string) error {
	if len(args) != 0 {
		return fmt.Errorf("probe-noswap takes no arguments")
	}
	dir, err := os.MkdirTemp("", "tmpfs-noswap-probe-")
	if err != nil {
		return err
	}
	defer os.Remove(dir)
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "noswap,size=64k"); err != nil {
		emit("noswap-supported false error=%s", quote(err.Error()))
		return nil
	}
	if err := syscall.Unmount(dir, 0); err != nil {
		return fmt.Errorf("probe-noswap: unmount %s: %w", dir, err)
	}
	emit("noswap-supported true")
	return nil
}
