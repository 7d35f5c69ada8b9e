"""Host preflight: each probe for real on this machine, and with injected contents for the rest."""

from __future__ import annotations

import os
import json
import subprocess
from pathlib import Path

import pytest

from clusters import kind_config, preflight, versions
from clusters.checks import PreflightError, require

HEADER = "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n"
CGROUP2_MOUNTS = "cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid,nodev,noexec,relatime 0 0\n"
V1_MOUNTS = "tmpfs /sys/fs/cgroup tmpfs rw 0 0\ncgroup /sys/fs/cgroup/memory cgroup rw,memory 0 0\n"


# --- real readings of this host ------------------------------------------------------------------

def test_swap_check_agrees_with_swapon() -> None:
    # Independent reading: swapon --show prints nothing when no swap is active.
    active = subprocess.run(["swapon", "--show", "--noheadings"], capture_output=True, text=True).stdout.strip()
    check = preflight.check_swap(Path("/proc/swaps").read_text())
    assert check.ok is bool(active)
    if not check.ok:
        assert "fallocate" in check.remedy and "swapon /swapfile" in check.remedy


def test_cgroup_check_agrees_with_filesystem_type() -> None:
    fstype = subprocess.run(["stat", "-fc", "%T", "/sys/fs/cgroup"], capture_output=True, text=True).stdout.strip()
    controllers = Path("/sys/fs/cgroup/cgroup.controllers")
    check = preflight.check_cgroup_v2(
        Path("/proc/self/mounts").read_text(), controllers.read_text() if controllers.exists() else None
    )
    assert check.ok is (fstype == "cgroup2fs" and "memory" in controllers.read_text().split())
    if not check.ok:
        assert "systemd.unified_cgroup_hierarchy=1" in check.remedy


@pytest.mark.skipif(os.geteuid() != 0, reason="a tmpfs mount needs root (CAP_SYS_ADMIN in the init user namespace)")
def test_noswap_probe_mounts_for_real() -> None:
    # This host's kernel (>= 6.4) accepts noswap; the probe must say so and leave no mount behind.
    release = os.uname().release
    result = preflight.probe_tmpfs_noswap()
    major, minor = (int(x) for x in release.split(".")[:2])
    if (major, minor) >= (6, 4):
        assert result is True
    assert "ksc-noswap-probe-" not in Path("/proc/self/mounts").read_text()
    check = preflight.check_noswap("6.1.0-probe", preflight.probe_tmpfs_noswap)
    assert check.ok is result


def test_memory_check_reads_meminfo() -> None:
    meminfo = Path("/proc/meminfo").read_text()
    available = preflight.mem_available(meminfo)
    assert preflight.check_memory(meminfo, available).ok
    assert not preflight.check_memory(meminfo, available + 1).ok


# --- injected contents ---------------------------------------------------------------------------

def test_swap_present() -> None:
    check = preflight.check_swap(HEADER + "/swapfile\tfile\t4194300\t0\t-2\n/dev/zram0 partition 1048576 0 100\n")
    assert check.ok and "5119 MiB" in check.detail
    assert preflight.swap_total_from_proc_swaps(HEADER) == 0


def test_cgroup_v2_with_memory() -> None:
    assert preflight.check_cgroup_v2(CGROUP2_MOUNTS, "cpuset cpu io memory pids").ok


def test_cgroup_v2_without_memory_controller() -> None:
    check = preflight.check_cgroup_v2(CGROUP2_MOUNTS, "cpuset cpu io pids")
    assert not check.ok and "memory controller" in check.detail


def test_cgroup_v1() -> None:
    check = preflight.check_cgroup_v2(V1_MOUNTS, None)
    assert not check.ok and "v1" in check.detail


def test_noswap_by_kernel_version_without_probe() -> None:
    def must_not_probe() -> bool:
        raise AssertionError("kernels >= 6.4 need no probe")

    assert preflight.check_noswap("6.12.48+deb12-amd64", must_not_probe).ok


@pytest.mark.parametrize(("probe", "text"), [(True, "supported (probe mount"),
                                             (False, "PossibleMemoryBackedVolumesOnDisk"),
                                             (None, "could not be probed")])
def test_noswap_old_kernel_is_informational(probe: bool | None, text: str) -> None:
    # An old kernel is not a missing prerequisite: the volume tests then expect the warning.
    check = preflight.check_noswap("6.1.0-40-amd64", lambda: probe)
    assert check.ok and text in check.detail


def fake_run(returncode: int, stdout: str = "", stderr: str = ""):
    def run(argv, **kwargs):
        return subprocess.CompletedProcess(argv, returncode, stdout, stderr)

    return run


def test_docker_unreachable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(preflight.shutil, "which", lambda name: "/usr/bin/docker")
    check = preflight.check_docker(fake_run(1, stderr="Cannot connect to the Docker daemon at unix:///var/run/docker.sock"))
    assert not check.ok and "Cannot connect" in check.detail and "systemctl start docker" in check.remedy


def docker_info(**fields: object) -> str:
    info = {"ServerVersion": "28.2.2", "CgroupVersion": "2", "KernelVersion": "6.12.0", "MemTotal": 8 << 30,
            "Name": "h", **fields}
    return json.dumps(info) + "\n"


def test_docker_cgroup_v1_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(preflight.shutil, "which", lambda name: "/usr/bin/docker")
    check = preflight.check_docker(fake_run(0, stdout=docker_info(CgroupVersion="1")))
    assert not check.ok and "cgroup v1" in check.detail


def test_docker_ok(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(preflight.shutil, "which", lambda name: "/usr/bin/docker")
    check = preflight.check_docker(fake_run(0, stdout=docker_info()))
    assert check.ok and check.detail == "Docker 28.2.2, cgroup v2", check


@pytest.mark.parametrize(("stdout", "said"), [
    # what the docker CLI prints, exit 0, when an HTML page answers for the engine
    (docker_info(ServerVersion="", CgroupVersion="", KernelVersion="", MemTotal=0), "ServerVersion is empty"),
    ("", "not its JSON"), ("<html>router login</html>", "not its JSON"), ("[]", "must be a mapping, got list"),
    (docker_info(MemTotal=0), "MemTotal"),
])
def test_an_answer_that_is_no_docker_engine_is_refused(monkeypatch: pytest.MonkeyPatch, stdout: str, said: str) -> None:
    monkeypatch.setattr(preflight.shutil, "which", lambda name: "/usr/bin/docker")
    monkeypatch.setenv("DOCKER_HOST", "tcp://127.0.0.1:2375")
    check = preflight.check_docker(fake_run(0, stdout=stdout, stderr="Error reading remote info: invalid character '<'"))
    assert not check.ok and check.detail.startswith("DOCKER_HOST=tcp://127.0.0.1:2375 does not answer like a Docker"
                                                    " engine"), check
    assert said in check.detail and "DOCKER_HOST" in check.remedy, check
    assert preflight.docker_host(fake_run(0, stdout=stdout)) is None


@pytest.mark.parametrize("stdout", ["", "kind version 0.33\n", "kind v0.33.0\n", "<html>\n",
                                    "kind v0.33.0 go1.26 linux/amd64\nkind v0.40.0 go1.26 linux/amd64\n"])
def test_an_answer_that_is_no_kind_version_is_refused(monkeypatch: pytest.MonkeyPatch, stdout: str) -> None:
    monkeypatch.setattr(preflight.shutil, "which", lambda name: "/usr/bin/kind")
    check = preflight.check_kind("kind", None, fake_run(0, stdout=stdout))
    assert not check.ok and "not kind's version line" in check.detail, check


def test_docker_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(preflight.shutil, "which", lambda name: None)
    check = preflight.check_docker()
    assert not check.ok and "not on PATH" in check.detail


def test_kind_missing() -> None:
    check = preflight.check_kind("definitely-not-kind-ksc", None)
    assert not check.ok and "go install sigs.k8s.io/kind@" in check.remedy


def test_kind_older_than_the_pin_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(preflight.shutil, "which", lambda name: "/usr/bin/kind")
    old = fake_run(0, stdout="kind v0.32.0 go1.25.1 linux/amd64\n")
    for node in (None, (1, 36, 1), (1, 37, 0)):
        check = preflight.check_kind("kind", node, old)
        assert not check.ok and "older than v0.33.0" in check.detail and "kind@v0.33.0" in check.remedy
    assert preflight.check_kind("kind", (1, 37, 1), fake_run(0, stdout="kind v0.33.0 go1.26 linux/amd64\n")).ok


def test_kind_version_hanging_is_a_failed_check(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(preflight.shutil, "which", lambda name: "/usr/bin/kind")

    def hangs(argv, **kwargs):
        raise subprocess.TimeoutExpired(argv, kwargs.get("timeout", 30))

    check = preflight.check_kind("kind", None, hangs)
    assert not check.ok and "did not answer" in check.detail


def test_meminfo_without_memavailable_is_a_failed_check() -> None:
    check = preflight.check_memory("MemTotal:  1024 kB\n", 1)
    assert not check.ok and "MemAvailable" in check.detail


REMOTE = preflight.DockerHost("ksc-kind-host", "6.12.57+deb12-amd64", "2", 8 << 30, "tcp://127.0.0.1:40000")
SWAPS = HEADER + "/swapfile file 4194300 0 -2\n"
MEMINFO = "MemTotal: 8000000 kB\nMemAvailable: 7000000 kB\n"


def test_remote_docker_host_is_checked_through_docker() -> None:
    clusters = ["ksc-noswap", "ksc-limitedswap"]
    checks = {c.name: c for c in preflight.remote_host_checks(REMOTE, (SWAPS, MEMINFO), clusters,
                                                              {"ksc-noswap": 40001, "ksc-limitedswap": 40002}, "img")}
    assert all(c.ok for c in checks.values()), checks
    assert "not this machine" in checks["docker host"].detail
    assert "4095 MiB" in checks["swap"].detail and "6.7 GiB available" in checks["free memory"].detail
    assert "127.0.0.1:40002" in checks["API server ports"].detail


def test_remote_docker_host_without_swap_or_ports_fails() -> None:
    checks = {c.name: c for c in preflight.remote_host_checks(REMOTE, (HEADER, MEMINFO), ["ksc-limitedswap"], {}, "img")}
    assert not checks["swap"].ok and not checks["API server ports"].ok
    assert "KSC_KIND_API_PORTS" in checks["API server ports"].remedy and "kind-host up" in checks["API server ports"].remedy


def test_remote_docker_host_unreadable_before_creation_is_deferred() -> None:
    checks = {c.name: c for c in preflight.remote_host_checks(REMOTE, None, ["ksc-noswap"], {"ksc-noswap": 1}, None)}
    assert checks["swap"].ok and "checked after creation" in checks["swap"].detail


def test_a_local_socket_needs_no_port_map() -> None:
    local = preflight.DockerHost("laptop-vm", "6.8.0", "2", 4 << 30, "")
    assert preflight.check_api_ports(local, ["ksc-noswap"], {}).ok


def test_real_docker_and_kind_if_present() -> None:
    # On this machine the docker CLI exists; whether an engine answers decides the result,
    # and the check must agree with `docker info` itself.
    if preflight.shutil.which("docker") is None:
        pytest.skip("no docker CLI on this host")
    info = subprocess.run(["docker", "info", "--format", "{{.CgroupVersion}}"], capture_output=True, text=True, timeout=30)
    check = preflight.check_docker()
    assert check.ok is (info.returncode == 0 and info.stdout.strip() == "2")


def test_preflight_error_lists_every_check() -> None:
    listed = [preflight.check_swap(HEADER), preflight.check_cgroup_v2(CGROUP2_MOUNTS, "memory")]
    with pytest.raises(PreflightError) as raised:
        require(listed)
    text = str(raised.value)
    assert "1 of 2 checks" in text and "[FAIL] swap" in text and "[ok  ] cgroup v2" in text and "fix: " in text


def docker_says(inspect: int, pull: int = 0, pull_error: str = "", kind_version: str | None = None,
                read_error: str = "cat: /kind/version: No such file or directory"):
    calls = []

    def run(argv, **kwargs):
        calls.append(argv[:2])
        if argv[:3] == ["docker", "image", "inspect"]:
            return subprocess.CompletedProcess(argv, inspect, "", "")
        if argv[:2] == ["docker", "pull"]:
            return subprocess.CompletedProcess(argv, pull, "", pull_error)
        if argv[:2] == ["docker", "run"]:
            # a throwaway container, as kind runs its nodes (unconfined), without a network
            assert argv[2:9] == ["--rm", "--network", "none", "--security-opt", "apparmor=unconfined", "--entrypoint",
                                 "cat"] and argv[10:] == ["/kind/version"], argv
            if kind_version is None:
                return subprocess.CompletedProcess(argv, 1, "", read_error)
            return subprocess.CompletedProcess(argv, 0, kind_version + "\n", "")
        raise AssertionError(argv)

    run.calls = calls  # type: ignore[attr-defined]
    return run


@pytest.mark.parametrize(("image", "version", "text"), [
    ("Not An Image", None, "is not an image reference"),
    ("ksc/x:", None, "is not an image reference"),
    ("kindest/node:v1.27.3", (1, 27, 3), "kindest/node:v1.27.3 is Kubernetes 1.27: the suite supports Kubernetes 1.34"
                                         " to 1.37 only"),
    ("kindest/node:v1.33.9", (1, 33, 9), "is Kubernetes 1.33: the suite supports Kubernetes 1.34 to 1.37 only"),
    ("kindest/node:v1.38.0", (1, 38, 0), "is Kubernetes 1.38: the suite supports Kubernetes 1.34 to 1.37 only"),
])
def test_unusable_node_images_are_refused_before_anything_is_created(image: str, version, text: str) -> None:
    run = docker_says(inspect=0)
    check = preflight.check_node_image(image, version, run)
    assert not check.ok and text in check.detail
    assert run.calls == []  # refused on its face: Docker was not even asked


def test_a_node_image_docker_can_neither_find_nor_pull_is_refused() -> None:
    run = docker_says(inspect=1, pull=1, pull_error="Error response from daemon: pull access denied for not-an-image")
    check = preflight.check_node_image("not-an-image", None, run)
    assert not check.ok and "cannot be pulled: Error response from daemon: pull access denied" in check.detail
    assert "kind-host up" in check.remedy


def test_a_present_or_pullable_node_image_passes() -> None:
    assert preflight.check_node_image("kindest/node:v1.37.0", (1, 37, 0), docker_says(inspect=0)).ok
    pulled = docker_says(inspect=1, pull=0)
    assert preflight.check_node_image("kindest/node:v1.37.0", (1, 37, 0), pulled).ok and ["docker", "pull"] in pulled.calls
    assert preflight.check_node_image(None, None, docker_says(inspect=1)).ok  # kind's default: kind pulls it
    assert ["docker", "run"] not in pulled.calls, "a tag that names the release is believed"


@pytest.mark.parametrize("image", ["kindest/node:latest", "registry.example/node@sha256:" + "ab" * 32, "ksc/node"])
def test_a_node_image_whose_tag_names_no_release_is_judged_by_its_kind_version(image: str) -> None:
    """`kind build node-image` tags kindest/node:latest: the tag cannot say the release, the image's
    /kind/version does (read in a container removed at once)."""
    assert kind_config.image_version(image) is None
    old = preflight.check_node_image(image, None, docker_says(inspect=0, kind_version="v1.33.1"))
    assert not old.ok
    assert old.detail == (f"{image} (its /kind/version: v1.33.1) is Kubernetes 1.33: the suite supports Kubernetes"
                          f" {versions.SUPPORTED_RANGE} only (clusters/versions.py SUPPORTED)")
    assert "node-image --k8s-version" in old.remedy
    newer = versions.next_minor(max(versions.SUPPORTED, key=versions.minor_of))
    assert not preflight.check_node_image(image, None, docker_says(inspect=0, kind_version=f"v{newer}.0")).ok
    supported = docker_says(inspect=1, kind_version="v1.36.5")
    check = preflight.check_node_image(image, None, supported)
    assert check.ok and check.detail == f"{image} pulled, Kubernetes v1.36.5 (its /kind/version)"
    assert supported.calls == [["docker", "image"], ["docker", "pull"], ["docker", "run"]]


def test_docker_s_own_error_is_said_not_its_help_hint() -> None:
    said = ("docker: Error response from daemon: failed to create task: exec: \"cat\": executable file not found"
            " in $PATH\nRun 'docker run --help' for more information")
    check = preflight.check_node_image("ksc/scratch", None, docker_says(inspect=0, read_error=said))
    assert not check.ok and "(docker: Error response from daemon: failed to create task" in check.detail
    assert "--help" not in check.detail


def test_an_image_without_a_release_in_its_tag_or_a_kind_version_is_refused() -> None:
    check = preflight.check_node_image("busybox:latest", None, docker_says(inspect=0))
    assert not check.ok
    assert check.detail == ("busybox:latest's tag names no Kubernetes version, and its /kind/version cannot be read"
                            " (cat: /kind/version: No such file or directory): it is not a kind node image the suite"
                            " can place")
    assert "kindest/node:v1." in check.remedy
