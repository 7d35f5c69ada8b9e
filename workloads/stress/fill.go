package main

import (
	"fmt"
	"os"
	"strings"
)

type fillOptions struct {
	path  string
	bytes uint64
	chunk uint64
	hold  bool
}

func parseFillArgs(args []string) (fillOptions, error) {
	fs := newFlagSet("fill")
	var size sizeFlag
	chunk := sizeFlag{bytes: 1 << 20}
	path := fs.String("path", "", "file to write (e.g. on a memory-backed emptyDir)")
	fs.Var(&size, "bytes", "bytes to write")
	fs.Var(&chunk, "chunk", "bytes per write")
	hold := fs.Bool("hold", false, "keep running after the file is written")
	if err := parseFlags(fs, args, false); err != nil {
		return fillOptions{}, err
	}
	if *path == "" {
		return fillOptions{}, fmt.Errorf("fill: --path: %w", errMissing)
	}
	if !size.set {
		return fillOptions{}, fmt.Errorf("fill: --bytes: %w", errMissing)
	}
	if chunk.bytes == 0 || chunk.bytes > 1<<30 {
		return fillOptions{}, fmt.Errorf("fill: --chunk must be between 1 and 1Gi")
	}
	return fillOptions{*path, size.bytes, chunk.bytes, *hold}, nil
}

// runFill writes the file in chunks of non-zero bytes (a tmpfs stores every page: there are no
// holes). A full tmpfs (ENOSPC at sizeLimit) is reported with the bytes written so far.
func runFill(args []string) error {
	opts, err := parseFillArgs(args)
	if err != nil {
		return err
	}
	// Subscribe before anything is reported: a SIGTERM sent right after "holding" must be
	// handled, not kill the process with the default action.
	sigs := termSignals()
	written, err := writeFile(opts.path, opts.bytes, opts.chunk)
	if err != nil {
		emit("fill-failed %d error=%s", written, quote(err.Error()))
		return exitError{1}
	}
	emit("filled %d", written)
	if !opts.hold {
		return nil
	}
	emit("holding %d", written)
	return hold(sigs, forever, 0, nil)
}

// writeFile writes size bytes of non-zero data to path in chunks and fsyncs it, returning the
// bytes written so far on error.
func writeFile(path string, size, chunk uint64) (uint64, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	buf := make([]byte, min(chunk, max(size, 1)))
	for i := range buf {
		buf[i] = byte(i%251) + 1
	}
	var written uint64
	for written < size {
		n, err := f.Write(buf[:min(uint64(len(buf)), size-written)])
		written += uint64(n)
		if err != nil {
			return written, err
		}
	}
	return written, f.Sync()
}

// fileFill is one PATH=SIZE of alloc's --fill.
type fileFill struct {
	path  string
	bytes uint64
}

// fillList is a repeatable PATH=SIZE flag.
type fillList []fileFill

func (l *fillList) String() string {
	parts := make([]string, len(*l))
	for i, f := range *l {
		parts[i] = fmt.Sprintf("%s=%d", f.path, f.bytes)
	}
	return strings.Join(parts, ",")
}

func (l *fillList) Set(s string) error {
	path, size, ok := strings.Cut(s, "=")
	if !ok || path == "" {
		return fmt.Errorf("want PATH=SIZE, got %q", s)
	}
	n, err := parseSize(size)
	if err != nil {
		return err
	}
	*l = append(*l, fileFill{path, n})
	return nil
}
