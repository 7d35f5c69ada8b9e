"""Room on the disk of the suite's cache, said before anything is written there.

A disk that fills mid-run does not fail cleanly: QEMU pauses a guest whose disk write meets
ENOSPC, and the run then hangs in its bounded waits, test after test; a build leaves a half
written tree. So a run checks the room first (the preflight's cache directory check), and so does
each build (clusters/vm/build.py), which is what fills a disk fastest.
"""
from __future__ import annotations

import shutil
from pathlib import Path

from workloads.cache import CACHE_VARIABLES

GiB = 1 << 30
# What a run may still write under the cache and Go's caches (on the same disk by default): a
# cold build of a Kubernetes release took about 6 GiB with Go's module and build caches, a node's
# disk and its overlay about 2 GiB.
MIN_FREE_BYTES = 8 * GiB
# What one build may still write: its binaries, the patched source tree it compiles, Go's cache.
MIN_FREE_FOR_BUILD_BYTES = 3 * GiB
PRUNABLE = "patched builds under bin/, kubernetes-*+patch.*, are built again when needed"


def free_bytes(path: Path) -> int:
    return shutil.disk_usage(path).free


def problem(root: Path, wanted: int, free: int | None = None) -> str | None:
    """Why the disk of ``root`` cannot take ``wanted`` bytes more, None when it can."""
    free = free_bytes(root) if free is None else free
    if free >= wanted:
        return None
    return (f"{free / GiB:.1f} GiB free on the disk of {root}, {wanted / GiB:.0f} GiB wanted; free space there"
            f" ({PRUNABLE}), or set {CACHE_VARIABLES} to a directory on a larger disk")
