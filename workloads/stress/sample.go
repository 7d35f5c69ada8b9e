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

// sampleFiles are read from every container cgroup of the followed pod, in this order.
var sampleFiles = []string{"memory.current", "memory.swap.current", "memory.max", "memory.swap.max"}

// runSampleCgroups samples the memory of pods' containers from the node's cgroup tree.
//
// Pods to follow are named by their cgroup directory name part ("pod<uid>"), one per line on
// stdin or, with --follow-dir, one per (empty) file created in that directory. Every interval
// it writes, per container cgroup below a followed pod's, `sample UNIX_MS DIR current swap max
// swapmax` (a file the kernel does not offer reads "-"), to stdout or, with --out, to that
// file. It stops sampling when told "stop" (a line, or a file of that name), when every
// followed pod's cgroup is gone after it was seen, or after --timeout; on stdin's end too,
// without --follow-dir.
//
// --follow-dir is for running it as a pod's main process, which (unlike an exec stream)
// outlives a kubelet restart; after stopping it then idles until SIGTERM, so the file can
// still be read.
func runSampleCgroups(args []string) error {
	fs := newFlagSet("sample-cgroups")
	interval := fs.Duration("interval", 100*time.Millisecond, "time between samples")
	timeout := fs.Duration("timeout", 30*time.Minute, "stop after this long whatever happens")
	outPath := fs.String("out", "", "append samples to this file instead of stdout")
	followDir := fs.String("follow-dir", "", "follow the pods named by the files created in this directory")
	if err := parseFlags(fs, args, true); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("sample-cgroups [--interval D] [--timeout D] [--out FILE] [--follow-dir DIR] ROOT")
	}
	if *interval <= 0 || *timeout <= 0 {
		return fmt.Errorf("sample-cgroups: --interval and --timeout must be > 0")
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
	err := sampleLoop(fs.Arg(0), *interval, lines, time.After(*timeout), out)
	if err != nil || *followDir == "" {
		return err
	}
	sig := <-sigs // keep the file readable until the pod is deleted
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

// sampleLoop follows the pods named on lines until "stop", EOF, the deadline, or every
// followed pod's cgroup having gone away after it was seen.
func sampleLoop(root string, interval time.Duration, lines <-chan string, deadline <-chan time.Time, out io.Writer) error {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var parts []string
	dirs := map[string]string{} // part -> its cgroup directory, once found
	gone := map[string]bool{}
	for {
		for _, part := range parts {
			if gone[part] {
				continue
			}
			if dirs[part] == "" {
				dirs[part] = findDir(root, part)
			}
			if dirs[part] == "" {
				continue
			}
			rows, err := sampleChildren(dirs[part], time.Now())
			if errors.Is(err, fs.ErrNotExist) {
				gone[part] = true
				continue
			}
			for _, row := range rows {
				if _, err := io.WriteString(out, row+"\n"); err != nil {
					return err
				}
			}
		}
		if len(parts) > 0 && len(gone) == len(parts) {
			fmt.Fprintln(out, "stopped reason=gone")
			return nil
		}
		select {
		case line, ok := <-lines:
			if !ok || line == "stop" {
				fmt.Fprintln(out, "stopped reason=asked")
				return nil
			}
			if line != "" {
				parts = append(parts, line)
			}
		case <-deadline:
			fmt.Fprintln(out, "stopped reason=timeout")
			return nil
		case <-tick.C:
		}
	}
}

// findDir is the first directory below root whose name contains part, or part with "-" as "_"
// (the systemd cgroup driver's spelling of a pod UID); "" if none yet.
func findDir(root, part string) string {
	return findDirs(root, []string{part})[part]
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
		rows = append(rows, strings.Join(fields, " "))
	}
	return rows, nil
}
