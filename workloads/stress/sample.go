package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// sampleFiles are read from every container cgroup of the followed pod, in this order; then
// memory.events' oom_kill count (oomKills).
var sampleFiles = []string{"memory.current", "memory.swap.current", "memory.max", "memory.swap.max"}

// runSampleCgroups samples the memory of pods' containers from the node's cgroup tree.
//
// Pods to follow are named by their cgroup directory name part ("pod<uid>"), one per line on
// stdin or, with --follow-dir, one per (empty) file created in that directory; "NAME@DURATION"
// samples that pod every DURATION instead of every --interval. Every interval it writes, per
// container cgroup below a followed pod's, `sample UNIX_MS DIR current swap max swapmax` (a
// file the kernel does not offer reads "-"), to stdout, to --out FILE, or with --out-dir to
// DIR/NAME, one file per followed pod. It stops sampling when told "stop" (a line, or a file of
// that name), when every followed pod's cgroup is gone after it was seen (unless --keep), or
// after --timeout; on stdin's end too, without --follow-dir.
//
// --follow-dir is for running it as a pod's main process, which (unlike an exec stream)
// outlives a kubelet restart; after stopping it then idles until SIGTERM, so the files can
// still be read. With --keep and --out-dir one such pod serves a whole test run on its node:
// each test names its pods and reads only their files.
func runSampleCgroups(args []string) error {
	fs := newFlagSet("sample-cgroups")
	interval := fs.Duration("interval", 100*time.Millisecond, "time between samples")
	timeout := fs.Duration("timeout", 30*time.Minute, "stop after this long whatever happens")
	outPath := fs.String("out", "", "append samples to this file instead of stdout")
	outDir := fs.String("out-dir", "", "append each followed pod's samples to a file of its name in this directory")
	followDir := fs.String("follow-dir", "", "follow the pods named by the files created in this directory")
	keep := fs.Bool("keep", false, "keep sampling (and following new pods) when every followed pod is gone")
	if err := parseFlags(fs, args, true); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("sample-cgroups [--interval D] [--timeout D] [--out FILE | --out-dir DIR] [--follow-dir DIR] [--keep] ROOT")
	}
	if *interval <= 0 || *timeout <= 0 {
		return fmt.Errorf("sample-cgroups: --interval and --timeout must be > 0")
	}
	if *outPath != "" && *outDir != "" {
		return fmt.Errorf("sample-cgroups: --out and --out-dir exclude each other")
	}
	var out io.Writer = os.Stdout
	if *outPath != "" {
		f, err := os.OpenFile(*outPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		defer f.Close()
		out = f
	}
	if *outDir != "" {
		if err := os.MkdirAll(*outDir, 0o755); err != nil {
			return err
		}
	}
	sigs := termSignals()
	lines := make(chan string)
	if *followDir != "" {
		if err := os.MkdirAll(*followDir, 0o755); err != nil {
			return err
		}
		go watchDir(*followDir, *interval, lines)
	} else {
		go func() {
			scanner := bufio.NewScanner(os.Stdin)
			for scanner.Scan() {
				lines <- strings.TrimSpace(scanner.Text())
			}
			close(lines)
		}()
	}
	emit("ready")
	loop := sampling{root: fs.Arg(0), interval: *interval, out: out, outDir: *outDir, keep: *keep}
	err := loop.run(lines, time.After(*timeout))
	if err != nil || *followDir == "" {
		return err
	}
	sig := <-sigs // keep the files readable until the pod is deleted
	emit("exiting signal=%s", sig)
	return nil
}

// watchDir sends the name of every file that appears in dir, once, in name order per look.
func watchDir(dir string, interval time.Duration, lines chan<- string) {
	seen := map[string]bool{}
	for {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if !seen[e.Name()] {
				seen[e.Name()] = true
				lines <- e.Name()
			}
		}
		time.Sleep(interval)
	}
}

// sampling follows pods' cgroups below root and writes their containers' samples.
type sampling struct {
	root     string
	interval time.Duration // the tick; a pod followed as NAME@DURATION is sampled every DURATION
	out      io.Writer     // every sample and the final "stopped" line, unless outDir is set
	outDir   string        // one file per followed pod (its NAME) instead
	keep     bool          // do not stop when every followed pod is gone
}

type followed struct {
	part  string        // the cgroup directory name part, e.g. pod<uid>
	every time.Duration // its sampling interval
	next  time.Time
	dir   string // its cgroup directory, once found
	gone  bool
}

// parseFollow reads "NAME" or "NAME@DURATION" (a follow line or file name).
func parseFollow(line string, interval time.Duration) (followed, error) {
	part, every, found := strings.Cut(line, "@")
	f := followed{part: part, every: interval}
	if found {
		d, err := time.ParseDuration(every)
		if err != nil || d <= 0 {
			return f, fmt.Errorf("sample-cgroups: %q: the interval after @ must be a positive duration", line)
		}
		f.every = d
	}
	return f, nil
}

// run follows the pods named on lines until "stop", EOF, the deadline, or (unless keep) every
// followed pod's cgroup having gone away after it was seen.
func (s sampling) run(lines <-chan string, deadline <-chan time.Time) error {
	tick := time.NewTicker(s.interval)
	defer tick.Stop()
	var pods []*followed
	var nextFind time.Time
	for {
		gone := 0
		now := time.Now()
		// Pods whose cgroups have not appeared yet are looked for in one walk of the tree, at
		// most every findEvery: a walk per pod per tick cost an emulated node's agent a few
		// percent of its CPU while pods started.
		if missing := unfound(pods); len(missing) > 0 && !now.Before(nextFind) {
			nextFind = now.Add(max(s.interval, findEvery))
			found := findDirs(s.root, missing)
			for _, p := range pods {
				if p.dir == "" {
					p.dir = found[p.part]
				}
			}
		}
		for _, p := range pods {
			if p.gone {
				gone++
				continue
			}
			if now.Before(p.next) || p.dir == "" {
				continue
			}
			p.next = now.Add(p.every)
			rows, err := sampleChildren(p.dir, now)
			if errors.Is(err, fs.ErrNotExist) {
				p.gone = true
				continue
			}
			if err := s.write(p.part, rows); err != nil {
				return err
			}
		}
		if len(pods) > 0 && gone == len(pods) && !s.keep {
			return s.stopped("gone")
		}
		select {
		case line, ok := <-lines:
			if !ok || line == "stop" {
				return s.stopped("asked")
			}
			if line != "" {
				p, err := parseFollow(line, s.interval)
				if err != nil {
					return err
				}
				pods = append(pods, &p)
				nextFind = time.Time{} // a pod just named is looked for at once
			}
		case <-deadline:
			return s.stopped("timeout")
		case <-tick.C:
		}
	}
}

// findEvery bounds how often the tree is walked for pods not found yet.
const findEvery = 500 * time.Millisecond

func unfound(pods []*followed) []string {
	var parts []string
	for _, p := range pods {
		if p.dir == "" && !p.gone {
			parts = append(parts, p.part)
		}
	}
	return parts
}

func (s sampling) write(part string, rows []string) error {
	if len(rows) == 0 {
		return nil
	}
	text := strings.Join(rows, "\n") + "\n"
	if s.outDir == "" {
		_, err := io.WriteString(s.out, text)
		return err
	}
	f, err := os.OpenFile(filepath.Join(s.outDir, part), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.WriteString(text)
	return err
}

func (s sampling) stopped(reason string) error {
	if s.outDir != "" {
		emit("stopped reason=%s", reason)
		return nil
	}
	_, err := fmt.Fprintf(s.out, "stopped reason=%s\n", reason)
	return err
}

// sampleChildren reads sampleFiles of every child cgroup of dir, as `sample` lines sorted by
// child name. fs.ErrNotExist means dir itself is gone.
func sampleChildren(dir string, now time.Time) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	var rows []string
	for _, name := range names {
		fields := []string{"sample", fmt.Sprint(now.UnixMilli()), name}
		for _, file := range sampleFiles {
			data, err := os.ReadFile(filepath.Join(dir, name, file))
			value := strings.TrimSpace(string(data))
			if err != nil || value == "" {
				value = "-"
			}
			fields = append(fields, value)
		}
		fields = append(fields, oomKills(filepath.Join(dir, name, "memory.events")))
		rows = append(rows, strings.Join(fields, " "))
	}
	return rows, nil
}

// oomKills is the oom_kill count of a memory.events file, "-" if it cannot be read: the
// kernel's own record that the OOM killer killed in that cgroup, kept by the sample taken just
// before the cgroup goes away (the runtime's "OOMKilled" reason can miss the kill: containerd
// reported "Error", exit 137, for a container the OOM killer had killed, kind run 22).
func oomKills(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return "-"
	}
	for _, line := range strings.Split(string(data), "\n") {
		if value, found := strings.CutPrefix(line, "oom_kill "); found {
			return strings.TrimSpace(value)
		}
	}
	return "-"
}
