"""Start/stop the QEMU guest and talk to its qemu-guest-agent (no SSH).

State lives in one directory (``state_dir``): ``qemu.pid``, ``qga.sock``, ``qmp.sock``,
``console.log``, ``overlay.qcow2``. Any process can attach to a running VM from that directory,
and ``stop()`` kills by pidfile.
"""
from __future__ import annotations

import base64
import functools
import hashlib
import json
import os
import platform
import random
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from clusters import inputs
from clusters.cli import NotReady

from .paths import cache_root

GUEST_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
QEMU = "qemu-system-x86_64"
KVM_DEVICE = "/dev/kvm"


class QemuError(RuntimeError):
    pass


class AgentError(RuntimeError):
    pass


class AgentNoAnswer(AgentError):
    """The agent gave no answer: a command that ran out its time, a connection closed. A guest busy
    under emulation does this now and then; an AgentError proper is the agent's own error reply."""


# What a call to the agent that got no answer raises: its socket's timeout or error, AgentNoAnswer.
# Inside a wait that is a look lost (decision 0037); an AgentError proper is an answer.
NO_ANSWER: tuple[type[Exception], ...] = (OSError, AgentNoAnswer)


def no_answer_said(error: BaseException) -> str:
    """A wait's last state where its look got no answer (NO_ANSWER)."""
    return f"no answer from the guest agent ({type(error).__name__}: {str(error)[:160]})"


def journal_unread(error: BaseException) -> str:
    """A failure message's journal where it could not be read: the failure is the story."""
    return f"(its journal unread: {type(error).__name__}: {str(error)[:160]})"


class KvmUnavailable(NotReady):
    """``KSC_VM_ACCEL=kvm`` on a host where KVM does not run a guest (exit 3, before any build)."""


class HostBusy(QemuError, NotReady):
    """Another of the suite's guests runs, and this one would share the host's CPU with it under
    software emulation (sharing_problem): exit 3, like a failed preflight."""


class GuestStopped(QemuError):
    """The guest will not get anywhere: its qemu is gone, or QEMU stopped its vCPUs for good."""


def free_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass(frozen=True)
class Accel:
    """The accelerator a guest runs under, and why it was chosen (shown to the user)."""

    name: str  # "kvm" or "tcg"
    reason: str
    # The guest kernel a KVM choice was proven on, None where no kernel ran (the firmware alone:
    # an estimate for the checks before a build, never what a boot runs under; see start_qemu).
    kernel: str | None = None

    def argv(self) -> list[str]:
        if self.name == "kvm":
            return ["-accel", "kvm", "-cpu", "host"]
        # No -cpu under TCG: QEMU's default (qemu64) runs the node's Go code no slower than
        # "max", whose AES-NI, SSE4 and AVX2 are emulated too (docs/measurements/build-and-boot.md).
        return ["-accel", f"tcg,thread={inputs.variable('KSC_VM_TCG_THREAD', 'multi')},tb-size={tcg_tb_mib()}"]


# TCG's cache of translated code, in MiB: QEMU's default, 1 GiB, held a guest with a kind cluster
# for 60-90 s at a time (`info jit`: the whole cache flushed and every hot path translated again,
# six times in the run's first ten minutes); 2 GiB is the most QEMU takes on an x86-64 host
# (it quietly caps larger sizes). Only host memory a guest's translations really use is touched.
TCG_TB_MIB = 2048


def tcg_tb_mib() -> int:
    """`KSC_VM_TCG_TB_MIB` or TCG_TB_MIB (a bad value: clusters/inputs.py's UsageError, found by
    every command that boots before it builds anything)."""
    return inputs.variable("KSC_VM_TCG_TB_MIB", str(TCG_TB_MIB))


class QmpError(RuntimeError):
    pass


class Qmp:
    """A QMP client: one connection, the capabilities handshake, then commands answered in
    order (asynchronous events in between are skipped). QEMU serves one QMP client at a time:
    keep a connection only as long as needed."""

    def __init__(self, path: Path, timeout: float = 2):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.buf = bytearray()
        try:
            self.sock.settimeout(timeout)
            self.sock.connect(str(path))
            if "QMP" not in self._message():
                raise QmpError("no QMP greeting")
            self.command("qmp_capabilities")
        except BaseException:
            self.sock.close()
            raise

    def _message(self) -> dict:
        while b"\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise QmpError("QEMU closed the QMP connection")
            self.buf.extend(chunk)
        line, _, rest = bytes(self.buf).partition(b"\n")
        self.buf[:] = rest
        try:
            msg = json.loads(line)
        except json.JSONDecodeError as error:
            raise QmpError(f"not QMP: {line[:80]!r}") from error
        if not isinstance(msg, dict):
            raise QmpError(f"not QMP: {line[:80]!r}")
        return msg

    def command(self, name: str, **arguments: Any) -> Any:
        cmd: dict[str, Any] = {"execute": name}
        if arguments:
            cmd["arguments"] = arguments
        self.sock.sendall(json.dumps(cmd).encode() + b"\n")
        while True:
            msg = self._message()
            if "error" in msg:
                raise QmpError(f"{name}: {msg['error']}")
            if "return" in msg:
                return msg["return"]

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Qmp:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def query_status(qmp: Path, timeout: float = 2) -> str | None:
    """The VM's run state (``running``, ``paused``, ``internal-error`` ...), or None when QMP
    does not answer (no socket yet, QEMU gone, or another client holding the monitor)."""
    try:
        with Qmp(qmp, timeout) as client:
            return str(client.command("query-status")["status"])
    except (OSError, QmpError, KeyError, TypeError):
        return None


# Run states after which the guest runs no more code by itself: QEMU stopped the vCPUs on a
# KVM error it cannot handle (internal-error), the guest reported a panic (guest-panicked),
# it shut down (shutdown, seen only for a moment: guests run with -no-reboot, so qemu then
# exits), or a write to the host's disk failed (io-error: the host disk is full; the guest
# stays paused until someone frees space and resumes it by hand).
STOPPED_STATES = ("internal-error", "guest-panicked", "shutdown", "io-error")


def qemu_complaint(log: str) -> str:
    """The line of QEMU's stderr that says what went wrong ("KVM internal error. Suberror: 1;
    emulation failure", "...: error: failed to set MSR 0x10a to 0x69"), or ""."""
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    for i, line in enumerate(lines):
        if "KVM internal error" in line:
            detail = next((other for other in lines[i + 1:i + 6] if "failure" in other), "")
            return f"{line}; {detail}" if detail else line
    for line in lines:
        if "error" in line.lower() or "failed" in line.lower():
            return line[:300]
    return lines[0][:300] if lines else ""


# --- the accelerator ------------------------------------------------------------------------
# A working /dev/kvm is not shown by QEMU creating a KVM machine: on one host QEMU aborts as
# soon as a vCPU's registers are written ("failed to set MSR 0x10a"), on another the machine
# is created, quits cleanly while paused, and then stops at the guest's first instructions
# ("KVM internal error. Suberror: 1", emulation failure), and on a third the firmware and the
# kernel's real-mode setup run (its "Probing EDD ... ok" line) and the decompressor then hangs
# for good, still "running". So a console line proves only the code that printed it: KVM counts
# when the guest's own kernel got to the end of its boot, and the firmware alone is an estimate
# (decision 0028).
PROBE_TIMEOUT = 30.0  # under KVM a kernel reaches its root mount in a few seconds (TCG: ~15 s)
PROBE_VERSION = "2"  # part of the on-disk cache key: bump when the probe changes
# With no disk and no initrd a kernel that booted panics for want of a root file system: the
# last thing its boot does, long after the decompressor, the switch to long mode and SMP/timer set-up.
KERNEL_BOOTED = "VFS: Unable to mount root fs"


@dataclass(frozen=True)
class Probe:
    """What running a guest under KVM showed: ``ok`` only if it printed a console line while
    running; ``reason`` says what happened, in words for the user."""

    ok: bool
    reason: str
    seconds: float = 0.0
    kernel: str | None = None  # the kernel that ran, None: the firmware alone (or nothing ran)


def probe_kernel() -> Path | None:
    """A kernel for the probe guest: the newest cached guest kernel (what the guests boot), or
    the host's own, if readable; None: the probe boots the firmware alone."""
    images = cache_root() / "vm" / "images"
    cached = sorted((d / "vmlinuz" for d in images.glob("*") if (d / ".complete").exists() and (d / "vmlinuz").is_file()),
                    key=lambda k: k.stat().st_mtime, reverse=True) if images.is_dir() else []
    host = Path(f"/boot/vmlinuz-{platform.release()}")
    for kernel in [*cached, host]:
        if os.access(kernel, os.R_OK):
            return kernel
    return None


def probe_kvm(qemu: str | None = None, *, kernel: Path | None = None, timeout: float | None = None) -> Probe:
    """Boot a minimal guest under ``-accel kvm -cpu host`` and wait until it proves KVM.

    With ``kernel``: that kernel, no disk and no initrd, its console on the serial port; it
    proves KVM when it gets to the end of its boot (KERNEL_BOOTED), a line before that does not.
    ``panic=0`` keeps the kernel halted and running after that panic rather than gone, so the
    verdict cannot race it. Without: QEMU's firmware alone, whose SeaBIOS prints its banner on
    the debug port 0x402; that proves only the firmware (``Probe.kernel`` None). The QEMU process
    is always ended before this returns."""
    qemu = qemu or QEMU
    timeout = PROBE_TIMEOUT if timeout is None else timeout
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="ksc-kvm-probe-") as tmp:
        console, qmp, log = Path(tmp) / "console", Path(tmp) / "qmp.sock", Path(tmp) / "qemu.log"
        argv = [qemu, "-accel", "kvm", "-cpu", "host", "-machine", "q35", "-smp", "1", "-m", "256",
                "-nodefaults", "-display", "none", "-vga", "none", "-no-reboot",
                "-chardev", f"file,id=probe-console,path={console}",
                "-qmp", f"unix:{qmp},server=on,wait=off"]
        if kernel is not None:
            argv += ["-kernel", str(kernel), "-serial", "chardev:probe-console",
                     "-append", "console=ttyS0 earlyprintk=ttyS0 panic=0 loglevel=4"]
        else:
            argv += ["-device", "isa-debugcon,iobase=0x402,chardev=probe-console"]
        with open(log, "wb") as out:
            try:
                proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
            except OSError as error:
                return Probe(False, f"KVM probe: {qemu} does not start ({error.strerror or error})")
        try:
            return _watch_probe(proc, console, qmp, log, t0, timeout, kernel)
        finally:
            proc.kill()
            proc.wait()


def _watch_probe(proc: subprocess.Popen, console: Path, qmp_path: Path, log: Path, t0: float, timeout: float,
                 kernel: Path | None) -> Probe:
    def stopped(what: str) -> Probe:
        complaint = qemu_complaint(log.read_text(errors="replace"))
        return Probe(False, f"KVM stops the guest: {what}{f' ({complaint})' if complaint else ''}",
                     time.monotonic() - t0)

    qmp: Qmp | None = None
    status: str | None = None
    try:
        while True:
            rc = proc.poll()
            if rc is not None:
                return stopped(f"qemu exited ({_exit_text(rc)})")
            if qmp is None and qmp_path.exists():
                try:
                    qmp = Qmp(qmp_path, timeout=2)
                except (OSError, QmpError):
                    qmp = None
            if qmp is not None:
                try:
                    status = str(qmp.command("query-status")["status"])
                except (OSError, QmpError, KeyError, TypeError):
                    qmp.close()
                    qmp, status = None, None
            if status in STOPPED_STATES:
                return stopped(str(status))
            lines = _console_lines(console)
            proven = any(KERNEL_BOOTED in line for line in lines) if kernel else bool(lines)
            if proven and status == "running":
                took = time.monotonic() - t0
                if kernel is None:
                    return Probe(True, f"KVM ran the firmware to its first console line in {took:.1f} s (no"
                                       " guest kernel to boot yet)", took)
                return Probe(True, f"KVM booted the guest's kernel ({kernel.name}) to its root mount in {took:.1f} s",
                             took, str(kernel))
            if time.monotonic() - t0 > timeout:
                if proven:
                    seen = "the guest got there but QMP never said running"
                elif lines:
                    seen = f"the kernel ({kernel.name}) stopped short of its root mount, its last line {lines[-1]!r}" \
                        if kernel else f"its console printed {lines[0]!r} but QMP never said running"
                else:
                    seen = "no console output"
                return Probe(False, f"KVM runs no guest: {seen} within {timeout:.0f} s (run state:"
                                    f" {status or 'unknown'})", time.monotonic() - t0)
            time.sleep(0.05)
    finally:
        if qmp is not None:
            qmp.close()


def _exit_text(rc: int) -> str:
    if rc < 0:
        try:
            return f"killed by {signal.Signals(-rc).name}"
        except ValueError:
            return f"killed by signal {-rc}"
    return f"exit {rc}"


def _console_lines(console: Path) -> list[str]:
    """The complete, non-blank console lines so far, each cut to 120 characters."""
    try:
        text = console.read_bytes().decode(errors="replace")
    except OSError:
        return []
    return [line.strip()[:120] for line in text.splitlines(keepends=True)
            if line.endswith(("\n", "\r")) and line.strip()]


def _probe_cache_key(qemu: str, kernel: Path | None) -> str | None:
    """What the probe's answer depends on: this boot of the host, the QEMU binary, KVM_DEVICE
    (a new device node or new permissions) and the probe guest: the firmware, or the kernel by its
    content (every node disk carries a copy of the same kernel, and an image's first boot runs it
    from a directory renamed afterwards). None: nothing to key on."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        binary = Path(shutil.which(qemu) or qemu).resolve()
        b, k = binary.stat(), os.stat(KVM_DEVICE)
        guest = "firmware" if kernel is None else "kernel " + hashlib.sha256(kernel.read_bytes()).hexdigest()
    except OSError:
        return None
    parts = [PROBE_VERSION, boot, str(binary), str(b.st_mtime_ns), str(b.st_size), str(k.st_ino),
             str(k.st_ctime_ns), str(os.geteuid()), guest]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def probe_cache_file() -> Path:
    return cache_root() / "vm" / "kvm-probe.json"


PROBES_KEPT = 8  # answers kept in the file: the firmware's and a few kernels', newest last


def cached_probe(qemu: str | None = None, kernel: Path | None = None) -> Probe:
    """probe_kvm's answer for ``kernel`` (default: probe_kernel()), kept on disk for this boot of
    the host (a CLI call after another does not boot the probe guest again). The cache only saves
    time: unreadable or unwritable, it is ignored."""
    qemu = qemu or QEMU
    kernel = kernel or probe_kernel()
    key = _probe_cache_key(qemu, kernel)
    path = probe_cache_file()
    try:
        read = json.loads(path.read_text())
        kept = {k: v for k, v in read.items() if isinstance(v, dict)} if isinstance(read, dict) else {}
    except (OSError, ValueError):
        kept = {}
    saved = kept.get(key) if key else None
    if saved is not None:
        try:
            ok = bool(saved["ok"])
            return Probe(ok, f"{saved['reason']} (probed earlier this boot; {path})", float(saved.get("seconds", 0)),
                         str(kernel) if ok and kernel is not None else None)
        except (KeyError, TypeError, ValueError):
            pass
    result = probe_kvm(qemu, kernel=kernel)
    if key:
        kept.pop(key, None)
        kept[key] = {"ok": result.ok, "reason": result.reason, "seconds": round(result.seconds, 2)}
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.{os.getpid()}")
            tmp.write_text(json.dumps(dict(list(kept.items())[-PROBES_KEPT:]), indent=1) + "\n")
            tmp.replace(path)
        except OSError:
            pass
    return result


@functools.lru_cache(maxsize=8)
def choose_accel(kernel: Path | None = None) -> Accel:
    """KVM when the guest's ``kernel`` boots under it (probe_kvm), else TCG; ``KSC_VM_ACCEL=tcg``
    skips the probe, ``KSC_VM_ACCEL=kvm`` makes a KVM that fails it an error (KvmUnavailable),
    raised by the probe within a minute rather than by a silent guest many minutes later.

    Without ``kernel`` (before a build: the checks that a run can start) the probe boots a cached
    guest kernel, else the firmware alone; a KVM answer of the firmware is only an estimate
    (``Accel.kernel`` None), and start_qemu decides again with the kernel it boots."""
    forced = inputs.variable("KSC_VM_ACCEL", "")
    if forced == "tcg":
        return Accel(forced, f"forced by KSC_VM_ACCEL={forced}")
    if not os.access(KVM_DEVICE, os.R_OK | os.W_OK):
        why = "missing" if not os.path.exists(KVM_DEVICE) else "not accessible to this user"
        if forced:
            raise KvmUnavailable(f"KSC_VM_ACCEL=kvm, but {KVM_DEVICE} is {why}: unset KSC_VM_ACCEL for software"
                                 " emulation (TCG)")
        return Accel("tcg", f"{KVM_DEVICE} {why}: software emulation")
    probe = cached_probe(kernel=kernel)
    if forced:
        if not probe.ok:
            raise KvmUnavailable(f"KSC_VM_ACCEL=kvm, but {probe.reason}: unset KSC_VM_ACCEL for software"
                                 " emulation (TCG)")
        return Accel("kvm", f"forced by KSC_VM_ACCEL=kvm; {probe.reason}", probe.kernel)
    if probe.ok:
        return Accel("kvm", probe.reason, probe.kernel)
    return Accel("tcg", f"{probe.reason}: software emulation")


@dataclass
class VmPaths:
    dir: Path

    @property
    def pidfile(self) -> Path:
        return self.dir / "qemu.pid"

    @property
    def qga(self) -> Path:
        return self.dir / "qga.sock"

    @property
    def qmp(self) -> Path:
        return self.dir / "qmp.sock"

    @property
    def console(self) -> Path:
        return self.dir / "console.log"

    @property
    def overlay(self) -> Path:
        return self.dir / "overlay.qcow2"

    @property
    def qemu_log(self) -> Path:
        return self.dir / "qemu.log"


def read_pid(paths: VmPaths) -> int | None:
    try:
        pid = int(paths.pidfile.read_text().strip())
    except (FileNotFoundError, ValueError):
        return None
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except FileNotFoundError:
        return None
    # guard against pid reuse: it must be our qemu with our pidfile
    if b"qemu-system" not in cmdline or str(paths.pidfile).encode() not in cmdline:
        return None
    return pid


def _tail(path: Path, n: int) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return "(none)"
    return "\n".join(lines[-n:]) if lines else "(empty)"


def guest_stopped(paths: VmPaths, tail: int = 10) -> str | None:
    """Why the guest started from ``paths`` will not go on, or None while it may.

    Every loop that waits on a guest asks this, so a guest that QEMU stopped (or that is gone)
    fails the wait within seconds, with the last console lines and QEMU's log, instead of at
    the wait's deadline many minutes later. Only positive evidence counts: a QMP monitor that
    does not answer is not a verdict."""
    if read_pid(paths) is None:
        why = "qemu is not running"
    else:
        status = query_status(paths.qmp)
        if status not in STOPPED_STATES:
            return None
        why = f"QEMU stopped the guest: {status}"
    try:
        complaint = qemu_complaint(paths.qemu_log.read_text(errors="replace"))
    except OSError:
        complaint = ""
    return (f"{why}{f' ({complaint})' if complaint else ''}\n"
            f"--- console, last {tail} lines ({paths.console}) ---\n{_tail(paths.console, tail)}\n"
            f"--- qemu log, last {tail} lines ({paths.qemu_log}) ---\n{_tail(paths.qemu_log, tail)}")


def check_guest(paths: VmPaths) -> None:
    """Raise GuestStopped (see guest_stopped) if the guest will not go on."""
    why = guest_stopped(paths)
    if why:
        raise GuestStopped(why)


def ensure_alone(own: VmPaths, accel: Accel | None = None) -> None:
    """HostBusy when a guest must not start from ``own`` now (sharing_problem). start_qemu asks it;
    a command that builds before it boots asks it first too, so that it refuses before the build."""
    crowded = sharing_problem(own, accel)
    if crowded:
        raise HostBusy(crowded)


# How each of the suite's guests (qemu's -name) is stopped by hand, given its state directory.
_STOP_COMMAND = {"ksc-node": "python -m clusters.vm down --state-dir {dir}",
                 "ksc-kind-host": "python -m clusters.vm kind-host down --state-dir {dir}",
                 # the image build's first boot (image.py bake_images): nothing but its pid stops it
                 "ksc-bake": "kill {pid}"}


def other_guests(own: VmPaths) -> list[tuple[int, str, Path]]:
    """The suite's guests running on this host from another state directory than ``own``'s, as
    (pid, qemu's -name, state directory, absolute): any qemu whose -name starts with "ksc-". A
    directory is the same however it was written (relative to qemu's working directory, through
    a symbolic link)."""
    mine = os.path.realpath(own.dir)
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = [a.decode(errors="replace") for a in (proc / "cmdline").read_bytes().split(b"\0")]
            # qemu-system-* as any argument's base name: the binary itself, or a wrapper's "$0"
            if not any(Path(a).name.startswith("qemu-system") for a in argv) or "-name" not in argv \
                    or "-pidfile" not in argv:
                continue
            name, pidfile = argv[argv.index("-name") + 1:][:1], argv[argv.index("-pidfile") + 1:][:1]
            if not (name and pidfile and name[0].startswith("ksc-")):
                continue
            state_dir = os.path.realpath(os.path.join(os.readlink(proc / "cwd"), os.path.dirname(pidfile[0])))
        except OSError:  # gone meanwhile, or not ours to read
            continue
        if state_dir != mine:
            found.append((int(proc.name), name[0], Path(state_dir)))
    return sorted(found)


def sharing_problem(own: VmPaths, accel: Accel | None = None) -> str | None:
    """Why a guest must not start from ``own`` now, None when it may: under software emulation a
    second guest of the suite shares the host's cores with the first, and both then run slower
    than the waits they were sized for (kubeadm's API deadlines, the suite's bounded waits), so
    one fails for want of CPU, not for anything its kubelet did. Under KVM guests may share, and
    KSC_VM_ALONE=off lets them share under TCG (a host with cores for both)."""
    if not inputs.variable("KSC_VM_ALONE", "on"):
        return None
    others = other_guests(own)
    if not others:
        return None
    accel = accel or choose_accel()  # only now: the KVM probe boots a guest of its own
    if accel.name != "tcg":
        return None

    def named(pid: int, name: str, state_dir: Path) -> str:
        stop = _STOP_COMMAND.get(name, "kill {pid}").format(dir=shlex.quote(str(state_dir)), pid=pid)
        return f"{name}, pid {pid}, state directory {state_dir}: stop it with `{stop}`"

    return (f"another of the suite's guests runs on this host ({'; '.join(named(*g) for g in others)}), and this one"
            f" would run under software emulation ({accel.reason}): two emulated guests starve each other of CPU and"
            " fail on time, not on what they test. Wait for the run or command using it to end, or stop it if"
            " nothing uses it (or, on a host with cores for both, set KSC_VM_ALONE=off)")


def start_qemu(
    paths: VmPaths,
    *,
    disk: Path,
    kernel: Path,
    initrd: Path,
    memory_mb: int,
    cpus: int,
    swap_mb: int,
    forwards: Sequence[tuple[int, int]] = (),
    extra_cmdline: str = "",
    use_overlay: bool = True,
    name: str = "ksc-node",
    accel: Accel | None = None,
) -> int:
    """Create a fresh qcow2 overlay on ``disk`` and start qemu detached; returns its pid.

    ``forwards`` are (host port, guest port) pairs: the host side listens on 127.0.0.1 only,
    and ``restrict=on`` keeps the guest from reaching anything outside.
    """
    paths.dir.mkdir(parents=True, exist_ok=True)
    if read_pid(paths):
        raise QemuError(f"a VM is already running from {paths.dir} (pid {read_pid(paths)})")
    if accel is None or (accel.name == "kvm" and accel.kernel != str(kernel)):
        # what boots is this kernel: a KVM proven on another one, or on the firmware, is no proof
        accel = choose_accel(kernel)
    ensure_alone(paths, accel)
    for p in (paths.qga, paths.qmp, paths.pidfile, paths.overlay, paths.console):
        p.unlink(missing_ok=True)
    if use_overlay:
        subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-F", "raw", "-b", str(disk),
                        str(paths.overlay)], check=True, capture_output=True)
        drive = f"file={paths.overlay},format=qcow2,if=virtio,cache=unsafe,discard=unmap"
    else:  # writes go straight into disk (used once, to bake the base image)
        drive = f"file={disk},format=raw,if=virtio,cache=writeback"
    # maxcpus=1: the other vCPUs are onlined by ksc-cpus-online.service (see guestfiles.py)
    append = (f"root=/dev/vda rw console=ttyS0 panic=-1 loglevel=4 net.ifnames=0 maxcpus=1 "
              f"systemd.unified_cgroup_hierarchy=1 ksc.swap_mb={swap_mb} {extra_cmdline}").strip()
    nic = "user,model=virtio-net-pci,restrict=on" + "".join(
        f",hostfwd=tcp:127.0.0.1:{host}-:{guest}" for host, guest in forwards)
    argv = [
        QEMU, "-name", name, *accel.argv(),
        "-machine", "q35", "-smp", str(cpus), "-m", str(memory_mb),
        "-display", "none", "-vga", "none", "-no-reboot",
        "-kernel", str(kernel), "-initrd", str(initrd), "-append", append,
        "-drive", drive,
        "-nic", nic,
        "-chardev", f"socket,id=qga0,path={paths.qga},server=on,wait=off",
        "-device", "virtio-serial-pci",
        "-device", "virtserialport,chardev=qga0,name=org.qemu.guest_agent.0",
        "-qmp", f"unix:{paths.qmp},server=on,wait=off",
        "-serial", f"file:{paths.console}",
        "-pidfile", str(paths.pidfile),
    ]
    with open(paths.qemu_log, "wb") as log:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)  # survives the CLI; killed by stop()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise QemuError(f"qemu exited with {proc.returncode}: {paths.qemu_log.read_text()[-2000:]}")
        if read_pid(paths) and paths.qga.exists():
            return proc.pid
        time.sleep(0.2)
    proc.kill()
    raise QemuError("qemu did not create its pidfile and sockets within 30s")


def stop_qemu(paths: VmPaths, timeout: float = 20) -> bool:
    """Kill the VM (QMP quit, then SIGTERM, then SIGKILL). True if one was running."""
    pid = read_pid(paths)
    if pid is None:
        paths.pidfile.unlink(missing_ok=True)
        return False
    try:
        with Qmp(paths.qmp, timeout=3) as client:
            client.command("quit")
    except (OSError, QmpError):  # it may close before it answers; the signals below follow anyway
        pass
    for sig in (None, signal.SIGTERM, signal.SIGKILL):
        if sig is not None:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                break
        if wait_gone(pid, 5 if sig != signal.SIGKILL else timeout):
            break
    try:  # reap if it is our child
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
    if Path(f"/proc/{pid}").exists() and not _is_zombie(pid):
        raise QemuError(f"qemu pid {pid} survived SIGKILL")
    for p in (paths.pidfile, paths.qga, paths.qmp):
        p.unlink(missing_ok=True)
    return True


def wait_gone(pid: int, secs: float) -> bool:
    """Whether process `pid` exits (or is left a zombie) within `secs`."""
    end = time.monotonic() + secs
    while time.monotonic() < end:
        if not Path(f"/proc/{pid}").exists() or _is_zombie(pid):
            return True
        time.sleep(0.1)
    return False


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"
    except (FileNotFoundError, IndexError):
        return True


# How often a slow agent reply makes the agent client ask `watch` whether the guest still runs.
WATCH_EVERY = 2.0


class GuestAgent:
    """Minimal qemu-guest-agent client over the virtio-serial unix socket.

    ``watch`` (e.g. ``lambda: check_guest(paths)``) is called whenever a reply has kept it
    waiting WATCH_EVERY seconds, and raises if the guest will not answer at all: QEMU keeps
    the agent's socket open for a guest whose vCPUs it stopped, so without it every call would
    wait out its whole timeout."""

    def __init__(self, sock_path: Path, watch: Callable[[], None] | None = None):
        self.sock_path = sock_path
        self.watch = watch

    def _recv(self, s: socket.socket) -> bytes:
        timeout = s.gettimeout()
        if self.watch is None or timeout is None:
            return s.recv(1 << 16)
        deadline = time.monotonic() + timeout
        try:
            while True:
                s.settimeout(max(0.01, min(WATCH_EVERY, deadline - time.monotonic())))
                try:
                    return s.recv(1 << 16)
                except TimeoutError:  # socket.timeout
                    if time.monotonic() >= deadline:
                        raise
                    self.watch()
        finally:
            s.settimeout(timeout)

    def _read_msg(self, s: socket.socket, buf: bytearray) -> dict:
        """Next JSON message from the agent (0xff delimiters and garbage lines skipped)."""
        while True:
            while b"\n" not in buf:
                chunk = self._recv(s)
                if not chunk:
                    raise AgentNoAnswer("guest agent closed the connection")
                buf.extend(chunk)
            line, _, rest = bytes(buf).partition(b"\n")
            buf[:] = rest
            line = line.strip(b"\xff \r\t")
            if not line:
                continue
            try:
                msg = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(msg, dict):
                return msg

    def _call(self, s: socket.socket, buf: bytearray, cmd: dict, timeout: float) -> object:
        s.settimeout(timeout)
        s.sendall(json.dumps(cmd).encode() + b"\n")
        msg = self._read_msg(s, buf)
        if "error" in msg:
            raise AgentError(f"{cmd['execute']}: {msg['error']}")
        return msg.get("return")

    def _session(self, timeout: float) -> tuple[socket.socket, bytearray]:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.settimeout(timeout)
            s.connect(str(self.sock_path))
            buf = bytearray()
            sync_id = random.randint(1, 2**31 - 1)  # noqa: S311 - pairs a reply with its request, guards nothing
            # Replies queued for an earlier, interrupted client may come first: send one sync
            # and skip everything until its id comes back.
            s.sendall(json.dumps({"execute": "guest-sync", "arguments": {"id": sync_id}}).encode() + b"\n")
            while self._read_msg(s, buf).get("return") != sync_id:
                pass
            return s, buf
        except BaseException:
            s.close()
            raise

    def ping(self, timeout: float = 3) -> bool:
        try:
            s, _ = self._session(timeout)
            s.close()
            return True
        except (OSError, AgentError):
            return False

    def _exec_args(self, argv: Sequence[str], input: bytes | None, env: dict[str, str] | None) -> dict:
        envs = [f"PATH={GUEST_PATH}", "HOME=/root", "LANG=C.UTF-8"] + [f"{k}={v}" for k, v in (env or {}).items()]
        args: dict[str, object] = {"path": "/usr/bin/env", "arg": [*envs, *argv], "capture-output": True}
        if input is not None:
            args["input-data"] = base64.b64encode(input).decode()
        return args

    def spawn(self, argv: Sequence[str], *, input: bytes | None = None) -> int:
        """Start argv in the guest without waiting; returns the guest pid for exec_status()."""
        s, buf = self._session(15)
        try:
            return int(self._call(s, buf, {"execute": "guest-exec",
                                           "arguments": self._exec_args(argv, input, None)}, 30)["pid"])  # type: ignore[index]
        finally:
            s.close()

    def exec_status(self, pid: int) -> int | None:
        """Exit code of a spawned command, or None while it runs."""
        s, buf = self._session(15)
        try:
            st = self._call(s, buf, {"execute": "guest-exec-status", "arguments": {"pid": pid}}, 30)
        finally:
            s.close()
        if not st.get("exited"):  # type: ignore[union-attr]
            return None
        rc = st.get("exitcode")  # type: ignore[union-attr]
        return int(rc) if rc is not None else 128 + int(st.get("signal", 0))  # type: ignore[union-attr]

    def exec(
        self,
        argv: Sequence[str],
        *,
        input: bytes | None = None,
        timeout: float = 300,
        env: dict[str, str] | None = None,
    ) -> tuple[int, str, str]:
        """Run argv in the guest (PATH searched), return (rc, stdout, stderr)."""
        args = self._exec_args(argv, input, env)
        s, buf = self._session(15)
        try:
            pid = self._call(s, buf, {"execute": "guest-exec", "arguments": args}, 30)["pid"]  # type: ignore[index]
            deadline = time.monotonic() + timeout
            delay = 0.05
            while True:
                st = self._call(s, buf, {"execute": "guest-exec-status", "arguments": {"pid": pid}}, 30)
                if st.get("exited"):  # type: ignore[union-attr]
                    break
                if time.monotonic() > deadline:
                    self._call(s, buf, {"execute": "guest-exec", "arguments": {
                        "path": "/bin/kill", "arg": ["-9", str(pid)]}}, 10)
                    raise AgentNoAnswer(f"guest command timed out after {timeout:.0f}s: {' '.join(argv)}")
                time.sleep(delay)
                delay = min(delay * 1.5, 1.0)
        finally:
            s.close()
        out = base64.b64decode(st.get("out-data", "")).decode(errors="replace")  # type: ignore[union-attr]
        err = base64.b64decode(st.get("err-data", "")).decode(errors="replace")  # type: ignore[union-attr]
        rc = st.get("exitcode")  # type: ignore[union-attr]
        if rc is None:
            rc = 128 + int(st.get("signal", 0))  # type: ignore[union-attr]
        return int(rc), out, err
