"""A pod's containers' memory over time, sampled on the node from their cgroups while a test
runs: by the node agent (e2e/agent.py: `swapstress sample-cgroups --keep` as the main process
of a privileged pod for the whole run), told to follow the pod as soon as it exists. What it
reads is what the plots show: memory.current and memory.swap.current against the memory.max
and memory.swap.max the kubelet wrote."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from e2e.agent import FOLLOW, SAMPLES
from e2e.apitime import api_time
from e2e.record import Series

if TYPE_CHECKING:
    from e2e.nodefiles import NodeFiles


def _number(text: str) -> int | None:
    return None if text in ("-", "max") else int(text)


def parse_series(output: str, name: str, cgroup_part: str, terminated: dict[str, Any] | None) -> Series:
    """The samples of the container cgroup whose directory names `cgroup_part` (its container
    id), with how the container ended, placed on the samples' clock (the node's)."""
    rows = [line.split() for line in output.splitlines() if line.startswith("sample ")]
    # A row whose memory.current could not be read was taken while the cgroup was being
    # removed (the container just ended): it carries nothing. The eighth field, memory.events'
    # oom_kill, is read even then (an agent older than it writes seven).
    kills = [int(r[7]) for r in rows if len(r) == 8 and cgroup_part in r[2] and r[7].isdigit()]
    mine = [r for r in rows if len(r) in (7, 8) and cgroup_part in r[2] and r[3] != "-"]
    if not mine:
        return Series(name, ended=_ended(terminated))
    start = int(mine[0][1])
    # The limits as last read: the last row may have lost the later files to the cgroup going
    # away (a killed container's last sample can have memory.current and not memory.swap.max).
    memory_max = next((r[5] for r in reversed(mine) if r[5] != "-"), "-")
    swap_max = next((r[6] for r in reversed(mine) if r[6] != "-"), "-")
    ended_at = None
    finished = api_time((terminated or {}).get("finishedAt"))
    if finished:
        ended_at = finished.timestamp() - start / 1000
    return Series(
        name,
        t=[(int(r[1]) - start) / 1000 for r in mine],
        current=[int(r[3]) for r in mine],
        swap=[_number(r[4]) for r in mine],
        memory_max=_number(memory_max),
        swap_max=_number(swap_max),
        ended=_ended(terminated),
        ended_at=ended_at,
        oom_kills=max(kills, default=None),
    )


def _ended(terminated: dict[str, Any] | None) -> str:
    if not terminated:
        return ""
    return f"{terminated.get('reason', 'terminated')} (exit {terminated.get('exitCode')})"


class CgroupSampler:
    """The pods one test has the node agent sample, each every `interval`: `follow(uid)` once
    the pod exists (its containers' cgroups are found when they appear), `samples()` for what
    was sampled so far. The agent's main process outlives a kubelet restart (the eviction test
    restarts it); an exec stream would not."""

    def __init__(self, agent: NodeFiles, interval: str = "100ms"):
        self.agent = agent
        self.interval = interval
        self.followed: list[str] = []

    def follow(self, *pod_uids: str) -> None:
        """One exec for all of them: under load an exec takes an emulated node 10-40 s, which
        pods followed one by one (the eviction test's seven) would pay each time."""
        self.agent.touch(*(f"{FOLLOW}/pod{uid}@{self.interval}" for uid in pod_uids))
        self.followed.extend(pod_uids)

    def samples(self) -> str:
        """Every sample of the followed pods so far (complete lines: the agent may be writing)."""
        text = "".join(self.agent.read_optional(f"{SAMPLES}/pod{uid}") for uid in self.followed)
        return "".join(line for line in text.splitlines(keepends=True) if line.endswith("\n"))
