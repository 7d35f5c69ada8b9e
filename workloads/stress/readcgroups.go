package main

import (
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// cgroupFiles is what read-cgroups reports for one name part: the cgroup directory found for it
// and each requested file's content (null where the file could not be read).
type cgroupFiles struct {
	Path  string             `json:"path"`
	Files map[string]*string `json:"files"`
}

// readCgroupsOutput is read-cgroups' one JSON document.
type readCgroupsOutput struct {
	UnixMilli int64                   `json:"unix_ms"` // when the walk started
	Cgroups   map[string]*cgroupFiles `json:"cgroups"` // part -> its cgroup; null if none was found
	Meminfo   *string                 `json:"meminfo,omitempty"`
}

// runReadCgroups reads FILES (comma-separated) of the cgroups named by each PART, below ROOT,
// in one walk of the tree, and prints one JSON document. A PART names the first directory
// below ROOT whose name contains it (a container id, or "pod<uid>" in either cgroup driver's
// spelling); the PART "." is ROOT itself; a PART with a "/" is a path below ROOT, exactly (a
// cgroup whose name alone is too short or too common, such as cgroupfs's "kubepods"). --meminfo adds /proc/meminfo (the node's: it is not
// namespaced). One exec reads what would otherwise take one exec per file per container: on
// an emulated node each exec costs seconds, and figures read in one go are read close together.
//
// With --every D --for W it reads them again every D for W (the directories found once), one
// JSON document per line: a series of the figures on the node's clock, for comparing with what
// the kubelet reports as of a time it names (its samples are up to tens of seconds old).
func runReadCgroups(args []string) error { return readCgroups(os.Stdout, args) }

func readCgroups(w io.Writer, args []string) error {
	flags := newFlagSet("read-cgroups")
	meminfo := flags.Bool("meminfo", false, "also print /proc/meminfo")
	every := flags.Duration("every", 0, "read again every this long (with --for)")
	window := flags.Duration("for", 0, "keep reading for this long (with --every)")
	if err := parseFlags(flags, args, true); err != nil {
		return err
	}
	if flags.NArg() < 2 {
		return fmt.Errorf("read-cgroups [--meminfo] [--every D --for W] ROOT FILE[,FILE...] [PART...]")
	}
	if *every < 0 || *window < 0 || (*every == 0) != (*window == 0) {
		return fmt.Errorf("read-cgroups: --every and --for go together, both > 0")
	}
	root, files, parts := flags.Arg(0), strings.Split(flags.Arg(1), ","), flags.Args()[2:]
	for _, part := range parts {
		if part != "." && !strings.Contains(part, "/") && len(part) < 12 {
			return fmt.Errorf("read-cgroups: %q is too short to name one cgroup", part)
		}
	}
	dirs := findDirs(root, parts)
	if *every == 0 {
		return readOnce(w, dirs, files, parts, *meminfo, time.Now())
	}
	tick := time.NewTicker(*every)
	defer tick.Stop()
	for end := time.Now().Add(*window); ; {
		now := time.Now()
		if now.After(end) {
			return nil
		}
		if err := readOnce(w, dirs, files, parts, *meminfo, now); err != nil {
			return err
		}
		<-tick.C
	}
}

// readOnce prints one JSON document: FILES of each found directory (null for a part with none).
func readOnce(w io.Writer, dirs map[string]string, files, parts []string, meminfo bool, now time.Time) error {
	out := readCgroupsOutput{UnixMilli: now.UnixMilli(), Cgroups: map[string]*cgroupFiles{}}
	for part, dir := range dirs {
		found := &cgroupFiles{Path: dir, Files: map[string]*string{}}
		for _, file := range files {
			if data, err := os.ReadFile(filepath.Join(dir, file)); err == nil {
				text := string(data)
				found.Files[file] = &text
			} else {
				found.Files[file] = nil
			}
		}
		out.Cgroups[part] = found
	}
	for _, part := range parts {
		if _, ok := out.Cgroups[part]; !ok {
			out.Cgroups[part] = nil
		}
	}
	if meminfo {
		data, err := os.ReadFile("/proc/meminfo")
		if err != nil {
			return err
		}
		text := string(data)
		out.Meminfo = &text
	}
	encoded, err := json.Marshal(out)
	if err != nil {
		return err
	}
	_, err = w.Write(append(encoded, '\n'))
	return err
}

// findDirs walks root once and maps each part to the first directory whose name contains it
// (or its systemd spelling, "-" as "_"); "." maps to root. Parts with no directory are absent.
func findDirs(root string, parts []string) map[string]string {
	found := map[string]string{}
	left := 0
	for _, part := range parts {
		if part == "." {
			found[part] = root
		} else if strings.Contains(part, "/") {
			if info, err := os.Stat(filepath.Join(root, part)); err == nil && info.IsDir() {
				found[part] = filepath.Join(root, part)
			}
		} else {
			left++
		}
	}
	if left == 0 {
		return found
	}
	_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // cgroups come and go while we walk
		}
		if !d.IsDir() || path == root {
			return nil
		}
		for _, part := range parts {
			if _, done := found[part]; done || part == "." || strings.Contains(part, "/") {
				continue
			}
			if strings.Contains(d.Name(), part) || strings.Contains(d.Name(), strings.ReplaceAll(part, "-", "_")) {
				found[part] = path
				left--
			}
		}
		if left == 0 {
			return errFound
		}
		return nil
	})
	return found
}
