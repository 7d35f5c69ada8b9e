"""Progress lines: ``[  12.3s] vm: booting ...`` on stderr by default."""
from __future__ import annotations

import sys
import time
from typing import Callable

Progress = Callable[[str], None]


def stderr_progress(prefix: str = "vm") -> Progress:
    t0 = time.monotonic()

    def emit(msg: str) -> None:
        print(f"[{time.monotonic() - t0:7.1f}s] {prefix}: {msg}", file=sys.stderr, flush=True)

    return emit
