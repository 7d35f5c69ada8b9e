"""Start/stop the QEMU guest and talk to its qemu-guest-agent (no SSH).

State lives in one directory (``state_dir``): ``qemu.pid``, ``qga.sock``, ``qmp.sock``,
``console.log``, ``overlay.qcow2``. Any process can attach to a running VM from that directory,
and ``stop()`` kills by pidfile.
"""
from __future__ import annotations

import base64
import functools
import json
import os
import random
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

GUEST_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
QEMU = "qemu-system-x86_64"


class QemuError(RuntimeError):
    pass


class AgentError(RuntimeError):
    pass


def free_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass(frozen=True)
class Accel:
    """The accelerator a guest runs under, and why it was chosen (shown to the user)."""

    name: str  # "kvm" or "tcg"
    reason: str

    def argv(self) -> list[str]:
        if self.name == "kvm":
            return ["-accel", "kvm", "-cpu", "host"]
        return ["-accel", f"tcg,thread={os.environ.get('KSC_VM_TCG_THREAD', 'multi')},tb-size={tcg_tb_mib()}"]


# TCG's cache of translated code, in MiB: QEMU's default, 1 GiB, held a guest with a kind cluster
# for 60-90 s at a time (`info jit`: the whole cache flushed and every hot path translated again,
# six times in the run's first ten minutes); 2 GiB is the most QEMU takes on an x86-64 host
# (it quietly caps larger sizes). Only host memory a guest's translations really use is touched.
TCG_TB_MIB = 2048


def tcg_tb_mib() -> int:
    """`KSC_VM_TCG_TB_MIB` or TCG_TB_MIB."""
    text = os.environ.get("KSC_VM_TCG_TB_MIB", str(TCG_TB_MIB))
    if not text.isdigit() or int(text) < 1:
        raise QemuError(f"KSC_VM_TCG_TB_MIB={text!r}: a size in MiB, at least 1 (QEMU caps it at 2048)")
    return int(text)


@functools.lru_cache(maxsize=1)
def choose_accel() -> Accel:
    """KVM when /dev/kvm really works, else TCG; ``KSC_VM_ACCEL=kvm|tcg`` forces a choice.

    A readable /dev/kvm is not enough: on nested hosts that only offer PVM, QEMU aborts on
    the first vCPU register write ("failed to set MSR 0x10a"). So a paused machine is created
    and quit through QMP; only if that exits cleanly is KVM used.
    """
    forced = os.environ.get("KSC_VM_ACCEL", "")
    if forced in ("kvm", "tcg"):
        return Accel(forced, f"forced by KSC_VM_ACCEL={forced}")
    if forced:
        raise QemuError(f"KSC_VM_ACCEL={forced!r}: use kvm or tcg")
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        why = "missing" if not os.path.exists("/dev/kvm") else "not accessible to this user"
        return Accel("tcg", f"/dev/kvm {why}: software emulation")
    argv = [QEMU, "-accel", "kvm", "-cpu", "host", "-machine", "q35", "-m", "64", "-nodefaults",
            "-display", "none", "-S", "-qmp", "stdio"]
    qmp = b'{"execute":"qmp_capabilities"}\n{"execute":"quit"}\n'
    try:
        probe = subprocess.run(argv, input=qmp, capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as error:
        return Accel("tcg", f"KVM probe failed ({error}): software emulation")
    if probe.returncode == 0:
        return Accel("kvm", "/dev/kvm works")
    lines = probe.stderr.decode(errors="replace").strip().splitlines()
    return Accel("tcg", f"/dev/kvm present but KVM fails ({lines[0] if lines else f'exit {probe.returncode}'}):"
                        " software emulation")


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
    accel = accel or choose_accel()
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
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(3)
            s.connect(str(paths.qmp))
            s.recv(4096)
            s.sendall(b'{"execute":"qmp_capabilities"}\n')
            s.recv(4096)
            s.sendall(b'{"execute":"quit"}\n')
    except OSError:
        pass
    for sig in (None, signal.SIGTERM, signal.SIGKILL):
        if sig is not None:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                break
        if _wait_gone(pid, 5 if sig != signal.SIGKILL else timeout):
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


def _wait_gone(pid: int, secs: float) -> bool:
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


class GuestAgent:
    """Minimal qemu-guest-agent client over the virtio-serial unix socket."""

    def __init__(self, sock_path: Path):
        self.sock_path = sock_path

    @staticmethod
    def _read_msg(s: socket.socket, buf: bytearray) -> dict:
        """Next JSON message from the agent (0xff delimiters and garbage lines skipped)."""
        while True:
            while b"\n" not in buf:
                chunk = s.recv(1 << 16)
                if not chunk:
                    raise AgentError("guest agent closed the connection")
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
                    raise AgentError(f"guest command timed out after {timeout:.0f}s: {' '.join(argv)}")
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
