"""A pod's containers' memory over time, sampled on the node from their cgroups while a test
runs: `swapstress sample-cgroups` as the main process of a privileged pod, running before the
pod is created and told to follow it as soon as it exists. What it reads is what the plots
show: memory.current and memory.swap.current against the memory.max and memory.swap.max the
kubelet wrote."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from e2e.nodefiles import SCRATCH
from e2e.record import Series

if TYPE_CHECKING:
    from e2e.workspace import Workspace
    from e2e.nodefiles import NodeFiles

FOLLOW = f"{SCRATCH}/follow"
SAMPLES = f"{SCRATCH}/samples"
RETRY_SECONDS = 120


def _number(text: str) -> int | None:
    return None if text in ("-", "max") else int(text)


def parse_series(output: str, name: str, cgroup_part: str, terminated: dict[str, Any] | None) -> Series:
    """The samples of the container cgroup whose directory names `cgroup_part` (its container
    id), with how the container ended, placed on the samples' clock (the node's)."""
    rows = [line.split() for line in output.splitlines() if line.startswith("sample ")]
    # A row whose memory.current could not be read was taken while the cgroup was being
    # removed (the container just ended): it carries nothing.
    mine = [r for r in rows if len(r) == 7 and cgroup_part in r[2] and r[3] != "-"]
    if not mine:
        return Series(name, ended=_ended(terminated))
    start = int(mine[0][1])
    last = mine[-1]
    ended_at = None
    if terminated and terminated.get("finishedAt"):
        finished = datetime.fromisoformat(str(terminated["finishedAt"]).replace("Z", "+00:00"))
        ended_at = finished.timestamp() - start / 1000
    return Series(
        name,
        t=[(int(r[1]) - start) / 1000 for r in mine],
        current=[int(r[3]) for r in mine],
        swap=[_number(r[4]) for r in mine],
        memory_max=_number(last[5]),
        swap_max=_number(last[6]),
        ended=_ended(terminated),
        ended_at=ended_at,
    )


def _ended(terminated: dict[str, Any] | None) -> str:
    if not terminated:
        return ""
    return f"{terminated.get('reason', 'terminated')} (exit {terminated.get('exitCode')})"


class CgroupSampler:
    """A privileged pod whose main process samples the pods it is told to follow: a main
    process outlives a kubelet restart (the eviction test restarts it), an exec stream does
    not. Pods are named by creating a file in its follow directory; samples go to a file in it.
    `start()` before creating the pod, `follow(uid)` once it exists, `stop()` when done."""

    def __init__(self, ws: Workspace, interval: str = "100ms", name: str = "cgroup-sampler"):
        self.ws = ws
        self.interval = interval
        self.name = name
        self.files: NodeFiles | None = None
        self.stopped = ""

    def start(self) -> CgroupSampler:
        from e2e.nodefiles import HOST_CGROUP, NodeFiles

        command = ["/swapstress", "sample-cgroups", "--interval", self.interval, "--out", SAMPLES,
                   "--follow-dir", FOLLOW, HOST_CGROUP]
        self.files = NodeFiles.on(self.ws, self.ws.node.name, name=self.name, critical=True, command=command)
        return self

    def follow(self, pod_uid: str) -> None:
        self._retrying(f"following pod {pod_uid}", lambda: self.files.touch(f"{FOLLOW}/pod{pod_uid}") or "done")

    def stop(self) -> str:
        """Stop sampling (once) and return every sample."""
        if self.files is None:
            return ""
        if not self.stopped:
            self._retrying("asking the sampler to stop", lambda: self.files.touch(f"{FOLLOW}/stop") or "done")
            self.stopped = self._retrying("the sampler to stop", self._when_stopped)
        return self.stopped

    def _when_stopped(self) -> str | None:
        text = self.files.read(SAMPLES)
        return text if any(line.startswith("stopped ") for line in text.splitlines()) else None

    def _retrying(self, what: str, attempt: Callable[[], str | None]) -> str:
        # Right after a kubelet restart its exec handler may not know the pod yet ("pod does
        # not exist"): retry, bounded.
        from e2e.observe import wait_for

        last: list[str] = [""]

        def probe() -> str | None:
            try:
                return attempt()
            except Exception as error:  # noqa: BLE001 - retried; the last one is reported
                last[0] = repr(error)[:300]
                return None

        return wait_for(what, probe, RETRY_SECONDS, lambda: last[0])
