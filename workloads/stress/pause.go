package main

import (
	"os"
	"os/signal"
	"syscall"
	"time"
)

// runPause blocks until SIGTERM or SIGINT and exits 0. As PID 1 of a pod sandbox (or of a
// container with a shared PID namespace) it inherits orphans, so it reaps them on SIGCHLD
// the way the upstream pause binary does. With --exit-when PATH it also exits 0 once PATH
// exists: a test ends a container at a moment it chooses (`fill --path PATH`), and the
// kubelet creates a new one (restartPolicy Always) without any signal from outside.
func runPause(args []string) error {
	fs := newFlagSet("pause")
	exitWhen := fs.String("exit-when", "", "exit 0 once this path exists")
	if err := parseFlags(fs, args, false); err != nil {
		return err
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	var tick <-chan time.Time
	if *exitWhen != "" {
		ticker := time.NewTicker(200 * time.Millisecond)
		defer ticker.Stop()
		tick = ticker.C
	}
	emit("pausing pid=%d", os.Getpid())
	for {
		select {
		case sig := <-sigs:
			if sig == syscall.SIGCHLD {
				reapZombies()
				continue
			}
			emit("exiting signal=%s", sig)
			return nil
		case <-tick:
			if _, err := os.Stat(*exitWhen); err == nil {
				emit("exiting path=%s", *exitWhen)
				return nil
			}
		}
	}
}

// reapZombies collects every exited child without blocking (signals coalesce, so one SIGCHLD
// may stand for several children).
func reapZombies() {
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if err == syscall.EINTR {
			continue
		}
		if pid <= 0 || err != nil {
			return
		}
	}
}

// termSignals subscribes to the signals that end a hold. Without a handler, PID 1 in a
// container ignores SIGTERM and the pod would only die after its grace period.
func termSignals() chan os.Signal {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	return sigs
}
