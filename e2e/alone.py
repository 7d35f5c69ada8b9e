"""Tests that load a node's memory, or the whole host's, run while nothing they disturb runs.

Under pytest-xdist several workers run tests at once. Two locks order them, each shared or
exclusive, in the run's directory:

* the node's lock: a test holds its node's shared; a `runs_alone` test holds it exclusively,
  so no other test runs on that node meanwhile (its kubelet restarts, its memory is driven to
  pressure, its whole swap usage is compared with its metrics). Tests on another node go on:
  with kind each behavior has a node of its own, and a node's figures are its own cgroup's.
* the host's lock: every test holds it shared; a `runs_alone(..., host=True)` test holds it
  exclusively, so nothing else in the run runs (it allocates more than the host's RAM, which
  every node on the host shares).

The host's lock is always taken before the node's, and both are held to the end of the test,
so no two tests wait for each other. flock alone would let a stream of shared holders starve
an exclusive one, so a test waiting for a lock exclusively first closes that lock's gate, which
every test passes on its way in."""

from __future__ import annotations

import fcntl
import re
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import IO

WAIT_SECONDS = 3600.0  # the longest test (eviction) takes minutes; an hour means something is stuck
POLL_SECONDS = 0.5
HOST = "host"


class AloneTimeout(RuntimeError):
    pass


def _flock(file: IO[str], mode: int, what: str, deadline: float, seconds: float) -> None:
    while True:
        try:
            fcntl.flock(file, mode | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise AloneTimeout(f"waited {seconds:g}s for {what}") from None
            time.sleep(POLL_SECONDS)


def _hold(files: ExitStack, run_dir: Path, scope: str, alone: bool, where: str, deadline: float, seconds: float) -> None:
    """Take one lock (the host's, or one node's) for the rest of the test."""
    stem = "alone" if scope == HOST else "alone-node-" + re.sub(r"[^A-Za-z0-9_.-]", "_", scope)
    gate = files.enter_context(open(run_dir / f"{stem}.gate", "a+"))
    lock = files.enter_context(open(run_dir / f"{stem}.lock", "a+"))
    if alone:
        _flock(gate, fcntl.LOCK_EX, f"another test that runs alone {where}", deadline, seconds)
        _flock(lock, fcntl.LOCK_EX, f"the tests running {where} now to finish, to run alone", deadline, seconds)
    else:
        _flock(gate, fcntl.LOCK_SH, f"a test that runs alone {where} to finish", deadline, seconds)
        fcntl.flock(gate, fcntl.LOCK_UN)
        _flock(lock, fcntl.LOCK_SH, f"a test that runs alone {where} to finish", deadline, seconds)


@contextmanager
def turn(run_dir: Path, alone: bool, node: str | None = None, host: bool = False,
         seconds: float = WAIT_SECONDS) -> Iterator[None]:
    """Hold this run's locks for one test on `node` (None: a test on no node): its node's
    exclusively when `alone`, the host's exclusively when `alone` and `host` (or when the
    test names no node), shared otherwise."""
    deadline = time.monotonic() + seconds
    whole_host = alone and (host or node is None)
    with ExitStack() as files:
        _hold(files, run_dir, HOST, whole_host, "on the host", deadline, seconds)
        if node is not None and not whole_host:
            _hold(files, run_dir, node, alone, f"on {node}", deadline, seconds)
        yield  # closing the files releases the locks
