package main

import (
	"fmt"
	"os"
	"syscall"
	"time"
)

// allocOptions are the parsed flags of "alloc".
type allocOptions struct {
	target    uint64
	step      uint64
	interval  time.Duration
	hold      time.Duration // forever when negative
	retouch   time.Duration // 0: never
	fills     []fileFill    // files written before allocating (same process, same cgroup)
	startWhen string        // wait until this path exists before allocating ("": at once)
}

func parseAllocArgs(args []string) (allocOptions, error) {
	fs := newFlagSet("alloc")
	var target, step sizeFlag
	step.bytes = 16 << 20
	hold := holdFlag{forever}
	var retouch holdFlag
	fs.Var(&target, "target", "bytes to allocate in total (e.g. 256Mi)")
	fs.Var(&step, "step", "bytes per step")
	interval := fs.Duration("interval", 100*time.Millisecond, "pause between steps")
	fs.Var(&hold, "hold", "how long to hold the memory afterwards (duration or forever)")
	fs.Var(&retouch, "retouch", "re-write every page this often while holding (0: never)")
	var fills fillList
	fs.Var(&fills, "fill", "PATH=SIZE: write SIZE bytes to PATH before allocating (repeatable)")
	startWhen := fs.String("start-when", "", "wait until PATH exists before allocating")
	if err := parseFlags(fs, args, false); err != nil {
		return allocOptions{}, err
	}
	if !target.set {
		return allocOptions{}, fmt.Errorf("alloc: --target: %w", errMissing)
	}
	if step.bytes == 0 {
		return allocOptions{}, fmt.Errorf("alloc: --step must be > 0")
	}
	if *interval < 0 {
		return allocOptions{}, fmt.Errorf("alloc: --interval must be >= 0")
	}
	if retouch.d < 0 {
		return allocOptions{}, fmt.Errorf("alloc: --retouch must be a finite duration")
	}
	return allocOptions{target.bytes, step.bytes, *interval, hold.d, retouch.d, fills, *startWhen}, nil
}

// region is an anonymous private mapping outside the Go heap: the garbage collector neither
// scans nor frees it, and it does not count towards GOGC, so RSS is exactly what we touched
// (heap allocations could transiently double under GC).
type region []byte

var page = os.Getpagesize()

func mapRegion(size uint64) (region, error) {
	mem, err := syscall.Mmap(-1, 0, int(size), syscall.PROT_READ|syscall.PROT_WRITE,
		syscall.MAP_PRIVATE|syscall.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("mmap %d bytes: %w", size, err)
	}
	// 4 KiB pages instead of transparent huge pages: RSS then grows exactly with the touched
	// bytes, and reclaim swaps pages individually instead of splitting huge pages first.
	_ = syscall.Madvise(mem, syscall.MADV_NOHUGEPAGE)
	return mem, nil
}

// touch writes one byte per page. The value is never zero and varies with the page, so the
// kernel cannot treat the page as zero-filled (not stored on swap) or share it. salt must be
// even so the low bit stays set.
func (r region) touch(salt byte) {
	for i := 0; i < len(r); i += page {
		r[i] = (byte(i/page) | 1) ^ salt
	}
}

func runAlloc(args []string) error {
	opts, err := parseAllocArgs(args)
	if err != nil {
		return err
	}
	sigs := termSignals()
	if opts.startWhen != "" {
		// A test checks the limits the kubelet wrote before letting the allocation begin: an
		// allocation sized for a swap share must not run in a container that has none.
		emit("waiting path=%s", quote(opts.startWhen))
		for {
			if _, err := os.Stat(opts.startWhen); err == nil {
				break
			}
			if sig := sleepOrSignal(sigs, 200*time.Millisecond); sig != nil {
				emit("exiting signal=%s", sig)
				return nil
			}
		}
	}
	// Files first, then anonymous memory: the files' pages are charged to this cgroup and are
	// the oldest on its LRU lists, so reclaim reaches them before the anonymous pages.
	for _, f := range opts.fills {
		written, err := writeFile(f.path, f.bytes, 1<<20)
		if err != nil {
			emit("fill-failed %d path=%s error=%s", written, quote(f.path), quote(err.Error()))
			return exitError{1}
		}
		emit("filled %d path=%s", written, quote(f.path))
	}
	var regions []region // keeps every mapping referenced for the life of the process
	var allocated uint64
	for allocated < opts.target {
		size := min(opts.step, opts.target-allocated)
		r, err := mapRegion(size)
		if err != nil {
			return err
		}
		r.touch(0)
		regions = append(regions, r)
		allocated += size
		emit("allocated %d", allocated)
		if allocated < opts.target && opts.interval > 0 {
			if sig := sleepOrSignal(sigs, opts.interval); sig != nil {
				emit("exiting signal=%s", sig)
				return nil
			}
		}
	}
	emit("holding %d", allocated)
	return hold(sigs, opts.hold, opts.retouch, func(round int) {
		for _, r := range regions {
			r.touch(byte(round << 1))
		}
		emit("retouched %d", allocated)
	})
}

// hold waits for d (forever when negative) or a termination signal, calling retouch every
// period when period > 0.
func hold(sigs chan os.Signal, d, period time.Duration, retouch func(round int)) error {
	var deadline <-chan time.Time
	if d >= 0 {
		deadline = time.After(d)
	}
	var tick <-chan time.Time
	if period > 0 {
		t := time.NewTicker(period)
		defer t.Stop()
		tick = t.C
	}
	for round := 1; ; round++ {
		select {
		case <-deadline:
			emit("released")
			return nil
		case sig := <-sigs:
			emit("exiting signal=%s", sig)
			return nil
		case <-tick:
			retouch(round)
		}
	}
}

// sleepOrSignal sleeps for d and returns the signal if one arrived first.
func sleepOrSignal(sigs chan os.Signal, d time.Duration) os.Signal {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case sig := <-sigs:
		return sig
	}
}
