"""A kind binary and a docker CLI that stand in for the real ones in self-tests of a run's life
(kill it, crash its end) through the real kind provider, its preflight, its ledger and its teardown.

The fake kind keeps each cluster as a file under ``$FAKE_KIND_STATE/clusters``, so a test can see
what a run left behind. ``create cluster`` writes a kubeconfig that is not one (the provider's
wait for nodes fails at once: the cluster exists, no node is found); with ``FAKE_KIND_CREATE=hang``
it starts a child (as kind starts ``docker run``), writes both pids to ``pids`` and waits forever.
``delete cluster`` takes ``FAKE_KIND_DELETE_SECONDS``. Phases reached leave marker files:
``creating``, ``deleting``.

The fake docker answers the two questions kind's preflight asks (an engine on another machine,
cgroup v2), so the preflight passes on any host without Docker; with ``FAKE_DOCKER_INFO=hang`` it
starts a child, writes both pids to ``docker-pids``, leaves ``preflight`` and waits forever."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

KIND = r"""#!/bin/sh
state=${FAKE_KIND_STATE:?}
mkdir -p "$state/clusters"
echo "$*" >> "$state/calls"
name=""
kubeconfig=""
prev=""
for arg in "$@"; do
  [ "$prev" = --name ] && name=$arg
  [ "$prev" = --kubeconfig ] && kubeconfig=$arg
  prev=$arg
done
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
    fi ;;
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
case "$*" in
  "info --format {{.ServerVersion}} {{.CgroupVersion}}") echo "27.5.1 2" ;;
  "info --format {{json .}}")
    echo '{"Name": "fake-docker-host", "ServerVersion": "27.5.1", "KernelVersion": "6.12.0-fake", "CgroupVersion": "2", "MemTotal": 17179869184}' ;;
  *) echo "fake docker: unknown command: $*" >&2; exit 1 ;;
esac
"""


def install(directory: Path) -> tuple[Path, Path]:
    """Write the fake kind and docker into ``directory/bin``; return (that bin dir, the state dir)."""
    bin_dir, state = directory / "bin", directory / "kind-state"
    bin_dir.mkdir(parents=True)
    state.mkdir()
    for name, text in (("kind", KIND), ("docker", DOCKER)):
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
