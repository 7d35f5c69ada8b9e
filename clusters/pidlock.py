"""An exclusive lock on a file that names the process holding it: a second process asking for it
learns at once which one has it, instead of waiting or meeting its half-done work. The kernel
drops the lock with its process, so a crashed holder never leaves it taken."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import IO


class Held(RuntimeError):
    """Another process holds the lock."""

    def __init__(self, path: Path, holder: str):
        self.path = path
        self.holder = holder  # its pid as it wrote it, or "?"
        super().__init__(f"{path} is held by pid {holder}")


def take(path: Path) -> IO[str]:
    """The open, locked file (keep it open to keep the lock), with this process's pid in it;
    Held when another process has it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = open(path, "a+")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "?"
        handle.close()
        raise Held(path, holder) from None
    handle.seek(0)
    handle.truncate()
    handle.write(f"{os.getpid()}\n")
    handle.flush()
    return handle


def holder(path: Path) -> str | None:
    """The pid of the process holding the lock ("?" when it has not written it yet), None when
    none does. Only looks: creates nothing, writes nothing, and holds a shared lock for a moment
    only where it is free."""
    try:
        handle = open(path)  # noqa: SIM115 - closed below on every path
    except FileNotFoundError:
        return None
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return handle.read().strip() or "?"
        fcntl.flock(handle, fcntl.LOCK_UN)
    return None


def release(handle: IO[str]) -> None:
    fcntl.flock(handle, fcntl.LOCK_UN)
    handle.close()


def remove_if_alone(path: Path) -> None:
    """Remove the lock file and its directory when the directory holds nothing else (the lock was
    taken for work that then made nothing). Another file in it, or a directory not empty by the
    time it is removed, leaves both."""
    try:
        if [p.name for p in path.parent.iterdir()] == [path.name]:
            path.unlink()
            path.parent.rmdir()
    except OSError:
        pass
