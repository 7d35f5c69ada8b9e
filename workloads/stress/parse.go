package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// Suffixes follow Kubernetes resource quantities, so a test can pass the same string it puts
// in a pod spec: binary Ki/Mi/Gi/Ti (powers of 1024) and decimal k/K/M/G/T (powers of 1000).
var sizeSuffixes = []struct {
	suffix string
	factor uint64
}{
	{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"Ti", 1 << 40},
	{"k", 1e3}, {"K", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12},
}

// parseSize parses a byte count such as "1048576", "64Mi" or "1G". Fractions and negative
// numbers are rejected: the tests compute exact byte counts and must not be rounded silently.
func parseSize(s string) (uint64, error) {
	num, factor := s, uint64(1)
	for _, sf := range sizeSuffixes {
		if strings.HasSuffix(s, sf.suffix) {
			num, factor = strings.TrimSuffix(s, sf.suffix), sf.factor
			break
		}
	}
	if num == "" || strings.ContainsAny(num, "+-") {
		return 0, fmt.Errorf("invalid size %q", s)
	}
	n, err := strconv.ParseUint(num, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("invalid size %q: want an integer with an optional Ki/Mi/Gi/Ti/k/M/G/T suffix", s)
	}
	if n > math.MaxUint64/factor {
		return 0, fmt.Errorf("size %q overflows", s)
	}
	return n * factor, nil
}

// sizeFlag is a flag.Value for byte counts.
type sizeFlag struct {
	bytes uint64
	set   bool
}

func (f *sizeFlag) String() string { return strconv.FormatUint(f.bytes, 10) }
func (f *sizeFlag) Set(s string) error {
	n, err := parseSize(s)
	if err != nil {
		return err
	}
	f.bytes, f.set = n, true
	return nil
}

// holdFlag is a duration that also accepts "forever" (represented as a negative duration).
type holdFlag struct{ d time.Duration }

const forever = time.Duration(-1)

func (f *holdFlag) String() string {
	if f.d < 0 {
		return "forever"
	}
	return f.d.String()
}
func (f *holdFlag) Set(s string) error {
	if s == "forever" || s == "inf" {
		f.d = forever
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return fmt.Errorf("invalid duration %q: want e.g. 30s, 500ms or forever", s)
	}
	f.d = d
	return nil
}

// newFlagSet returns a flag set that reports errors instead of exiting, so parsing is testable.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// parseFlags parses args and rejects unexpected positional arguments.
func parseFlags(fs *flag.FlagSet, args []string, allowPositional bool) error {
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%s: %w", fs.Name(), err)
	}
	if !allowPositional && fs.NArg() > 0 {
		return fmt.Errorf("%s: unexpected arguments %q", fs.Name(), fs.Args())
	}
	return nil
}

var errMissing = errors.New("missing required flag")

func quote(s string) string { return strconv.Quote(s) }
