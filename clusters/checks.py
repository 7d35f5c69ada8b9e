"""A check of what the suite needs (a host tool, a cluster's state) and the error that lists them.

The checks themselves are in clusters/preflight.py; the error is raised by every provider and
turned into exit 3 by the commands' one error path (clusters/cli.py). It lives apart from the
checks so that cli.py, which clusters/versions.py and through it the preflight import, can know
the error without importing the preflight back.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    remedy: str = ""

    def line(self) -> str:
        mark = "ok  " if self.ok else "FAIL"
        text = f"[{mark}] {self.name}: {self.detail}"
        return text + (f"\n       fix: {self.remedy}" if not self.ok and self.remedy else "")


class PreflightError(RuntimeError):
    def __init__(self, checks: Sequence[Check]):
        self.checks = list(checks)
        failed = [c for c in checks if not c.ok]
        super().__init__(
            f"preflight failed ({len(failed)} of {len(checks)} checks):\n"
            + "\n".join(c.line() for c in checks)
        )


def require(checks: Sequence[Check]) -> None:
    if not all(c.ok for c in checks):
        raise PreflightError(checks)
