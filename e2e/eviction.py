"""Watching a node under memory pressure: what the kubelet reported and did, moment by moment
(pods on the node, their working sets and swap from /stats/summary, the node's condition and
taint, evictions as they happen), and the account a failed eviction test prints."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from e2e import oracle
from e2e.observe import NodeObserver

MEMORY_PRESSURE_TAINT = "node.kubernetes.io/memory-pressure"
Mi = 1 << 20


def key_of(pod: dict[str, Any]) -> str:
    return f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"


@dataclass
class Moment:
    t: float  # seconds since the watch began
    pods: dict[str, dict[str, Any]]  # active pods on the node (not terminating, not ended)
    working_set: dict[str, int]
    swap: dict[str, int]
    node_available: int | None
    node_swap: int | None
    pressure: bool
    taint: bool


@dataclass
class Eviction:
    key: str
    t: float
    reason: str
    message: str


@dataclass
class EvictionWatch:
    observer: NodeObserver
    start: float = field(default_factory=time.monotonic)
    moments: list[Moment] = field(default_factory=list)
    evictions: list[Eviction] = field(default_factory=list)
    _seen: set[str] = field(default_factory=set)

    def poll(self) -> Moment:
        pods = self.observer.pods_on_node()
        node = self.observer.node_status()
        summary = json.loads(self.observer.node_proxy("stats/summary"))
        t = time.monotonic() - self.start
        active = {}
        for pod in pods:
            key = key_of(pod)
            status = pod.get("status") or {}
            if status.get("reason") == "Evicted" and key not in self._seen:
                self._seen.add(key)
                self.evictions.append(Eviction(key, t, status.get("reason", ""), status.get("message", "")))
            if status.get("phase") in ("Running", "Pending") and not pod["metadata"].get("deletionTimestamp"):
                active[key] = pod
        working_set, swap = {}, {}
        for stats in summary.get("pods") or []:
            ref = stats.get("podRef") or {}
            key = f"{ref.get('namespace')}/{ref.get('name')}"
            if (stats.get("memory") or {}).get("workingSetBytes") is not None:
                working_set[key] = int(stats["memory"]["workingSetBytes"])
            if (stats.get("swap") or {}).get("swapUsageBytes") is not None:
                swap[key] = int(stats["swap"]["swapUsageBytes"])
        conditions = {c["type"]: c["status"] for c in (node.get("status") or {}).get("conditions") or []}
        taints = {t_["key"] for t_ in (node.get("spec") or {}).get("taints") or []}
        node_stats = summary.get("node") or {}
        moment = Moment(t, active, working_set, swap, (node_stats.get("memory") or {}).get("availableBytes"),
                        (node_stats.get("swap") or {}).get("swapUsageBytes"), conditions.get("MemoryPressure") == "True",
                        MEMORY_PRESSURE_TAINT in taints)
        self.moments.append(moment)
        return moment

    def before_first_eviction(self) -> Moment | None:
        """The last moment observed before the first eviction was seen."""
        if not self.evictions:
            return self.moments[-1] if self.moments else None
        earlier = [m for m in self.moments if m.t < self.evictions[0].t]
        return earlier[-1] if earlier else None

    def evicted(self) -> list[str]:
        return [e.key for e in self.evictions]


def account(watch: EvictionWatch, designed: list[str], threshold: int, extra: str = "") -> str:
    """What a reader of a failed eviction test needs: the threshold and the signal, every pod's
    requests, limits, priority, working set and swap when the first eviction came, the oracle's
    order with its inputs, the evictions in order, and the node's condition over time."""
    lines = [f"evictionHard memory.available: {threshold} ({threshold / Mi:.0f} MiB)"]
    moment = watch.before_first_eviction()
    if moment:
        lines.append(f"at t={moment.t:.0f}s (last look before the first eviction): node memory.available"
                     f" {moment.node_available}, node swap usage {moment.node_swap}, MemoryPressure {moment.pressure},"
                     f" taint {moment.taint}")
        lines.append("pods (key: request / limits / priority / working set / swap):")
        for key, pod in sorted(moment.pods.items()):
            containers = pod["spec"]["containers"]
            limits = [c.get("resources", {}).get("limits", {}).get("memory", "-") for c in containers]
            lines.append(f"  {'*' if key in designed else ' '} {key}: request {oracle.pod_memory_request(pod)}"
                         f" / limits {limits} / priority {pod['spec'].get('priority', 0)}"
                         f"{' (critical)' if oracle.is_critical_pod(pod) else ''}"
                         f" / ws {moment.working_set.get(key)} / swap {moment.swap.get(key)}")
        candidates = oracle.eviction_candidates(p for k, p in moment.pods.items() if k in moment.working_set)
        lines.append(f"oracle order (tiers): {oracle.eviction_ranking(candidates, moment.working_set)}")
    lines.append("evictions seen: " + "; ".join(f"t={e.t:.0f}s {e.key}: {e.message}" for e in watch.evictions))
    changes, previous = [], None
    for m in watch.moments:
        state = (m.pressure, m.taint)
        if state != previous:
            changes.append(f"t={m.t:.0f}s MemoryPressure={m.pressure} taint={m.taint} available={m.node_available}")
            previous = state
    lines.append("node over time: " + "; ".join(changes))
    if extra:
        lines.append(extra)
    return "\n".join(lines)
