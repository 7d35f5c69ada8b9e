// Command swapstress is the workload program of the kube-swap-conformance suite.
//
// One static binary (standard library only, no cgo) provides every behaviour the conformance
// tests need inside a container, so the image needs no shell and no other tools:
//
//	swapstress pause|sleep                 block until SIGTERM/SIGINT, reaping zombies
//	swapstress alloc --target SIZE ...     [--fill PATH=SIZE] write files, then allocate and touch
//	                                       anonymous memory gradually, hold
//	swapstress forkspike --hold SIZE ... [--exec PATH ARGS...]   hold, fork, dirty the copy, exec
//	swapstress fill --path FILE --bytes SIZE [--hold]   write a file (e.g. on tmpfs)
//	swapstress cat FILE...                 print files (cgroup files through kubectl exec)
//	swapstress touch FILE...               create empty files
//	swapstress mountinfo                   print /proc/self/mountinfo
//	swapstress true                        exit 0 (a cheap exec target)
//	swapstress resident FILE...            bytes of each file resident in memory (mincore)
//	swapstress probe-noswap                does the kernel accept tmpfs noswap? (privileged)
//	swapstress read-cgroups ROOT FILES PART...  files of many cgroups as one JSON document
//	swapstress sample-cgroups ROOT         sample a pod's containers' memory (pod named on stdin)
//
// Progress goes to stdout as one event per line, "<event> <value> [key=value ...]", written
// with a single write(2) each so nothing is lost when the process is OOM-killed.
package main

import (
	"fmt"
	"os"
	"path/filepath"
)

type command struct {
	run     func(args []string) error
	summary string
}

var commands = map[string]command{
	"pause":          {runPause, "block until SIGTERM/SIGINT, reaping zombies (pod sandbox)"},
	"sleep":          {runPause, "same as pause"},
	"alloc":          {runAlloc, "allocate and touch anonymous memory gradually, then hold"},
	"forkspike":      {runForkSpike, "hold memory, fork, dirty the child's copy, exec (static C helper)"},
	"fill":           {runFill, "write BYTES into a file, fsync, optionally hold"},
	"cat":            {runCat, "print files"},
	"touch":          {runTouch, "create empty files"},
	"mountinfo":      {runMountinfo, "print /proc/self/mountinfo"},
	"true":           {func([]string) error { return nil }, "exit 0"},
	"read-cgroups":   {runReadCgroups, "print files of many cgroups (and /proc/meminfo) as one JSON document"},
	"resident":       {runResident, "bytes of each file resident in memory (mincore), e.g. tmpfs pages not swapped"},
	"sample-cgroups": {runSampleCgroups, "sample memory.current/swap.current/max/swap.max of a pod's containers (pod on stdin)"},
	"probe-noswap":   {runProbeNoswap, "mount a tmpfs with noswap, as the kubelet's probe does (privileged)"},
}

// emit prints one progress line. os.Stdout is unbuffered, so each line is one write(2) and is
// visible in the container log immediately.
func emit(format string, args ...any) {
	fmt.Fprintf(os.Stdout, format+"\n", args...)
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: swapstress COMMAND [flags]")
	for _, name := range []string{"pause", "sleep", "alloc", "forkspike", "fill", "cat", "touch", "mountinfo", "true", "resident", "probe-noswap", "read-cgroups", "sample-cgroups"} {
		fmt.Fprintf(os.Stderr, "  %-10s %s\n", name, commands[name].summary)
	}
}

// exitError carries a specific exit status out of a subcommand.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

func main() {
	args := os.Args[1:]
	// Installed as /pause the binary behaves like the upstream pause image.
	if filepath.Base(os.Args[0]) == "pause" {
		args = append([]string{"pause"}, args...)
	}
	if len(args) == 0 {
		usage()
		os.Exit(2)
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(os.Stderr, "swapstress: unknown command %q\n", args[0])
		usage()
		os.Exit(2)
	}
	if err := cmd.run(args[1:]); err != nil {
		if e, ok := err.(exitError); ok {
			os.Exit(e.code)
		}
		fmt.Fprintf(os.Stderr, "swapstress: %v\n", err)
		emit("error %s", quote(err.Error()))
		os.Exit(1)
	}
}
