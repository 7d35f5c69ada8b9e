"""kind at the release the suite is proven with (clusters/versions.py KIND), installed into the
suite's cache with the Go toolchain when --kind-bin is left at its default and the kind on PATH is
missing or older than that:

    GOBIN=<cache>/bin/kind-<version> go install sigs.k8s.io/kind@<version>

A fresh machine then needs Go, not a kind release found and put on PATH by hand. A --kind-bin the
user gave is never replaced: a wrong one is the preflight's message (clusters/preflight.py)."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from clusters import waits
from clusters import commands, preflight, versions
from clusters.checks import Check
from clusters.progress import Progress

DEFAULT_KIND_BIN = "kind"  # --kind-bin's default: kind on PATH, else the suite's own install
GO_MISSING = "install Go (https://go.dev/dl/) and put it on PATH"


class KindInstallError(RuntimeError):
    pass


def cached_kind(root: Path) -> Path:
    return root / "bin" / f"kind-{versions.KIND}" / "kind"


def go_install(go: str, root: Path, run: Callable[..., subprocess.CompletedProcess] = commands.run) -> Path:
    """``go install sigs.k8s.io/kind@<pin>`` into the cache; one process at a time (two runs starting
    together wait for each other, the second finds the binary)."""
    target = cached_kind(root)
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent.parent / f".kind-{versions.KIND}.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        argv = [go, "install", f"sigs.k8s.io/kind@{versions.KIND}"]
        try:
            done = run(argv, timeout=waits.bound(waits.GO_INSTALL_KIND), env=dict(os.environ, GOBIN=str(target.parent)))
        except subprocess.TimeoutExpired:
            raise KindInstallError(f"`go install sigs.k8s.io/kind@{versions.KIND}` did not finish in"
                                   f" {waits.bound(waits.GO_INSTALL_KIND):.0f}s") from None
        if done.returncode != 0:
            tail = "\n".join(((done.stderr or "") + (done.stdout or "")).strip().splitlines()[-8:])
            raise KindInstallError(f"`go install sigs.k8s.io/kind@{versions.KIND}` exited {done.returncode}: {tail}")
    if not os.access(target, os.X_OK):
        raise KindInstallError(f"`go install sigs.k8s.io/kind@{versions.KIND}` left no kind binary in {target.parent}")
    return target


def resolve(kind_bin: str, node_version: tuple[int, int, int] | None, progress: Progress, root: Path, *,
            which: Callable[[str], str | None] = shutil.which,
            run: Callable[..., subprocess.CompletedProcess] = commands.run,
            check: Callable[..., Check] = preflight.check_kind) -> tuple[str, Check | None]:
    """The kind binary the run uses, and a failing check when there is none to use.

    The default --kind-bin is kind on PATH when it is good enough; else the cached install of the
    pinned release (made now with Go when not there yet). A given --kind-bin is used as given."""
    if kind_bin != DEFAULT_KIND_BIN:
        return kind_bin, None
    on_path = check(kind_bin, node_version)
    if on_path.ok:
        return kind_bin, None
    why = on_path.detail
    installed = cached_kind(root)
    if installed.is_file() and os.access(installed, os.X_OK):
        cached = check(str(installed), node_version)
        if cached.ok:
            progress(f"{why}: using kind {versions.KIND} from the suite's cache ({installed})")
            return str(installed), None
    go = which("go")
    if go is None:
        return kind_bin, Check("kind", False, f"{why}, and Go is not on PATH to install kind {versions.KIND} with",
                               f"{GO_MISSING}: the suite then installs kind {versions.KIND} into its cache itself;"
                               f" or install kind: {preflight.KIND_INSTALL}, or pass --kind-bin /path/to/kind")
    progress(f"{why}: installing kind {versions.KIND} with Go (GOBIN={installed.parent} go install"
             f" sigs.k8s.io/kind@{versions.KIND}; a few minutes)")
    try:
        go_install(go, root, run)
    except (KindInstallError, OSError) as error:
        return kind_bin, Check("kind", False, f"{why}; installing kind {versions.KIND} with Go failed: {error}",
                               f"install it yourself: {preflight.KIND_INSTALL}, or pass --kind-bin /path/to/kind")
    done = check(str(installed), node_version)
    if done.ok:
        progress(f"installed {done.detail}")
        return str(installed), None
    return kind_bin, done
