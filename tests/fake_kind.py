"""A kind binary and a docker CLI that stand in for the real ones in self-tests of a run's life
(kill it, crash its end) through the real kind provider, its preflight, its ledger and its teardown.

The fake kind keeps each cluster as a file under ``$FAKE_KIND_STATE/clusters``, so a test can see
what a run left behind. ``create cluster`` writes a kubeconfig that is not one (the provider's
wait for nodes fails at once: the cluster exists, no node is found); with ``FAKE_KIND_CREATE=hang``
it starts a child (as kind starts ``docker run``), writes both pids to ``pids`` and waits forever;
with ``FAKE_KIND_CREATE=fail`` it fails as kubeadm does (the cluster is left: ``--retain``).
``export logs DIR`` writes a node's log under DIR.
``delete cluster`` takes ``FAKE_KIND_DELETE_SECONDS``. Phases reached leave marker files:
``creating``, ``deleting``.

The fake docker answers the two questions kind's preflight asks (an engine on another machine,
cgroup v2), so the preflight passes on any host without Docker; with ``FAKE_DOCKER_INFO=hang`` it
starts a child, writes both pids to ``docker-pids``, leaves ``preflight`` and waits forever.

The kind host VM the kind provider may start (clusters/kind_autohost.py): with
``FAKE_DOCKER_LOCAL=cgroup-v1`` (or ``none``) the fake docker is a local engine that cannot run
kind's nodes until ``DOCKER_HOST`` is set; then it answers as the kind host's engine (the node
image is there, ``docker run`` reads its swap and memory). :class:`FakeKindHost` stands in for the
VM (:data:`KIND_HOST_PLUGIN` gives it to the provider of every process of a run); it and the fake
kind log to the same ``calls``, so a test sees their order, and the fake kind logs the
``DOCKER_HOST`` it ran with to ``env-calls``. A fake ``apt-get`` and ``go`` record their argv."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from clusters.checks import Check
from clusters.kind_autohost import KindHostUp

KIND = r"""#!/bin/sh
state=${FAKE_KIND_STATE:?}
mkdir -p "$state/clusters"
echo "$*" >> "$state/calls"
echo "DOCKER_HOST=${DOCKER_HOST:-} $*" >> "$state/env-calls"
name=""
kubeconfig=""
config=""
prev=""
for arg in "$@"; do
  [ "$prev" = --name ] && name=$arg
  [ "$prev" = --kubeconfig ] && kubeconfig=$arg
  [ "$prev" = --config ] && config=$arg
  prev=$arg
done
[ -n "$config" ] && cp "$config" "$state/created-config.yaml"
case "$1 $2" in
  "version "*) echo "kind v0.33.0 go1.24.0 linux/amd64" ;;
  "get clusters") ls "$state/clusters" ;;
  "get nodes") if [ -e "$state/clusters/$name" ]; then echo "$name-control-plane"; fi ;;
  "create cluster")
    touch "$state/clusters/$name"
    echo "- not a kubeconfig" > "$kubeconfig"
    if [ "${FAKE_KIND_CREATE:-}" = hang ]; then
      sleep 600 &
      echo "$$ $!" > "$state/pids"
      touch "$state/creating"
      wait
    fi
    if [ "${FAKE_KIND_CREATE:-}" = fail ]; then
      echo "ERROR: failed to create cluster: failed to init node with kubeadm" >&2
      exit 1
    fi ;;
  "export logs")
    [ -e "$state/clusters/$name" ] || { echo "ERROR: unknown cluster \"$name\"" >&2; exit 1; }
    mkdir -p "$3/$name-control-plane"
    echo "kubeadm init: wait-control-plane" > "$3/$name-control-plane/kubelet.log" ;;
  "delete cluster")
    touch "$state/deleting"
    sleep "${FAKE_KIND_DELETE_SECONDS:-0}"
    rm -f "$state/clusters/$name" ;;
  *) echo "fake kind: unknown command: $*" >&2; exit 1 ;;
esac
"""

DOCKER = r"""#!/bin/sh
if [ "${FAKE_DOCKER_INFO:-}" = hang ]; then
  sleep 600 &
  echo "$$ $!" > "$FAKE_KIND_STATE/docker-pids"
  touch "$FAKE_KIND_STATE/preflight"
  wait
fi
if [ -z "${DOCKER_HOST:-}" ] && [ -n "${FAKE_DOCKER_LOCAL:-}" ]; then
  if [ "$FAKE_DOCKER_LOCAL" = cgroup-v1 ] && [ "$*" = "info --format {{.ServerVersion}} {{.CgroupVersion}}" ]; then
    echo "20.10.24 1"
    exit 0
  fi
  if [ "$FAKE_DOCKER_LOCAL" = cgroup-v1 ] && [ "$*" = "info --format {{json .}}" ]; then
    echo '{"Name": "this-machine", "ServerVersion": "20.10.24", "KernelVersion": "6.1.0-fake", "CgroupVersion": "1", "MemTotal": 17179869184}'
    exit 0
  fi
  echo "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?" >&2
  exit 1
fi
case "$*" in
  "info --format {{.ServerVersion}} {{.CgroupVersion}}") echo "27.5.1 2" ;;
  "info --format {{json .}}")
    echo '{"Name": "fake-docker-host", "ServerVersion": "27.5.1", "KernelVersion": "6.12.0-fake", "CgroupVersion": "2", "MemTotal": 17179869184}' ;;
  "image inspect -f {{json .Config.Labels}} "*) [ -n "${DOCKER_HOST:-}" ] && echo null || exit 1 ;;
  "image inspect "*) [ -n "${DOCKER_HOST:-}" ] || exit 1 ;;
  "run "*)
    [ -n "${DOCKER_HOST:-}" ] || exit 1
    printf 'Filename Type Size Used Priority\n/swapfile file 4194300 0 -2\n'
    printf 'MemTotal: 8000000 kB\nMemAvailable: 7000000 kB\n' ;;
  *) echo "fake docker: unknown command: $*" >&2; exit 1 ;;
esac
"""

APT_GET = r"""#!/bin/sh
echo "$*" >> "${FAKE_KIND_STATE:?}/apt-get"
"""

# `go install sigs.k8s.io/kind@V` writes a kind of that version into $GOBIN (any other command than
# `version` it hands to $FAKE_KIND_FULL, the fake kind); `go env GOVERSION` answers
GO = r"""#!/bin/sh
echo "GOBIN=${GOBIN:-} $*" >> "${FAKE_KIND_STATE:?}/go"
case "$1" in
  env) echo go1.26.1 ;;
  install)
    mkdir -p "$GOBIN"
    printf '#!/bin/sh\n[ "$1" = version ] && { echo "kind %s go1.26.1 linux/amd64"; exit 0; }\nexec "${FAKE_KIND_FULL:?}" "$@"\n' \
      "${2#*@}" > "$GOBIN/kind"
    chmod +x "$GOBIN/kind" ;;
  *) exit 1 ;;
esac
"""

# The kind host's variables, as `kind-host up` prints them under emulation.
KIND_HOST_ENV = {
    "DOCKER_HOST": "tcp://127.0.0.1:1",
    "KSC_KIND_API_PORTS": "ksc-mixed=40001,ksc-noswap=40002,ksc-limitedswap=40003,ksc-workloadcontrolledswap=40004",
    "KSC_KIND_NODE_IMAGE": "localhost/kube-swap-conformance/kind-node:v1.37.1-fa4e00000000",
    "KSC_KIND_CONFIG_PATCH": str(Path(__file__).resolve().parents[1] / "clusters" / "kind" / "profiles"
                                 / "emulated-host.yaml"),
}
HINT = ("reach it with `eval \"$(python -m clusters.vm kind-host env)\"`, stop it with"
        " `python -m clusters.vm kind-host down`")


class FakeKindHost:
    """Stands in for clusters.kind_autohost.KindHostVm, with its state in ``$FAKE_KIND_STATE``:
    ``kind-host.json`` while it is up. ``FAKE_KIND_HOST_LACKS=cmd=package,...`` names what this
    machine lacks to start it (until the fake apt-get installed the package);
    ``FAKE_KIND_HOST_BOOT=hang`` leaves ``kind-host-booting`` and never finishes booting."""

    def __init__(self, state: Path | None = None):
        self.state = Path(state or os.environ["FAKE_KIND_STATE"])
        self.file = self.state / "kind-host.json"

    def _log(self, line: str) -> None:
        with open(self.state / "calls", "a") as calls:
            calls.write(line + "\n")

    def running(self) -> KindHostUp | None:
        return KindHostUp(json.loads(self.file.read_text()), False, "pid 4242 (fake)") if self.file.exists() else None

    def missing(self, node_image: str | None) -> list[Check]:
        apt = self.state / "apt-get"
        installed = set(apt.read_text().split()) if apt.exists() else set()
        lacks = [item.split("=", 1) for item in os.environ.get("FAKE_KIND_HOST_LACKS", "").split(",") if item]
        return [Check(command, False, "not on PATH (fake)", packages=(package,))
                for command, package in lacks if package not in installed]

    def start(self, node_image: str | None, progress: Callable[[str], None], booting: Callable[[], None]) -> KindHostUp:
        self._log(f"kind-host up {node_image or '-'}")
        booting()
        progress("booting (fake)")
        self.file.write_text(json.dumps(KIND_HOST_ENV))
        if os.environ.get("FAKE_KIND_HOST_BOOT") == "hang":
            (self.state / "kind-host-booting").touch()
            time.sleep(600)
        return KindHostUp(dict(KIND_HOST_ENV), True, "pid 4242 (fake), tcg")

    def stop(self) -> bool:
        self._log("kind-host down")
        was = self.file.exists()
        self.file.unlink(missing_ok=True)
        return was

    def hint(self) -> str:
        return HINT


# Appended to a run's conftest.py: every process's kind provider gets the stand-in.
KIND_HOST_PLUGIN = """
import pytest


@pytest.hookimpl(wrapper=True)
def pytest_ksc_make_provider(config):
    provider = yield
    if getattr(provider, "name", None) == "kind":
        from tests.fake_kind import FakeKindHost

        provider.kind_host = FakeKindHost()
    return provider
"""


def install(directory: Path) -> tuple[Path, Path]:
    """Write the fake kind and docker into ``directory/bin``; return (that bin dir, the state dir)."""
    bin_dir, state = directory / "bin", directory / "kind-state"
    bin_dir.mkdir(parents=True)
    state.mkdir()
    for name, text in (("kind", KIND), ("docker", DOCKER), ("apt-get", APT_GET)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    return bin_dir, state


def environment(directory: Path, **extra: str) -> dict[str, str]:
    """Variables for a run against the fakes: fake kind and docker first on PATH, the system's
    tools behind them (the scripts need sh), no Go (nothing gets built), and a cache and temp
    directory of the test's own."""
    bin_dir, state = directory / "bin", directory / "kind-state"
    (directory / "tmp").mkdir(exist_ok=True)
    return {"PATH": f"{bin_dir}:/usr/bin:/bin", "FAKE_KIND_STATE": str(state), "KSC_CACHE_DIR": str(directory / "cache"),
            "TMPDIR": str(directory / "tmp"), **extra}


def clusters(state: Path) -> list[str]:
    return sorted(p.name for p in (state / "clusters").glob("*"))


def wait_for(what: Path, process: subprocess.Popen, seconds: float = 120) -> None:
    """Wait until ``what`` exists, failing if the process ended first or it never appears."""
    deadline = time.monotonic() + seconds
    while not what.exists():
        if process.poll() is not None:
            raise AssertionError(f"the run ended (exit {process.returncode}) before {what.name} appeared:\n"
                                 + process.stdout.read().decode(errors="replace"))  # type: ignore[union-attr]
        if time.monotonic() > deadline:
            process.kill()
            raise AssertionError(f"{what.name} did not appear in {seconds:.0f}s")
        time.sleep(0.1)


def alive(pid: int) -> bool:
    """Whether a process exists and is not a zombie (an orphan's zombie waits for its reaper)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in status


def gone(pids: list[int], seconds: float = 10) -> list[int]:
    """The pids still alive once SIGKILL has had time to land (a kill is not instantaneous)."""
    deadline = time.monotonic() + seconds
    while (left := [p for p in pids if alive(p)]) and time.monotonic() < deadline:
        time.sleep(0.1)
    for pid in left:  # the test fails on them; do not leave them behind either
        os.kill(pid, signal.SIGKILL)
    return left


def install_go(bin_dir: Path) -> None:
    """A fake ``go`` (:data:`GO`) in ``bin_dir``; it logs to ``$FAKE_KIND_STATE/go``."""
    (bin_dir / "go").write_text(GO)
    (bin_dir / "go").chmod(0o755)
