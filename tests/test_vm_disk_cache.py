"""The vm provider's cache of built disks (clusters/vm/image.py), without a VM."""
from __future__ import annotations

import os
from pathlib import Path

from clusters.versions import SUPPORTED
from clusters.vm import image
from clusters.vm.image import KEPT_DISKS, _prune, _used

CLOCK = [1_000_000.0]


def _built(images: Path, name: str) -> Path:
    d = images / name
    d.mkdir()
    (d / ".complete").write_text("6.12.0 built in 1s\n")
    CLOCK[0] += 10
    os.utime(d / ".complete", (CLOCK[0], CLOCK[0]))
    _prune(images, keep=KEPT_DISKS)
    return d


def _booted(d: Path) -> None:
    _used(d)
    CLOCK[0] += 10
    os.utime(d / ".used", (CLOCK[0], CLOCK[0]))


def test_the_matrix_then_patched_builds_then_the_matrix_again_keeps_what_it_boots(tmp_path: Path) -> None:
    """The kind host's disk and every minor's, booted in turn; then patched builds (the bench's
    fresh VMs): each evicts the disk used longest ago, never one booted since it."""
    minors = [_built(tmp_path, f"minor-{m}") for m in SUPPORTED]  # 1.34's disk is the oldest built
    kind_host = _built(tmp_path, "kind-host")
    for d in [kind_host, *minors]:  # the matrix, then the kind cells
        _booted(d)
    first = _built(tmp_path, "patched-1")
    assert {p.name for p in tmp_path.iterdir()} == {"kind-host", "patched-1", *(d.name for d in minors)}
    _booted(minors[0])  # the matrix starts again on 1.34; a second patched build evicts one disk:
    _built(tmp_path, "patched-2")  # the kind host's, booted before every other
    assert {p.name for p in tmp_path.iterdir()} == {"patched-1", "patched-2", *(d.name for d in minors)}
    assert first.is_dir()


def test_a_build_under_way_is_never_pruned(tmp_path: Path) -> None:
    (tmp_path / "half-built.tmp").mkdir()
    for i in range(KEPT_DISKS + 2):
        _built(tmp_path, f"disk{i}")
    assert (tmp_path / "half-built.tmp").is_dir() and len(list(tmp_path.iterdir())) == KEPT_DISKS + 1


def test_a_cached_disk_is_stamped_as_used(tmp_path: Path) -> None:
    d = _built(tmp_path, "disk")
    assert _used(d) == "6.12.0" and (d / ".used").exists()
    assert image.KEPT_DISKS == len(SUPPORTED) + 2
