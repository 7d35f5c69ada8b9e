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
    t: float  # when the watch first saw it
    at: str  # the DisruptionTarget condition's lastTransitionTime (whole seconds)
    phase: str
    reason: str  # status.reason: "Evicted" when the pod ended Failed
    message: str  # status.message, or the condition's where the pod ended Succeeded
    condition: dict[str, Any]
    exit_codes: list[int | None]


def _eviction(pod: dict[str, Any], t: float) -> Eviction:
    """The eviction as the pod's status tells it at time t of the watch."""
    status = pod.get("status") or {}
    condition = eviction_of(pod) or {}
    codes = [((cs.get("state") or {}).get("terminated") or {}).get("exitCode")
             for cs in status.get("containerStatuses") or []]
    return Eviction(key_of(pod), t, condition.get("lastTransitionTime", ""), status.get("phase", ""),
                    status.get("reason", ""), status.get("message") or condition.get("message", ""), condition, codes)


def eviction_of(pod: dict[str, Any]) -> dict[str, Any] | None:
    """The mark the kubelet leaves on a pod it evicted, whatever phase the pod ends in: the
    DisruptionTarget condition with reason TerminationByKubelet (eviction_manager.go evictPod).
    status.reason "Evicted" survives only when the pod ends Failed: a container that exits 0 on
    SIGTERM ends the pod Succeeded without it (kubelet_pods.go generateAPIPodStatus recomputes
    the phase from the containers; SIG Node kept that, kubernetes/kubernetes#120182)."""
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "DisruptionTarget" and condition.get("reason") == "TerminationByKubelet" \
                and condition.get("status") == "True":
            return condition
    return None


@dataclass
class EvictionWatch:
    observer: NodeObserver
    start: float = field(default_factory=time.monotonic)
    moments: list[Moment] = field(default_factory=list)
    evictions: list[Eviction] = field(default_factory=list)

    def poll(self, stats: bool = True) -> Moment:
        """One look at the node. Without `stats` (no /stats/summary: the slow part) a look is
        quick enough to see evictions that come seconds apart one by one."""
        pods = self.observer.pods_on_node()
        node = self.observer.node_status()
        summary = json.loads(self.observer.node_proxy("stats/summary")) if stats else {}
        t = time.monotonic() - self.start
        active = {}
        for pod in pods:
            key = key_of(pod)
            status = pod.get("status") or {}
            condition = eviction_of(pod)
            if (condition or status.get("reason") == "Evicted") and key not in {e.key for e in self.evictions}:
                self.evictions.append(_eviction(pod, t))
            if status.get("phase") in ("Running", "Pending") and not pod["metadata"].get("deletionTimestamp") \
                    and not condition:
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

    def pressure_seen(self) -> tuple[bool, bool]:
        """(MemoryPressure, its taint): each seen at least once."""
        return any(m.pressure for m in self.moments), any(m.taint for m in self.moments)

    def over(self, quiet: float) -> bool:
        """Pressure came and went: pods were evicted, none for `quiet` seconds, and the node no
        longer reports MemoryPressure."""
        if not self.evictions or not self.moments or self.moments[-1].pressure:
            return False
        return self.moments[-1].t - max(e.t for e in self.evictions) >= quiet

    def evicted(self) -> list[str]:
        """In the order they happened: the condition's second, then the order the watch saw them."""
        return [e.key for e in sorted(self.evictions, key=lambda e: (e.at, e.t))]

    def refresh(self) -> None:
        """Evicted pods reach their final phase after the mark: read each one's last status."""
        for i, eviction in enumerate(self.evictions):
            namespace, name = eviction.key.split("/", 1)
            self.evictions[i] = _eviction(self.observer.pod(namespace, name), eviction.t)

    def problems_with_evicted_pods(self) -> list[str]:
        """What an evicted pod must say: the condition naming memory; a Failed pod the reason
        Evicted and that message; a Succeeded one only if every container exited 0."""
        problems = []
        for e in self.evictions:
            memory = "The node was low on resource: memory."
            if not str(e.condition.get("message", "")).startswith(memory):
                problems.append(f"{e.key}: DisruptionTarget {e.condition or 'missing'}")
            if e.phase == "Failed" and not (e.reason == "Evicted" and e.message.startswith(memory)):
                problems.append(f"{e.key}: Failed with reason {e.reason!r}, message {e.message!r}")
            elif e.phase == "Succeeded" and any(code != 0 for code in e.exit_codes):
                problems.append(f"{e.key}: Succeeded, yet its containers exited {e.exit_codes}")
            elif e.phase not in ("Failed", "Succeeded"):
                problems.append(f"{e.key}: phase {e.phase!r} after eviction")
        return problems


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
    lines.append("evictions seen: " + "; ".join(f"t={e.t:.0f}s ({e.at}) {e.key}: {e.phase} {e.reason!r} exit {e.exit_codes}:"
                                                 f" {e.message}" for e in watch.evictions))
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
