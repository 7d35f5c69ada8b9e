"""A wait on the vm guest through its agent loses a look, not the wait, when one answer does not
come (a command timed out in a guest busy under emulation: decision 0037); a guest that is gone
still ends it at once (tests/test_vm_accel.py)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from clusters.vm import cluster, qemu
from clusters.vm.cluster import VmCluster, VmClusterError


def busy_guest(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, answers: list) -> VmCluster:
    """A vm node whose agent gives `answers` in turn (an exception: that look's answer lost)."""
    vm = VmCluster(tmp_path / "state", progress=lambda message: None)
    monkeypatch.setattr(vm, "watch", lambda: None)
    monkeypatch.setattr(cluster.time, "sleep", lambda s: None)

    def exec_(argv: Sequence[str], *, input: bytes | None = None, timeout: float = 300) -> tuple[int, str, str]:
        answer = answers.pop(0) if len(answers) > 1 else answers[0]
        if isinstance(answer, Exception):
            raise answer
        return answer

    monkeypatch.setattr(vm.agent, "exec", exec_)
    return vm


def test_a_unit_wait_outlives_an_answer_that_did_not_come(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    answers = [qemu.AgentError("guest command timed out after 60s: systemctl is-active containerd.service"),
               TimeoutError("timed out"), (3, "activating\n", ""), (0, "active\n", "")]
    vm = busy_guest(monkeypatch, tmp_path, answers)
    vm._wait_unit("containerd.service", time.monotonic() + 30)
    assert answers == [(0, "active\n", "")]


def test_a_unit_wait_never_answered_ends_at_its_deadline_saying_so(monkeypatch: pytest.MonkeyPatch,
                                                                   tmp_path: Path) -> None:
    vm = busy_guest(monkeypatch, tmp_path, [qemu.AgentError("guest command timed out after 60s")])
    with pytest.raises(VmClusterError, match=r"timed out waiting for containerd.service to become active \(last state:"
                                             r" 'the guest agent did not answer'\)"):
        vm._wait_unit("containerd.service", time.monotonic() + 0.2)


def test_a_failed_unit_still_ends_the_wait_at_once(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    vm = busy_guest(monkeypatch, tmp_path, [(3, "failed\n", "")])
    monkeypatch.setattr(vm, "journal", lambda unit, lines=60: "containerd: config invalid")
    with pytest.raises(VmClusterError, match="containerd.service failed in the guest:\ncontainerd: config invalid"):
        vm._wait_unit("containerd.service", time.monotonic() + 30)
