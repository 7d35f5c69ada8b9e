"""The kind provider starts the kind host VM itself where the local Docker cannot run swap-enabled
kind nodes and this machine can run the VM (clusters/kind_autohost.py), and never boots one here:
FakeKindHost (tests/fake_kind.py) stands in for the VM, a fake docker for the local engine and
the kind host's.

Whole runs of the suite (pytest in a subprocess, -n 2 where the variables must reach workers)
through the real kind provider, its preflight, ledger and teardown; then the decision's parts in
this process."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from clusters import kind_autohost, kind_install, kind_provider, versions
from clusters.checks import Check, PreflightError
from clusters.kind_autohost import KindHostError, KindHostVm, LocalDocker
from clusters.kind_provider import KindProvider
from clusters.preflight import DockerHost
from clusters.shared import created
from tests import fake_kind
from tests.fake_kind import HINT, KIND_HOST_ENV, FakeKindHost
from tests.suite_project import the_suite

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parent.parent
NEEDS_A_NODE = "def test_limited(limited_swap_node):\n    pass\n"
IMAGE = KIND_HOST_ENV["KSC_KIND_NODE_IMAGE"]


# --- whole runs -----------------------------------------------------------------------------------

@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.Pytester:
    """A run on a machine whose Docker runs cgroup v1 (the fake's local engine), with the fake
    kind host: auto on, no DOCKER_HOST or kind host variable inherited."""
    the_suite(pytester, monkeypatch, conftest_extra=fake_kind.KIND_HOST_PLUGIN, test_swap=NEEDS_A_NODE)
    fake_kind.install(tmp_path)
    for key, value in fake_kind.environment(tmp_path, FAKE_DOCKER_LOCAL="cgroup-v1").items():
        monkeypatch.setenv(key, value)
    for key in (kind_autohost.AUTO_VARIABLE, *KIND_HOST_ENV):
        monkeypatch.delenv(key, raising=False)
    return pytester


def run(suite: pytest.Pytester, *args: str) -> tuple[int, str]:
    result = suite.runpytest_subprocess("-p", "no:cacheprovider", *args)
    output = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in output and "INTERNALERROR" not in output, output
    return result.ret, output


def calls(tmp_path: Path) -> list[str]:
    """What the fake kind and kind host were asked, in order (the preflight's `kind version` aside)."""
    path = tmp_path / "kind-state" / "calls"
    return [line for line in path.read_text().splitlines() if line != "version"] if path.exists() else []


def test_started_for_the_run_reaches_its_workers_and_is_stopped_after_the_cluster(suite: pytest.Pytester,
                                                                                  tmp_path: Path) -> None:
    ret, output = run(suite, "-n", "2")
    assert ret == 1, output  # the fake cluster has no nodes: the test fails, the run goes on to its end
    assert ("kind: the local Docker cannot run swap-enabled kind nodes (cgroup v1" in output
            and "starting the kind host VM (about 20 min cold, 5 min cached)" in output), output
    done = calls(tmp_path)
    order = [next(i for i, line in enumerate(done) if line.startswith(what)) for what in
             ("kind-host up -", "create cluster --name ksc-mixed", "delete cluster --name ksc-mixed", "kind-host down")]
    assert order == sorted(order), done
    # the cluster was created by an xdist worker, which started before the kind host: it got its
    # DOCKER_HOST, ports, node image and host profile from the run
    created_with = [line for line in (tmp_path / "kind-state" / "env-calls").read_text().splitlines()
                    if " create cluster " in line]
    assert created_with and created_with[0].startswith(f"DOCKER_HOST={KIND_HOST_ENV['DOCKER_HOST']} "), created_with
    assert f"--image {IMAGE}" in created_with[0], created_with
    config = (tmp_path / "kind-state" / "created-config.yaml").read_text()
    assert "apiServerPort: 40001" in config and "GOMAXPROCS" in config, config
    assert "stopped the kind host VM this run started" in output, output
    assert not (tmp_path / "kind-state" / "kind-host.json").exists()
    assert fake_kind.clusters(tmp_path / "kind-state") == []


def test_kept_with_the_clusters_and_the_summary_says_how_to_reach_and_stop_it(suite: pytest.Pytester,
                                                                             tmp_path: Path) -> None:
    ret, output = run(suite, "--keep-clusters")
    assert ret == 1, output
    assert "kind-host up -" in calls(tmp_path) and "kind-host down" not in calls(tmp_path), calls(tmp_path)
    assert f"kept the kind host VM this run started (--keep-clusters): {HINT}" in output, output
    assert (tmp_path / "kind-state" / "kind-host.json").exists()


def test_a_kind_host_already_up_is_used_and_left_running(suite: pytest.Pytester, tmp_path: Path) -> None:
    (tmp_path / "kind-state" / "kind-host.json").write_text(json.dumps(KIND_HOST_ENV))
    ret, output = run(suite, "-n", "2")
    assert ret == 1, output
    assert "using the kind host VM that is already up (pid 4242 (fake)); the run leaves it running" in output, output
    assert not [line for line in calls(tmp_path) if line.startswith("kind-host")], calls(tmp_path)
    assert "delete cluster --name ksc-mixed" in calls(tmp_path)  # its cluster, made in the kind host, is deleted
    assert (tmp_path / "kind-state" / "kind-host.json").exists()


def test_a_machine_that_cannot_run_it_fails_the_preflight_with_one_install_line(suite: pytest.Pytester,
                                                                                 tmp_path: Path,
                                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_KIND_HOST_LACKS", "qemu-system-x86_64=qemu-system-x86,debootstrap=debootstrap")
    ret, output = run(suite)
    assert ret == 3, output
    assert "[FAIL] docker: Docker 20.10.24 runs with cgroup v1" in output, output  # today's message, still there
    assert ("[FAIL] kind host VM: the local Docker cannot run swap-enabled kind nodes (cgroup v1" in output
            and "this machine cannot start the kind host VM that would: qemu-system-x86_64, debootstrap" in output), output
    assert output.count("apt-get install") == 1, output
    assert "apt-get install -y qemu-system-x86 debootstrap (or run again with --install-host-packages)" in output
    assert calls(tmp_path) == [], "nothing may start or be created"
    assert not (tmp_path / "kind-state" / "apt-get").exists(), "nothing is installed without the option"


def test_install_host_packages_installs_what_it_lacks_then_starts_it(suite: pytest.Pytester, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_KIND_HOST_LACKS", "qemu-system-x86_64=qemu-system-x86,debootstrap=debootstrap")
    ret, output = run(suite, "--install-host-packages")
    assert ret == 1, output
    assert (tmp_path / "kind-state" / "apt-get").read_text().splitlines() == [
        "update", "install -y qemu-system-x86 debootstrap"]
    assert ("--install-host-packages: installing qemu-system-x86, debootstrap: apt-get update, then apt-get install -y"
            " qemu-system-x86 debootstrap") in output, output
    assert calls(tmp_path)[0] == "kind-host up -" and calls(tmp_path)[-1] == "kind-host down", calls(tmp_path)


def test_install_host_packages_is_refused_without_apt_get(suite: pytest.Pytester, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    bare = tmp_path / "no-apt"
    bare.mkdir()
    monkeypatch.setenv("PATH", str(bare))
    ret, output = run(suite, "--install-host-packages")
    assert ret == pytest.ExitCode.USAGE_ERROR, output
    assert "--install-host-packages installs Debian packages with apt-get, and this host has no apt-get on PATH" \
        in output, output
    assert calls(tmp_path) == []


def test_interrupted_while_it_boots_the_run_stops_it(suite: pytest.Pytester, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_KIND_HOST_BOOT", "hang")
    process = suite.popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", f"--rootdir={suite.path}"],
                          stdin=subprocess.DEVNULL,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    fake_kind.wait_for(tmp_path / "kind-state" / "kind-host-booting", process)
    process.send_signal(signal.SIGTERM)
    process.wait(timeout=180)
    output = process.stdout.read().decode(errors="replace") + process.stderr.read().decode(errors="replace")
    assert process.returncode == pytest.ExitCode.INTERRUPTED, output
    assert calls(tmp_path) == ["kind-host up -", "kind-host down"], output
    assert "stopped the kind host VM this run started" in output, output
    assert not (tmp_path / "kind-state" / "kind-host.json").exists()


def test_the_run_installs_a_missing_kind_with_go_and_uses_it(suite: pytest.Pytester, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    full = tmp_path / "kind-full"
    (tmp_path / "bin" / "kind").rename(full)  # no kind on PATH; what Go installs hands its work to the fake
    fake_kind.install_go(tmp_path / "bin")
    monkeypatch.setenv("FAKE_KIND_FULL", str(full))
    monkeypatch.delenv("FAKE_DOCKER_LOCAL")  # a kind-capable Docker: no kind host
    ret, output = run(suite)
    assert ret == 1, output
    installed = tmp_path / "cache" / "bin" / f"kind-{versions.KIND}" / "kind"
    assert (tmp_path / "kind-state" / "go").read_text().splitlines() == [
        f"GOBIN={installed.parent} install sigs.k8s.io/kind@{versions.KIND}"]
    assert f"installing kind {versions.KIND} with Go" in output, output
    done = calls(tmp_path)  # through the kind Go installed (the fake behind it logs them)
    assert [line.split(" --config")[0] for line in done if " cluster " in line] == [
        "create cluster --name ksc-mixed", "delete cluster --name ksc-mixed"], done
    assert not [line for line in done if line.startswith("kind-host")], done


# --- the decision, in this process ----------------------------------------------------------------

@pytest.fixture
def environ() -> Iterator[None]:
    """The provider sets the kind host's variables in os.environ, as for a run: undone after."""
    saved = dict(os.environ)
    for key in (kind_autohost.AUTO_VARIABLE, *KIND_HOST_ENV):
        os.environ.pop(key, None)
    yield
    os.environ.clear()
    os.environ.update(saved)


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> list[dict]:
    """kind_host_checks stubbed (all pass), recording what the provider asked it with; kind on PATH
    taken as good; the local Docker unable to run kind nodes (each test may say otherwise)."""
    seen: list[dict] = []

    def checks(kind_bin, node_version, clusters, node_image=None, api_ports=None, nodes=2):
        seen.append({"kind_bin": kind_bin, "node_image": node_image, "api_ports": dict(api_ports or {})})
        return [Check("docker", True, "stub"), Check("kind", True, "stub")]

    monkeypatch.setattr(kind_provider.preflight, "kind_host_checks", checks)
    monkeypatch.setattr(kind_install, "resolve", lambda kind_bin, *a, **kw: (kind_bin, None))
    monkeypatch.setattr(kind_autohost, "local_docker", lambda: LocalDocker(("cgroup v1", "no swap")))
    return seen


def fake_host(tmp_path: Path) -> FakeKindHost:
    (tmp_path / "kind-state").mkdir(exist_ok=True)
    return FakeKindHost(tmp_path / "kind-state")


def provider(tmp_path: Path, **kw) -> KindProvider:
    run_dir = tmp_path / "run"
    run_dir.mkdir(exist_ok=True)
    return KindProvider(kw.pop("kind_bin", "kind"), kw.pop("node_image", None), run_dir, reuse=False,
                        kind_host=fake_host(tmp_path), **kw)


def test_a_capable_local_docker_gets_no_kind_host(tmp_path: Path, environ: None, asked: list[dict],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kind_autohost, "local_docker", lambda: LocalDocker())
    assert provider(tmp_path).preflight(["LimitedSwap"]) is None
    assert calls(tmp_path) == [] and "DOCKER_HOST" not in os.environ


@pytest.mark.parametrize("why", ["DOCKER_HOST", "KSC_KIND_AUTO=off"])
def test_a_docker_host_given_or_auto_off_gets_no_kind_host(tmp_path: Path, environ: None, asked: list[dict],
                                                            why: str) -> None:
    name, _, value = why.partition("=")
    os.environ[name] = value or "tcp://127.0.0.1:2375"
    assert provider(tmp_path).preflight(["LimitedSwap"]) is None
    assert calls(tmp_path) == []


def test_started_its_variables_are_the_runs_and_a_worker_adopts_them(tmp_path: Path, environ: None,
                                                                     asked: list[dict]) -> None:
    owner = provider(tmp_path)
    decided = owner.preflight(["LimitedSwap"])
    assert calls(tmp_path) == ["kind-host up -"]
    assert {k: os.environ[k] for k in KIND_HOST_ENV} == KIND_HOST_ENV
    assert asked[-1]["node_image"] == IMAGE and asked[-1]["api_ports"]["ksc-mixed"] == 40001
    assert owner.node_image == IMAGE and owner.config_patch == Path(KIND_HOST_ENV["KSC_KIND_CONFIG_PATCH"])
    # the ledger: stopped at the end, after the clusters in it
    assert [e for e in created(owner.shared_root) if e.get("kind_host")], "not recorded for the run's teardown"
    # a worker, started before the kind host: nothing of it in its environment
    for key in KIND_HOST_ENV:
        os.environ.pop(key)
    worker = provider(tmp_path)
    worker.adopt(json.loads(json.dumps(decided)))  # as the run directory hands it over
    assert os.environ["DOCKER_HOST"] == KIND_HOST_ENV["DOCKER_HOST"]
    assert (worker.node_image, worker.api_ports, worker.config_patch) == (owner.node_image, owner.api_ports,
                                                                         owner.config_patch)


def test_teardown_deletes_the_cluster_then_stops_the_kind_host(tmp_path: Path, environ: None, asked: list[dict],
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    owner = provider(tmp_path)
    owner.preflight(["LimitedSwap"])
    monkeypatch.setattr(kind_provider, "delete_cluster",
                        lambda kind, cluster: fake_host(tmp_path)._log(f"delete {cluster}") or f"deleted {cluster}")
    ledger = [{"provider": "kind", "cluster": "ksc-mixed", "kind_bin": "kind"}, *created(tmp_path / "run")]
    assert owner.teardown(ledger) == ["deleted ksc-mixed", "stopped the kind host VM this run started"]
    assert calls(tmp_path) == ["kind-host up -", "delete ksc-mixed", "kind-host down"]


def test_node_image_and_host_profile_given_are_kept(tmp_path: Path, environ: None, asked: list[dict]) -> None:
    mine = tmp_path / "my-profile.yaml"
    mine.write_text((REPO / "clusters" / "kind" / "profiles" / "emulated-host.yaml").read_text())
    given = "localhost/kube-swap-conformance/kind-node:v1.36.3-0123456789ab"
    owner = provider(tmp_path, node_image=given, config_patch=mine)
    owner.preflight(["LimitedSwap"])
    assert calls(tmp_path) == [f"kind-host up {given}"]  # brought up with the image the run names
    assert owner.node_image == given and asked[-1]["node_image"] == given
    assert owner.config_patch == mine
    assert "KSC_KIND_CONFIG_PATCH" not in os.environ


def test_kind_that_fails_starts_nothing(tmp_path: Path, environ: None, asked: list[dict],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    failed = Check("kind", False, "'kind' is not on PATH, and Go is not on PATH to install kind with", "install Go")
    monkeypatch.setattr(kind_install, "resolve", lambda kind_bin, *a, **kw: (kind_bin, failed))
    with pytest.raises(PreflightError) as error:
        provider(tmp_path).preflight(["LimitedSwap"])
    assert failed in error.value.checks and calls(tmp_path) == []


def test_a_start_that_fails_is_one_preflight_line(tmp_path: Path, environ: None, asked: list[dict],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args, **kwargs):
        raise KindHostError("qemu exited during boot")

    host = fake_host(tmp_path)
    monkeypatch.setattr(host, "start", broken)
    owner = KindProvider("kind", None, tmp_path, reuse=False, kind_host=host)
    with pytest.raises(PreflightError, match="starting the kind host VM failed: KindHostError: qemu exited during boot"):
        owner.preflight(["LimitedSwap"])


# --- what the local Docker is ----------------------------------------------------------------------

V1_MOUNTS = "tmpfs /sys/fs/cgroup tmpfs ro 0 0\ncgroup /sys/fs/cgroup/memory cgroup rw,memory 0 0\n"
V2_MOUNTS = "cgroup2 /sys/fs/cgroup cgroup2 rw 0 0\n"
NO_SWAP = "Filename Type Size Used Priority\n"
SWAP = NO_SWAP + "/swapfile file 4194300 0 -2\n"


def files(mounts: str, swaps: str) -> dict[str, str]:
    return {"/proc/self/mounts": mounts, "/sys/fs/cgroup/cgroup.controllers": "cpu memory", "/proc/swaps": swaps}


def here() -> DockerHost:
    return DockerHost(socket.gethostname(), os.uname().release, "2", 1 << 34, "")


@pytest.mark.parametrize(("engine", "mounts", "swaps", "reasons"), [
    (Check("docker", True, "Docker 27, cgroup v2"), V2_MOUNTS, SWAP, ()),
    (Check("docker", False, "Docker 20.10 runs with cgroup v1: kind nodes would be cgroup v1"), V1_MOUNTS, NO_SWAP,
     ("cgroup v1", "no swap")),
    (Check("docker", False, "the Docker engine is not reachable: Cannot connect"), V2_MOUNTS, SWAP, ("no Docker engine",)),
    (Check("docker", False, "the docker CLI is not on PATH"), V1_MOUNTS, SWAP, ("no docker CLI", "cgroup v1")),
    (Check("docker", True, "Docker 27, cgroup v2"), V2_MOUNTS, NO_SWAP, ("no swap",)),
], ids=["capable", "cgroup-v1-no-swap", "no-engine", "no-cli", "no-swap"])
def test_the_local_docker(engine: Check, mounts: str, swaps: str, reasons: tuple[str, ...]) -> None:
    found = kind_autohost.local_docker(lambda: engine, here, files(mounts, swaps).get)
    assert found.reasons == reasons and found.capable == (not reasons)


def test_a_docker_engine_on_another_machine_is_not_judged_here() -> None:
    elsewhere = DockerHost("docker-desktop", "6.10.0-linuxkit", "2", 1 << 33, "")
    found = kind_autohost.local_docker(lambda: Check("docker", True, "ok"), lambda: elsewhere,
                                       files(V1_MOUNTS, NO_SWAP).get)
    assert found.capable


# --- the real kind host's part, without booting it ------------------------------------------------

def test_nothing_running_in_an_empty_state_dir(tmp_path: Path) -> None:
    assert KindHostVm(tmp_path / "state", tmp_path / "cache").running() is None


@pytest.fixture
def kind_host_qemu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[KindHostVm, Path]]:
    """A kind host as `kind-host up` leaves it in its state directory: its qemu running (the fake
    QEMU of tests/fake_qemu.py, nothing booted) and the state it saved right after starting it,
    before Docker answered. The test says how far it got."""
    from clusters.vm import qemu
    from clusters.vm.kindhost import KindHost, KindHostState
    from tests import fake_qemu

    fake_qemu.stand_in(monkeypatch, tmp_path / "bin")
    host = KindHost(tmp_path / "state", cache_dir=tmp_path / "cache", progress=lambda message: None)
    pid = fake_qemu.start_guest(host.paths, "ksc-kind-host")
    host.save_state(KindHostState(pid=pid, docker_port=2375, api_ports={"ksc-mixed": 40001}, kernel="6.12",
                                  kernel_release="6.12.0", memory_mb=8192, swap_mb=4096, cpus=2, accel="tcg",
                                  image_key="k", started_at=0.0))
    try:
        yield KindHostVm(tmp_path / "state", tmp_path / "cache"), tmp_path / "state"
    finally:
        qemu.stop_qemu(host.paths, timeout=5)


def _ready(state: Path, images: list[str]) -> None:
    st = json.loads((state / "state.json").read_text())
    (state / "state.json").write_text(json.dumps({**st, "ready_at": 1.0, "node_images": images}))


def test_a_kind_host_whose_up_ended_before_docker_answered_is_not_used(kind_host_qemu) -> None:
    vm, _ = kind_host_qemu
    assert vm.running() is None  # start() replaces it


def test_a_kind_host_another_command_is_still_starting_is_not_used(kind_host_qemu) -> None:
    """Docker answers while its node images still load: the run must not take its DOCKER_HOST then."""
    from tests.lock_holder import holding

    vm, state = kind_host_qemu
    _ready(state, [])
    with holding(state / "starting.lock"):
        assert vm.running() is None  # start() stops at the lock, naming the command's pid
    assert vm.running() is not None


def test_a_kind_host_done_starting_is_used_with_its_node_image(kind_host_qemu) -> None:
    vm, state = kind_host_qemu
    _ready(state, [IMAGE])
    up = vm.running()
    assert up is not None and not up.started, up
    assert up.env["DOCKER_HOST"] == "tcp://127.0.0.1:2375" and up.env["KSC_KIND_NODE_IMAGE"] == IMAGE, up.env
    from clusters.vm.kindhost import KindHost

    own = KindHost(state, cache_dir=state.parent / "cache", progress=lambda message: None)
    with own.starting():  # this process's own start(), asking again under its lock
        assert vm.running() is not None


def test_the_node_image_it_loads(tmp_path: Path) -> None:
    host = KindHostVm(tmp_path / "state", tmp_path / "cache")
    assert host.wanted(None).release == versions.KUBERNETES  # the pinned release's local image
    assert host.wanted("kindest/node:v1.37.0") is None  # a public image: kind pulls it
    release = "localhost/kube-swap-conformance/kind-node:v1.36.3-0123456789ab"
    assert host.wanted(release).release == "v1.36.3"  # not cached: a release's is built again
    done = tmp_path / "cache" / "vm" / "kind-node" / ("0123456789ab" + "0" * 52)
    done.mkdir(parents=True)
    (done / ".complete").write_text(json.dumps({"ref": release}))
    cached = host.wanted(release)
    assert (cached.ref, cached.archive, cached.k8s_version) == (release, done / "node-image.tar", "v1.36.3")
    patched = "localhost/kube-swap-conformance/kind-node:v1.37.1_patch.abc123-0123456789ab"
    with pytest.raises(KindHostError, match="patched release or a checkout"):
        host.wanted(patched)
    assert [c.name for c in host.missing(patched)] == ["node image"]


def test_what_this_machine_lacks_is_named_with_its_packages(tmp_path: Path) -> None:
    host = KindHostVm(tmp_path / "state", tmp_path / "cache", which=lambda command: None)
    lacking = host.missing("kindest/node:v1.37.0")  # nothing to build: the VM's tools and docker only
    packages = [p for c in lacking for p in c.packages]
    assert packages == ["qemu-system-x86", "qemu-utils", "debootstrap", "e2fsprogs", "docker.io"], lacking
    assert all(not c.ok for c in lacking)


def test_the_hint_names_its_state_dir(tmp_path: Path) -> None:
    assert "kind-host env)\"" in KindHostVm().hint() and "kind-host down`" in KindHostVm().hint()
    assert f"kind-host down --state-dir {tmp_path}`" in KindHostVm(tmp_path).hint()
