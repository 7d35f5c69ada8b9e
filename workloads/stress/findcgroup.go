package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

var errFound = errors.New("found")

// runFindCgroup prints one cgroup file of the container whose cgroup directory name contains
// ID, searching below ROOT (the node's /sys/fs/cgroup mounted into a privileged pod). This is
// how the suite reads static pods' containers, which it cannot exec into.
// Output: `cgroup PATH` then the file's content.
func runFindCgroup(args []string) error {
	if len(args) != 3 {
		return fmt.Errorf("find-cgroup ROOT CONTAINER_ID FILE")
	}
	root, id, file := args[0], args[1], args[2]
	if len(id) < 12 {
		return fmt.Errorf("find-cgroup: container id %q is too short to be unique", id)
	}
	var found string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // cgroups come and go while we walk
		}
		if d.IsDir() && strings.Contains(d.Name(), id) {
			found = path
			return errFound
		}
		return nil
	})
	if err != nil && !errors.Is(err, errFound) {
		return err
	}
	if found == "" {
		return fmt.Errorf("find-cgroup: no cgroup below %s names %s", root, id)
	}
	data, err := os.ReadFile(filepath.Join(found, file))
	if err != nil {
		return err
	}
	emit("cgroup %s", found)
	_, err = os.Stdout.Write(data)
	return err
}
