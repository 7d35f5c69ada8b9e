"""--kind-bin as the user gave it: a file that cannot run is named for what it is, and a kind that
hangs is killed together with everything it started (its process group), not only itself."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusters import preflight
from clusters.kind_provider import KindError, run_command
from tests import fake_kind

# `version` (and any other command) starts a child, as kind starts docker, and hangs.
HANGING_KIND = """#!/bin/sh
sleep 600 &
echo "$$ $!" > "$KSC_PIDS"
wait
"""


def test_a_kind_bin_that_is_not_executable(tmp_path: Path) -> None:
    kind = tmp_path / "kind"
    kind.write_text("#!/bin/sh\necho kind v0.33.0\n")
    kind.chmod(0o644)
    check = preflight.check_kind(str(kind), None)
    assert not check.ok
    assert check.detail == f"--kind-bin {kind} is not executable (mode 644)"
    assert check.remedy.startswith(f"make it executable (chmod +x {kind})")
    with pytest.raises(KindError, match=f"--kind-bin {kind} is not executable \\(mode 644\\): make it executable"):
        run_command([str(kind), "get", "clusters"], 10)


def test_a_kind_bin_that_is_a_directory(tmp_path: Path) -> None:
    check = preflight.check_kind(str(tmp_path), None)
    assert not check.ok and check.detail == f"--kind-bin {tmp_path} is a directory, not the kind binary"
    assert "go install sigs.k8s.io/kind@" in check.remedy
    with pytest.raises(KindError, match="is a directory, not the kind binary: install it"):
        run_command([str(tmp_path), "get", "clusters"], 10)


def test_a_kind_bin_that_does_not_exist(tmp_path: Path) -> None:
    check = preflight.check_kind(str(tmp_path / "nope"), None)
    assert not check.ok and check.detail == f"--kind-bin {tmp_path / 'nope'} does not exist"


@pytest.fixture
def hanging_kind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    kind = tmp_path / "kind"
    kind.write_text(HANGING_KIND)
    kind.chmod(0o755)
    monkeypatch.setenv("KSC_PIDS", str(tmp_path / "pids"))
    return kind, tmp_path / "pids"


def test_a_hanging_kind_version_is_killed_with_its_children(hanging_kind: tuple[Path, Path],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    kind, pids = hanging_kind
    monkeypatch.setattr(preflight, "KIND_VERSION_SECONDS", 2)
    check = preflight.check_kind(str(kind), None)
    assert not check.ok and check.detail == f"`{kind} version` did not answer in 2 s"
    started = [int(p) for p in pids.read_text().split()]
    assert len(started) == 2 and fake_kind.gone(started) == [], "kind's child outlived the kill"


def test_a_hanging_kind_command_is_killed_with_its_children(hanging_kind: tuple[Path, Path]) -> None:
    kind, pids = hanging_kind
    with pytest.raises(KindError, match="did not finish in 2s"):
        run_command([str(kind), "create", "cluster"], 2)
    started = [int(p) for p in pids.read_text().split()]
    assert len(started) == 2 and fake_kind.gone(started) == [], "kind's child outlived the kill"
