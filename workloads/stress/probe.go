package main

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// runProbeNoswap does what the kubelet does to decide whether memory-backed volumes get the
// tmpfs `noswap` option on kernels older than 6.4: mount a tmpfs with it and see whether the
// kernel accepts it. It needs CAP_SYS_ADMIN in the initial user namespace (a privileged
// container): unprivileged tmpfs mounts reject `noswap` whatever the kernel.
// Prints `noswap-supported true|false error="..."` and exits 0 when the kernel answered;
// any other failure (no privilege, no mount point) is an error: it says nothing of the kernel.
func runProbeNoswap(args []string) error {
	if len(args) != 0 {
		return fmt.Errorf("probe-noswap takes no arguments")
	}
	dir, err := os.MkdirTemp("", "tmpfs-noswap-probe-")
	if err != nil {
		return err
	}
	defer os.Remove(dir)
	mountErr := syscall.Mount("tmpfs", dir, "tmpfs", 0, "noswap,size=64k")
	supported, err := noswapVerdict(mountErr)
	if err != nil {
		return err
	}
	if !supported {
		emit("noswap-supported false error=%s", quote(mountErr.Error()))
		return nil
	}
	if err := syscall.Unmount(dir, 0); err != nil {
		return fmt.Errorf("probe-noswap: unmount %s: %w", dir, err)
	}
	emit("noswap-supported true")
	return nil
}

// noswapVerdict reads a tmpfs mount's result: success means supported, EINVAL is the kernel
// rejecting the option ("tmpfs: Unknown parameter 'noswap'"), anything else is no answer.
func noswapVerdict(mountErr error) (bool, error) {
	switch {
	case mountErr == nil:
		return true, nil
	case errors.Is(mountErr, syscall.EINVAL):
		return false, nil
	default:
		return false, fmt.Errorf("probe-noswap: the probe mount failed for another reason than the kernel"+
			" rejecting noswap (%w): run it in a privileged container", mountErr)
	}
}
