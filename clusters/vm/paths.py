"""Where the vm provider keeps its run state: under the suite's cache root (workloads/cache.py),
never inside the repository."""
from __future__ import annotations

from pathlib import Path

from workloads.cache import cache_root


def default_state_dir() -> Path:
    return cache_root() / "vm" / "run"
