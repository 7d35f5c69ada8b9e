"""Host checks before the suite creates anything: each failing check says exactly what to do.

Every check is a pure function of what it reads (file contents, a command's result), so each
can be tested for real on this machine and with injected contents for the other cases.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from clusters import commands, diskspace, inputs, versions
from clusters.checks import Check
from clusters.kernel import kernel_supports_noswap
from workloads.cache import CACHE_VARIABLES, writable_cache_root

GiB = diskspace.GiB
# A kind cluster of one control plane and one worker, idle, takes about 1.2 GiB; the stress
# workloads take what they are told. Asking for this much per cluster keeps the host out of
# its own memory pressure, which would evict our test pods for reasons we do not test.
MEMORY_PER_KIND_NODE = GiB  # a kind node container (kubelet, containerd, its pods at rest)

SWAPFILE_COMMANDS = (
    "sudo fallocate -l 4G /swapfile && sudo chmod 600 /swapfile && "
    "sudo mkswap /swapfile && sudo swapon /swapfile"
)


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
        if result is None:  # informational: the volume tests read support from the nodes
            return Check("tmpfs noswap", True, f"kernel {kernel_release} is older than 6.4 and could not be"
                         " probed here (needs root on the Docker host): the tests read noswap support"
                         " from the nodes' mounts")
        supported = kernel_supports_noswap(kernel_release, result)
        how = "probe mount"
    if supported:
        return Check("tmpfs noswap", True, f"supported ({how}, kernel {kernel_release})")
    # Informational: on such a kernel the kubelet mounts without noswap and warns, and the
    # suite's volume tests expect exactly that instead.
    return Check(
        "tmpfs noswap",
        True,
        f"not supported by kernel {kernel_release} ({how}): the suite expects memory-backed volumes"
        " without `noswap` and the PossibleMemoryBackedVolumesOnDisk node warning",
    )


# --- memory ------------------------------------------------------------------------------------

def mem_available(meminfo: str) -> int:
    match = re.search(r"^MemAvailable:\s+(\d+) kB", meminfo, re.MULTILINE)
    if not match:
        raise ValueError("/proc/meminfo has no MemAvailable line")
    return int(match.group(1)) * 1024


def check_memory(meminfo: str, required: int) -> Check:
    try:
        available = mem_available(meminfo)
    except ValueError as error:
        return Check("free memory", False, str(error), "use a Linux kernel >= 3.14 (MemAvailable)")
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


def check_docker(run: Runner = commands.run) -> Check:
    if shutil.which("docker") is None:
        return Check(
            "docker",
            False,
            "the docker CLI is not on PATH",
            "install Docker Engine (https://docs.docker.com/engine/install/) or use --provider vm",
        )
    try:
        result = run(["docker", "info", "--format", "{{json .}}"], capture_output=True, text=True, timeout=30)
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
    # The docker CLI prints its info JSON, emptied, and exits 0 whatever answered (an HTML page, a
    # proxy): the answer is a typed record (clusters/inputs.py DockerInfo) that refuses that.
    try:
        info = inputs.docker_info(result.stdout)
    except inputs.NotAnEngine as error:
        said = (result.stderr or "").strip().splitlines()
        return Check("docker", False, str(error) + (f" ({said[-1]})" if said else ""),
                     "point DOCKER_HOST at a Docker engine, or unset it for the local one (the kind host's:"
                     " eval \"$(python -m clusters.vm kind-host env)\")")
    if info.CgroupVersion == "1":
        return Check(
            "docker",
            False,
            f"Docker {info.ServerVersion} runs with cgroup v1: kind nodes would be cgroup v1, where the"
            " kubelet refuses LimitedSwap",
            "run Docker on a cgroup v2 host (see the cgroup v2 check)",
        )
    return Check("docker", True, f"Docker {info.ServerVersion}, cgroup v{info.CgroupVersion}")


# The kind release the suite is proven with (clusters/versions.py); older ones are refused.
MIN_KIND = tuple(int(x) for x in versions.KIND.lstrip("v").split("."))
# kubeadm 1.37 refuses the v1beta3 config API that older kind releases write.
MIN_KIND_FOR_NODE_MINOR = {37: (0, 33, 0)}
KIND_INSTALL = f"go install sigs.k8s.io/kind@{versions.KIND}"


KIND_VERSION_SECONDS = 30


def kind_binary_problem(kind_bin: str) -> str | None:
    """What is wrong with --kind-bin as a file, before running it: a path that does not exist, is
    a directory or is not executable, or a name PATH does not have; None when it can run."""
    if os.sep not in kind_bin:
        named = "kind" if kind_bin == "kind" else f"--kind-bin {kind_bin!r}"
        return None if shutil.which(kind_bin) else f"{named} is not on PATH"
    path = Path(kind_bin)
    if path.is_dir():
        return f"--kind-bin {kind_bin} is a directory, not the kind binary"
    if not path.exists():
        return f"--kind-bin {kind_bin} does not exist"
    if not os.access(path, os.X_OK):
        return f"--kind-bin {kind_bin} is not executable (mode {path.stat().st_mode & 0o777:o})"
    return None


def kind_remedy(kind_bin: str) -> str:
    if os.sep in kind_bin and Path(kind_bin).is_file():
        return f"make it executable (chmod +x {kind_bin}), or reinstall kind: {KIND_INSTALL}"
    return (f"install it: {KIND_INSTALL} (then put $(go env GOPATH)/bin first on PATH), or pass"
            " --kind-bin /path/to/kind")


def check_kind(kind_bin: str, node_version: tuple[int, int, int] | None, run: Runner = commands.run) -> Check:
    problem = kind_binary_problem(kind_bin)
    if problem is not None:
        return Check("kind", False, problem, kind_remedy(kind_bin))
    path = shutil.which(kind_bin) or kind_bin
    try:
        # its own process group: a kind that hangs is killed with whatever it started
        result = run([path, "version"], capture_output=True, text=True, timeout=KIND_VERSION_SECONDS)
    except subprocess.TimeoutExpired:
        return Check("kind", False, f"`{path} version` did not answer in {KIND_VERSION_SECONDS} s",
                     f"reinstall kind: {KIND_INSTALL}")
    # its one line, as a typed record: anything else (nothing, a wrapper's banner, another
    # program's version) is not kind
    said = inputs.kind_version(result.stdout) if result.returncode == 0 else None
    if said is None:
        what = (result.stderr.strip() or result.stdout.strip()).splitlines()[-1:] or ["nothing"]
        how = "failed" if result.returncode != 0 else "said"
        return Check("kind", False, f"`{path} version` {how}: {what[0][:200]}"
                     + ("" if result.returncode != 0 else ", not kind's version line (kind vX.Y.Z goX linux/ARCH)"),
                     f"reinstall kind: {KIND_INSTALL}")
    version = said.version
    if version < MIN_KIND:
        return Check("kind", False, f"kind v{'.'.join(map(str, version))} at {path} is older than {versions.KIND},"
                     " the release this suite is proven with", f"{KIND_INSTALL}, and put it first on PATH")
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


# --- the Docker host: kind's nodes share its kernel, memory and swap -------------------------

@dataclass(frozen=True)
class DockerHost:
    """What the Docker engine says about the machine it runs on."""

    name: str
    kernel: str
    cgroup_version: str
    mem_total: int
    endpoint: str  # $DOCKER_HOST, "" for the default socket

    def is_this_machine(self) -> bool:
        return self.kernel == os.uname().release and self.name == socket.gethostname()

    def remote_api(self) -> bool:
        """Ports kind publishes on this Docker host's loopback are not this machine's."""
        return self.endpoint.startswith(("tcp://", "ssh://"))


def docker_host(run: Runner = commands.run) -> DockerHost | None:
    try:
        result = run(["docker", "info", "--format", "{{json .}}"], capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        return None
    if result.returncode != 0:
        return None
    try:
        info = inputs.docker_info(result.stdout)
    except inputs.NotAnEngine:
        return None
    return DockerHost(info.Name, info.KernelVersion, info.CgroupVersion, info.MemTotal, os.environ.get("DOCKER_HOST", ""))


def cat_in_image(image: str, paths: Sequence[str], run: Runner = commands.run) -> subprocess.CompletedProcess:
    """``cat`` of ``paths`` in a throwaway container of ``image``: no network, removed at once."""
    # unconfined, as kind runs its nodes: a host with AppArmor on but no parser refuses the default
    return run(["docker", "run", "--rm", "--network", "none", "--security-opt", "apparmor=unconfined",
                "--entrypoint", "cat", image, *paths], capture_output=True, text=True, timeout=300)


def read_docker_host_files(image: str, run: Runner = commands.run) -> tuple[str, str] | None:
    """(/proc/swaps, /proc/meminfo) of the Docker host, read in a throwaway container of
    ``image`` (neither file is namespaced); None when the image is not on the Docker host."""
    if run(["docker", "image", "inspect", image], capture_output=True, text=True, timeout=60).returncode != 0:
        return None
    result = cat_in_image(image, ["/proc/swaps", "/proc/meminfo"], run)
    if result.returncode != 0 or "MemTotal:" not in result.stdout:
        return None
    swaps, _, rest = result.stdout.partition("MemTotal:")
    return swaps, "MemTotal:" + rest


def check_api_ports(host: DockerHost, clusters: Sequence[str], api_ports: Mapping[str, int]) -> Check:
    if not host.remote_api():
        return Check("API server ports", True, "kind publishes API servers on this machine's loopback")
    missing = [c for c in clusters if c not in api_ports]
    if not missing:
        return Check("API server ports", True, ", ".join(f"{c} on 127.0.0.1:{api_ports[c]}" for c in clusters))
    return Check(
        "API server ports",
        False,
        f"the Docker engine is at {host.endpoint}: kind publishes each API server on that host's"
        f" 127.0.0.1, which this machine cannot reach, and no port is named for {', '.join(missing)}",
        "forward one port per cluster from this machine's 127.0.0.1 to the same port on the Docker"
        " host and name them: KSC_KIND_API_PORTS=ksc-noswap=PORT,ksc-limitedswap=PORT (the kind host"
        " VM does both: eval \"$(python -m clusters.vm kind-host up)\")",
    )


def remote_host_checks(host: DockerHost, files: tuple[str, str] | None, clusters: Sequence[str],
                       api_ports: Mapping[str, int], node_image: str | None, nodes: int = 2) -> list[Check]:
    """The checks of a Docker host that is not this machine, from what Docker and a container say."""
    where = Check("docker host", True, f"{host.name} (kernel {host.kernel}, {host.mem_total / GiB:.1f} GiB):"
                  " not this machine; its swap, memory and kernel are what the kind nodes get")
    if files is None:
        unknown = ("not readable before creating clusters (the node image "
                   f"{node_image or 'kind picks'} is not on the Docker host yet); every node's swap"
                   " capacity is checked after creation")
        swap, memory = Check("swap", True, unknown), Check("free memory", True, unknown)
    else:
        swap = check_swap(files[0])
        memory = check_memory(files[1], nodes * MEMORY_PER_KIND_NODE)
    return [where, swap, memory, check_noswap(host.kernel, lambda: None), check_api_ports(host, clusters, api_ports)]


# --- the cache directory -----------------------------------------------------------------------

def check_cache_dir() -> Check:
    """Writable, with room for what a run may write there (diskspace.MIN_FREE_BYTES)."""
    try:
        root = writable_cache_root()
    except OSError as error:
        return Check("cache directory", False, error.strerror or str(error),
                     f"export KSC_CACHE_DIR=/a/writable/dir (it moves every cache; see {CACHE_VARIABLES})")
    lack = diskspace.problem(root, diskspace.MIN_FREE_BYTES)
    if lack:
        return Check("cache directory", False, *lack)
    return Check("cache directory", True, f"{root} ({diskspace.free_bytes(root) / GiB:.0f} GiB free)")


# --- the node image ----------------------------------------------------------------------------

# docker's reference grammar, simplified: [registry[:port]/]path[:tag][@sha256:hex]
_REFERENCE = re.compile(
    r"^(?:[a-z0-9.-]+(?::\d+)?/)?[a-z0-9]+(?:[._-][a-z0-9]+)*(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*"
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[a-f0-9]{64})?$")


def node_image_refusal(image: str, version: tuple[int, int, int] | None) -> Check | None:
    """What is wrong with a --node-image by its name alone (the reference, the Kubernetes version
    in its tag), without asking Docker; None when nothing is."""
    if not _REFERENCE.match(image):
        return Check("node image", False, f"{image!r} is not an image reference",
                     "pass --node-image REPOSITORY:TAG, e.g. kindest/node:v1.37.0")
    refused = versions.out_of_range(image, version) if version is not None else None
    return Check("node image", False, refused, _OUT_OF_RANGE_FIX) if refused else None


_OUT_OF_RANGE_FIX = (f"use a node image of Kubernetes {versions.SUPPORTED_RANGE} (clusters/kind/node-images.yaml pins"
                     " kind's, one per supported minor), or build one of a supported release: python -m clusters.vm"
                     f" node-image --k8s-version {versions.SUPPORTED[max(versions.SUPPORTED, key=versions.minor_of)]}")


def check_node_image(image: str | None, version: tuple[int, int, int] | None, run: Runner = commands.run) -> Check:
    """A --node-image that kind could not use is refused before any cluster exists: a malformed
    reference, a Kubernetes outside the supported range, or an image Docker can neither find nor
    pull (pulled here, as kind would, so a missing image fails once and clearly). An image whose
    tag names no version (``kind build node-image``'s ``kindest/node:latest``, a digest) is judged
    by the release it carries, its ``/kind/version``."""
    if image is None:
        return Check("node image", True, "kind's default node image")
    refused = node_image_refusal(image, version)
    if refused is not None:
        return refused
    try:
        if run(["docker", "image", "inspect", image], capture_output=True, text=True, timeout=60).returncode == 0:
            found = f"{image} is on the Docker host"
        else:
            pulled = run(["docker", "pull", image], capture_output=True, text=True, timeout=1800)
            if pulled.returncode != 0:
                last = (pulled.stderr or pulled.stdout).strip().splitlines()[-1:] or [""]
                return Check("node image", False, f"{image} is not on the Docker host and cannot be pulled: {last[0]}",
                             "check the name, or build and load the local one: eval \"$(python -m clusters.vm kind-host"
                             " up)\"")
            found = f"{image} pulled"
    except subprocess.TimeoutExpired:
        return Check("node image", False, f"pulling {image} did not finish in 30 min", "pull it by hand: docker pull " + image)
    if version is not None:
        return Check("node image", True, found)
    return _carried_release(image, found, run)


def _carried_release(image: str, found: str, run: Runner) -> Check:
    """The release a kind node image carries (kind writes it to /kind/version when it builds one),
    read in a container removed at once, for an image whose tag does not say it."""
    try:
        read = cat_in_image(image, ["/kind/version"], run)
    except subprocess.TimeoutExpired:
        read = subprocess.CompletedProcess([], 1, "", "reading /kind/version did not finish in 5 min")
    carried = read.stdout.strip() if read.returncode == 0 else ""
    if versions.minor_of(carried) is None:
        said = _first_error(read.stderr or read.stdout)
        return Check("node image", False,
                     f"{image}'s tag names no Kubernetes version, and its /kind/version cannot be read"
                     + (f" ({said})" if said else "") + ": it is not a kind node image the suite can place",
                     "pass a kind node image tagged with its release, e.g. kindest/node:v1.37.2, or build one: python"
                     f" -m clusters.vm node-image --k8s-version {versions.KUBERNETES}")
    refused = versions.out_of_range(f"{image} (its /kind/version: {carried})", carried)
    if refused:
        return Check("node image", False, refused, _OUT_OF_RANGE_FIX)
    return Check("node image", True, f"{found}, Kubernetes {carried} (its /kind/version)")


def _first_error(output: str) -> str:
    """The line that says what went wrong: docker's own ("docker: Error response ..."), not the
    "Run 'docker run --help'" that follows it; else the first line."""
    lines = [line.strip() for line in output.strip().splitlines() if line.strip()]
    return next((line for line in lines if line.startswith("docker:")), lines[0] if lines else "")


# --- putting it together -----------------------------------------------------------------------

def _read(path: str) -> str | None:
    try:
        return Path(path).read_text()
    except OSError:
        return None


def kind_host_checks(kind_bin: str, node_version: tuple[int, int, int] | None, clusters: Sequence[str],
                     node_image: str | None = None, api_ports: Mapping[str, int] | None = None,
                     nodes: int = 2) -> list[Check]:
    """Everything a kind run needs from the host, all checked so the user sees every gap at once.

    The host is the Docker host: this machine when the engine runs here, otherwise whatever
    Docker reaches (a VM, a remote engine), read through Docker itself."""
    docker = check_docker()
    kind = check_kind(kind_bin, node_version)
    image = check_node_image(node_image, node_version) if docker.ok else Check(
        "node image", False, "not checked: no Docker engine", "see the docker check")
    host = docker_host() if docker.ok else None
    if host is not None and not host.is_this_machine():
        files = read_docker_host_files(node_image) if node_image and image.ok else None
        return [docker, kind, image, check_cache_dir(),
                *remote_host_checks(host, files, clusters, api_ports or {}, node_image, nodes)]
    return [
        docker,
        kind,
        image,
        check_cache_dir(),
        check_swap(_read("/proc/swaps") or ""),
        check_cgroup_v2(_read("/proc/self/mounts") or "", _read("/sys/fs/cgroup/cgroup.controllers")),
        check_noswap(os.uname().release, probe_tmpfs_noswap),
        check_memory(_read("/proc/meminfo") or "", nodes * MEMORY_PER_KIND_NODE),
    ]
