"""What --reuse-clusters takes of a vm node left running (clusters/vm/guest.py Guest.usable,
VmCluster.up): only a VM whose `up` got to node Ready; one whose `up` ended early (its qemu still
running) is stopped and replaced, not waited on for ten minutes. Against the fake QEMU of
tests/fake_qemu.py: nothing is booted."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from clusters.vm import qemu
from clusters.vm.cluster import VmCluster, VmState
from tests import fake_qemu


class Booted(Exception):
    """The up went on to build and boot a new VM (stopped there by the test)."""


@pytest.fixture
def left_running(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[VmCluster, list[str]]]:
    """A vm node's qemu running from its state directory (the fake), with the state its `up` saved
    after the boot and a kubeconfig; VmCluster's progress lines are collected."""
    fake_qemu.stand_in(monkeypatch, tmp_path / "bin")
    monkeypatch.setenv("KSC_VM_ACCEL", "tcg")
    lines: list[str] = []
    vm = VmCluster(tmp_path / "state", cache_dir=tmp_path / "cache", progress=lines.append)
    pid = fake_qemu.start_guest(vm.paths)
    vm.save_state(VmState(pid=pid, port=40001, k8s_version=vm.k8s_version, kernel="6.12", kernel_release="6.12.0",
                          memory_mb=4096, swap_mb=2048, cpus=2, behavior="LimitedSwap", image_key="k", started_at=0.0))
    vm.kubeconfig.parent.mkdir(parents=True, exist_ok=True)
    vm.kubeconfig.write_text("apiVersion: v1\nkind: Config\n")  # an earlier VM's, or this one's

    def boot(*a: object, **kw: object) -> None:
        raise Booted()

    monkeypatch.setattr(VmCluster, "prepare", boot)
    monkeypatch.setattr(VmCluster, "_check_workload_image_current", lambda self: None)
    monkeypatch.setattr(VmCluster, "_wait_node_ready", lambda self, deadline, since=None: lines.append("waited"))
    try:
        yield vm, lines
    finally:
        qemu.stop_qemu(vm.paths, timeout=5)


def test_a_vm_whose_up_never_got_to_node_ready_is_replaced_not_waited_on(left_running) -> None:
    vm, lines = left_running
    assert vm.usable() is None
    with pytest.raises(Booted):
        vm.up("LimitedSwap", reuse=True, booting=lambda: lines.append("the run's own"))
    assert "waited" not in lines and "a VM from an earlier run is still up: stopping it" in lines, lines
    assert lines.index("the run's own") < lines.index("a VM from an earlier run is still up: stopping it")
    assert not vm.is_running()


def test_a_vm_another_command_is_starting_is_neither_reused_nor_the_runs(left_running) -> None:
    """`python -m clusters.vm up` at work in another terminal: the run stops at its lock, and its
    teardown must not stop that command's VM (it was never recorded as the run's)."""
    from clusters.vm.guest import AlreadyStarting
    from tests.lock_holder import holding

    vm, lines = left_running
    st = json.loads(vm.state_file.read_text())
    vm.state_file.write_text(json.dumps({**st, "ready_at": 1.0}))
    with holding(vm.state_dir / "starting.lock") as other:
        assert vm.usable() is None and vm.starting_elsewhere() == str(other.pid)
        with pytest.raises(AlreadyStarting, match=rf"already starting \(pid {other.pid}\)"):
            vm.up("LimitedSwap", reuse=True, booting=lambda: lines.append("the run's own"))
    assert "the run's own" not in lines and vm.is_running()


def test_a_vm_whose_up_got_to_node_ready_is_reused(left_running) -> None:
    vm, lines = left_running
    st = json.loads(vm.state_file.read_text())
    vm.state_file.write_text(json.dumps({**st, "ready_at": 1.0}))
    assert vm.up("LimitedSwap", reuse=True, booting=lambda: lines.append("the run's own")) == vm.kubeconfig
    assert lines[0].startswith("reusing running VM (pid ") and "waited" in lines, lines
    assert "the run's own" not in lines
    assert vm.is_running()


def test_asking_who_holds_a_lock_only_looks(tmp_path: Path) -> None:
    """pidlock.holder: no file made where there is none, nothing written where there is one, and
    the holder named while another process holds it."""
    from clusters import pidlock
    from tests.lock_holder import ask, holding

    lock = tmp_path / "state" / "starting.lock"
    assert pidlock.holder(lock) is None and not lock.parent.exists()
    with holding(lock) as other:
        assert pidlock.holder(lock) == str(other.pid)
    lock.write_text("12345\n")  # a holder long gone
    assert pidlock.holder(lock) is None and lock.read_text() == "12345\n" and ask(lock) == "free"


def test_a_kind_host_whose_up_ended_before_docker_answered_is_replaced_by_kind_host_up_reuse(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`kind-host up --reuse` takes what Guest.usable takes, as the vm node's --reuse-clusters does:
    a host left before Docker answered is stopped and booted anew, not waited on for Docker."""
    from clusters.vm.kindhost import KindHost, KindHostState

    fake_qemu.stand_in(monkeypatch, tmp_path / "bin")
    monkeypatch.setenv("KSC_VM_ACCEL", "tcg")
    lines: list[str] = []
    host = KindHost(tmp_path / "state", cache_dir=tmp_path / "cache", progress=lines.append)
    pid = fake_qemu.start_guest(host.paths, "ksc-kind-host")
    host.save_state(KindHostState(pid=pid, docker_port=2375, api_ports={}, kernel="6.12", kernel_release="6.12.0",
                                  memory_mb=8192, swap_mb=4096, cpus=2, accel="tcg", image_key="k", started_at=0.0))

    def boot(*a: object, **kw: object) -> None:
        raise Booted()

    monkeypatch.setattr(KindHost, "prepare", boot)
    monkeypatch.setattr(KindHost, "_wait_docker", lambda self, st, deadline: lines.append("waited for Docker"))
    try:
        with pytest.raises(Booted):
            host.up([], reuse=True)
    finally:
        qemu.stop_qemu(host.paths, timeout=5)
    assert "waited for Docker" not in lines and "a kind host from an earlier run is still up: stopping it" in lines
