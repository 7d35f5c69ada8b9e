"""Running a tool (kind, docker) or one of the project's own commands so that whatever it
starts ends with it.

A command runs in its own process group; on a timeout, Ctrl-C or SIGTERM the whole group is
ended, not only the process we started: `kind create` runs `docker run`, and a hung `kind
version` may have children of its own, which would otherwise be orphaned and keep running. A
tool's group is killed at once. One of the project's own commands (`clusters.vm up`, a pytest
run of the suite) owns a VM or a cluster and removes it on SIGTERM: it is given `grace` seconds
to do so before its group is killed (a SIGKILL would leave its VM running)."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

# What one of the project's own commands (clusters.vm, a pytest run of the suite) is given, on an
# interrupt, to remove the VM or clusters it made before its process group is killed.
OWN_COMMAND_GRACE = 300.0


def start(argv: Sequence[str], **kwargs: Any) -> subprocess.Popen:
    """Popen in a new session (its own process group, away from the terminal's Ctrl-C: the
    caller ends it with kill_group)."""
    return subprocess.Popen(list(argv), start_new_session=True, **kwargs)


def kill_group(proc: subprocess.Popen, grace: float = 0.0) -> Any:
    """End the command's process group: SIGTERM first and up to `grace` seconds for the command
    to exit (what it owns removed), then SIGKILL to whatever is left; reap the command. A second
    interrupt meanwhile cuts the grace short, never the kill.

    During the grace, what the command writes to our pipes is read, and returned (its stdout,
    or None): a command that reports what it removes would otherwise block on a full pipe that
    nobody reads any more, and spend its grace doing nothing."""
    drained = None
    if grace > 0 and proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            if proc.stdout is not None or proc.stderr is not None:
                drained, _ = proc.communicate(timeout=grace)
            else:
                proc.wait(timeout=grace)
        except (ProcessLookupError, subprocess.TimeoutExpired, KeyboardInterrupt):
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
    return drained


@contextmanager
def started(argv: Sequence[str], grace: float, *, drained: Callable[[Any], object] | None = None,
            **kwargs: Any) -> Iterator[subprocess.Popen]:
    """The command started (start) for the block, which reads it; if the block ends by an
    exception (an interrupt), the command's group is ended first (kill_group, `grace`), and what
    it wrote meanwhile goes to `drained` (when it wrote something)."""
    proc = start(argv, **kwargs)
    try:
        yield proc
    except BaseException:
        out = kill_group(proc, grace)
        if out and drained is not None:
            drained(out)
        raise


def run(argv: Sequence[str], *, timeout: float | None, capture_output: bool = True, text: bool = True,
        input: str | bytes | None = None, grace: float = 0.0, **kwargs: Any) -> subprocess.CompletedProcess:
    """subprocess.run's answer (the same arguments, for what callers here use), with the whole
    process group ended (kill_group, `grace`) on a timeout or an interrupt before TimeoutExpired
    or it propagates."""
    pipe = subprocess.PIPE if capture_output else None
    kwargs.setdefault("stdout", pipe)
    kwargs.setdefault("stderr", pipe)
    proc = start(argv, stdin=subprocess.PIPE if input is not None else None, text=text, **kwargs)
    try:
        out, err = proc.communicate(input, timeout=timeout)
    except BaseException:
        kill_group(proc, grace)
        proc.communicate()  # close the pipes (a grandchild that held them is gone too)
        raise
    return subprocess.CompletedProcess(list(argv), proc.returncode, out, err)
