"""One expensive resource per run, shared by every pytest-xdist worker.

The first worker to take the lock creates the resource and writes a JSON handle; the others
wait on the lock and read it. A failed creation is recorded too, so the other workers fail
fast with the same message instead of each retrying a slow failure. Before creating anything,
a worker appends an entry to the run's ledger, so the controller can remove even a
half-created cluster at the end (only the controller tears down: no worker knows it is last).
"""

from __future__ import annotations

import fcntl
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

LEDGER = "ksc-created.jsonl"


class SharedCreationError(RuntimeError):
    pass


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def get_or_create(root: Path, key: str, create: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Return the handle for `key`, calling `create` in exactly one process of the run."""
    handle_path = root / f"{key}.json"
    with _locked(root / f"{key}.lock"):
        if handle_path.exists():
            record = json.loads(handle_path.read_text())
        else:
            try:
                record = {"ok": create()}
            except BaseException as error:  # KeyboardInterrupt too: record, then re-raise
                handle_path.write_text(json.dumps({"error": f"{type(error).__name__}: {error}"}))
                raise
            handle_path.write_text(json.dumps(record))
            return record["ok"]
    if "error" in record:
        raise SharedCreationError(f"{key}: creation failed earlier in this run: {record['error']}")
    return record["ok"]


def recorded_error(root: Path, key: str) -> str | None:
    """The error a creation of `key` recorded in this run, if it failed."""
    path = root / f"{key}.json"
    return json.loads(path.read_text()).get("error") if path.exists() else None


def record_created(root: Path, entry: dict[str, Any]) -> None:
    """Append to the ledger of things this run created (call before starting to create)."""
    with _locked(root / f"{LEDGER}.lock"):
        with open(root / LEDGER, "a") as ledger:
            ledger.write(json.dumps(entry) + "\n")


def created(root: Path) -> list[dict[str, Any]]:
    path = root / LEDGER
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# --- one behavior after another (one cluster at a time) --------------------------------------
