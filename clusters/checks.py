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
    # Debian packages that fix it: a message names every failing check's packages in one
    # apt-get line (install_line), which --install-host-packages runs.
    packages: tuple[str, ...] = ()

    def line(self) -> str:
        mark = "ok  " if self.ok else "FAIL"
        text = f"[{mark}] {self.name}: {self.detail}"
        remedy = self.remedy
        if self.packages:  # one install line below names them with the other checks' packages
            remedy = f"install {', '.join(self.packages)} (the apt-get line below)" + (f"; {remedy}" if remedy else "")
        return text + (f"\n       fix: {remedy}" if not self.ok and remedy else "")


def missing_packages(checks: Sequence[Check]) -> list[str]:
    """The Debian packages of every failing check, each once, in the checks' order."""
    return list(dict.fromkeys(p for c in checks if not c.ok for p in c.packages))


def install_line(packages: Sequence[str]) -> str:
    return f"apt-get install -y {' '.join(packages)}"


class PreflightError(RuntimeError):
    def __init__(self, checks: Sequence[Check]):
        self.checks = list(checks)
        failed = [c for c in checks if not c.ok]
        packages = missing_packages(checks)
        install = (f"\nmissing packages, in one line (as root): {install_line(packages)}"
                   " (or run again with --install-host-packages)") if packages else ""
        super().__init__(
            f"preflight failed ({len(failed)} of {len(checks)} checks):\n"
            + "\n".join(c.line() for c in checks) + install
        )


def require(checks: Sequence[Check]) -> None:
    if not all(c.ok for c in checks):
        raise PreflightError(checks)
