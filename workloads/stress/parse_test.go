package main

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseSize(t *testing.T) {
	valid := map[string]uint64{
		"0":        0,
		"1048576":  1048576,
		"64Mi":     64 << 20,
		"1Ki":      1024,
		"3Gi":      3 << 30,
		"1Ti":      1 << 40,
		"1G":       1000000000,
		"5M":       5000000,
		"2k":       2000,
		"2K":       2000,
		"70085610": 70085610,
	}
	for in, want := range valid {
		got, err := parseSize(in)
		if err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "Mi", "-1", "+1", "1.5Gi", "1mi", "1 Mi", "1Pi", "abc", "18446744073709551616", "20000000Ti"} {
		if got, err := parseSize(in); err == nil {
			t.Errorf("parseSize(%q) = %d, want an error", in, got)
		}
	}
}

func TestParseAllocArgs(t *testing.T) {
	got, err := parseAllocArgs([]string{"--target", "64Mi", "--step", "16Mi", "--interval", "10ms", "--hold", "0s"})
	if err != nil {
		t.Fatal(err)
	}
	want := allocOptions{target: 64 << 20, step: 16 << 20, interval: 10 * time.Millisecond, hold: 0}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}

	got, err = parseAllocArgs([]string{"-target=1G", "--retouch", "5s"})
	if err != nil {
		t.Fatal(err)
	}
	want = allocOptions{target: 1e9, step: 16 << 20, interval: 100 * time.Millisecond, hold: forever, retouch: 5 * time.Second}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("defaults: got %+v, want %+v", got, want)
	}

	got, err = parseAllocArgs([]string{"--target", "1Mi", "--start-when", "/go"})
	if err != nil || got.startWhen != "/go" {
		t.Fatalf("--start-when: got %+v, %v", got, err)
	}
	got, err = parseAllocArgs([]string{"--target", "1Mi", "--hold", "forever"})
	if err != nil || got.hold != forever {
		t.Errorf("--hold forever: got %+v, %v", got, err)
	}

	got, err = parseAllocArgs([]string{"--target", "1Mi", "--fill", "/volumes/mem/a=16Mi", "--fill", "/dev/shm/b=4096"})
	wantFills := []fileFill{{"/volumes/mem/a", 16 << 20}, {"/dev/shm/b", 4096}}
	if err != nil || !reflect.DeepEqual(got.fills, wantFills) {
		t.Errorf("--fill: got %+v, %v; want %+v", got.fills, err, wantFills)
	}

	for _, args := range [][]string{
		{"--target", "1Mi", "--fill", "/x"},     // no size
		{"--target", "1Mi", "--fill", "=1Mi"},   // no path
		{"--target", "1Mi", "--fill", "/x=1.5"}, // bad size
		{},                                      // no target
		{"--target", "1Mi", "--step", "0"},      // zero step would loop forever
		{"--target", "lots"},                    // bad size
		{"--target", "1Mi", "--hold", "-1s"},    // negative hold
		{"--target", "1Mi", "--retouch", "forever"},
		{"--target", "1Mi", "extra"},             // stray positional
		{"--target", "1Mi", "--interval", "-1s"}, // negative interval
		{"--target", "1Mi", "--bogus"},
	} {
		if _, err := parseAllocArgs(args); err == nil {
			t.Errorf("parseAllocArgs(%q): want an error", args)
		}
	}
}

func TestParseFillArgs(t *testing.T) {
	got, err := parseFillArgs([]string{"--path", "/mnt/x", "--bytes", "10Mi", "--hold"})
	if err != nil {
		t.Fatal(err)
	}
	if want := (fillOptions{"/mnt/x", 10 << 20, 1 << 20, true}); got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
	for _, args := range [][]string{
		{"--bytes", "1Mi"},
		{"--path", "/x"},
		{"--path", "/x", "--bytes", "1Mi", "--chunk", "0"},
		{"--path", "/x", "--bytes", "1Mi", "--chunk", "2Gi"},
	} {
		if _, err := parseFillArgs(args); err == nil {
			t.Errorf("parseFillArgs(%q): want an error", args)
		}
	}
}

func TestParseForkSpikeArgs(t *testing.T) {
	got, err := parseForkSpikeArgs([]string{"--hold", "64Mi", "--repeat", "3", "--child-hold", "1.5s",
		"--hold-after", "forever", "--exec", "/bin/sh", "-c", "exit 0"})
	if err != nil {
		t.Fatal(err)
	}
	want := forkSpikeOptions{hold: 64 << 20, childDirty: 64 << 20, repeat: 3, childHold: 1500 * time.Millisecond,
		holdAfter: forever, exec: []string{"/bin/sh", "-c", "exit 0"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
	wantArgv := []string{"/fs", "-H", "67108864", "-d", "67108864", "-r", "3", "-i", "0", "-c", "1500", "-a", "-1",
		"--", "/bin/sh", "-c", "exit 0"}
	if argv := got.helperArgv("/fs"); !reflect.DeepEqual(argv, wantArgv) {
		t.Errorf("helperArgv = %q, want %q", argv, wantArgv)
	}

	got, err = parseForkSpikeArgs([]string{"--hold", "8Mi", "--child-dirty", "0"})
	if err != nil || got.childDirty != 0 || got.exec != nil {
		t.Errorf("--child-dirty 0: got %+v, %v", got, err)
	}
	if argv := strings.Join(got.helperArgv("/fs"), " "); strings.Contains(argv, "--") {
		t.Errorf("no --exec must not pass an exec argv: %s", argv)
	}

	for _, args := range [][]string{
		{},
		{"--hold", "0"},
		{"--hold", "1Mi", "--child-dirty", "2Mi"},
		{"--hold", "1Mi", "--repeat", "0"},
		{"--hold", "1Mi", "--exec"},
		{"--hold", "1Mi", "/bin/true"}, // a program without --exec is a mistake, not an argument
		{"--hold", "1Mi", "--child-hold", "forever"},
	} {
		if _, err := parseForkSpikeArgs(args); err == nil {
			t.Errorf("parseForkSpikeArgs(%q): want an error", args)
		}
	}
}

func TestTouchWritesEveryPageNonZero(t *testing.T) {
	r, err := mapRegion(uint64(8 * page))
	if err != nil {
		t.Fatal(err)
	}
	for _, salt := range []byte{0, 2, 0xfe} {
		r.touch(salt)
		for i := 0; i < len(r); i += page {
			if r[i] == 0 {
				t.Fatalf("salt %d: page %d left zero", salt, i/page)
			}
		}
	}
}
