"""Host checks before the suite creates anything: each failing check says exactly what to do.

Every check is a pure function of what it reads (file contents, a command's result), so each
can be tested for real on this machine and with injected contents for the other cases.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from e2e.oracle import kernel_supports_noswap

GiB = 1024**3
# A kind cluster of one control plane and one worker, idle, takes about 1.2 GiB; the stress
# workloads take what they are told. Asking for this much per cluster keeps the host out of
# its own memory pressure, which would evict our test pods for reasons we do not test.
MEMORY_PER_KIND_CLUSTER = 2 * GiB

SWAPFILE_COMMANDS = (
    "sudo fallocate -l 4G /swapfile && sudo chmod 600 /swapfile && "
    "sudo mkswap /swapfile && sudo swapon /swapfile"
)


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


# --- swap --------------------------------------------------------------------------------------

def swap_total_from_proc_swaps(text: str) -> int:
    """Sum of the Size column of /proc/swaps (KiB) in bytes; the header line is skipped."""
    total = 0
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) >= 3:
            total += int(fields[2]) * 1024
    return total


def check_swap(proc_swaps: str) -> Check:
    total = swap_total_from_proc_swaps(proc_swaps)
    if total > 0:
        return Check("swap", True, f"{total // (1024 * 1024)} MiB of swap active")
    return Check(
        "swap",
        False,
        "no active swap in /proc/swaps: kind nodes share the host's swap, so they would have none",
        f"provision a swap file before creating clusters: {SWAPFILE_COMMANDS}",
    )


# --- cgroup v2 ---------------------------------------------------------------------------------

def check_cgroup_v2(mounts: str, controllers: str | None) -> Check:
    """`mounts` is /proc/self/mounts; `controllers` is /sys/fs/cgroup/cgroup.controllers or None."""
    unified = any(
        fields[1] == "/sys/fs/cgroup" and fields[2] == "cgroup2"
        for fields in (line.split() for line in mounts.splitlines())
        if len(fields) >= 3
    )
    remedy = (
        "boot the host with cgroup v2 only: add systemd.unified_cgroup_hierarchy=1 to the kernel"
        " command line (GRUB_CMDLINE_LINUX in /etc/default/grub, then update-grub and reboot);"
        " or use --provider vm, whose guest runs cgroup v2"
    )
    if not unified:
        return Check(
            "cgroup v2",
            False,
            "/sys/fs/cgroup is not a cgroup2 mount (hybrid or v1 hierarchy): the kubelet refuses"
            " LimitedSwap on cgroup v1 and memory.swap.max does not exist there",
            remedy,
        )
    if controllers is None or "memory" not in controllers.split():
        return Check(
            "cgroup v2",
            False,
            "cgroup v2 is mounted but its memory controller is not enabled at the root",
            remedy,
        )
    return Check("cgroup v2", True, "unified hierarchy with the memory controller")


# --- tmpfs noswap ------------------------------------------------------------------------------

def probe_tmpfs_noswap() -> bool | None:
    """Mount a tmpfs with `noswap` for real, as the kubelet does; None when we may not mount."""
    if os.geteuid() != 0:
        return None
    with tempfile.TemporaryDirectory(prefix="ksc-noswap-probe-") as target:
        mounted = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "noswap,size=64k", "tmpfs", target],
            capture_output=True,
            text=True,
            timeout=30,
        )
        if mounted.returncode == 0:
            subprocess.run(["umount", target], check=True, timeout=30)
            return True
        return False


def check_noswap(kernel_release: str, probe: Callable[[], bool | None]) -> Check:
    """Kernel >= 6.4 supports `noswap`; an older one only if the probe mount succeeds."""
    try:
        supported = kernel_supports_noswap(kernel_release)
        how = "kernel >= 6.4"
    except ValueError:
        result = probe()
        if result is None:
            return Check(
                "tmpfs noswap",
                False,
                f"kernel {kernel_release} is older than 6.4 and the noswap probe mount needs root",
                "run the suite as root once (sudo), or upgrade the kernel to 6.4+",
            )
        supported = kernel_supports_noswap(kernel_release, result)
        how = "probe mount"
    if supported:
        return Check("tmpfs noswap", True, f"supported ({how}, kernel {kernel_release})")
    return Check(
        "tmpfs noswap",
        False,
        f"kernel {kernel_release} rejects tmpfs `noswap`: memory-backed volumes (Secrets,"
        " emptyDir medium Memory) could be swapped to disk",
        "use a 6.4+ kernel; the suite's noswap tests then expect the"
        " PossibleMemoryBackedVolumesOnDisk node warning instead",
    )


# --- memory ------------------------------------------------------------------------------------

def mem_available(meminfo: str) -> int:
    match = re.search(r"^MemAvailable:\s+(\d+) kB", meminfo, re.MULTILINE)
    if not match:
        raise ValueError("/proc/meminfo has no MemAvailable line")
    return int(match.group(1)) * 1024


def check_memory(meminfo: str, required: int) -> Check:
    available = mem_available(meminfo)
    detail = f"{available / GiB:.1f} GiB available, {required / GiB:.1f} GiB wanted"
    if available >= required:
        return Check("free memory", True, detail)
    return Check(
        "free memory",
        False,
        detail,
        "free memory, or test fewer behaviors at once (--behaviors LimitedSwap)",
    )


# --- docker and kind ---------------------------------------------------------------------------

Runner = Callable[..., subprocess.CompletedProcess]


def check_docker(run: Runner = subprocess.run) -> Check:
    if shutil.which("docker") is None:
        return Check(
            "docker",
            False,
            "the docker CLI is not on PATH",
            "install Docker Engine (https://docs.docker.com/engine/install/) or use --provider vm",
        )
    try:
        result = run(
            ["docker", "info", "--format", "{{.ServerVersion}} {{.CgroupVersion}}"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except subprocess.TimeoutExpired:
        return Check("docker", False, "`docker info` did not answer in 30 s", "restart the Docker engine")
    if result.returncode != 0:
        error = (result.stderr or result.stdout).strip().splitlines()
        return Check(
            "docker",
            False,
            f"the Docker engine is not reachable: {error[-1] if error else 'no output'}",
            "start it (sudo systemctl start docker) and make sure this user may use it"
            " (sudo usermod -aG docker $USER, then log in again)",
        )
    version, _, cgroup = result.stdout.strip().partition(" ")
    if cgroup.strip() == "1":
        return Check(
            "docker",
            False,
            f"Docker {version} runs with cgroup v1: kind nodes would be cgroup v1, where the"
            " kubelet refuses LimitedSwap",
            "run Docker on a cgroup v2 host (see the cgroup v2 check)",
        )
    return Check("docker", True, f"Docker {version}, cgroup v{cgroup.strip() or '?'}")


_KIND_VERSION = re.compile(r"kind v(\d+)\.(\d+)\.(\d+)")
# kubeadm 1.37 refuses the v1beta3 config API that older kind releases write.
MIN_KIND_FOR_NODE_MINOR = {37: (0, 33, 0)}


def check_kind(kind_bin: str, node_version: tuple[int, int, int] | None, run: Runner = subprocess.run) -> Check:
    path = shutil.which(kind_bin)
    if path is None:
        return Check(
            "kind",
            False,
            f"{kind_bin!r} is not on PATH",
            "install it: go install sigs.k8s.io/kind@v0.33.0 (then add $(go env GOPATH)/bin to"
            " PATH), or pass --kind-bin /path/to/kind",
        )
    result = run([path, "version"], capture_output=True, text=True, timeout=30)
    match = _KIND_VERSION.search(result.stdout)
    if result.returncode != 0 or not match:
        return Check("kind", False, f"`{path} version` failed: {result.stderr.strip() or result.stdout.strip()}", "reinstall kind")
    version = tuple(int(x) for x in match.groups())
    if node_version is not None:
        needed = max(
            (v for minor, v in MIN_KIND_FOR_NODE_MINOR.items() if node_version[1] >= minor),
            default=None,
        )
        if needed is not None and version < needed:
            return Check(
                "kind",
                False,
                f"kind v{'.'.join(map(str, version))} cannot create Kubernetes"
                f" {'.'.join(map(str, node_version))} clusters",
                f"install kind v{'.'.join(map(str, needed))} or newer",
            )
    return Check("kind", True, f"kind v{'.'.join(map(str, version))} at {path}")


# --- putting it together -----------------------------------------------------------------------

def _read(path: str) -> str | None:
    try:
        return Path(path).read_text()
    except OSError:
        return None


def kind_host_checks(kind_bin: str, node_version: tuple[int, int, int] | None, clusters: int) -> list[Check]:
    """Everything a kind run needs from the host, all checked so the user sees every gap at once."""
    return [
        check_docker(),
        check_kind(kind_bin, node_version),
        check_swap(_read("/proc/swaps") or ""),
        check_cgroup_v2(_read("/proc/self/mounts") or "", _read("/sys/fs/cgroup/cgroup.controllers")),
        check_noswap(os.uname().release, probe_tmpfs_noswap),
        check_memory(_read("/proc/meminfo") or "", clusters * MEMORY_PER_KIND_CLUSTER),
    ]
