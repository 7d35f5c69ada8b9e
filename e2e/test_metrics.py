"""Swap observability: node swap capacity, /metrics/resource and /stats/summary against the
container's own cgroup files. Metrics are sampled by the kubelet on its own schedule, each level
(container, pod, node) on its own, so each comparison waits (bounded) for a scrape in which the
container equals its cgroup value, read while stable, and the pod and node levels hold at least
that much: a kubelet that reports 0, a stale value or a level missing never gets there and fails
naming the relations that did not hold and every value seen."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from clusters.provider import SwapNode
from e2e.conftest import Workspace
from e2e.metrics import find, parse_prometheus, summary_container, summary_pod, swap_usage_inconsistencies
from e2e.observe import wait_for
from e2e.sizing import swapping_past_limit
from workloads.pods import stress_pod

METRIC_SECONDS = 180  # the kubelet's stats housekeeping runs every 10-15 s


def meminfo(ws: Workspace, pod: str, container: str) -> dict[str, int]:
    """/proc/meminfo's kB fields in bytes (the file is the node's: it is not namespaced)."""
    text = ws.observer.read_file(ws.namespace, pod, container, "/proc/meminfo")
    fields = (line.split() for line in text.splitlines())
    return {f[0].rstrip(":"): int(f[1]) * 1024 for f in fields if len(f) == 3 and f[2] == "kB"}


@pytest.mark.min_kubernetes("1.33")
def test_node_swap_capacity_is_swap_total(swap_node: SwapNode, workspace: Callable[[SwapNode], Workspace]) -> None:
    ws = workspace(swap_node)
    ws.deploy(stress_pod("reader", ws.image, ws.namespace, ws.test, ["/swapstress", "pause"]))
    ws.running("reader")
    swap_total = meminfo(ws, "reader", "stress")["SwapTotal"]  # /proc/meminfo is the node's
    info = ws.observer.node_status()["status"]["nodeInfo"]
    assert swap_total > 0, "the node has no swap provisioned"
    assert (info.get("swap") or {}).get("capacity") == swap_total, f"nodeInfo {info}; SwapTotal {swap_total}"


@pytest.fixture
def swapping_pod(swap_node: SwapNode, workspace: Callable[[SwapNode], Workspace]) -> Workspace:
    """A Burstable pod pushed past its memory limit, holding, with part of it in swap."""
    ws = workspace(swap_node)
    swapping_past_limit(ws, "swapping")
    return ws


def stable_swap(ws: Workspace, read: Callable[[], Any]) -> tuple[int, int, Any]:
    """(swap.current, swap.max, what `read` returned) with swap.current unchanged around `read`."""
    def current() -> int:
        return int(ws.observer.cgroup_value(ws.namespace, "swapping", "stress", "memory.swap.current"))

    before = current()
    value = read()
    after = current()
    swap_max = int(ws.observer.cgroup_value(ws.namespace, "swapping", "stress", "memory.swap.max"))
    return (before if before == after else -1), swap_max, value


@pytest.mark.needs_behavior("LimitedSwap")
@pytest.mark.min_kubernetes("1.30")
def test_resource_metrics_match_the_cgroup(swap_node: SwapNode, swapping_pod: Workspace) -> None:
    ws = swapping_pod
    labels = {"namespace": ws.namespace, "pod": "swapping"}
    seen: dict[str, Any] = {}

    def probe() -> dict[str, Any] | None:
        current, swap_max, text = stable_swap(ws, lambda: ws.observer.node_proxy("metrics/resource"))
        samples = parse_prometheus(text)
        container = find(samples, "container_swap_usage_bytes", container="stress", **labels)
        pod, node = find(samples, "pod_swap_usage_bytes", **labels), find(samples, "node_swap_usage_bytes")
        seen.clear()
        seen.update(current=current, swap_max=swap_max, container=container, pod=pod, node=node,
                    limit=find(samples, "container_swap_limit_bytes", container="stress", **labels))
        usage = {level: sample.value if sample else None for level, sample in (("container", container), ("pod", pod),
                                                                                ("node", node))}
        seen["unmet"] = swap_usage_inconsistencies(current, usage)
        return None if seen["unmet"] else dict(seen)

    got = wait_for("a /metrics/resource scrape consistent with the container's memory.swap.current", probe,
                   METRIC_SECONDS, lambda: repr(seen))
    if swap_node.kubelet_at_least("1.34"):
        assert got["limit"] is not None and got["limit"].value == got["swap_max"], got


@pytest.mark.needs_behavior("LimitedSwap")
@pytest.mark.min_kubernetes("1.30")
def test_stats_summary_matches_the_cgroup(swap_node: SwapNode, swapping_pod: Workspace) -> None:
    import json

    ws = swapping_pod
    seen: dict[str, Any] = {}

    def probe() -> dict[str, Any] | None:
        current, swap_max, text = stable_swap(ws, lambda: ws.observer.node_proxy("stats/summary"))
        summary = json.loads(text)
        container = (summary_container(summary, ws.namespace, "swapping", "stress") or {}).get("swap") or {}
        pod = (summary_pod(summary, ws.namespace, "swapping") or {}).get("swap") or {}
        node = (summary.get("node") or {}).get("swap") or {}
        seen.clear()
        seen.update(current=current, swap_max=swap_max, container=container, pod=pod, node=node)
        usage = {level: stats.get("swapUsageBytes") for level, stats in (("container", container), ("pod", pod),
                                                                         ("node", node))}
        seen["unmet"] = swap_usage_inconsistencies(current, usage)
        return None if seen["unmet"] else dict(seen)

    got = wait_for("a /stats/summary consistent with the container's memory.swap.current", probe,
                   METRIC_SECONDS, lambda: repr(seen))
    assert got["container"].get("swapAvailableBytes") == got["swap_max"] - got["current"], got
