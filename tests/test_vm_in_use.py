"""A run of the suite holds its vm node's state directory (clusters/vm_provider.py IN_USE) from its
preflight to the end of the process that owns it: a second run on the same directory stops at its
preflight, naming the first, instead of stopping or reconfiguring the VM under the first run's
tests. The other run here is a real second process."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from clusters.checks import Check, PreflightError
from clusters.vm import hostcheck
from clusters.vm_provider import _HELD, IN_USE, VmProvider
from tests.lock_holder import ask, holding


@pytest.fixture
def preflight(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator:
    """The vm provider's preflight on a state directory of the test's own, with this host's tools
    and the build out of the way; what it holds is let go after the test."""
    monkeypatch.setattr(hostcheck, "checks", lambda *a, **kw: [])
    monkeypatch.setattr(VmProvider, "_build_kubernetes", lambda self: None)
    monkeypatch.setenv("KSC_CACHE_DIR", str(tmp_path / "cache"))
    before = set(_HELD)

    def run() -> None:
        VmProvider(tmp_path / "run", k8s_version=None, kernel="6.12", memory_mb=4096, swap_mb=2048, reuse=False,
                   state_dir=tmp_path / "state").preflight(["LimitedSwap"])

    yield run
    for path in set(_HELD) - before:
        _HELD.pop(path).close()


def test_a_vm_node_in_use_by_another_run_fails_the_preflight_before_the_build(
        tmp_path: Path, preflight, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(VmProvider, "_build_kubernetes", lambda self: pytest.fail("built while the node is in use"))
    (tmp_path / "state").mkdir()
    with holding(tmp_path / "state" / IN_USE) as holder, pytest.raises(PreflightError) as raised:
        preflight()
    assert (f"[FAIL] vm node free: another run of the suite (pid {holder.pid}) is using the vm node in"
            f" {tmp_path / 'state'}: wait for it to end, or give this run a state directory of its own (--vm-state-dir)"
            ) in str(raised.value), raised.value


def test_a_run_past_its_preflight_holds_its_node_until_it_ends(tmp_path: Path, preflight) -> None:
    preflight()
    assert ask(tmp_path / "state" / IN_USE) == f"held by {os.getpid()}"
    preflight()  # the same run asking again (a second provider object, as in-process runs make)
    _HELD.pop((tmp_path / "state").resolve()).close()
    assert ask(tmp_path / "state" / IN_USE) == "free"


def test_a_run_its_preflight_stops_leaves_no_state_directory_behind(
        tmp_path: Path, preflight, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hostcheck, "checks", lambda *a, **kw: [Check("qemu-system-x86_64", False, "not on PATH")])
    with pytest.raises(PreflightError, match="qemu-system-x86_64: not on PATH"):
        preflight()
    assert not (tmp_path / "state").exists()
