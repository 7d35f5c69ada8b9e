"""The accelerator probe and the watch on a running guest (clusters/vm/qemu.py, guest.py).

KVM counts only when the guest's kernel boots under it to its root mount (the firmware's banner
is an estimate for the checks before a build, never what a boot runs under); a KVM that stops the
guest is TCG with QEMU's own reason, or, when KSC_VM_ACCEL=kvm forces it, exit 3 before
anything is built. Every wait on a guest fails within seconds when QEMU stopped the guest or
is gone, with its console and log. All of it against tests/fake_qemu.py (no guest is booted),
plus one check of the probe against the real QEMU and /dev/kvm of this machine."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from clusters import cli
from clusters.kubelet_config import KubeletConfigError, NodeKubelet
from clusters.vm import qemu
from clusters.vm.cluster import VmCluster, VmClusterError
from clusters.vm.kindhost import KindHost, KindHostError, KindHostState
from tests import fake_qemu

KVM_STOP = "KVM stops the guest: internal-error (KVM internal error. Suberror: 1; emulation failure)"
MSR_STOP = ("KVM stops the guest: qemu exited (killed by SIGABRT) (qemu-system-x86_64: error: failed to set"
            " MSR 0x10a to 0x69)")


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """tests/fake_qemu.py as the QEMU binary, a stand-in /dev/kvm, a cache of the test's own.
    Returns the file the fake records its argv and pid in (absent: it was not started)."""
    (tmp_path / "bin").mkdir()
    monkeypatch.setattr(qemu, "QEMU", str(fake_qemu.wrapper(tmp_path / "bin")))
    (tmp_path / "kvm").touch()
    monkeypatch.setattr(qemu, "KVM_DEVICE", str(tmp_path / "kvm"))
    monkeypatch.setenv("KSC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("KSC_VM_ACCEL", raising=False)
    monkeypatch.setenv("FAKE_QEMU_RECORD", str(tmp_path / "record.json"))
    monkeypatch.setattr(qemu, "probe_kernel", lambda: None)  # the host's kernel, if readable, is not the test's
    qemu.choose_accel.cache_clear()
    yield tmp_path / "record.json"
    qemu.choose_accel.cache_clear()


def mode(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    monkeypatch.setenv("FAKE_QEMU_MODE", name)


def gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"
    except FileNotFoundError:
        return True


# --- the probe's verdict --------------------------------------------------------------------

def test_firmware_that_prints_its_banner_is_only_an_estimate(fake: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mode(monkeypatch, "boots")
    probe = qemu.probe_kvm(timeout=20)
    assert probe.ok and probe.kernel is None, probe
    assert probe.reason.startswith("KVM ran the firmware to its first console line in "), probe
    assert probe.reason.endswith(" s (no guest kernel to boot yet)"), probe
    assert probe.seconds < 15
    assert gone(json.loads(fake.read_text())["pid"]), "the probe left its QEMU running"


def test_a_kernel_that_boots_to_its_root_mount_proves_kvm(fake: Path, monkeypatch: pytest.MonkeyPatch,
                                                          tmp_path: Path) -> None:
    mode(monkeypatch, "boots")
    probe = qemu.probe_kvm(kernel=tmp_path / "vmlinuz", timeout=20)
    assert (probe.ok, probe.kernel) == (True, str(tmp_path / "vmlinuz")), probe
    assert probe.reason.startswith("KVM booted the guest's kernel (vmlinuz) to its root mount in "), probe
    assert gone(json.loads(fake.read_text())["pid"]), "the probe left its QEMU running"


def test_a_kernel_that_hangs_in_its_decompressor_is_refused_with_its_last_line(
        fake: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The firmware and the real-mode setup print under such a KVM; the kernel proper never does."""
    mode(monkeypatch, "decompressor-hang")
    assert qemu.probe_kvm(timeout=20).ok, "the firmware runs under this KVM"
    probe = qemu.probe_kvm(kernel=tmp_path / "vmlinuz", timeout=3)
    assert (probe.ok, probe.kernel) == (False, None), probe
    assert probe.reason == ("KVM runs no guest: the kernel (vmlinuz) stopped short of its root mount, its last line"
                            " 'Probing EDD (edd=off to disable)... ok' within 3 s (run state: running)"), probe
    assert gone(json.loads(fake.read_text())["pid"]), "the probe left its QEMU running"


def test_a_guest_boots_under_what_its_own_kernel_proved(fake: Path, monkeypatch: pytest.MonkeyPatch,
                                                        tmp_path: Path) -> None:
    """A KVM that ran the firmware before the build (no kernel yet) is re-probed with the kernel
    that boots: one that hangs in the decompressor boots the guest under TCG."""
    mode(monkeypatch, "decompressor-hang")
    estimate = qemu.choose_accel()
    assert (estimate.name, estimate.kernel) == ("kvm", None), estimate
    monkeypatch.setattr(qemu, "PROBE_TIMEOUT", 3.0)
    probed: list[Path | None] = []
    real_probe = qemu.probe_kvm
    monkeypatch.setattr(qemu, "probe_kvm", lambda *a, **kw: probed.append(kw.get("kernel")) or real_probe(*a, **kw))
    paths = qemu.VmPaths(tmp_path / "state")
    try:
        qemu.start_qemu(paths, disk=tmp_path / "disk.raw", kernel=tmp_path / "vmlinuz", initrd=tmp_path / "initrd.img",
                        memory_mb=64, cpus=1, swap_mb=0, use_overlay=False, accel=estimate)
        argv = json.loads(fake.read_text())["argv"]
    finally:
        qemu.stop_qemu(paths, timeout=5)
    assert probed == [tmp_path / "vmlinuz"], "the boot did not probe the kernel it boots"
    assert argv[argv.index("-accel") + 1].startswith("tcg,"), argv


def test_a_kernel_is_probed_once_whichever_copy_boots(fake: Path, monkeypatch: pytest.MonkeyPatch,
                                                      tmp_path: Path) -> None:
    """Every node disk carries a copy of the same kernel: its answer is kept by content, beside
    the firmware's, across processes (the lru cache cleared between calls)."""
    mode(monkeypatch, "boots")
    probed: list[Path | None] = []
    real_probe = qemu.probe_kvm
    monkeypatch.setattr(qemu, "probe_kvm", lambda *a, **kw: probed.append(kw.get("kernel")) or real_probe(*a, **kw))
    one, two, other = tmp_path / "a" / "vmlinuz", tmp_path / "b" / "vmlinuz", tmp_path / "c" / "vmlinuz"
    for kernel, text in ((one, "kernel 6.12"), (two, "kernel 6.12"), (other, "kernel 6.1")):
        kernel.parent.mkdir()
        kernel.write_text(text)
    for kernel in (None, one, two, one, other, None):
        qemu.choose_accel.cache_clear()
        accel = qemu.choose_accel(kernel)
        assert accel.name == "kvm" and accel.kernel == (str(kernel) if kernel else None), (kernel, accel)
    assert probed == [None, one, other], probed


def test_kvm_that_stops_the_guest_is_refused_with_qemus_own_line(fake: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mode(monkeypatch, "internal-error")
    probe = qemu.probe_kvm(timeout=20)
    assert (probe.ok, probe.reason) == (False, KVM_STOP)
    assert probe.seconds < 15, "a stopped guest is seen at once, not at the probe's timeout"
    assert gone(json.loads(fake.read_text())["pid"]), "the probe left its QEMU running"


def test_a_console_line_counts_only_while_the_guest_runs(fake: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mode(monkeypatch, "line-then-internal-error")
    probe = qemu.probe_kvm(timeout=20)
    assert (probe.ok, probe.reason) == (False, KVM_STOP)


def test_qemu_that_aborts_is_refused_with_its_error_line(fake: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mode(monkeypatch, "abort")
    probe = qemu.probe_kvm(timeout=20)
    assert (probe.ok, probe.reason) == (False, MSR_STOP)


def test_a_silent_guest_is_refused_at_the_timeout(fake: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mode(monkeypatch, "silent")
    probe = qemu.probe_kvm(timeout=2)
    assert (probe.ok, probe.reason) == (False, "KVM runs no guest: no console output within 2 s (run state: running)")
    assert 2 <= probe.seconds < 12
    assert gone(json.loads(fake.read_text())["pid"]), "the probe left its QEMU running"


def test_a_qemu_that_does_not_start(tmp_path: Path) -> None:
    probe = qemu.probe_kvm(str(tmp_path / "no-such-qemu"), timeout=5)
    assert not probe.ok and probe.reason.startswith(f"KVM probe: {tmp_path / 'no-such-qemu'} does not start ("), probe


@pytest.mark.parametrize("kernel", [None, "vmlinuz"])
def test_the_probe_guest_is_a_kernel_on_the_serial_port_or_the_firmware_on_its_debug_port(
        fake: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, kernel: str | None) -> None:
    mode(monkeypatch, "boots")
    probe = qemu.probe_kvm(kernel=tmp_path / kernel if kernel else None, timeout=20)
    assert probe.ok and probe.kernel == (str(tmp_path / kernel) if kernel else None), probe
    argv = json.loads(fake.read_text())["argv"]
    assert argv[:4] == ["-accel", "kvm", "-cpu", "host"] and "-no-reboot" in argv and "-drive" not in argv
    if kernel:
        assert argv[argv.index("-kernel") + 1] == str(tmp_path / kernel)
        assert argv[argv.index("-serial") + 1] == "chardev:probe-console"
        assert set(argv[argv.index("-append") + 1].split()) >= {"console=ttyS0", "earlyprintk=ttyS0", "panic=0"}
    else:
        assert "isa-debugcon,iobase=0x402,chardev=probe-console" in argv and "-kernel" not in argv


# --- choose_accel: auto, forced, cached ---------------------------------------------------

def test_kvm_that_stops_the_guest_means_tcg_with_the_reason(fake: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mode(monkeypatch, "internal-error")
    assert qemu.choose_accel() == qemu.Accel("tcg", f"{KVM_STOP}: software emulation")


def test_kvm_that_runs_the_guest_is_used(fake: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mode(monkeypatch, "boots")
    accel = qemu.choose_accel()
    assert accel.name == "kvm" and accel.reason.startswith("KVM ran the firmware"), accel
    booted = qemu.choose_accel(fake.parent / "vmlinuz")
    assert (booted.name, booted.kernel) == ("kvm", str(fake.parent / "vmlinuz")), booted


def test_forced_kvm_that_fails_the_probe_is_not_ready_at_once(fake: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mode(monkeypatch, "internal-error")
    monkeypatch.setenv("KSC_VM_ACCEL", "kvm")
    t0 = time.monotonic()
    with pytest.raises(qemu.KvmUnavailable) as raised:
        qemu.choose_accel()
    assert time.monotonic() - t0 < 30
    assert isinstance(raised.value, cli.NotReady)  # exit 3
    assert str(raised.value) == (f"KSC_VM_ACCEL=kvm, but {KVM_STOP}: unset KSC_VM_ACCEL for software emulation"
                                 " (TCG)")


def test_forced_kvm_that_passes_the_probe(fake: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mode(monkeypatch, "boots")
    monkeypatch.setenv("KSC_VM_ACCEL", "kvm")
    accel = qemu.choose_accel()
    assert accel.name == "kvm" and accel.reason.startswith("forced by KSC_VM_ACCEL=kvm; KVM ran the firmware"), accel


def test_forced_tcg_does_not_probe(fake: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mode(monkeypatch, "boots")
    monkeypatch.setenv("KSC_VM_ACCEL", "tcg")
    assert qemu.choose_accel() == qemu.Accel("tcg", "forced by KSC_VM_ACCEL=tcg")
    assert not fake.exists(), "KSC_VM_ACCEL=tcg started QEMU"


def test_no_kvm_device(fake: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(qemu, "KVM_DEVICE", str(tmp_path / "no-kvm"))
    assert qemu.choose_accel() == qemu.Accel("tcg", f"{tmp_path / 'no-kvm'} missing: software emulation")
    qemu.choose_accel.cache_clear()
    monkeypatch.setenv("KSC_VM_ACCEL", "kvm")
    with pytest.raises(qemu.KvmUnavailable, match="KSC_VM_ACCEL=kvm, but .*no-kvm is missing"):
        qemu.choose_accel()
    assert not fake.exists()


def test_the_verdict_is_kept_for_this_boot_of_the_host(fake: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mode(monkeypatch, "internal-error")
    assert qemu.choose_accel().reason == f"{KVM_STOP}: software emulation"
    fake.unlink()
    qemu.choose_accel.cache_clear()
    again = qemu.choose_accel()
    assert not fake.exists(), "a second process probed again"
    assert again.name == "tcg" and f"{KVM_STOP} (probed earlier this boot; {qemu.probe_cache_file()})" in again.reason
    mtime = os.stat(qemu.QEMU).st_mtime_ns + 10**9  # a new QEMU binary: probe again
    os.utime(qemu.QEMU, ns=(mtime, mtime))
    mode(monkeypatch, "boots")
    qemu.choose_accel.cache_clear()
    assert qemu.choose_accel().name == "kvm" and fake.exists()


def test_an_unwritable_cache_only_costs_a_probe(fake: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("KSC_CACHE_DIR", str(tmp_path / "file"))  # a file: nothing can be made under it
    mode(monkeypatch, "internal-error")
    assert qemu.choose_accel() == qemu.Accel("tcg", f"{KVM_STOP}: software emulation")


# --- forced KVM through the commands: exit 3 before anything is built -----------------------

@pytest.mark.parametrize("args", [["up"], ["kind-host", "up", "--no-node-image"]], ids=["up", "kind-host-up"])
def test_forced_kvm_stops_up_before_the_build(fake: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str], args: list[str]) -> None:
    from clusters.vm import __main__ as vm_main
    from clusters.vm import hostcheck

    def built(*a: object, **kw: object) -> None:
        raise AssertionError("built or booted with a KVM that fails the probe")

    monkeypatch.setattr(hostcheck, "checks", lambda *a, **kw: [])  # this host's tools are not the point
    monkeypatch.setattr(VmCluster, "prepare", built)
    monkeypatch.setattr(KindHost, "prepare", built)
    monkeypatch.setattr(qemu, "start_qemu", built)
    mode(monkeypatch, "internal-error")
    monkeypatch.setenv("KSC_VM_ACCEL", "kvm")
    t0 = time.monotonic()
    code = vm_main.main(["--state-dir", str(tmp_path / "state"), *args])
    assert time.monotonic() - t0 < 60
    err = capsys.readouterr().err
    assert code == cli.Exit.PREFLIGHT, err
    assert err == f"error: KSC_VM_ACCEL=kvm, but {KVM_STOP}: unset KSC_VM_ACCEL for software emulation (TCG)\n"


@pytest.mark.parametrize("flavor", [VmCluster, KindHost])
def test_forced_kvm_stops_the_library_up_before_the_build(fake: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                           flavor: type) -> None:
    def built(*a: object, **kw: object) -> None:
        raise AssertionError("built with a KVM that fails the probe")

    monkeypatch.setattr(flavor, "prepare", built)
    mode(monkeypatch, "abort")
    monkeypatch.setenv("KSC_VM_ACCEL", "kvm")
    guest = flavor(tmp_path / "state", progress=lambda message: None)
    with pytest.raises(qemu.KvmUnavailable, match="failed to set MSR 0x10a"):
        guest.up()


def test_forced_kvm_fails_the_vm_providers_preflight(fake: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from clusters.checks import PreflightError
    from clusters.vm import hostcheck
    from clusters.vm_provider import VmProvider

    monkeypatch.setattr(hostcheck, "checks", lambda *a, **kw: [])
    monkeypatch.setattr(VmProvider, "_build_kubernetes", lambda self: pytest.fail("built with a KVM that fails"))
    mode(monkeypatch, "internal-error")
    monkeypatch.setenv("KSC_VM_ACCEL", "kvm")
    provider = VmProvider(tmp_path / "run", k8s_version=None, kernel="6.12", memory_mb=4096, swap_mb=2048, reuse=False,
                          state_dir=tmp_path / "state")
    with pytest.raises(PreflightError) as raised:
        provider.preflight(["LimitedSwap"])
    assert f"[FAIL] accelerator: KSC_VM_ACCEL=kvm, but {KVM_STOP}" in str(raised.value), raised.value


# --- the watch on a running guest ---------------------------------------------------------

@pytest.fixture
def running(fake: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """Start a fake guest the way the tools do (qemu.start_qemu) under a VmCluster's state
    directory; ``status`` is the file whose text becomes its run state."""
    status = tmp_path / "status"
    monkeypatch.setenv("FAKE_QEMU_STATUS_FILE", str(status))
    mode(monkeypatch, "silent")
    started: list[qemu.VmPaths] = []

    def start(guest_mode: str = "silent", state: Path | None = None) -> qemu.VmPaths:
        mode(monkeypatch, guest_mode)
        paths = qemu.VmPaths(state or tmp_path / "state")
        qemu.start_qemu(paths, disk=tmp_path / "disk.raw", kernel=tmp_path / "vmlinuz", initrd=tmp_path / "initrd.img",
                        memory_mb=64, cpus=1, swap_mb=0, use_overlay=False, accel=qemu.Accel("tcg", "test"))
        started.append(paths)
        return paths

    yield start, status
    for paths in started:
        qemu.stop_qemu(paths, timeout=5)


def flip_later(status: Path, state: str, after: float) -> threading.Timer:
    timer = threading.Timer(after, status.write_text, (state,))
    timer.start()
    return timer


def test_a_running_guest_is_left_alone(running) -> None:
    start, status = running
    paths = start()
    assert qemu.guest_stopped(paths) is None
    status.write_text("paused")  # paused by someone on purpose: not the tools' verdict to make
    assert qemu.guest_stopped(paths) is None


@pytest.mark.parametrize("state", qemu.STOPPED_STATES)
def test_a_stopped_guest_is_named_with_its_console_and_qemus_log(running, state: str) -> None:
    start, status = running
    paths = start("internal-error")
    paths.console.write_text("".join(f"console line {i}\n" for i in range(1, 31)))
    status.write_text(state)
    why = qemu.guest_stopped(paths)
    assert why is not None
    first, *rest = why.splitlines()
    assert first == f"QEMU stopped the guest: {state} (KVM internal error. Suberror: 1; emulation failure)"
    body = "\n".join(rest)
    assert "console line 21\n" in body and "console line 30" in body and "console line 20\n" not in body
    assert f"--- qemu log, last 10 lines ({paths.qemu_log}) ---" in body and "RSI=0000000000000000" in body
    with pytest.raises(qemu.GuestStopped, match=state):
        qemu.check_guest(paths)


def test_a_qemu_that_is_gone_is_named(running) -> None:
    start, _ = running
    paths = start()
    os.kill(qemu.read_pid(paths), signal.SIGKILL)
    deadline = time.monotonic() + 10
    while qemu.read_pid(paths) is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    why = qemu.guest_stopped(paths)
    assert why is not None and why.startswith("qemu is not running\n--- console"), why


def test_waiting_for_the_agent_ends_when_qemu_stops_the_guest(running, tmp_path: Path) -> None:
    start, status = running
    start()
    vm = VmCluster(tmp_path / "state", progress=lambda message: None)
    flip_later(status, "internal-error", 1.5)
    t0 = time.monotonic()
    with pytest.raises(VmClusterError, match=r"^vm node: QEMU stopped the guest: internal-error"):
        vm.wait_agent(time.monotonic() + 600)
    assert time.monotonic() - t0 < 15, "the wait ran on after the guest stopped"


def test_an_agent_call_in_flight_ends_when_qemu_stops_the_guest(running, tmp_path: Path) -> None:
    """QEMU keeps the agent's socket open for a stopped guest: the call would wait out its own
    timeout (15 s for the session, 300 s for the command) without the agent's watch."""
    start, status = running
    start()
    host = KindHost(tmp_path / "state", progress=lambda message: None)
    flip_later(status, "guest-panicked", 1)
    t0 = time.monotonic()
    with pytest.raises(KindHostError, match=r"^kind host: QEMU stopped the guest: guest-panicked"):
        host.guest_exec(["true"], timeout=300)
    assert time.monotonic() - t0 < 12


def test_every_wait_loop_fails_on_a_stopped_guest(running, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    start, status = running
    start()
    status.write_text("internal-error")
    vm = VmCluster(tmp_path / "state", progress=lambda message: None)
    host = KindHost(tmp_path / "state", progress=lambda message: None)
    st = KindHostState(pid=1, docker_port=1, api_ports={}, kernel="6.12", kernel_release="", memory_mb=1, swap_mb=1,
                       cpus=1, accel="tcg", image_key="", started_at=0)
    monkeypatch.setattr(KindHost, "docker", lambda *a, **kw: pytest.fail("asked Docker in a stopped guest"))
    far = time.monotonic() + 20  # each would run to it (and fail differently) without the watch
    waits = {"wait_agent": lambda: vm.wait_agent(far), "ksc-images": lambda: vm._wait_unit("ksc-images.service", far),
             "node Ready": lambda: vm._wait_node_ready(far), "service account": lambda: vm._wait_default_service_account(far),
             "kubeadm": lambda: vm._kubeadm_init("LimitedSwap"), "docker": lambda: host._wait_docker(st, far),
             "kubelet /configz": lambda: vm.kubelet().restart_with("", lambda config: True, "test", timeout=20),
             # its reads of the node are looks that may be lost (decision 0037): a stopped guest still ends it
             "kubelet refusal": lambda: vm.kubelet()._started_or_refused("test", {}, "", 0.0, "")}
    monkeypatch.setattr(vm, "put_file", lambda *a, **kw: None)  # kubeadm's config: reached before its loop
    monkeypatch.setattr(vm.agent, "spawn", lambda *a, **kw: 1)
    monkeypatch.setattr(type(vm.kubelet()), "write_config", lambda self, text: None)
    monkeypatch.setattr(type(vm.kubelet()), "restart", lambda self: None)
    for name, wait in waits.items():
        t0 = time.monotonic()
        with pytest.raises((VmClusterError, KindHostError), match="QEMU stopped the guest: internal-error"):
            wait()
        assert time.monotonic() - t0 < 15, name


def test_the_kubelet_wait_checks_the_node_each_round() -> None:
    class Gone(NodeKubelet):
        rounds = 0

        def read_config(self) -> str:
            return ""

        def write_config(self, text: str) -> None:
            pass

        def restart(self) -> None:
            pass

        def configz(self) -> dict:
            raise ConnectionError("the kubelet is restarting")  # swallowed by the wait

        def wait_ready(self, deadline: float, since: float | None = None, kubelet_version: str | None = None) -> None:
            pass

        def node_status(self) -> dict:
            return {}

        def node_command(self, argv) -> str:  # noqa: ANN001
            return "1700000000.5"

        def check(self) -> None:
            self.rounds += 1
            if self.rounds == 2:
                raise RuntimeError("the node's guest stopped")

    with pytest.raises(RuntimeError, match="the node's guest stopped"):
        Gone().restart_with("", lambda config: False, "test", timeout=60)
    with pytest.raises(KubeletConfigError):  # a node that has no check waits for its deadline, as before
        type("Plain", (Gone,), {"check": lambda self: None})().restart_with("", lambda config: False, "t", timeout=0.1)


# --- this machine -------------------------------------------------------------------------

def _real_kvm_skip() -> str:
    if not os.path.exists("/dev/kvm"):
        return "no /dev/kvm on this machine"
    if shutil.which("qemu-system-x86_64") is None:
        return "qemu-system-x86_64 is not installed"
    return ""


@pytest.mark.skipif(bool(_real_kvm_skip()), reason=_real_kvm_skip() or "-")
def test_the_probe_agrees_with_qemu_booting_the_guests_kernel_here(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The probe against the real QEMU and /dev/kvm, within a minute, with a guest kernel of this
    machine's cache, and an independent reading: QEMU alone boots that kernel under KVM, its
    console in a file, for up to PROBE_TIMEOUT; a KVM that runs it gets to the root-mount panic,
    one that cannot kills QEMU, complains on stderr, or leaves the console short of it."""
    kernel = qemu.probe_kernel()  # the user's cache: a guest kernel is only read, nothing is written there
    if kernel is None:
        pytest.skip("no guest kernel on this machine to boot (`python -m clusters.vm build` caches one)")
    monkeypatch.delenv("KSC_VM_ACCEL", raising=False)
    monkeypatch.setenv("KSC_CACHE_DIR", str(tmp_path / "cache"))  # neither read nor write the user's probe cache
    qemu.choose_accel.cache_clear()
    t0 = time.monotonic()
    try:
        accel = qemu.choose_accel(kernel)
    finally:
        qemu.choose_accel.cache_clear()
    took = time.monotonic() - t0
    assert took < 60, f"the probe took {took:.0f} s"
    console = tmp_path / "console"
    argv = ["qemu-system-x86_64", "-accel", "kvm", "-cpu", "host", "-machine", "q35", "-m", "256", "-nodefaults",
            "-display", "none", "-no-reboot", "-kernel", str(kernel), "-serial", f"file:{console}",
            "-append", "console=ttyS0 panic=-1"]  # panic=-1: QEMU exits once the kernel booted
    try:
        direct = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                timeout=qemu.PROBE_TIMEOUT, check=False)
        stderr = direct.stderr
    except subprocess.TimeoutExpired as ran:
        stderr = ran.stderr.decode(errors="replace") if isinstance(ran.stderr, bytes) else (ran.stderr or "")
    booted = qemu.KERNEL_BOOTED in console.read_text(errors="replace") if console.exists() else False
    complaint = qemu.qemu_complaint(stderr)
    print(f"probe: {accel} in {took:.1f} s; QEMU alone: {'booted' if booted else 'did not boot'} {kernel}"
          f"{f' ({complaint})' if complaint else ''}")
    if booted and not complaint:
        assert (accel.name, accel.kernel) == ("kvm", str(kernel)), accel
        assert accel.reason.startswith("KVM booted the guest's kernel"), accel
    else:
        assert accel.name == "tcg", (accel, complaint)
        assert accel.reason.startswith(("KVM stops the guest: ", "KVM runs no guest: ")), accel
        assert accel.reason.endswith(": software emulation")
        if complaint:
            assert complaint in accel.reason, (accel, complaint)


# --- one emulated guest at a time ----------------------------------------------------------

def test_a_second_emulated_guest_is_refused_before_anything_is_created(running, monkeypatch: pytest.MonkeyPatch,
                                                                        tmp_path: Path) -> None:
    start, _ = running
    first = start()  # KSC_VM_ALONE=off (tests/conftest.py): it starts whatever else runs on this host
    monkeypatch.delenv("KSC_VM_ALONE")
    second = qemu.VmPaths(tmp_path / "second")
    assert (qemu.read_pid(first), "ksc-node", first.dir) in qemu.other_guests(second)
    # the host's own guests, if one runs (a developer's kind host), are listed too, before or after
    with pytest.raises(qemu.QemuError, match=r"^another of the suite's guests runs on this host \((.*; )?ksc-node, pid "
                                             r".*two emulated guests starve each other of CPU") as raised:
        start(state=second.dir)
    assert "python -m clusters.vm down --state-dir " in str(raised.value) and "KSC_VM_ALONE=off" in str(raised.value)
    assert qemu.read_pid(second) is None and not second.overlay.exists() and not second.console.exists()


def test_a_guest_is_not_in_the_way_of_its_own_state_directory_however_it_is_written(
        running, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    start, _ = running
    first = start()
    pid = qemu.read_pid(first)
    assert (pid, "ksc-node", first.dir.resolve()) in qemu.other_guests(qemu.VmPaths(tmp_path / "second"))
    (tmp_path / "link").symlink_to(first.dir)
    monkeypatch.chdir(first.dir.parent)
    for same in (first.dir, Path(first.dir.name), tmp_path / "link", tmp_path / "link" / ".." / first.dir.name):
        assert pid not in [p for p, _, _ in qemu.other_guests(qemu.VmPaths(same))], same


@pytest.mark.parametrize(("accel", "alone"), [("kvm", None), ("tcg", "off")])
def test_guests_may_share_under_kvm_or_when_told(running, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                 accel: str, alone: str | None) -> None:
    start, _ = running
    start()
    monkeypatch.delenv("KSC_VM_ALONE")
    if alone:
        monkeypatch.setenv("KSC_VM_ALONE", alone)
    assert qemu.sharing_problem(qemu.VmPaths(tmp_path / "second"), qemu.Accel(accel, "test")) is None


def test_the_refusal_names_how_to_stop_a_kind_host(fake: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    mode(monkeypatch, "silent")
    paths = qemu.VmPaths(tmp_path / "kind host")
    qemu.start_qemu(paths, disk=tmp_path / "disk.raw", kernel=tmp_path / "vmlinuz", initrd=tmp_path / "initrd.img",
                    memory_mb=64, cpus=1, swap_mb=0, use_overlay=False, name="ksc-kind-host",
                    accel=qemu.Accel("tcg", "test"))
    try:
        monkeypatch.delenv("KSC_VM_ALONE")
        why = qemu.sharing_problem(qemu.VmPaths(tmp_path / "node"), qemu.Accel("tcg", "test"))
    finally:
        qemu.stop_qemu(paths, timeout=5)
    assert why is not None and (f"ksc-kind-host, pid {json.loads(fake.read_text())['pid']}, state directory {paths.dir}:"
                                f" stop it with `python -m clusters.vm kind-host down --state-dir '{paths.dir}'`") in why, why


def test_a_second_emulated_guest_fails_the_vm_providers_preflight(running, monkeypatch: pytest.MonkeyPatch,
                                                                   tmp_path: Path) -> None:
    from clusters.checks import PreflightError
    from clusters.vm import hostcheck
    from clusters.vm_provider import VmProvider

    start, _ = running
    other = start()
    monkeypatch.delenv("KSC_VM_ALONE")
    monkeypatch.setenv("KSC_VM_ACCEL", "tcg")
    monkeypatch.setattr(hostcheck, "checks", lambda *a, **kw: [])
    monkeypatch.setattr(VmProvider, "_build_kubernetes", lambda self: pytest.fail("built while another guest runs"))
    provider = VmProvider(tmp_path / "run", k8s_version=None, kernel="6.12", memory_mb=4096, swap_mb=2048, reuse=False,
                          state_dir=tmp_path / "mine")
    with pytest.raises(PreflightError) as raised:
        provider.preflight(["LimitedSwap"])
    assert "[FAIL] one emulated guest: another of the suite's guests runs on this host" in str(raised.value), raised.value
    assert f"ksc-node, pid {qemu.read_pid(other)}, state directory {other.dir}:" in str(raised.value)
