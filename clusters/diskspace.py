"""Room on the disk of the suite's cache, said before anything is written there.

A disk that fills mid-run does not fail cleanly: QEMU pauses a guest whose disk write meets
ENOSPC, and the run then hangs in its bounded waits, test after test; a build leaves a half
written tree. So a run checks the room first (the preflight's cache directory check), and so does
each build (clusters/vm/build.py) and each node image (clusters/vm/nodeimage.py), which fill a
disk fastest.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

from workloads.cache import CACHE_VARIABLES

GiB = 1 << 30
# What a run may still write under the cache and Go's caches (on the same disk by default): a
# cold build of a Kubernetes release took about 6 GiB with Go's module and build caches, a node's
# disk and its overlay about 2 GiB.
MIN_FREE_BYTES = 8 * GiB
# What one build may still write: its binaries, the patched source tree it compiles, Go's cache;
# or one kind node image (1.4 GiB) with the tree it is assembled from.
MIN_FREE_FOR_BUILD_BYTES = 3 * GiB
# What takes the room, and is made again when needed.
PRUNABLE = ("Go's build cache (go clean -cache), the kind node images under vm/kind-node/ and their parts under"
            " vm/oci/, the VM disks under vm/images/, patched builds under bin/kubernetes-*+patch.*")


def free_bytes(path: Path) -> int:
    return shutil.disk_usage(path).free


def device(path: Path) -> int:
    return os.stat(path).st_dev


def problem(root: Path, wanted: int) -> tuple[str, str] | None:
    """Why the disk of ``root`` cannot take ``wanted`` bytes more, as (what is wrong, what to do);
    None when it can."""
    free = free_bytes(root)
    if free >= wanted:
        return None
    return (f"{free / GiB:.1f} GiB free on the disk of {root}, {wanted / GiB:.0f} GiB wanted",
            f"free space there ({PRUNABLE}), or set {CACHE_VARIABLES} to a directory on a larger disk")


def build_problem(root: Path, go_cache: Path | None) -> tuple[str, str] | None:
    """``problem`` for one build: the cache's disk, and that of Go's build cache (``go env
    GOCACHE``; KSC_CACHE_DIR does not move it) where it is another."""
    said = problem(root, MIN_FREE_FOR_BUILD_BYTES)
    if said is not None or go_cache is None:
        return said
    while not go_cache.exists() and go_cache != go_cache.parent:  # not made yet: the disk it will be on
        go_cache = go_cache.parent
    if device(go_cache) == device(root):
        return None
    return problem(go_cache, MIN_FREE_FOR_BUILD_BYTES)
