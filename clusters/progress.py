"""Progress the user sees while clusters are built and created, from any process of a run.

Providers run inside pytest (its output captured) and often inside pytest-xdist workers (no
terminal at all). So progress goes through a file: every process appends whole lines to the
run's ``progress.log`` and the controller follows it, writing each line through pytest's
terminal reporter as it arrives. Every line goes through clusters.redact before it is written:
a tool's output in a progress line may carry a URL's password or a token.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

from clusters.redact import redact

Progress = Callable[[str], None]

FILE = "progress.log"


def writer(run_dir: Path, source: str, start: float | None = None,
           show: Callable[[str], None] | None = None) -> Progress:
    """A progress callable for one component (``kind``, ``vm``, ...): appends timestamped lines,
    and hands each to ``show`` too when the process can show it itself (no xdist)."""
    path = Path(run_dir) / FILE
    t0 = start if start is not None else time.time()

    def emit(message: str) -> None:
        line = redact(f"[{time.time() - t0:7.1f}s] {source}: {message.rstrip()}")
        # O_APPEND writes of one short line are not interleaved with other processes' lines
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, (line + "\n").encode(errors="replace"))
        finally:
            os.close(fd)
        if show is not None:
            show(line)

    return emit


class Follower:
    """Follows a run's progress file on a daemon thread and hands each complete line to ``show``."""

    def __init__(self, run_dir: Path, show: Callable[[str], None], interval: float = 0.5):
        self.path = Path(run_dir) / FILE
        self.show = show
        self.interval = interval
        self._stop = threading.Event()
        self._offset = 0
        self._thread = threading.Thread(target=self._run, name="ksc-progress", daemon=True)

    def start(self) -> "Follower":
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop following, after showing every line written so far."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        self._drain()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._drain()

    def _drain(self) -> None:
        try:
            with open(self.path, "rb") as f:
                f.seek(self._offset)
                data = f.read()
        except FileNotFoundError:
            return
        complete = data[: data.rfind(b"\n") + 1]
        self._offset += len(complete)
        for line in complete.decode(errors="replace").splitlines():
            self.show(line)
