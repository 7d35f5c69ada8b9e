"""Running a tool (kind, docker) so that whatever it starts ends with it.

A command runs in its own process group; on a timeout, Ctrl-C or SIGTERM the whole group is
killed, not only the process we started: `kind create` runs `docker run`, and a hung `kind
version` may have children of its own, which would otherwise be orphaned and keep running."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Sequence
from typing import Any


def start(argv: Sequence[str], **kwargs: Any) -> subprocess.Popen:
    """Popen in a new session (its own process group, away from the terminal's Ctrl-C: the
    caller ends it with kill_group)."""
    return subprocess.Popen(list(argv), start_new_session=True, **kwargs)


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL to the command's process group, then reap the command."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def run(argv: Sequence[str], *, timeout: float, capture_output: bool = True, text: bool = True,
        input: str | bytes | None = None, **kwargs: Any) -> subprocess.CompletedProcess:
    """subprocess.run's answer (the same arguments, for what callers here use), with the whole
    process group killed on a timeout or an interrupt before TimeoutExpired or it propagates."""
    pipe = subprocess.PIPE if capture_output else None
    proc = start(argv, stdout=pipe, stderr=pipe, stdin=subprocess.PIPE if input is not None else None, text=text,
                 **kwargs)
    try:
        out, err = proc.communicate(input, timeout=timeout)
    except BaseException:
        kill_group(proc)
        proc.communicate()  # close the pipes (a grandchild that held them is gone too)
        raise
    return subprocess.CompletedProcess(list(argv), proc.returncode, out, err)
