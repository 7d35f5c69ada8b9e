"""Tests that load the whole host's memory run while no other test of the run runs.

Under pytest-xdist several workers share a node (and, with kind, every cluster shares one
host's memory). A test marked `runs_alone` holds the run's lock exclusively; every other test
holds it shared. flock alone would let a stream of shared holders starve the exclusive one, so
a test waiting to run alone first closes a gate that every test passes on its way in."""

from __future__ import annotations

import fcntl
import hashlib
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import IO

WAIT_SECONDS = 3600.0  # the longest test (eviction) takes minutes; an hour means something is stuck
POLL_SECONDS = 0.5


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


@contextmanager
def turn(run_dir: Path, alone: bool, seconds: float = WAIT_SECONDS) -> Iterator[None]:
    """Hold this run's lock for one test: exclusively when `alone`, shared otherwise."""
    deadline = time.monotonic() + seconds
    with ExitStack() as files:
        gate = files.enter_context(open(run_dir / "alone.gate", "a+"))
        lock = files.enter_context(open(run_dir / "alone.lock", "a+"))
        if alone:
            _flock(gate, fcntl.LOCK_EX, "another test that runs alone", deadline, seconds)
            _flock(lock, fcntl.LOCK_EX, "the tests running now to finish, to run alone", deadline, seconds)
        else:
            _flock(gate, fcntl.LOCK_SH, "a test that runs alone to finish", deadline, seconds)
            fcntl.flock(gate, fcntl.LOCK_UN)
            _flock(lock, fcntl.LOCK_SH, "a test that runs alone to finish", deadline, seconds)
        yield  # closing the files releases both locks


def _ended_file(run_dir: Path, nodeid: str) -> Path:
    return run_dir / "ended" / hashlib.sha256(nodeid.encode()).hexdigest()[:32]


def mark_ended(run_dir: Path, nodeid: str) -> None:
    """`nodeid` has ended (whatever its outcome): the tests held back for it may go."""
    path = _ended_file(run_dir, nodeid)
    path.parent.mkdir(exist_ok=True)
    path.touch()


def wait_until_ended(run_dir: Path, nodeids: list[str], seconds: float = WAIT_SECONDS) -> list[str]:
    """Wait until every test of `nodeids` has ended; those that had not after `seconds` (a
    worker that died with one) are returned, and the caller goes on without them."""
    deadline = time.monotonic() + seconds
    while True:
        pending = [n for n in nodeids if not _ended_file(run_dir, n).exists()]
        if not pending or time.monotonic() > deadline:
            return pending
        time.sleep(POLL_SECONDS)
