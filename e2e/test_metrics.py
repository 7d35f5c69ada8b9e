"""Swap observability: node memory and swap capacity, /metrics/resource and /stats/summary
against the figures each series is defined as, read from the node: the container's and the
pod's own cgroup memory.swap.current, and for the node what cAdvisor computes for its "/"
cgroup (the node cgroup's memory.swap.current where it has one, as in kind, else SwapTotal -
SwapFree). The kubelet samples on its own schedule, so each comparison waits (bounded) for two
consecutive scrapes in which every level equals its figure, each figure read unchanged around
the scrape: a kubelet that reports 0, a stale or a summed value, or a missing level never gets
there and fails naming each mismatch and every value seen."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from clusters.provider import SwapNode
from e2e.workspace import Workspace
from e2e.metrics import find, parse_prometheus, summary_container, summary_pod, swap_usage_mismatches
from e2e.nodefiles import NODE_SWAP_FILES, CgroupRead, NodeFiles
from e2e.observe import wait_for
from e2e.record import Recorder
from e2e.sizing import swapping_past_limit
from workloads.pods import stress_pod

METRIC_SECONDS = 180  # the kubelet's stats housekeeping runs every 10-15 s


def meminfo(ws: Workspace, pod: str, container: str) -> dict[str, int]:
    """/proc/meminfo's kB fields in bytes (the file is the node's: it is not namespaced)."""
    text = ws.observer.read_file(ws.namespace, pod, container, "/proc/meminfo")
    fields = (line.split() for line in text.splitlines())
    return {f[0].rstrip(":"): int(f[1]) * 1024 for f in fields if len(f) == 3 and f[2] == "kB"}


def test_node_memory_capacity_is_mem_total(swap_node: SwapNode, workspace: Callable[[SwapNode], Workspace]) -> None:
    """The oracle's main input: the kubelet's capacity is cAdvisor's MemoryCapacity, which is
    /proc/meminfo's MemTotal (pkg/kubelet/cadvisor CapacityFromMachineInfo; huge pages become
    resources of their own and are not taken off). Read from the node, compared exactly."""
    from kubernetes.utils import parse_quantity

    ws = workspace(swap_node)
    ws.deploy(stress_pod("reader", ws.image, ws.namespace, ws.test, ["/swapstress", "pause"]))
    ws.running("reader")
    mem_total = meminfo(ws, "reader", "stress")["MemTotal"]
    capacity = ws.observer.node_status()["status"]["capacity"]["memory"]
    assert ws.record.check("status.capacity.memory", mem_total, int(parse_quantity(capacity)), "MemTotal (/proc/meminfo)"), \
        f"capacity.memory {capacity}; MemTotal {mem_total}"
    assert swap_node.memory_capacity == mem_total  # what every expectation of the run was computed from


@pytest.mark.min_kubernetes("1.33")
def test_node_swap_capacity_is_swap_total(swap_node: SwapNode, workspace: Callable[[SwapNode], Workspace]) -> None:
    ws = workspace(swap_node)
    ws.deploy(stress_pod("reader", ws.image, ws.namespace, ws.test, ["/swapstress", "pause"]))
    ws.running("reader")
    swap_total = meminfo(ws, "reader", "stress")["SwapTotal"]  # /proc/meminfo is the node's
    info = ws.observer.node_status()["status"]["nodeInfo"]
    assert swap_total > 0, "the node has no swap provisioned"
    assert ws.record.check("nodeInfo.swap.capacity", swap_total, (info.get("swap") or {}).get("capacity"),
                           "SwapTotal (/proc/meminfo)"), f"nodeInfo {info}; SwapTotal {swap_total}"


@dataclass
class SwappingPod:
    """A Burstable pod pushed past its memory limit, holding, with part of it in swap, and a
    privileged reader on its node. Every figure is read by the reader: an exec into the
    swapping container itself would add memory to a cgroup at its limit and push more of it to
    swap, moving the very figure being compared."""

    ws: Workspace
    uid: str
    container_id: str
    node_files: NodeFiles

    def read(self) -> CgroupRead:
        """The container's, the pod's and the node's cgroup files (and /proc/meminfo), in one exec."""
        return self.node_files.read_cgroups([self.container_id, "pod" + self.uid, "."],
                                            ("memory.swap.current", "memory.swap.max", *NODE_SWAP_FILES), meminfo=True)

    def figures(self) -> dict[str, int]:
        read = self.read()
        return {"container": int(read.value(self.container_id, "memory.swap.current")),
                "pod": int(read.value("pod" + self.uid, "memory.swap.current")),
                "node": read.node_swap_usage()[0],
                "swap_max": int(read.value(self.container_id, "memory.swap.max"))}

    def around(self, read: Callable[[], Any]) -> tuple[dict[str, int | None], Any]:
        """Each figure read before and after ``read()``; None for one that moved."""
        before = self.figures()
        value = read()
        after = self.figures()
        return {level: before[level] if before[level] == after[level] else None for level in before}, value


@pytest.fixture
def swapping_pod(swap_node: SwapNode, workspace: Callable[[SwapNode], Workspace]) -> SwappingPod:
    # Its own per test: a pod shared by the tests of this module would be on the node between
    # them, where the eviction test (which needs the node to hold only its own pods) may run.
    ws = workspace(swap_node)
    swapping_past_limit(ws, "swapping")
    pod = ws.observer.pod(ws.namespace, "swapping")
    container_id = next(s["containerID"] for s in pod["status"]["containerStatuses"] if s["name"] == "stress")
    return SwappingPod(ws, pod["metadata"]["uid"], container_id.split("://")[-1], ws.node_files())


def two_consistent_scrapes(what: str, scrape: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Wait (bounded) until two scrapes in a row are consistent; ``scrape`` returns what it saw
    with an "unmet" list. A failure shows every scrape, with its time into the wait."""
    start = time.monotonic()
    scrapes: list[tuple[float, dict[str, Any]]] = []

    def probe() -> dict[str, Any] | None:
        scrapes.append((time.monotonic() - start, scrape()))
        consistent = [got for _, got in scrapes[-2:] if not got["unmet"]]
        return consistent[-1] if len(consistent) == 2 else None

    return wait_for(f"two consecutive {what} scrapes consistent with the node's figures", probe, METRIC_SECONDS,
                    lambda: f"{len(scrapes)} scrapes:\n" + "\n".join(f"  +{t:.0f}s {got!r}" for t, got in scrapes))


# Why alone: the node's figure is its whole cgroup tree's swap (on kind, the node container's),
# which cAdvisor samples every 10-15 s and the kubelet serves from that cache. While another
# test allocates on the same node (or, on kind, anywhere on the shared host, whose reclaim
# swaps out any cgroup's pages), that figure moves between the kubelet's sample and our read,
# and the exact comparison never finds two quiet scrapes in a row.
@pytest.mark.needs_behavior("LimitedSwap")
@pytest.mark.min_kubernetes("1.30")
@pytest.mark.runs_alone("compares the node's whole swap usage, which any other test's memory moves")
def test_resource_metrics_match_the_cgroups(swap_node: SwapNode, swapping_pod: SwappingPod) -> None:
    ws = swapping_pod.ws
    labels = {"namespace": ws.namespace, "pod": "swapping"}

    def scrape() -> dict[str, Any]:
        figures, text = swapping_pod.around(lambda: ws.observer.node_proxy("metrics/resource"))
        samples = parse_prometheus(text)
        found = {"container": find(samples, "container_swap_usage_bytes", container="stress", **labels),
                 "pod": find(samples, "pod_swap_usage_bytes", **labels), "node": find(samples, "node_swap_usage_bytes")}
        reported = {level: sample.value if sample else None for level, sample in found.items()}
        return {"figures": figures, "reported": reported, "unmet": swap_usage_mismatches(figures, reported)}

    two_consistent_scrapes("/metrics/resource", scrape)


@pytest.mark.needs_behavior("LimitedSwap")
@pytest.mark.min_kubernetes("1.30")
@pytest.mark.runs_alone("compares the node's whole swap usage, which any other test's memory moves")
def test_stats_summary_matches_the_cgroups(swap_node: SwapNode, swapping_pod: SwappingPod) -> None:
    import json

    ws = swapping_pod.ws

    def scrape() -> dict[str, Any]:
        figures, text = swapping_pod.around(lambda: ws.observer.node_proxy("stats/summary"))
        summary = json.loads(text)
        stats = {"container": (summary_container(summary, ws.namespace, "swapping", "stress") or {}).get("swap") or {},
                 "pod": (summary_pod(summary, ws.namespace, "swapping") or {}).get("swap") or {},
                 "node": (summary.get("node") or {}).get("swap") or {}}
        reported = {level: s.get("swapUsageBytes") for level, s in stats.items()}
        unmet = swap_usage_mismatches(figures, reported)
        swap_max, usage = figures["swap_max"], figures["container"]
        # available = the container's memory.swap.max - its usage (cadvisorInfoToSwapStats)
        if swap_max is None:
            unmet.append("the container's memory.swap.max moved during the scrape")
        elif usage is not None and stats["container"].get("swapAvailableBytes") != swap_max - usage:
            unmet.append(f"container swapAvailableBytes {stats['container'].get('swapAvailableBytes')},"
                         f" expected memory.swap.max - usage = {swap_max - usage}")
        return {"figures": figures, "stats": stats, "unmet": unmet}

    two_consistent_scrapes("/stats/summary", scrape)


@pytest.mark.needs_behavior("LimitedSwap")
@pytest.mark.min_kubernetes("1.34")
def test_swap_limit_metric_is_memory_swap_max(swap_node: SwapNode, swapping_pod: SwappingPod, record: Recorder) -> None:
    """container_swap_limit_bytes (1.34+) is the container's memory.swap.max, as read back.

    The kubelet reports it as swap available + swap used from the container's stats, and as 0
    while the stats of a new container carry no swap figures yet (seen for its first 10-15 s on
    1.37.1: the CRI/cAdvisor path fills zeros): so the check waits, bounded, for the steady
    value; a kubelet that never reports memory.swap.max fails with every value it reported."""
    ws = swapping_pod.ws
    swap_max = int(swapping_pod.read().value(swapping_pod.container_id, "memory.swap.max"))
    seen: list[float | None] = []

    def probe() -> float | None:
        limit = find(parse_prometheus(ws.observer.node_proxy("metrics/resource")), "container_swap_limit_bytes",
                     container="stress", namespace=ws.namespace, pod="swapping")
        seen.append(limit.value if limit else None)
        return limit.value if limit is not None and limit.value == swap_max else None

    try:
        wait_for("container_swap_limit_bytes to equal memory.swap.max", probe, METRIC_SECONDS,
                 lambda: f"values seen: {seen}")
    finally:
        last = seen[-1] if seen else None
        record.check("container_swap_limit_bytes", swap_max, last, "the container's memory.swap.max",
                     ok=last == swap_max)
