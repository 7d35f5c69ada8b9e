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
    (tmp_path / "bin").mkdir()
    monkeypatch.setattr(qemu, "QEMU", str(fake_qemu.wrapper(tmp_path / "bin")))
    monkeypatch.setenv("FAKE_QEMU_MODE", "silent")
    monkeypatch.setenv("KSC_VM_ALONE", "off")  # a real guest of the suite may be running on this host
    monkeypatch.setenv("KSC_VM_ACCEL", "tcg")
    lines: list[str] = []
    vm = VmCluster(tmp_path / "state", cache_dir=tmp_path / "cache", progress=lines.append)
    pid = qemu.start_qemu(vm.paths, disk=tmp_path / "disk.raw", kernel=tmp_path / "vmlinuz",
                          initrd=tmp_path / "initrd.img", memory_mb=64, cpus=1, swap_mb=0, use_overlay=False,
                          accel=qemu.Accel("tcg", "test"))
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
        vm.up("LimitedSwap", reuse=True)
    assert "waited" not in lines and "a VM from an earlier run is still up: stopping it" in lines, lines
    assert not vm.is_running()


def test_a_vm_whose_up_got_to_node_ready_is_reused(left_running) -> None:
    vm, lines = left_running
    st = json.loads(vm.state_file.read_text())
    vm.state_file.write_text(json.dumps({**st, "ready_at": 1.0}))
    assert vm.up("LimitedSwap", reuse=True) == vm.kubeconfig
    assert lines[0].startswith("reusing running VM (pid ") and "waited" in lines, lines
    assert vm.is_running()
