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
    answers = [qemu.AgentNoAnswer("guest command timed out after 60s: systemctl is-active containerd.service"),
               TimeoutError("timed out"), (3, "activating\n", ""), (0, "active\n", "")]
    vm = busy_guest(monkeypatch, tmp_path, answers)
    vm._wait_unit("containerd.service", time.monotonic() + 30)
    assert answers == [(0, "active\n", "")]


def test_a_unit_wait_never_answered_ends_at_its_deadline_saying_so(monkeypatch: pytest.MonkeyPatch,
                                                                   tmp_path: Path) -> None:
    vm = busy_guest(monkeypatch, tmp_path, [qemu.AgentNoAnswer("guest agent closed the connection")])
    with pytest.raises(VmClusterError, match=r"timed out waiting for containerd.service to become active \(last state:"
                                             r" 'no answer from the guest agent \(AgentNoAnswer: guest agent closed the"
                                             r" connection\)'\)"):
        vm._wait_unit("containerd.service", time.monotonic() + 0.2)


def test_a_failed_unit_still_ends_the_wait_at_once(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    vm = busy_guest(monkeypatch, tmp_path, [(3, "failed\n", "")])
    monkeypatch.setattr(vm, "journal", lambda unit, lines=60: "containerd: config invalid")
    with pytest.raises(VmClusterError, match="containerd.service failed in the guest:\ncontainerd: config invalid"):
        vm._wait_unit("containerd.service", time.monotonic() + 30)


def test_an_error_the_agent_answers_ends_the_wait_at_once(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # the agent answered: no later look can change it (here, an exec the agent refuses)
    vm = busy_guest(monkeypatch, tmp_path, [qemu.AgentError("guest-exec: {'class': 'GenericError'}")])
    t0 = time.monotonic()
    with pytest.raises(qemu.AgentError, match="GenericError"):
        vm._wait_unit("containerd.service", time.monotonic() + 30)
    assert time.monotonic() - t0 < 5


def test_a_failed_unit_whose_journal_is_unread_still_says_it_failed(monkeypatch: pytest.MonkeyPatch,
                                                                    tmp_path: Path) -> None:
    vm = busy_guest(monkeypatch, tmp_path, [(3, "failed\n", ""), qemu.AgentNoAnswer("guest command timed out after 300s")])
    with pytest.raises(VmClusterError, match=r"containerd.service failed in the guest:\n\(its journal unread:"
                                             r" AgentNoAnswer: guest command timed out after 300s\)"):
        vm._wait_unit("containerd.service", time.monotonic() + 30)


def test_kubeadm_init_outlives_answers_that_did_not_come(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    log = (0, "[init] Using Kubernetes version: v1.37.2\nYour Kubernetes control-plane has initialized successfully!\n", "")
    vm = busy_guest(monkeypatch, tmp_path, [qemu.AgentNoAnswer("guest command timed out after 60s: cat"), log])
    monkeypatch.setattr(vm, "put_file", lambda *a, **k: None)
    monkeypatch.setattr(vm.agent, "spawn", lambda *a, **k: 7)
    statuses: list = [TimeoutError("timed out"), qemu.AgentNoAnswer("guest agent closed the connection"), None, 0]

    def exec_status(pid: int) -> int | None:
        status = statuses.pop(0)
        if isinstance(status, Exception):
            raise status
        return status

    monkeypatch.setattr(vm.agent, "exec_status", exec_status)
    said: list[str] = []
    vm.progress = said.append
    vm._kubeadm_init("LimitedSwap")
    assert statuses == [] and said[-1] == "API server up: kubeadm init finished"


def test_kubeadm_init_ends_at_once_on_the_agents_error_reply(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    vm = busy_guest(monkeypatch, tmp_path, [(0, "", "")])
    monkeypatch.setattr(vm, "put_file", lambda *a, **k: None)
    monkeypatch.setattr(vm.agent, "spawn", lambda *a, **k: 7)

    def exec_status(pid: int) -> int | None:
        raise qemu.AgentError("guest-exec-status: {'class': 'GenericError', 'desc': 'Invalid parameter pid'}")

    monkeypatch.setattr(vm.agent, "exec_status", exec_status)
    with pytest.raises(qemu.AgentError, match="Invalid parameter pid"):
        vm._kubeadm_init("LimitedSwap")
