"""--install-host-packages: the Debian packages a preflight found missing, installed by the suite
itself (``apt-get update``, then one ``apt-get install -y``) and the checks made again.

Only with the option: without it nothing is installed, and the preflight message names every
missing package in one apt-get line (clusters.checks.install_line) for the user to run. Refused
where it cannot work, before anything starts: a host without apt-get (not Debian or a
derivative) and a user who is not root."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Sequence

from clusters import waits
from clusters import commands
from clusters.checks import Check, install_line, missing_packages
from clusters.progress import Progress

OPTION = "--install-host-packages"


class HostPackagesError(RuntimeError):
    pass


def refusal(which: Callable[[str], str | None] = shutil.which, euid: Callable[[], int] = os.geteuid) -> str | None:
    """Why the option cannot work on this host (a usage error), or None."""
    if which("apt-get") is None:
        return (f"{OPTION} installs Debian packages with apt-get, and this host has no apt-get on PATH (not Debian"
                f" or a derivative): install what the preflight names with this system's package manager, and run"
                f" again without {OPTION}")
    if euid() != 0:
        return (f"{OPTION} runs apt-get, which needs root: run as root (sudo -E), or leave {OPTION} out and"
                " install what the preflight names yourself")
    return None


def install(packages: Sequence[str], progress: Progress, run: Callable[..., subprocess.CompletedProcess] = commands.run
            ) -> None:
    """apt-get update, then apt-get install -y of ``packages``; HostPackagesError with the end of
    apt-get's output when either fails."""
    progress(f"{OPTION}: installing {', '.join(packages)}: apt-get update, then {install_line(packages)}")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")  # no debconf question waits for a terminal
    for argv in (["apt-get", "update"], ["apt-get", "install", "-y", *packages]):
        try:
            done = run(argv, timeout=waits.bound(waits.APT_INSTALL), env=env)
        except subprocess.TimeoutExpired:
            raise HostPackagesError(f"`{' '.join(argv)}` did not finish in {waits.bound(waits.APT_INSTALL):.0f}s") from None
        except OSError as error:
            raise HostPackagesError(f"`{' '.join(argv)}` could not run: {error}") from None
        if done.returncode != 0:
            tail = "\n".join(((done.stderr or "") + (done.stdout or "")).strip().splitlines()[-5:])
            raise HostPackagesError(f"`{' '.join(argv)}` exited {done.returncode}: {tail}")
    progress(f"{OPTION}: installed {', '.join(packages)}")


def checked(make_checks: Callable[[], list[Check]], install_packages: bool, progress: Progress,
            run: Callable[..., subprocess.CompletedProcess] = commands.run) -> list[Check]:
    """``make_checks()``; with ``install_packages``, the packages its failing checks name are
    installed first and the checks made again (what apt-get could not fix stays failing)."""
    found = make_checks()
    packages = missing_packages(found)
    if not install_packages or not packages:
        return found
    try:
        install(packages, progress, run)
    except HostPackagesError as error:
        return [*found, Check("host packages", False, f"{OPTION} could not install them: {error}",
                              "see apt-get's message; install the packages by hand")]
    return make_checks()
