"""The eviction test's pure logic: the oracle's expected evictions (rankMemoryPressure, evictPod
passing over critical pods, pressure ending at the threshold), the plan of an episode
(e2e/eviction.py plan_pressure), and the check of the memory.available signal against the node's
cgroup files (the kubelet's rule, and the windows a cached summary sample can be judged in)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from e2e import oracle
from e2e.eviction import (
    MIN_MARGIN,
    DesignError,
    Eviction,
    RootRead,
    SampleWindow,
    extra_evictions,
    node_memory_problems,
    parse_root_read,
    plan_pressure,
    judged_enough,
    sample_windows,
    swap_reorders,
)

Mi = 1 << 20
Gi = 1 << 30


def pod(name: str, request: int | None = None, limit: int | None = None, priority: int = 0, namespace: str = "ns",
        annotations: dict[str, str] | None = None, overhead: int | None = None) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if request is not None:
        resources["requests"] = {"memory": str(request)}
    if limit is not None:
        resources["limits"] = {"memory": str(limit)}
    spec: dict[str, Any] = {"containers": [{"name": "stress", "resources": resources}], "priority": priority}
    if overhead is not None:
        spec["overhead"] = {"memory": str(overhead)}
    return {"metadata": {"name": name, "namespace": namespace, "annotations": annotations or {}}, "spec": spec}


NODE_CRITICAL = 2_000_001_000
# The eviction test's pods as a correct node shows them at settle (working sets a few MiB above
# what each allocated), and pods of the node itself.
DESIGNED = [
    pod("low-big", 32 * Mi, priority=-10), pod("low-small", 32 * Mi, priority=-10), pod("above", 32 * Mi),
    pod("hog", 128 * Mi, 256 * Mi, priority=10), pod("critical", 32 * Mi, priority=NODE_CRITICAL),
    pod("within", 160 * Mi), pod("guaranteed", 64 * Mi, 64 * Mi),
]
NODE_PODS = [
    pod("kube-proxy-x", priority=NODE_CRITICAL, namespace="kube-system"),  # BestEffort: above its request (0)
    pod("coredns-1", 70 * Mi, 170 * Mi, priority=2_000_000_000, namespace="kube-system"),
    pod("etcd-node", 100 * Mi, namespace="kube-system",  # a mirror pod: critical whatever its priority
        annotations={oracle.CONFIG_MIRROR_ANNOTATION: "x", oracle.CONFIG_SOURCE_ANNOTATION: "file"}),
    pod("cgroup-sampler", priority=NODE_CRITICAL),
]
USAGE = {"ns/low-big": 99 * Mi, "ns/low-small": 67 * Mi, "ns/above": 83 * Mi, "ns/hog": 255 * Mi,
         "ns/critical": 99 * Mi, "ns/within": 151 * Mi, "ns/guaranteed": 35 * Mi,
         "kube-system/kube-proxy-x": 20 * Mi, "kube-system/coredns-1": 15 * Mi, "kube-system/etcd-node": 180 * Mi,
         "ns/cgroup-sampler": 3 * Mi}
PODS = DESIGNED + NODE_PODS
AVAILABLE = 2 * Gi


# --- the oracle: which pods, in which order, until when ------------------------------------------

def test_the_plan_evicts_up_to_the_hog_passes_over_critical_pods_and_takes_the_within_request_pod() -> None:
    plan = plan_pressure(PODS, USAGE, AVAILABLE, "ns/hog")
    assert plan.expected == ["ns/low-big", "ns/low-small", "ns/above", "ns/hog", "ns/within"]
    assert plan.threshold == AVAILABLE + (99 + 67 + 83 + 255) * Mi + 151 * Mi // 2
    # the kubelet's loop reaches these after the hog, before the within-request pod: the etcd
    # mirror pod (above its request, priority 0), then priority order
    assert plan.passed_over == ["kube-system/etcd-node", "ns/critical", "kube-system/kube-proxy-x", "ns/cgroup-sampler"]
    assert plan.next == "ns/within" and "ns/guaranteed" not in plan.expected  # ranked after: -29 MiB vs -9 MiB


def test_swap_reorders_two_pods_only_where_counting_it_would_put_the_second_first() -> None:
    peer = pod("peer", 32 * Mi, priority=10)
    pods = [*PODS, peer]
    usage = {**USAGE, "ns/peer": 181 * Mi}  # 149 MiB above its request; the hog 127 MiB
    assert swap_reorders(pods, usage, {"ns/hog": 36 * Mi}, "ns/peer", "ns/hog")  # the hog's total: 163 MiB
    assert not swap_reorders(pods, usage, {"ns/hog": 20 * Mi}, "ns/peer", "ns/hog")  # 147 MiB: the peer first still
    assert not swap_reorders(pods, usage, {"ns/hog": 22 * Mi}, "ns/peer", "ns/hog")  # 149 MiB: a tie tells nothing
    assert not swap_reorders(pods, {**usage, "ns/peer": 150 * Mi}, {"ns/hog": 36 * Mi}, "ns/peer", "ns/hog")


def test_expected_evictions_stop_as_soon_as_the_signal_reaches_the_threshold() -> None:
    plan = plan_pressure(PODS, USAGE, AVAILABLE, "ns/hog")
    before_within = AVAILABLE + (99 + 67 + 83 + 255) * Mi
    assert oracle.expected_evictions(PODS, USAGE, AVAILABLE, before_within) == plan.expected[:4]
    assert oracle.expected_evictions(PODS, USAGE, AVAILABLE, before_within + 1) == plan.expected
    assert oracle.expected_evictions(PODS, USAGE, AVAILABLE, AVAILABLE) == []  # no pressure
    # pressure that evicting every pod cannot end: every pod but the critical ones, in order
    everything = oracle.expected_evictions(PODS, USAGE, AVAILABLE, 100 * Gi)
    assert everything == plan.expected + ["ns/guaranteed"]
    assert not any(oracle.is_critical_pod(p) for p in PODS if oracle._pod_key(p) in everything)  # noqa: SLF001


def test_a_pod_with_system_critical_priority_is_passed_over_like_a_static_one() -> None:
    pods = [pod("a", 0, priority=2_000_000_000), pod("b", 0, priority=1_999_999_999), pod("c", 0, namespace="x",
            annotations={oracle.CONFIG_SOURCE_ANNOTATION: "file"})]
    usage = {"ns/a": 50 * Mi, "ns/b": 10 * Mi, "x/c": 90 * Mi}
    assert oracle.expected_evictions(pods, usage, 0, 5 * Mi) == ["ns/b"]
    assert oracle.critical_pods_passed_over(pods, usage, ["ns/b"]) == ["x/c"]  # priority 0 ranks first


def test_pressure_ending_inside_a_tie_is_not_a_definite_answer() -> None:
    tied = [pod("a", 10 * Mi), pod("b", 10 * Mi)]
    usage = {"ns/a": 30 * Mi, "ns/b": 30 * Mi}
    with pytest.raises(ValueError, match="tied pods"):
        oracle.expected_evictions(tied, usage, 0, 10 * Mi)
    assert oracle.expected_evictions(tied, usage, 0, 60 * Mi) == ["ns/a", "ns/b"]  # both go: order undefined


def test_the_request_the_ranking_uses_adds_overhead_only_to_a_non_zero_request() -> None:
    assert oracle.eviction_memory_request(pod("p", 64 * Mi, overhead=16 * Mi)) == 80 * Mi
    assert oracle.eviction_memory_request(pod("p", overhead=16 * Mi)) == 0  # GetResourceRequestQuantity
    assert oracle.pod_memory_request(pod("p", overhead=16 * Mi)) == 16 * Mi  # PodRequests (admission) does add it
    assert oracle.eviction_memory_request(pod("p", limit=64 * Mi)) == 64 * Mi  # defaulted from the limit


def test_a_plan_the_node_does_not_allow_is_a_design_error_with_the_figures() -> None:
    small = dict(USAGE, **{"ns/within": 2 * MIN_MARGIN - Mi})
    with pytest.raises(DesignError, match="below the .* margin"):
        plan_pressure(PODS, small, AVAILABLE, "ns/hog")
    with pytest.raises(DesignError, match="no pod the kubelet may evict is ranked after the hog"):
        plan_pressure([p for p in PODS if p["metadata"]["name"] not in ("within", "guaranteed")], USAGE, AVAILABLE, "ns/hog")
    tie = DESIGNED + [pod("twin", 160 * Mi)]
    with pytest.raises(DesignError, match="tied"):
        plan_pressure(tie, dict(USAGE, **{"ns/twin": 151 * Mi}), AVAILABLE, "ns/hog")


def test_evictions_beyond_the_plan_are_named_with_their_time() -> None:
    def e(key: str, t: float) -> Eviction:
        return Eviction(key, t, "", "Failed", "Evicted", "", {}, [137])

    seen = [e("ns/hog", 10), e("ns/within", 14), e("ns/guaranteed", 25), e("kube-system/kube-proxy-x", 30)]
    assert extra_evictions(seen, ["ns/hog", "ns/within"]) == [
        "ns/guaranteed at t=25s (+11s after the last expected eviction)",
        "kube-system/kube-proxy-x at t=30s (+16s after the last expected eviction)"]
    assert extra_evictions(seen[:2], ["ns/hog", "ns/within"]) == []


def test_two_lost_events_are_not_put_out_of_order_by_each_other() -> None:
    """Two evictions whose Evicted events were lost: c marked at :08, a with no mark, b decided
    at :09. a and c may both go where the oracle puts them (nothing decided after c's mark is
    ahead of it there); placing a pod at the place its mark allows before placing one expected
    ahead of it invented an inversion of a correct kubelet's order: [c, a, b]."""
    from e2e.eviction import EvictionWatch

    def e(key: str, at: str, decided: str = "") -> Eviction:
        return Eviction(key, 1.0, at, "Failed", "Evicted", "", {}, [137], decided)

    watch = EvictionWatch(None)  # type: ignore[arg-type]
    watch.evictions = [e("ns/b", "2026-12-07T00:00:09Z", "2026-12-07T00:00:09Z"), e("ns/c", "2026-12-07T00:00:08Z"),
                       e("ns/a", "")]
    assert watch.evicted(["ns/a", "ns/b", "ns/c"]) == ["ns/a", "ns/c", "ns/b"]


# --- the signal -----------------------------------------------------------------------------------

STAT = "anon 1000\nfile 700\nkernel 50\nactive_file 300\ninactive_file 400\nshmem 10\n"


def test_the_working_set_is_read_where_cadvisor_reads_it() -> None:
    host = parse_root_read(STAT, has_current=False)  # a host's root cgroup: anon + file
    assert (host.usage, host.working_set) == (1700, 1300)
    kind = parse_root_read("2000\n" + STAT, has_current=True)  # a kind node's cgroup namespace: memory.current
    assert (kind.usage, kind.working_set) == (2000, 1600)
    assert oracle.node_working_set(300, {"inactive_file": 400}) == 0  # never below zero
    with pytest.raises(ValueError, match="memory.current first"):
        parse_root_read(STAT, has_current=True)
    with pytest.raises(ValueError, match="inactive_file"):
        parse_root_read("anon 1\nfile 2\n", has_current=False)


def test_available_is_capacity_minus_the_working_set_and_hugepages_from_1_37() -> None:
    assert oracle.node_memory_available(4 * Gi, Gi) == 3 * Gi
    assert oracle.node_memory_available(4 * Gi, Gi, 512 * Mi) == 3 * Gi - 512 * Mi
    assert oracle.node_memory_available(4 * Gi, 4 * Gi - Mi, 512 * Mi) == 0
    assert oracle.node_memory_available(Gi, Gi + 1) == 2**64 - 1  # uint64, as in Go
    assert oracle.hugepage_aware_eviction("v1.37.1") and oracle.hugepage_aware_eviction("v1.38.0-alpha.1+patch.ab")
    assert not oracle.hugepage_aware_eviction("v1.36.3")
    assert not oracle.hugepage_aware_eviction("v1.37.1", {"HugepageAwareEviction": False})


def read(usage: int, inactive: int = 100) -> RootRead:
    return RootRead(usage, {"inactive_file": inactive})


def memory(t: str, usage: int, ws: int, available: int) -> dict[str, Any]:
    return {"time": t, "usageBytes": usage, "workingSetBytes": ws, "availableBytes": available, "rssBytes": 1}


def test_a_new_summary_sample_is_bracketed_by_the_reads_around_the_summaries() -> None:
    reads = [read(1000), read(1010), read(1020), read(1030), read(1040)]
    a, b = memory("t1", 990, 890, 9110), memory("t2", 1015, 915, 9085)
    windows = sample_windows(reads, [a, a, b, b])
    assert [(w.memory["time"], [r.usage for r in w.reads]) for w in windows] == [("t2", [1010, 1020, 1030])]
    assert sample_windows(reads[:4], [a, a, a, b]) == []  # no read after the summary with it yet
    assert sample_windows(reads, [b, b, b, b]) == []  # the first one's sample has no known start


CAPACITY = 10_000


def test_a_consistent_summary_passes_exactly_or_within_its_window() -> None:
    same = SampleWindow(memory("t", 1000, 900, CAPACITY - 900), (read(1000), read(1000), read(1000)))
    assert same.exact and node_memory_problems([same], CAPACITY, 0) == []
    moving = SampleWindow(memory("t", 1015, 915, CAPACITY - 915), (read(1000), read(1010), read(1030)))
    assert not moving.exact and node_memory_problems([moving], CAPACITY, 0) == []


def test_an_inflated_available_fails_exactly_whatever_the_timing() -> None:
    inflated = SampleWindow(memory("t", 1015, 915, CAPACITY - 915 + 4096), (read(1000), read(1010), read(1030)))
    assert node_memory_problems([inflated], CAPACITY, 0) == [
        f"sample at t: availableBytes {CAPACITY - 915 + 4096} != capacity {CAPACITY} - workingSetBytes 915"
        f" = {CAPACITY - 915} (+4096)"]
    hugepages = SampleWindow(memory("t", 1000, 900, CAPACITY - 900), (read(1000),) * 3)
    assert "- hugepages 512" in node_memory_problems([hugepages], CAPACITY, 512)[0]


def test_a_working_set_the_node_never_had_fails() -> None:
    # a kubelet that also takes active file pages off (or reports RSS): smaller than every read
    low = SampleWindow(memory("t", 1000, 600, CAPACITY - 600), (read(1000), read(1000), read(1000)))
    assert node_memory_problems([low], CAPACITY, 0) == ["sample at t: workingSetBytes 600, the node's files = 900"
                                                        " across the window (-300)"]
    # where the files moved across the window, only the identity is judged: a live node's memory
    # swings by megabytes both ways between reads (a false alarm on v1.37.1 when this was bounded)
    moved = SampleWindow(memory("t", 1031, 931, CAPACITY - 931), (read(1000), read(1010), read(1030)))
    assert node_memory_problems([moved], CAPACITY, 0) == []


def test_no_window_or_missing_figures_are_problems() -> None:
    assert node_memory_problems([], CAPACITY, 0) == [
        "no new /stats/summary node memory sample came between two reads of the node's files"]
    bare = SampleWindow({"time": "t", "workingSetBytes": 1}, (read(1000),) * 3)
    assert node_memory_problems([bare], CAPACITY, 0)[0].startswith("sample at t: node memory without ['usageBytes',"
                                                                     " 'availableBytes']")


def test_leftovers_that_stay_are_named_with_the_side_that_is_slow(monkeypatch: pytest.MonkeyPatch) -> None:
    """Other tests' pods that do not leave the node before the eviction test: the failure says,
    for each, whether it waits for the namespace controller (not marked for deletion) or for
    the kubelet (terminating since when)."""
    from types import SimpleNamespace

    from e2e import test_eviction
    from e2e.observe import WaitTimeout
    from workloads.pods import labels

    def pod(namespace: str, name: str, deleted: str | None) -> dict:
        meta = {"namespace": namespace, "name": name, "labels": labels("t")}
        if deleted:
            meta["deletionTimestamp"] = deleted
        return {"metadata": meta, "status": {"phase": "Running"}}

    stay = [pod("shapes", "guaranteed", "2026-11-26T01:00:00Z"), pod("shapes", "best-effort", None),
            pod("mine", "hog", None)]
    ws = SimpleNamespace(namespace="mine", node=SimpleNamespace(name="node-1"),
                         observer=SimpleNamespace(pods_on_node=lambda: stay))
    monkeypatch.setattr(test_eviction, "LEFTOVER_SECONDS", 0.3)
    with pytest.raises(WaitTimeout) as raised:
        test_eviction.wait_for_other_tests_pods_to_go(ws)
    assert str(raised.value).endswith(
        "still there: ['shapes/guaranteed (terminating since 2026-11-26T01:00:00Z, Running)',"
        " 'shapes/best-effort (not marked for deletion, Running)']"), str(raised.value)


def test_the_signal_check_ends_on_an_exact_window_or_two_new_samples() -> None:
    moving = SampleWindow(memory("t", 1015, 915, CAPACITY - 915), (read(1000), read(1010), read(1030)))
    exact = SampleWindow(memory("t", 1000, 900, CAPACITY - 900), (read(1000),) * 3)
    assert not judged_enough([]) and not judged_enough([moving])
    assert judged_enough([exact]) and judged_enough([moving, moving])


class SlowNode:
    """The signal check's node, where one round (a read, a summary) outlasts the whole bound, as
    on a loaded emulated node: the node's files and memory sample stay as they are until
    `sample_after` summaries have been served, then a new sample comes."""

    def __init__(self, sample_after: int) -> None:
        self.summaries = 0
        self.sample_after = sample_after
        self.ws = type("Ws", (), {"namespace": "ns"})()
        self.pod = "reader"

    def read_cgroups(self, parts: Any, files: Any, meminfo: bool = False) -> Any:
        return type("Read", (), {"files": {".": {"memory.current": "1000"}}, "meminfo": {"MemTotal": CAPACITY}})()

    def exec(self, namespace: str, pod: str, container: str, argv: list[str]) -> Any:
        return type("Done", (), {"stdout": "1000\ninactive_file 100\n"})()

    def node_proxy(self, path: str) -> str:
        self.summaries += 1
        new = self.summaries > self.sample_after
        sample = memory("t2" if new else "t1", 1000, 900, CAPACITY - 900)
        return json.dumps({"node": {"memory": sample}})


def test_the_signal_check_reads_enough_summaries_before_it_says_no_sample_came() -> None:
    from e2e.eviction import NODE_SIGNAL_LOOKS, check_node_memory_signal

    node = SlowNode(sample_after=NODE_SIGNAL_LOOKS - 1)
    check = check_node_memory_signal(node, node, 0, seconds=0)  # type: ignore[arg-type]
    assert check.problems == [] and [w.memory["time"] for w in check.windows] == ["t2"]
    stalled = SlowNode(sample_after=10**6)
    check = check_node_memory_signal(stalled, stalled, 0, seconds=0)  # type: ignore[arg-type]
    assert stalled.summaries == NODE_SIGNAL_LOOKS
    assert check.problems == ["no new /stats/summary node memory sample came between two reads of the node's files"]


def test_the_watch_counts_from_the_clock_in_use_when_it_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    # the simulated kubelet patches time.monotonic; a start bound to the real one at import made
    # its moments late by however long the host took to get there (a flaky self-test under load)
    import time

    from e2e.eviction import EvictionWatch

    monkeypatch.setattr(time, "monotonic", lambda: 42.0)
    assert EvictionWatch(None).start == 42.0  # type: ignore[arg-type]


def test_a_summary_lost_to_an_overloaded_api_server_costs_the_signal_check_one_look(monkeypatch: pytest.MonkeyPatch) -> None:
    from kubernetes.client.exceptions import ApiException

    from e2e.eviction import check_node_memory_signal

    class Overloaded(SlowNode):
        def node_proxy(self, path: str) -> str:
            if self.summaries == 1 and not getattr(self, "refused", False):
                self.refused = True
                raise ApiException(status=503, reason="Service Unavailable")
            return super().node_proxy(path)

    import time

    naps: list[float] = []
    monkeypatch.setattr(time, "sleep", naps.append)
    node = Overloaded(sample_after=2)
    check = check_node_memory_signal(node, node, 0, seconds=0)  # type: ignore[arg-type]
    assert naps == [2.0]  # a 429 comes back at once: the lost look is not retried in a tight loop
    assert check.problems == [] and [w.memory["time"] for w in check.windows] == ["t2"]
    assert len(check.missed) == 1 and "1 summaries lost to an overloaded API server" in check.judged()
