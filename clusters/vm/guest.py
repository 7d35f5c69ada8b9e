"""What every guest flavor (the kubeadm node, the kind host) does the same way: its state
directory and state file, whether its qemu runs, the guest agent, the console, stopping it.

A flavor subclasses :class:`Guest` with its state dataclass and error type, and adds only what
its job needs (kubeadm and the API for the node; Docker and images for the kind host).
"""
from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import os
import time
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import IO, Any, ClassVar, Generic, Sequence, TypeVar

from clusters import pidlock
from clusters.cli import NotReady

from . import qemu

S = TypeVar("S")
# the largest piece of a file sent in one agent call: its JSON is about 4/3 of it in memory on
# both sides
PUT_PIECE = 8 << 20


class AlreadyStarting(NotReady):
    """Another process is bringing up a guest in the same state directory."""


class Guest(Generic[S]):
    state_type: ClassVar[type]
    error: ClassVar[type[Exception]] = RuntimeError
    what: ClassVar[str] = "guest"  # as a person names it: "vm node", "kind host"
    stop_command: ClassVar[str] = ""

    def __init__(self, state_dir: Path):
        self.state_dir = Path(state_dir)
        self.paths = qemu.VmPaths(self.state_dir)
        self.agent = qemu.GuestAgent(self.paths.qga, watch=self.watch)
        self.timings: dict[str, float] = {}
        self._starting: IO[str] | None = None

    def starting_elsewhere(self) -> str | None:
        """The pid of another process bringing this guest up now (it holds ``starting``), None
        when none is."""
        if self._starting is not None:  # this process's own up
            return None
        held = pidlock.holder(self.state_dir / "starting.lock")
        # held through another Guest object of this process's (start() asking again): its own
        return None if held == str(os.getpid()) else held

    @contextlib.contextmanager
    def starting(self) -> Iterator[None]:
        """Held while this process brings the guest up (builds included): a second `up` on the
        same state directory stops at once, naming the process that holds it, instead of meeting
        the first one's disk half-made. The kernel drops the lock with its process."""
        if self._starting is not None:  # this process holds it already (the CLI, then up())
            yield
            return
        created = not self.state_dir.exists()
        try:
            handle = pidlock.take(self.state_dir / "starting.lock")
        except pidlock.Held as held:
            raise AlreadyStarting(f"a {self.what} is already starting (pid {held.holder}) in {self.state_dir}: wait for"
                                  f" it, or stop that process{' and run ' + self.stop_command if self.stop_command else ''}"
                                  ) from None
        self._starting = handle
        try:
            yield
        finally:
            self._starting = None
            pidlock.release(handle)
            if created:  # an up that failed before making anything leaves no directory behind
                pidlock.remove_if_alone(self.state_dir / "starting.lock")

    # --- state -----------------------------------------------------------------------------
    @property
    def state_file(self) -> Path:
        return self.state_dir / "state.json"

    def state(self) -> S | None:
        try:
            return self.state_type(**json.loads(self.state_file.read_text()))
        except (FileNotFoundError, ValueError, TypeError):
            return None

    def save_state(self, st: S) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(st), indent=2) + "\n")  # type: ignore[call-overload]
        tmp.replace(self.state_file)

    def is_running(self) -> bool:
        return qemu.read_pid(self.paths) is not None

    def usable(self) -> S | None:
        """The guest's state when it can be used as it stands: its qemu runs, its `up` got to the
        end (``ready_at``) and no other process is at work on it. A running qemu alone is no such
        guest: an `up` still at work has one, and so has an `up` that ended early (a signal it does
        not catch leaves qemu running: it runs in a session of its own)."""
        st = self.state()
        if st is None or getattr(st, "ready_at", None) is None or not self.is_running() or self.starting_elsewhere():
            return None
        return st

    def emulated(self) -> bool | None:
        """Whether the running guest is under TCG, from its QEMU's own command line (a guest
        another process booted too); None when none runs."""
        pid = qemu.read_pid(self.paths)
        if pid is None:
            return None
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            return None
        accel = next((argv[i + 1] for i, arg in enumerate(argv[:-1]) if arg == b"-accel"), b"tcg")
        return not accel.startswith(b"kvm")

    def stop(self) -> bool:
        """Stop qemu (by pidfile), drop the overlay and the state file; True if it was running."""
        was = qemu.stop_qemu(self.paths)
        self.paths.overlay.unlink(missing_ok=True)
        self.state_file.unlink(missing_ok=True)
        return was

    # --- the guest -------------------------------------------------------------------------
    def watch(self) -> None:
        """Raise ``self.error`` if the guest will not go on: its qemu is gone, or QEMU stopped it
        (internal-error, guest-panicked, shutdown, io-error; qemu.guest_stopped). The message
        carries the last console lines and QEMU's log. Every loop that waits on the guest calls
        it, and the agent client calls it while a reply is slow, so a dead guest fails a wait
        within seconds instead of at its deadline."""
        why = qemu.guest_stopped(self.paths)
        if why:
            raise self.error(f"{self.what}: {why}")

    def guest_exec(self, argv: Sequence[str], *, input: bytes | None = None,
                   timeout: float = 300) -> tuple[int, str, str]:
        """Run a command in the guest via qemu-guest-agent: (exit code, stdout, stderr)."""
        try:
            return self.agent.exec(list(argv), input=input, timeout=timeout)
        except (OSError, qemu.AgentError):
            self.watch()  # a guest that is gone or stopped is the story, not the socket's error
            raise

    def guest_look(self, argv: Sequence[str], timeout: float = 60) -> tuple[int, str, str] | str:
        """``guest_exec`` for one look of a wait; where the agent gave no answer (a guest busy
        under emulation), a sentence saying so instead: that costs the wait a look, not the wait
        (decision 0037). An error the agent answers, and a guest that is gone or stopped (from
        ``watch``), still raise."""
        try:
            return self.guest_exec(argv, timeout=timeout)
        except qemu.NO_ANSWER as error:
            return qemu.no_answer_said(error)

    def journal_or_why(self, unit: str, lines: int = 60) -> str:
        """The unit's journal for a failure message, or why it could not be read: that failure
        is the story, not a lost read of its journal."""
        try:
            return self.journal(unit, lines)
        except (OSError, qemu.AgentError) as error:
            return qemu.journal_unread(error)

    def put_file(self, path: str, data: bytes, mode: str = "0644") -> None:
        """``data`` as the guest's file ``path``, whole or not at all. The agent carries input as
        base64 inside JSON, which an emulated guest parses at about 1 MB/s: a binary goes
        gzip-compressed (a Go binary to about a third; the guest's gzip inflates it in seconds),
        in pieces of at most PUT_PIECE, and is checked by its sha256 in the guest before it takes
        the name (the path and mode are the script's parameters, never shell text)."""
        packed = gzip.compress(data, compresslevel=1)
        partial = f"{path}.ksc-partial"
        for offset in range(0, len(packed), PUT_PIECE):  # gzip makes even no data a few bytes
            self._put_step(path, ["sh", "-c", 'if [ "$2" = first ]; then mkdir -p "$(dirname "$1")" && cat > "$1";'
                                              ' else cat >> "$1"; fi', "sh", partial + ".gz",
                                  "first" if offset == 0 else "next"], packed[offset:offset + PUT_PIECE],
                           silent=f"the guest could not store the piece at byte {offset} of {len(packed)} sent")
        self._put_step(path, ["sh", "-c", 'gzip -dc "$1.gz" > "$1" && rm -f "$1.gz" && chmod "$2" "$1"'
                                    ' && [ "$(sha256sum < "$1" | cut -d" " -f1)" = "$3" ] && mv "$1" "$4"'
                                    ' || { rm -f "$1" "$1.gz"; exit 1; }',
                        "sh", partial, mode, hashlib.sha256(data).hexdigest(), path],
                       silent="what the guest unpacked is not what was sent (sha256)")

    def _put_step(self, path: str, argv: list[str], data: bytes | None = None, *, silent: str) -> None:
        """``silent``: what a failure the guest's commands wrote nothing about means at this step."""
        rc, out, err = self.guest_exec(argv, input=data)
        if rc != 0:
            said = (err or out).strip() or silent
            raise self.error(f"{self.what}: writing {path} failed ({rc}): {said}")

    def console_tail(self, n: int = 40) -> str:
        with contextlib.suppress(FileNotFoundError):
            return "\n".join(self.paths.console.read_text(errors="replace").splitlines()[-n:])
        return "(no console log)"

    def wait_agent(self, deadline: float) -> None:
        while time.monotonic() < deadline:
            self.watch()
            if self.agent.ping(timeout=3):
                return
            time.sleep(1)
        raise self.error("timed out waiting for the guest agent to answer; console:\n" + self.console_tail())

    def journal(self, unit: str, lines: int = 60) -> str:
        _, out, _ = self.guest_exec(["journalctl", "-b", "--no-pager", "-n", str(lines), "-u", unit])
        return out

    def describe(self) -> dict[str, Any]:
        st = self.state()
        out: dict[str, Any] = {"state_dir": str(self.state_dir), "running": self.is_running()}
        if st is not None:
            out.update(asdict(st))  # type: ignore[call-overload]
        return out
