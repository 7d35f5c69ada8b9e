"""What every guest flavor (the kubeadm node, the kind host) does the same way: its state
directory and state file, whether its qemu runs, the guest agent, the console, stopping it.

A flavor subclasses :class:`Guest` with its state dataclass and error type, and adds only what
its job needs (kubeadm and the API for the node; Docker and images for the kind host).
"""
from __future__ import annotations

import contextlib
import json
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, ClassVar, Generic, Sequence, TypeVar

from . import qemu

S = TypeVar("S")


class Guest(Generic[S]):
    state_type: ClassVar[type]
    error: ClassVar[type[Exception]] = RuntimeError

    def __init__(self, state_dir: Path):
        self.state_dir = Path(state_dir)
        self.paths = qemu.VmPaths(self.state_dir)
        self.agent = qemu.GuestAgent(self.paths.qga)
        self.timings: dict[str, float] = {}

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

    def stop(self) -> bool:
        """Stop qemu (by pidfile), drop the overlay and the state file; True if it was running."""
        was = qemu.stop_qemu(self.paths)
        self.paths.overlay.unlink(missing_ok=True)
        self.state_file.unlink(missing_ok=True)
        return was

    # --- the guest -------------------------------------------------------------------------
    def guest_exec(self, argv: Sequence[str], *, input: bytes | None = None,
                   timeout: float = 300) -> tuple[int, str, str]:
        """Run a command in the guest via qemu-guest-agent: (exit code, stdout, stderr)."""
        return self.agent.exec(list(argv), input=input, timeout=timeout)

    def console_tail(self, n: int = 40) -> str:
        with contextlib.suppress(FileNotFoundError):
            return "\n".join(self.paths.console.read_text(errors="replace").splitlines()[-n:])
        return "(no console log)"

    def wait_agent(self, deadline: float) -> None:
        while time.monotonic() < deadline:
            if not self.is_running():
                raise self.error("qemu exited during boot; console:\n" + self.console_tail())
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
