"""A qemu-system-x86_64 that stands in for the real one in self-tests of the KVM probe and of the
watch on a running guest (clusters/vm/qemu.py): no guest is booted, no CPU is emulated.

It reads the few options the suite passes: ``-qmp unix:PATH,...`` (a QMP server in a thread that
answers the handshake, ``query-status`` and ``quit``), ``-chardev file,...,path=PATH`` and
``-serial file:PATH`` (its console), ``-chardev socket,...,path=PATH`` (a guest agent that
accepts and never answers, as QEMU's socket does for a stopped guest) and ``-pidfile PATH``.

``FAKE_QEMU_MODE`` says what the "guest" does:

* ``boots``: the run state is ``running``; after 0.2 s the console shows the firmware's banner, or
  with ``-kernel`` the kernel's boot to its root-mount panic (qemu.KERNEL_BOOTED).
* ``decompressor-hang``: ``running``; the firmware's banner, or with ``-kernel`` only the real-mode
  setup's line (``Probing EDD``), never the kernel proper: a KVM seen here that runs the firmware
  and hangs in the kernel's decompressor.
* ``internal-error``: QEMU's KVM error text on stderr, run state ``internal-error``, no console.
* ``line-then-internal-error``: the same stop, with a console line (never seen while running).
* ``abort``: the MSR error on stderr, then SIGABRT (QEMU's assertion), before any QMP.
* ``silent``: ``running``, and nothing ever on the console.

``FAKE_QEMU_STATUS_FILE``: if that file exists, its text is the run state (a test flips it).
``FAKE_QEMU_RECORD``: the argv and pid are written there as JSON."""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
from pathlib import Path

KVM_INTERNAL_ERROR = """\
KVM internal error. Suberror: 1
extra data[0]: 0x0000000000000000
extra data[1]: 0x0000000000000030
emulation failure
RAX=0000000000000000 RBX=0000000000000000 RCX=0000000000000000 RDX=0000000000000663
RSI=0000000000000000 RDI=0000000000000000 RBP=0000000000000000 RSP=0000000000000000
"""
MSR_ERROR = """\
qemu-system-x86_64: error: failed to set MSR 0x10a to 0x69
qemu-system-x86_64: ../../target/i386/kvm/kvm.c:3183: kvm_buf_set_msrs: Assertion `ret == cpu->kvm_msr_buf->nmsrs' failed.
"""
CONSOLE_LINE = "Linux version 6.12.0-fake (fake@qemu) #1 SMP PREEMPT_DYNAMIC\n"
FIRMWARE_LINE = "SeaBIOS (version 1.16.2-debian-1.16.2-1)\n"
SETUP_LINE = "Probing EDD (edd=off to disable)... ok\n"
KERNEL_BOOT = (SETUP_LINE + "[    0.000000] " + CONSOLE_LINE
               + "[    1.200000] Kernel panic - not syncing: VFS: Unable to mount root fs on unknown-block(0,0)\n")


def wrapper(directory: Path, name: str = "qemu-system-x86_64") -> Path:
    """An executable ``name`` in ``directory`` that runs this fake with the test's Python."""
    path = directory / name
    # "$0" on the command line: qemu.read_pid knows its qemu by "qemu-system" in /proc/PID/cmdline
    path.write_text(f"#!/bin/sh\nexec {sys.executable} {Path(__file__).resolve()} --as \"$0\" \"$@\"\n")
    path.chmod(0o755)
    return path


def stand_in(monkeypatch, bin_dir: Path, guest_mode: str = "silent") -> None:
    """This fake as the suite's QEMU for the test (``monkeypatch``: pytest's), its guests doing
    ``guest_mode``, allowed beside a real guest of the suite that may be running on this host."""
    from clusters.vm import qemu

    bin_dir.mkdir(parents=True, exist_ok=True)
    monkeypatch.setattr(qemu, "QEMU", str(wrapper(bin_dir)))
    monkeypatch.setenv("FAKE_QEMU_MODE", guest_mode)
    monkeypatch.setenv("KSC_VM_ALONE", "off")


def start_guest(paths, name: str = "ksc-node") -> int:
    """A guest started from ``paths`` (clusters.vm.qemu.VmPaths) as the tools start one
    (qemu.start_qemu, under TCG), with files that need not exist; its qemu's pid."""
    from clusters.vm import qemu

    here = paths.dir.parent
    return qemu.start_qemu(paths, disk=here / "disk.raw", kernel=here / "vmlinuz", initrd=here / "initrd.img",
                           memory_mb=64, cpus=1, swap_mb=0, use_overlay=False, name=name,
                           accel=qemu.Accel("tcg", "test"))


def _option(argv: list[str], name: str) -> list[str]:
    return [argv[i + 1] for i, arg in enumerate(argv[:-1]) if arg == name]


def _path(spec: str) -> str:
    return next(part[len("path="):] for part in spec.split(",") if part.startswith("path="))


class Fake:
    def __init__(self, argv: list[str]):
        self.mode = os.environ.get("FAKE_QEMU_MODE", "boots")
        self.status = "running"
        self.status_file = os.environ.get("FAKE_QEMU_STATUS_FILE")
        self.consoles = [_path(spec) for spec in _option(argv, "-chardev") if spec.startswith("file,")]
        self.consoles += [spec[len("file:"):] for spec in _option(argv, "-serial") if spec.startswith("file:")]
        self.agents = [_path(spec) for spec in _option(argv, "-chardev") if spec.startswith("socket,")]
        self.qmp = [spec[len("unix:"):].split(",")[0] for spec in _option(argv, "-qmp")]
        self.quit = threading.Event()
        self.kernel = bool(_option(argv, "-kernel"))

    def run_state(self) -> str:
        if self.status_file and os.path.exists(self.status_file):
            return Path(self.status_file).read_text().strip()
        return self.status

    def console(self, text: str) -> None:
        for path in self.consoles:
            with open(path, "a") as f:
                f.write(text)

    def serve_qmp(self, path: str) -> None:
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(path)
        server.listen(4)
        threading.Thread(target=self._accept, args=(server, self._qmp_client), daemon=True).start()

    def serve_silent(self, path: str) -> None:
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(path)
        server.listen(4)
        threading.Thread(target=self._accept, args=(server, lambda conn: time.sleep(3600)), daemon=True).start()

    @staticmethod
    def _accept(server: socket.socket, handle) -> None:
        while True:
            conn, _ = server.accept()
            threading.Thread(target=handle, args=(conn,), daemon=True).start()

    def _qmp_client(self, conn: socket.socket) -> None:
        with conn:
            conn.sendall(b'{"QMP": {"version": {"qemu": {"major": 7}}, "capabilities": []}}\r\n')
            buf = b""
            while True:
                data = conn.recv(4096)
                if not data:
                    return
                buf += data
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    name = json.loads(line)["execute"]
                    if name == "query-status":
                        state = self.run_state()
                        answer = {"status": state, "running": state == "running", "singlestep": False}
                    else:
                        answer = {}
                    conn.sendall(b'{"timestamp": {"seconds": 0, "microseconds": 0}, "event": "RTC_CHANGE"}\r\n'
                                 + json.dumps({"return": answer}).encode() + b"\r\n")
                    if name == "quit":
                        self.quit.set()
                        return

    def main(self, argv: list[str]) -> int:
        record = os.environ.get("FAKE_QEMU_RECORD")
        if record:
            Path(record).write_text(json.dumps({"argv": argv, "pid": os.getpid()}))
        for path in _option(argv, "-pidfile"):
            Path(path).write_text(f"{os.getpid()}\n")
        if self.mode == "abort":
            sys.stderr.write(MSR_ERROR)
            sys.stderr.flush()
            os.abort()
        for path in self.consoles:
            open(path, "a").close()
        if self.mode in ("internal-error", "line-then-internal-error"):
            # stopped before QMP answers at all, so no reader can see "running" with the line
            self.status = "internal-error"
            if self.mode == "line-then-internal-error":
                self.console(CONSOLE_LINE)
            sys.stderr.write(KVM_INTERNAL_ERROR)
            sys.stderr.flush()
        for path in self.qmp:
            self.serve_qmp(path)
        for path in self.agents:
            self.serve_silent(path)
        if self.mode in ("boots", "decompressor-hang"):
            time.sleep(0.2)
            if not self.kernel:
                self.console(FIRMWARE_LINE)
            else:
                self.console(KERNEL_BOOT if self.mode == "boots" else SETUP_LINE)
        self.quit.wait(600)
        return 0


if __name__ == "__main__":
    args = sys.argv[1:]
    if args[:1] == ["--as"]:
        args = args[2:]
    sys.exit(Fake(args).main(args))
