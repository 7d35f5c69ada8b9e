package main

import (
	"os"
	"os/signal"
	"syscall"
)

// runPause blocks until SIGTERM or SIGINT and exits 0. As PID 1 of a pod sandbox (or of a
// container with a shared PID namespace) it inherits orphans, so it reaps them on SIGCHLD
// the way the upstream pause binary does.
func runPause(args []string) error {
	if err := parseFlags(newFlagSet("pause"), args, false); err != nil {
		return err
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	emit("pausing pid=%d", os.Getpid())
	for sig := range sigs {
		if sig == syscall.SIGCHLD {
			reapZombies()
			continue
		}
		emit("exiting signal=%s", sig)
		return nil
	}
	return nil
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
