"""Swap observability: node memory and swap capacity, /metrics/resource and /stats/summary
against the figures each series is defined as, read from the node: the container's and the
pod's own cgroup memory.swap.current, and for the node what cAdvisor computes for its "/"
cgroup (the node cgroup's memory.swap.current where it has one, as in kind, else SwapTotal -
SwapFree). The kubelet serves what cAdvisor sampled up to 30 s before the scrape, and says when:
so while it is scraped the node agent reads every figure every 100 ms, and each sample is put
beside the figure the node's files had while the kubelet read it. Every level must equal its
figure in two distinct samples (bounded wait), and none may contradict a figure that stood
still for 10 s before it: a kubelet that reports 0, a summed value, a missing level, or a value
frozen or late once the figure has moved fails, listing every sample. (While a figure never
moves a frozen value is the right one; and the swapping pod has one container, so its pod and
container figures agree: a kubelet swapping those two levels is not seen.)"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pytest

from clusters import waits
from clusters.provider import SwapNode
from e2e import oracle
from e2e.agent import agent_container
from e2e.claims import Claims, claim
from e2e.workspace import Workspace
from e2e.metrics import (
    Reported,
    SwapEvidence,
    find,
    has_swap_stats,
    parse_prometheus,
    reported_from_prometheus,
    reported_from_summary,
    summary_container,
    summary_pod,
    summary_system_container,
)
from e2e.nodefiles import NODE_SWAP_FILES, CgroupRead, NodeFiles, kubelet_cgroups_above, part_of
from e2e.observe import NodeObserver, WaitTimeout, unless_overloaded, wait_for
from e2e.record import Recorder
from e2e.sizing import swapping_past_limit

METRIC_SECONDS = waits.METRIC  # for the metric to appear; the comparisons of usage: WINDOW_SECONDS at a time, until this
# cAdvisor samples each cgroup every 10 s, 15 s while it does not change, each jittered up to twice
# that: a window of reads long enough for two samples of every level, read often enough that the
# figure around each of the kubelet's reads is known.
WINDOW_SECONDS = 75
READ_EVERY_MS = 100
SCRAPE_EVERY_SECONDS = 4
READ_SLACK_SECONDS = 90  # the exec's start and end beyond its window, on a loaded emulated node


def test_node_memory_capacity_is_mem_total(swap_node: SwapNode, workspace: Callable[[SwapNode], Workspace]) -> None:
    """The node's status.capacity.memory is its /proc/meminfo MemTotal, exactly.

    The oracle's main input: the kubelet's capacity is cAdvisor's MemoryCapacity, which is
    /proc/meminfo's MemTotal (pkg/kubelet/cadvisor CapacityFromMachineInfo; huge pages become
    resources of their own and are not taken off). Read from the node, compared exactly."""
    from kubernetes.utils import parse_quantity

    ws = workspace(swap_node)
    mem_total = ws.node_files().meminfo()["MemTotal"]
    capacity = ws.observer.node_status()["status"]["capacity"]["memory"]
    claim(ws.record, "status.capacity.memory", mem_total, int(parse_quantity(capacity)), "MemTotal (/proc/meminfo)",
          explain=f"capacity.memory {capacity}; MemTotal {mem_total}")
    assert swap_node.memory_capacity == mem_total  # what every expectation of the run was computed from


@pytest.mark.min_kubernetes("1.33")
def test_node_swap_capacity_is_swap_total(swap_node: SwapNode, workspace: Callable[[SwapNode], Workspace]) -> None:
    """On a node with swap, status.nodeInfo.swap.capacity and /metrics/cadvisor's
    machine_swap_bytes are the node's /proc/meminfo SwapTotal, exactly.

    Both are the machine info cAdvisor read at the kubelet's start (SwapCapacity)."""
    ws = workspace(swap_node)
    swap_total = ws.node_files().meminfo()["SwapTotal"]
    info = ws.observer.node_status()["status"]["nodeInfo"]
    assert swap_total > 0, "the node has no swap provisioned"
    claim(ws.record, "nodeInfo.swap.capacity", swap_total, (info.get("swap") or {}).get("capacity"),
          "SwapTotal (/proc/meminfo)", explain=f"nodeInfo {info}; SwapTotal {swap_total}")
    machine = find(parse_prometheus(ws.observer.node_proxy("metrics/cadvisor")), "machine_swap_bytes")
    claim(ws.record, "machine_swap_bytes (/metrics/cadvisor)", float(swap_total), machine.value if machine else "left out",
          "SwapTotal (/proc/meminfo)")


T = TypeVar("T")


def summary_once(ws: Workspace, what: str, pick: Callable[[dict[str, Any]], T], ready: Callable[[T], bool]) -> T:
    """`pick` of /stats/summary once `ready` says it is there (bounded, METRIC_SECONDS): right
    after a kubelet restart cAdvisor may not have every cgroup yet, and the summary leaves it
    out. Where it never is, the last pick: the test's claims then fail on what was reported."""
    picked: list[T] = []

    def probe() -> T | None:
        picked.append(pick(json.loads(ws.observer.node_proxy("stats/summary"))))
        return picked[-1] if ready(picked[-1]) else None

    try:
        return wait_for(f"/stats/summary with {what}", probe, METRIC_SECONDS)
    except WaitTimeout:
        if not picked:  # no summary came at all: the wait's own message says what did
            raise
        return picked[-1]


@pytest.mark.min_kubernetes("1.34")
def test_a_container_without_swap_reports_zero_swap(swap_node: SwapNode, workspace: Callable[[SwapNode], Workspace]) -> None:
    """A container whose memory.swap.max is 0 reports swap usage 0 and swapAvailableBytes 0 in
    /stats/summary, and container_swap_usage_bytes 0 and container_swap_limit_bytes 0 in
    /metrics/resource: present, not left out.

    The container is the node agent's (system-node-critical: NoSwap under every behavior). A
    limit of 0 is a limit (oracle.summary_swap_available); the metric's limit is available +
    usage. The kubelet's zeros for a container cAdvisor has not sampled yet are the same values,
    so the only wait (bounded) is for the summary to list the container at all."""
    ws = workspace(swap_node)
    agent = agent_container(ws.node_files())
    read = ws.node_files().read_cgroups([agent.id], ("memory.swap.max", "memory.swap.current"))
    swap_max, usage = read.value(agent.id, "memory.swap.max"), int(read.value(agent.id, "memory.swap.current"))
    assert swap_max == "0", f"the node agent's container has memory.swap.max {swap_max}, not 0: it proves nothing"
    swap = summary_once(ws, "the node agent's container swap",
                        lambda summary: (summary_container(summary, agent.namespace, agent.pod, agent.container)
                                         or {}).get("swap") or {},
                        bool)
    samples = parse_prometheus(ws.observer.node_proxy("metrics/resource"))
    labels = {"container": agent.container, "namespace": agent.namespace, "pod": agent.pod}
    inputs = f"{oracle.SUMMARY_SWAP_AVAILABLE_RULE}; memory.swap.max {swap_max}, memory.swap.current {usage}"
    available = oracle.summary_swap_available(swap_max, usage)
    each = Claims(ws.record)
    each.claim("/stats/summary container swapUsageBytes", usage, swap.get("swapUsageBytes"), inputs)
    each.claim("/stats/summary container swapAvailableBytes", available, swap.get("swapAvailableBytes"), inputs)
    for name, expected in (("container_swap_usage_bytes", usage), ("container_swap_limit_bytes", available + usage)):
        sample = find(samples, name, **labels)
        each.claim(name, float(expected), sample.value if sample else "left out", inputs)
    each.hold(explain=f"{agent}; summary swap {swap}\nnode: {swap_node.describe()}")


def test_swap_available_is_left_out_where_swap_is_unlimited(swap_node: SwapNode,
                                                            workspace: Callable[[SwapNode], Workspace]) -> None:
    """/stats/summary reports a pod's swap usage without swapAvailableBytes (its pod cgroup's
    memory.swap.max is max), node.systemContainers "pods" likewise (kubepods), and the node's
    swapAvailableBytes as SwapTotal minus its swap usage.

    cAdvisor's root container has the machine's swap as its limit; the cgroups above a container
    have none (oracle.PARENT_SWAP_MAX). The pod is the node agent's; each figure pair comes from
    one cAdvisor sample, so the node's sum is exact however the usage moves."""
    ws = workspace(swap_node)
    agent = agent_container(ws.node_files())
    container = ws.node_files().read_cgroups([agent.id], ("memory.swap.max",))
    above = kubelet_cgroups_above(container.path(agent.id))
    parts = {"pod": part_of(above[0]), "pods": part_of(above[-1])}
    read = ws.node_files().read_cgroups(list(parts.values()), ("memory.swap.max",), meminfo=True)
    swap_total = read.meminfo["SwapTotal"]
    stats = summary_once(ws, "the pod's, the pods' and the node's swap",
                         lambda summary: {"pod": (summary_pod(summary, agent.namespace, agent.pod) or {}).get("swap") or {},
                                          "pods": (summary_system_container(summary, "pods") or {}).get("swap") or {},
                                          "node": (summary.get("node") or {}).get("swap") or {}},
                         lambda levels: all(s.get("swapUsageBytes") is not None for s in levels.values()))
    limits = {level: read.value(part, "memory.swap.max") for level, part in parts.items()} | {"node": str(swap_total)}
    each = Claims(ws.record)
    for level, swap in stats.items():
        usage = swap.get("swapUsageBytes")
        inputs = f"{oracle.SUMMARY_SWAP_AVAILABLE_RULE}; swap limit {limits[level]}, reported usage {usage}"
        if not each.claim(f"/stats/summary {level} swapUsageBytes", "reported", "reported" if usage is not None
                          else "left out", inputs):
            continue
        expected = oracle.summary_swap_available(limits[level], usage)
        each.claim(f"/stats/summary {level} swapAvailableBytes", "left out" if expected is None else expected,
                   swap.get("swapAvailableBytes", "left out"), inputs)
    each.hold(explain=f"{agent}; pod cgroup {above[0]}, kubepods {above[-1]}; swap {stats}\nnode: {swap_node.describe()}")


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
    meminfo: bool = True  # the node's figure needs /proc/meminfo (its root cgroup has no memory.current)
    kubepods: str = ""  # the node allocatable cgroup's part (nodefiles.part_of), once the first read found it
    cadvisor_ids: dict[str, str] = field(default_factory=dict)  # level -> cAdvisor's id of its cgroup

    def parts(self) -> list[str]:
        return [self.container_id, "pod" + self.uid, *([self.kubepods] if self.kubepods else []), "."]

    def read(self) -> CgroupRead:
        """The container's, the pod's, kubepods' and the node's cgroup files (and /proc/meminfo), in one exec."""
        return self.node_files.read_cgroups(self.parts(), FILES, meminfo=True)

    def series_over(self, seconds: float, observer: NodeObserver) -> dict[str, list[tuple[int, int | None]]]:
        """Each level's figure every READ_EVERY_MS for `seconds`, on the node's clock (one exec,
        through `observer`'s own client: it runs in a thread beside the scrapes)."""
        reads = self.node_files.read_cgroups_over(self.parts(), FILES, READ_EVERY_MS, seconds, self.meminfo, observer)
        series: dict[str, list[tuple[int, int | None]]] = {"container": [], "pod": [], "node": [], "container available": [],
                                                            "pods": []}
        for read in reads:
            usage = int(read.value(self.container_id, "memory.swap.current"))
            series["container"].append((read.unix_ms, usage))
            series["pod"].append((read.unix_ms, int(read.value("pod" + self.uid, "memory.swap.current"))))
            series["node"].append((read.unix_ms, read.node_swap_usage()[0]))
            series["pods"].append((read.unix_ms, int(read.value(self.kubepods, "memory.swap.current"))))
            # /stats/summary: available = the container's memory.swap.max - its usage (cadvisorInfoToSwapStats)
            swap_max = read.value(self.container_id, "memory.swap.max")
            series["container available"].append((read.unix_ms, int(swap_max) - usage if swap_max.isdigit() else None))
        return series


FILES = ("memory.swap.current", "memory.swap.max", *NODE_SWAP_FILES)


@pytest.fixture
def swapping_pod(swap_node: SwapNode, workspace: Callable[[SwapNode], Workspace]) -> SwappingPod:
    # Its own per test: a pod shared by the tests of this module would be on the node between
    # them, where the eviction test (which needs the node to hold only its own pods) may run.
    ws = workspace(swap_node)
    swapping_past_limit(ws, "swapping")
    pod = ws.observer.pod(ws.namespace, "swapping")
    container_id = next(s["containerID"] for s in pod["status"]["containerStatuses"] if s["name"] == "stress")
    swapping = SwappingPod(ws, pod["metadata"]["uid"], container_id.split("://")[-1], ws.node_files())
    first = swapping.read()
    swapping.meminfo = "meminfo" in first.node_swap_usage()[1]
    swapping.kubepods = part_of(kubelet_cgroups_above(first.path(swapping.container_id))[-1])
    swapping.cadvisor_ids = {"container": cadvisor_id(first.path(swapping.container_id)),
                             "pod": cadvisor_id(first.path("pod" + swapping.uid)), "node": "/"}
    swap_max = first.value(swapping.container_id, "memory.swap.max")
    kubelet_has_swap_stats(swapping, int(swap_max) if swap_max.isdigit() else None)
    return swapping


def kubelet_has_swap_stats(swapping: SwappingPod, swap_max: int | None) -> None:
    """Wait (bounded) until the kubelet has cAdvisor's stats of the swapping container: before
    that it reports zeros stamped "now" (e2e/metrics.has_swap_stats), in /stats/summary and in
    /metrics/resource alike, which the comparisons would take for a wrong reading. A kubelet
    that never gets there fails here, with what it reported."""
    import json

    ws = swapping.ws
    seen: list[object] = []

    def probe() -> bool | None:
        summary = json.loads(ws.observer.node_proxy("stats/summary"))
        swap = (summary_container(summary, ws.namespace, "swapping", "stress") or {}).get("swap")
        seen.append(swap)
        return True if has_swap_stats(swap, swap_max) else None

    wait_for("the kubelet's swap stats of the swapping container (not its zeros for a container without stats)",
             probe, METRIC_SECONDS, lambda: f"memory.swap.max {swap_max}; last swap stats {seen[-3:]}")


Scrape = Callable[[], list[Reported]]


def proved_by_the_node(swapping: SwappingPod, endpoints: dict[str, tuple[Scrape, tuple[str, ...]]]) -> None:
    """Scrape every endpoint in turn while the node agent reads every level's figure every
    READ_EVERY_MS, then put each kubelet sample beside the figure the files had while the
    kubelet read it (the time the sample carries: up to 30 s before the scrape). Until every
    endpoint's every level is proved by two distinct samples, or METRIC_SECONDS; a sample that
    contradicts a figure still for long before it fails the test at once. A failure lists every
    endpoint's samples and their figures."""
    evidence = {name: SwapEvidence(levels) for name, (_, levels) in endpoints.items()}
    seen: dict[str, list[Reported]] = {name: [] for name in endpoints}
    deadline = time.monotonic() + waits.bound(METRIC_SECONDS)
    windows: list[dict[str, list[tuple[int, int | None]]]] = []
    missed: list[str] = []  # scrapes the API server answered overloaded
    reader = NodeObserver(swapping.ws.node)
    pool = ThreadPoolExecutor(max_workers=1)

    def settled() -> bool:
        return all(e.complete() for e in evidence.values()) or any(e.refuted() for e in evidence.values())

    try:
        while not settled() and time.monotonic() < deadline:
            window = max(min(WINDOW_SECONDS, deadline - time.monotonic()), 2 * SCRAPE_EVERY_SECONDS)
            reading = pool.submit(swapping.series_over, window, reader)
            # the reads' exec may be refused and retried for EXEC_RETRY before its window starts
            slack = READ_SLACK_SECONDS + waits.bound(waits.EXEC_RETRY)
            stuck = time.monotonic() + window + slack
            while not reading.done():
                if time.monotonic() > stuck:
                    pytest.fail(f"the node agent's {window:.0f} s of reads did not end within {slack:.0f} s more",
                                pytrace=False)
                for name, (scrape, _) in endpoints.items():
                    seen[name] += unless_overloaded(scrape, missed) or []
                time.sleep(SCRAPE_EVERY_SECONDS)
            windows.append(reading.result())
            # Every sample against every window: one stamped near a window's end is read in the next.
            for name, (_, levels) in endpoints.items():
                evidence[name] = SwapEvidence(levels)
                for reported in seen[name]:
                    for series in windows:
                        evidence[name].add(reported, series[reported.level])
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    if not all(e.complete() for e in evidence.values()):
        origin = windows[0]["node"][0][0] if windows and windows[0]["node"] else 0  # the first read
        lines = []
        for name, e in sorted(evidence.items(), key=lambda item: item[1].complete()):  # what failed first
            refuted = e.refuted()
            verdict = ("; ".join(refuted) if refuted else "proved" if e.complete() else
                       f"not every level equals its figure in two distinct samples within {waits.bound(METRIC_SECONDS):.0f}s")
            lines.append(f"{name}: {verdict} ({len(seen[name]) // len(e.levels)} scrapes; times from the first read"
                         f" of the node's files):\n{e.describe(origin)}")
        if missed:
            lines.append(f"{len(missed)} scrapes lost to an overloaded API server (last: {missed[-1]})")
        pytest.fail("\n".join(lines) + f"\nnode: {swapping.ws.node.describe()}", pytrace=False)


def resource_metrics(ws: Workspace, container: bool = True) -> Scrape:
    labels = {"namespace": ws.namespace, "pod": "swapping"}

    def scrape() -> list[Reported]:
        samples = parse_prometheus(ws.observer.node_proxy("metrics/resource"))
        found = [reported_from_prometheus("pod", find(samples, "pod_swap_usage_bytes", **labels)),
                 reported_from_prometheus("node", find(samples, "node_swap_usage_bytes"))]
        if container:
            found.insert(0, reported_from_prometheus(
                "container", find(samples, "container_swap_usage_bytes", container="stress", **labels)))
        return found

    return scrape


def cadvisor_id(path: str) -> str:
    """cAdvisor's name of a cgroup the node agent found: its path below the node's cgroup root
    (on kind, the node container's cgroup namespace, which is the kubelet's root too)."""
    part = part_of(path)
    return "/" if part == "." else part


def cadvisor_metrics(swapping: SwappingPod) -> Scrape:
    """/metrics/cadvisor's container_memory_swap of the swapping container, its pod cgroup and the
    node's root, each by cAdvisor's id of its cgroup (the pod's sandbox shares the pod's labels)."""
    def scrape() -> list[Reported]:
        samples = parse_prometheus(swapping.ws.observer.node_proxy("metrics/cadvisor"))
        return [reported_from_prometheus(level, find(samples, "container_memory_swap", id=cgroup))
                for level, cgroup in swapping.cadvisor_ids.items()]

    return scrape


def carries_container_swap(node: SwapNode) -> bool:
    return oracle.resource_metrics_carry_container_swap(node.kubelet_version, node.container_runtime,
                                                        node.kubelet_config.get("featureGates"))


def container_swap_metric(ws: Workspace, name: str) -> float | None:
    sample = find(parse_prometheus(ws.observer.node_proxy("metrics/resource")), name,
                  container="stress", namespace=ws.namespace, pod="swapping")
    return sample.value if sample else None


def claim_known_zeros(swapping: SwappingPod, name: str) -> None:
    """Where the oracle says the release reports a container's swap as 0 in /metrics/resource
    (#137093), the series is there and reads exactly 0 while the container is in swap and the
    kubelet has its swap stats (the fixture waited for them): a kubelet that drops the series, or a
    backport that fixes it, fails here, and the version rule then needs its new boundary."""
    ws = swapping.ws
    usage = int(swapping.read().value(swapping.container_id, "memory.swap.current"))
    assert usage > 0, f"the swapping container has nothing in swap (memory.swap.current {usage}): a 0 would prove nothing"
    claim(ws.record, name, 0.0, container_swap_metric(ws, name),
          f"{oracle.RESOURCE_METRICS_CONTAINER_SWAP_DEFECT}; kubelet {ws.node.kubelet_version},"
          f" runtime {ws.node.container_runtime or 'unknown'}",
          explain=f"the container's memory.swap.current {usage}")


def stats_summary(ws: Workspace) -> Scrape:
    import json

    def scrape() -> list[Reported]:
        summary = json.loads(ws.observer.node_proxy("stats/summary"))
        stats = {"container": (summary_container(summary, ws.namespace, "swapping", "stress") or {}).get("swap") or {},
                 "pod": (summary_pod(summary, ws.namespace, "swapping") or {}).get("swap") or {},
                 "node": (summary.get("node") or {}).get("swap") or {},
                 "pods": (summary_system_container(summary, "pods") or {}).get("swap") or {}}
        found = [reported_from_summary(level, s.get("swapUsageBytes"), s.get("time")) for level, s in stats.items()]
        container = stats["container"]
        return found + [reported_from_summary("container available", container.get("swapAvailableBytes"), container.get("time"))]

    return scrape


# Why alone: the node's figure is its whole cgroup tree's swap (on kind, the node container's),
# which any other test's memory moves (on kind, anywhere on the shared host, whose reclaim swaps
# out any cgroup's pages): the comparison needs each figure still while the kubelet reads it.
# Both endpoints in one test, scraped in turn against the same reads of the node's files: the
# node is held alone once, not twice (on an emulated kind node each took about 100 s).
@pytest.mark.needs_behavior("LimitedSwap")
@pytest.mark.min_kubernetes("1.30")
@pytest.mark.runs_alone("compares the node's whole swap usage, which any other test's memory moves")
def test_swap_usage_metrics_match_the_cgroups(swap_node: SwapNode, swapping_pod: SwappingPod) -> None:
    """Container, pod and node swap usage in /metrics/resource, /stats/summary and
    /metrics/cadvisor, the summary's container swapAvailableBytes and "pods" usage equal the
    node's cgroup figures when read (1.34-1.35: the resource container series is 0).

    Every level must equal its figure in two distinct samples within METRIC_SECONDS, and no sample
    may differ from a figure that stood still for the 10 s before it (the module's docstring says
    how the figures are read). The endpoints are scraped in turn against the same reads."""
    ws = swapping_pod.ws
    container = carries_container_swap(swap_node)
    proved_by_the_node(swapping_pod, {
        "/metrics/resource": (resource_metrics(ws, container), ("container", "pod", "node") if container else ("pod", "node")),
        "/stats/summary": (stats_summary(ws), ("container", "pod", "node", "container available", "pods")),
        "/metrics/cadvisor": (cadvisor_metrics(swapping_pod), ("container", "pod", "node")),
    })
    if not container:
        claim_known_zeros(swapping_pod, "container_swap_usage_bytes")


@pytest.mark.needs_behavior("LimitedSwap")
@pytest.mark.min_kubernetes("1.34")
def test_swap_limit_metric_is_memory_swap_max(swap_node: SwapNode, swapping_pod: SwappingPod, record: Recorder) -> None:
    """container_swap_limit_bytes (1.34+; on 1.34-1.35 exactly 0: k/k#137093) and
    /metrics/cadvisor's container_spec_memory_swap_limit_bytes are the container's
    memory.swap.max, as read back.

    The kubelet reports it as swap available + swap used from the container's stats, and as 0
    while the stats of a new container carry no swap figures yet (its first 10-15 s on 1.37.1:
    the CRI/cAdvisor path fills zeros): so the check waits, bounded, for the steady value; a
    kubelet that never reports memory.swap.max fails with every value it reported. Before 1.36
    the release reports 0 for good (the oracle's #137093 rule): then exactly 0."""
    ws = swapping_pod.ws
    swap_max = int(swapping_pod.read().value(swapping_pod.container_id, "memory.swap.max"))
    # cAdvisor's spec of the container: read once when cAdvisor first saw it, as the kubelet had written it
    spec = find(parse_prometheus(ws.observer.node_proxy("metrics/cadvisor")), "container_spec_memory_swap_limit_bytes",
                id=swapping_pod.cadvisor_ids["container"])
    claim(ws.record, "container_spec_memory_swap_limit_bytes (/metrics/cadvisor)", float(swap_max),
          spec.value if spec else "left out", "the container's memory.swap.max (cAdvisor's container spec)")
    if not carries_container_swap(swap_node):
        claim_known_zeros(swapping_pod, "container_swap_limit_bytes")
        return
    seen: list[float | None] = []

    def probe() -> float | None:
        seen.append(container_swap_metric(ws, "container_swap_limit_bytes"))
        return seen[-1] if seen[-1] == swap_max else None

    try:
        wait_for("container_swap_limit_bytes to equal memory.swap.max", probe, METRIC_SECONDS,
                 lambda: f"values seen: {seen}")
    finally:
        last = seen[-1] if seen else None
        record.check("container_swap_limit_bytes", swap_max, last, "the container's memory.swap.max",
                     ok=last == swap_max)
