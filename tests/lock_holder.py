"""Another process holding a clusters/pidlock lock, as another run of the suite would: the lock is
real, only the run around it is not."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_HOLD = ("import sys, time; from pathlib import Path; from clusters import pidlock;"
         " h = pidlock.take(Path(sys.argv[1])); print('held', flush=True); time.sleep(120)")
_ASK = ("import sys; from pathlib import Path; from clusters import pidlock\n"
        "try:\n    pidlock.take(Path(sys.argv[1])); print('free')\n"
        "except pidlock.Held as held:\n    print('held by', held.holder)")


@contextmanager
def holding(path: Path) -> Iterator[subprocess.Popen[str]]:
    """A process that holds the lock at ``path`` until the block ends (or it is killed sooner)."""
    proc = subprocess.Popen([sys.executable, "-c", _HOLD, str(path)], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        yield proc
    finally:
        proc.kill()
        proc.wait()


def ask(path: Path) -> str:
    """What another process finds at ``path``: "free", or "held by <pid>"."""
    return subprocess.run([sys.executable, "-c", _ASK, str(path)], capture_output=True, text=True, cwd=ROOT,
                          check=True).stdout.strip()
