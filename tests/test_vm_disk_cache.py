"""The vm provider's cache of built disks (clusters/vm/image.py), without a VM."""
from __future__ import annotations

import os

from clusters.versions import SUPPORTED
from clusters.vm.image import KEPT_DISKS, _prune


def test_the_disk_cache_keeps_a_disk_per_supported_minor_and_one_patched(tmp_path):
    """A matrix over every minor, then a patched build, evicts none of the minors' disks."""
    names = [f"disk{i}" for i in range(len(SUPPORTED) + 3)]  # names[0] is the newest
    for age, name in enumerate(names):
        d = tmp_path / name
        d.mkdir()
        (d / ".complete").write_text("built\n")
        os.utime(d / ".complete", (1_000_000 - age, 1_000_000 - age))
    (tmp_path / "half-built.tmp").mkdir()  # a build under way is never pruned

    _prune(tmp_path, keep=KEPT_DISKS)

    assert KEPT_DISKS == len(SUPPORTED) + 1
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(names[:KEPT_DISKS] + ["half-built.tmp"])
