"""A run of the suite holds its vm node's state directory (clusters/vm_provider.py IN_USE) from the
moment it brings the VM up or attaches to it: a second run on the same directory stops at its
preflight, naming the first, instead of stopping or reconfiguring the VM under the first run's
tests. The holder here is a real second process."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from clusters import pidlock
from clusters.checks import PreflightError
from clusters.cli import NotReady
from clusters.vm import hostcheck
from clusters.vm_provider import IN_USE, VmProvider

HOLD = ("import sys, time; from pathlib import Path; from clusters import pidlock;"
        " h = pidlock.take(Path(sys.argv[1])); print('held', flush=True); time.sleep(120)")


@pytest.fixture
def another_process() -> Iterator:
    """Start a process holding the lock at a path; yields the starter, stops them all after."""
    started: list[subprocess.Popen[str]] = []

    def hold(path: Path) -> subprocess.Popen[str]:
        proc = subprocess.Popen([sys.executable, "-c", HOLD, str(path)], stdout=subprocess.PIPE, text=True,
                                cwd=Path(__file__).resolve().parents[1])
        started.append(proc)
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        return proc

    yield hold
    for proc in started:
        proc.kill()
        proc.wait()


def provider(tmp_path: Path) -> VmProvider:
    return VmProvider(tmp_path / "run", k8s_version=None, kernel="6.12", memory_mb=4096, swap_mb=2048, reuse=False,
                      state_dir=tmp_path / "state")


def test_a_lock_file_that_does_not_exist_is_free_and_stays_absent(tmp_path: Path) -> None:
    assert pidlock.holder(tmp_path / "dir" / "x.lock") is None
    assert not (tmp_path / "dir").exists()


def test_the_holder_is_the_process_that_holds_it_and_only_while_it_lives(tmp_path: Path, another_process) -> None:
    path = tmp_path / "x.lock"
    proc = another_process(path)
    assert pidlock.holder(path) == str(proc.pid)
    proc.kill()
    proc.wait()
    assert pidlock.holder(path) is None


def test_a_vm_node_in_use_by_another_run_fails_the_preflight_before_the_build(
        tmp_path: Path, another_process, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hostcheck, "checks", lambda *a, **kw: [])  # this host's tools are not the point
    monkeypatch.setattr(VmProvider, "_build_kubernetes", lambda self: pytest.fail("built while the node is in use"))
    (tmp_path / "state").mkdir()
    holder = another_process(tmp_path / "state" / IN_USE)
    with pytest.raises(PreflightError) as raised:
        provider(tmp_path).preflight(["LimitedSwap"])
    assert (f"[FAIL] vm node free: another run of the suite (pid {holder.pid}) is using the vm node in"
            f" {tmp_path / 'state'}: wait for it to end, or give this run a state directory of its own (--vm-state-dir)"
            ) in str(raised.value), raised.value


def test_bringing_the_node_up_takes_it_or_stops_before_touching_the_vm(
        tmp_path: Path, another_process, monkeypatch: pytest.MonkeyPatch) -> None:
    ups: list[str] = []
    vm = provider(tmp_path).vm()
    monkeypatch.setattr(type(vm), "up", lambda self, behavior, reuse=False: ups.append(behavior))
    (tmp_path / "state").mkdir()
    holder = another_process(tmp_path / "state" / IN_USE)
    with pytest.raises(NotReady, match=rf"another run of the suite \(pid {holder.pid}\) is using the vm node"):
        provider(tmp_path)._bring_up("LimitedSwap")
    assert ups == []
    holder.kill()
    holder.wait()
    mine = provider(tmp_path)
    mine._bring_up("NoSwap")
    assert ups == ["NoSwap"]
    assert pidlock.holder(tmp_path / "state" / IN_USE) is not None, "the run does not hold its node"
