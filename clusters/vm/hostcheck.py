"""What this machine needs before the vm tools build or boot anything, each missing piece with
the command that installs it: checked first and all at once (one message, exit 3), not found by
`go build` minutes into a build. Used by `python -m clusters.vm` and the vm provider's preflight.

Build tools are asked for only where something is still to build (the cache holds finished
builds): Go, at least the version the Kubernetes release's go.mod names; gcc and libseccomp for
runc (cgo); patch(1) for --k8s-patch."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from clusters import versions
from clusters.checks import Check

from . import build as _build
from .k8s_source import KubernetesSource

Which = Callable[[str], "str | None"]
GO_INSTALL = "install Go from https://go.dev/dl/ (Debian's golang is older) and put it first on PATH"


def tool(which: Which, command: str, package: str, why: str) -> Check:
    """A command on PATH, and the Debian package that brings it (named with the other missing
    ones in the message's one apt-get line: clusters.checks.install_line)."""
    found = which(command)
    return Check(command, bool(found), found or f"not on PATH ({why})", packages=(package,))


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", text)[:3])


def go_directive(kubernetes: KubernetesSource) -> str:
    """The Go version the Kubernetes build needs: its go.mod's `go` line (a checkout's, or the
    release's from the module proxy; ProxyUnreachable, ProxyUnusable when it cannot be asked)."""
    if kubernetes.checkout is not None:
        text = (kubernetes.checkout / "go.mod").read_text()
    else:
        status, body = versions.proxy_get(f"k8s.io/kubernetes/@v/{kubernetes.release}.mod", timeout=30)
        if status != 200:
            raise versions.ProxyUnreachable(f"the Go module proxy {versions.module_proxy()} answered {status} for"
                                            f" k8s.io/kubernetes {kubernetes.release}: is it a release?")
        text = body.decode("utf-8", "replace")
        # a proxy's answer is read, not trusted: one that says 200 to everything (a captive portal,
        # a misconfigured mirror) has no go.mod of the module to give
        if not re.search(r"^module\s+k8s\.io/kubernetes\s*$", text, re.M):
            raise versions.ProxyUnreachable(
                f"the Go module proxy {versions.module_proxy()} answered k8s.io/kubernetes/@v/{kubernetes.release}.mod"
                f" with {text.strip()[:60]!r}, not the module's go.mod: is GOPROXY a Go module proxy? (e.g."
                f" {versions.DEFAULT_GOPROXY})")
    match = re.search(r"^go\s+(\d+\.\d+(?:\.\d+)?)\s*$", text, re.M)
    return match.group(1) if match else "1.0"


def _go_version(which: Which, run: Callable[..., subprocess.CompletedProcess]) -> str | None:
    go = which("go")
    if go is None:
        return None
    try:
        done = run([go, "env", "GOVERSION"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip().removeprefix("go") if done.returncode == 0 else None


def has_libseccomp(which: Which, run: Callable[..., subprocess.CompletedProcess],
                   include_dirs: tuple[str, ...] = ("/usr/include", "/usr/local/include")) -> bool:
    if which("pkg-config"):
        return run(["pkg-config", "--exists", "libseccomp"], capture_output=True, timeout=60).returncode == 0
    return any(Path(d, "seccomp.h").exists() for d in include_dirs)


def to_build(kubernetes: KubernetesSource, root: Path) -> list[str]:
    """The components the cache does not hold yet (etcd's version is kubeadm's choice, known
    only once kubernetes is built: it needs what the others need)."""
    wanted = [_build.Component(name="kubernetes", version=kubernetes.build_id, binaries=_build.K8S_COMMANDS),
              _build.containerd_component(), _build.runc_component(), _build.cni_component()]
    return [c.name for c in wanted if not c.is_cached(root)]


def checks(kubernetes: KubernetesSource | None, *, root: Path, guest_image: bool, boot: bool, binaries: bool = True,
           which: Which = shutil.which, run: Callable[..., subprocess.CompletedProcess] = subprocess.run,
           root_user: bool | None = None) -> list[Check]:
    """Every check for a command that builds the binaries (``binaries``), a guest image
    (``guest_image``: debootstrap, as root) and boots it (``boot``)."""
    out: list[Check] = []
    if boot:
        out.append(tool(which, "qemu-system-x86_64", "qemu-system-x86", "boots the guest"))
    if guest_image or boot:
        out.append(tool(which, "qemu-img", "qemu-utils", "the guest's disk overlay"))
    if guest_image:
        out.append(tool(which, "debootstrap", "debootstrap", "the guest's Debian root filesystem"))
        out.append(tool(which, "mkfs.ext4", "e2fsprogs", "the guest's disk"))
        is_root = os.geteuid() == 0 if root_user is None else root_user
        out.append(Check("root", is_root, "running as root" if is_root else
                         "building the guest's root filesystem (debootstrap, chroot) needs root", "run it as root (sudo -E)"))
    if binaries and kubernetes is not None:
        missing = to_build(kubernetes, root)
        if missing:
            out += _build_checks(kubernetes, missing, which, run)
    return out


def _build_checks(kubernetes: KubernetesSource, missing: list[str], which: Which,
                  run: Callable[..., subprocess.CompletedProcess]) -> list[Check]:
    out: list[Check] = []
    have = _go_version(which, run)
    needed = None
    if "kubernetes" in missing:
        try:
            needed = go_directive(kubernetes)
        except versions.ProxyUnreachable as error:
            out.append(Check("Go module proxy", False, str(error), "check the network, or set GOPROXY"))
        except versions.ProxyUnusable as error:
            out.append(Check("Go module proxy", False, str(error), f"export GOPROXY={versions.DEFAULT_GOPROXY}"))
    why = f"builds {', '.join(missing)} (not in the cache yet)"
    if have is None:
        out.append(Check("go", False, f"not on PATH ({why})", GO_INSTALL))
    elif needed and _version(have) < _version(needed):
        out.append(Check("go", False, f"go {have} is older than go {needed}, which Kubernetes {kubernetes.release} needs"
                                      " (its go.mod); builds use the local toolchain (GOTOOLCHAIN=local)", GO_INSTALL))
    else:
        out.append(Check("go", True, f"go {have}" + (f" (Kubernetes {kubernetes.release} needs {needed})" if needed else "")))
    if "runc" in missing:
        out.append(tool(which, "gcc", "gcc", "runc is built with cgo"))
        seccomp = has_libseccomp(which, run)
        out.append(Check("libseccomp", seccomp, "headers found" if seccomp else "no libseccomp headers (runc is built"
                         " with seccomp support)", packages=("libseccomp-dev", "pkg-config")))
    if kubernetes.patches and "kubernetes" in missing:
        out.append(tool(which, "patch", "patch", "applies --k8s-patch"))
    return out
