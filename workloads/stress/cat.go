package main

import (
	"fmt"
	"io"
	"os"
)

// runCat prints each file in turn, so tests can read cgroup files and mount tables through
// `kubectl exec` in an image without a shell. It continues past unreadable files and fails
// at the end, naming them on stderr.
func runCat(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("cat: no files given")
	}
	failed := 0
	for _, name := range args {
		if err := copyFile(name); err != nil {
			fmt.Fprintf(os.Stderr, "swapstress cat: %v\n", err)
			failed++
		}
	}
	if failed > 0 {
		return exitError{1}
	}
	return nil
}

func copyFile(name string) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(os.Stdout, f)
	return err
}

func runMountinfo(args []string) error {
	if err := parseFlags(newFlagSet("mountinfo"), args, false); err != nil {
		return err
	}
	return copyFile("/proc/self/mountinfo")
}
