"""Under pytest-xdist, which tests may run at once.

Several workers run tests at once. Locks in the run's directory order them, each taken shared
or exclusive:

* a node's lock: every test holds its node's shared; a `runs_alone` test holds it exclusively,
  so no other test runs on that node meanwhile (its kubelet restarts, its memory is driven to
  pressure, its whole swap usage is compared with its metrics). Tests on another node go on:
  with kind each behavior has a node of its own, and a node's figures are its own cgroup's.
* the host's lock: every test holds it shared; a `runs_alone(..., host=True)` test holds it
  exclusively, so nothing else in the run runs (it allocates more than the host's RAM, which
  every node on the host shares).
* bursts: a deployment of many pods at once (the pod shapes, the eviction test's seven) holds
  it exclusively while its pods start: two of them at once, one per node, can stall the API
  server of an emulated kind host.

The host's lock is taken before the node's, and both are held to the end of the test, so no
two tests wait for each other; a burst is taken last and let go before the test ends. flock
alone would let a stream of shared holders starve an exclusive one, so a test waiting for a
lock exclusively first closes that lock's gate, which every test passes on its way in.

And a `runs_first` test ends before the other tests of its behavior start (mark_ended,
wait_until_ended)."""

from __future__ import annotations

import fcntl
import hashlib
import re
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import IO

from clusters import waits

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


def _hold(files: ExitStack, run_dir: Path, scope: str, exclusive: bool, where: str, deadline: float,
          seconds: float) -> None:
    """Take one lock (the host's, a node's, the bursts') until `files` is closed."""
    stem = "alone" if scope == HOST else "alone-" + re.sub(r"[^A-Za-z0-9_.-]", "_", scope)
    gate = files.enter_context(open(run_dir / f"{stem}.gate", "a+"))
    lock = files.enter_context(open(run_dir / f"{stem}.lock", "a+"))
    if exclusive:
        _flock(gate, fcntl.LOCK_EX, f"another test that runs alone {where}", deadline, seconds)
        _flock(lock, fcntl.LOCK_EX, f"the tests running {where} now to finish, to run alone", deadline, seconds)
    else:
        _flock(gate, fcntl.LOCK_SH, f"a test that runs alone {where} to finish", deadline, seconds)
        fcntl.flock(gate, fcntl.LOCK_UN)
        _flock(lock, fcntl.LOCK_SH, f"a test that runs alone {where} to finish", deadline, seconds)


@contextmanager
def turn(run_dir: Path, alone: bool, node: str | None = None, host: bool = False,
         seconds: float | waits.Wait = waits.TURN) -> Iterator[str | None]:
    """Hold this run's locks for one test on `node`: its node's exclusively when `alone`, the
    host's exclusively when `alone` and `host` or when the test names no node, shared
    otherwise. Yields what it holds exclusively: HOST, the node, or None."""
    seconds = waits.bound(seconds)
    deadline = time.monotonic() + seconds
    whole_host = alone and (host or node is None)
    with ExitStack() as files:
        _hold(files, run_dir, HOST, whole_host, "on the host", deadline, seconds)
        if node is not None and not whole_host:
            _hold(files, run_dir, "node-" + node, alone, f"on {node}", deadline, seconds)
        yield HOST if whole_host else node if alone else None  # closing the files releases the locks


@contextmanager
def burst(run_dir: Path, seconds: float | waits.Wait = waits.TURN) -> Iterator[None]:
    """Hold the run's bursts lock: no other deployment of many pods starts meanwhile."""
    seconds = waits.bound(seconds)
    deadline = time.monotonic() + seconds
    with open(run_dir / "bursts.lock", "a+") as lock:
        _flock(lock, fcntl.LOCK_EX, "another deployment of many pods to start", deadline, seconds)
        yield


def _ended_file(run_dir: Path, nodeid: str) -> Path:
    return run_dir / "ended" / hashlib.sha256(nodeid.encode()).hexdigest()[:32]


def mark_ended(run_dir: Path, nodeid: str) -> None:
    """`nodeid` has ended (whatever its outcome): the tests held back for it may go."""
    path = _ended_file(run_dir, nodeid)
    path.parent.mkdir(exist_ok=True)
    path.touch()


def wait_until_ended(run_dir: Path, nodeids: list[str], seconds: float | waits.Wait = waits.TURN) -> list[str]:
    """Wait until every test of `nodeids` has ended; those that had not after `seconds` (a
    worker that died with one) are returned, and the caller goes on without them."""
    seconds = waits.bound(seconds)
    deadline = time.monotonic() + seconds
    while True:
        pending = [n for n in nodeids if not _ended_file(run_dir, n).exists()]
        if not pending or time.monotonic() > deadline:
            return pending
        time.sleep(POLL_SECONDS)
