"""Progress lines: ``[  12.3s] vm: booting ...`` on stderr by default, through clusters.redact (a
tool's output in a line may carry a URL's password or a token)."""
from __future__ import annotations

import sys
import time
from typing import Callable

from clusters.redact import redact

Progress = Callable[[str], None]


def stderr_progress(prefix: str = "vm") -> Progress:
    t0 = time.monotonic()

    def emit(msg: str) -> None:
        print(redact(f"[{time.monotonic() - t0:7.1f}s] {prefix}: {msg}"), file=sys.stderr, flush=True)

    return emit
