package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// forkSpikeOptions are the flags of "forkspike"; the work itself is done by the static C
// helper (see csrc/forkspike.c for why it cannot be Go).
type forkSpikeOptions struct {
	hold       uint64
	childDirty uint64 // defaults to hold: the child copies every page
	repeat     uint64
	interval   time.Duration
	childHold  time.Duration
	holdAfter  time.Duration // forever when negative
	helper     string
	exec       []string // --exec PATH ARGS...: the child's program; empty: a no-op exec
}

func parseForkSpikeArgs(args []string) (forkSpikeOptions, error) {
	fs := newFlagSet("forkspike")
	var holdBytes, dirty sizeFlag
	var holdAfter, childHold holdFlag
	repeat := fs.Uint64("repeat", 1, "number of fork/dirty/exec rounds")
	interval := fs.Duration("interval", 0, "pause between rounds")
	helper := fs.String("helper", "", "path of the forkspike helper (default: next to this binary)")
	fs.Var(&holdBytes, "hold", "bytes the parent holds before forking")
	fs.Var(&dirty, "child-dirty", "bytes the child writes before exec (default: --hold)")
	fs.Var(&childHold, "child-hold", "how long the child keeps its dirty copy before exec")
	fs.Var(&holdAfter, "hold-after", "how long the parent keeps holding after the last round (or forever)")
	flagArgs, execArgs := splitExec(args)
	if execArgs != nil && len(execArgs) == 0 {
		return forkSpikeOptions{}, fmt.Errorf("forkspike: --exec needs a program path")
	}
	if err := parseFlags(fs, flagArgs, false); err != nil {
		return forkSpikeOptions{}, err
	}
	if !holdBytes.set || holdBytes.bytes == 0 {
		return forkSpikeOptions{}, fmt.Errorf("forkspike: --hold: %w", errMissing)
	}
	if dirty.bytes > holdBytes.bytes {
		return forkSpikeOptions{}, fmt.Errorf("forkspike: --child-dirty %d exceeds --hold %d", dirty.bytes, holdBytes.bytes)
	}
	if !dirty.set {
		dirty.bytes = holdBytes.bytes
	}
	if *repeat == 0 || *interval < 0 || childHold.d < 0 {
		return forkSpikeOptions{}, fmt.Errorf("forkspike: --repeat must be >= 1, --interval and --child-hold finite and >= 0")
	}
	return forkSpikeOptions{holdBytes.bytes, dirty.bytes, *repeat, *interval, childHold.d, holdAfter.d, *helper, execArgs}, nil
}

// splitExec splits at the first --exec: everything after it is the child's argv verbatim
// (so the exec'd program may take flags of its own). execArgs is nil without --exec.
func splitExec(args []string) (flagArgs, execArgs []string) {
	for i, a := range args {
		if a == "--exec" || a == "-exec" {
			return args[:i], append([]string{}, args[i+1:]...)
		}
	}
	return args, nil
}

func millis(d time.Duration) string {
	if d < 0 {
		return "-1"
	}
	return strconv.FormatInt(d.Milliseconds(), 10)
}

// helperArgv is the argv of the C helper for these options.
func (o forkSpikeOptions) helperArgv(helper string) []string {
	argv := []string{helper,
		"-H", strconv.FormatUint(o.hold, 10),
		"-d", strconv.FormatUint(o.childDirty, 10),
		"-r", strconv.FormatUint(o.repeat, 10),
		"-i", millis(o.interval),
		"-c", millis(o.childHold),
		"-a", millis(o.holdAfter),
	}
	if len(o.exec) > 0 {
		argv = append(append(argv, "--"), o.exec...)
	}
	return argv
}

// runForkSpike replaces this process with the helper (same PID, so the container's main
// process is the forking parent).
func runForkSpike(args []string) error {
	opts, err := parseForkSpikeArgs(args)
	if err != nil {
		return err
	}
	helper := opts.helper
	if helper == "" {
		self, err := os.Executable()
		if err != nil {
			return err
		}
		helper = filepath.Join(filepath.Dir(self), "forkspike")
	}
	argv := opts.helperArgv(helper)
	if err := syscall.Exec(helper, argv, os.Environ()); err != nil {
		return fmt.Errorf("exec %s: %w", helper, err)
	}
	return nil
}
