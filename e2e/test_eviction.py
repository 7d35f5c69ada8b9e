"""A node under memory pressure: the kubelet evicts pods in the order its ranking decides,
says why, passes over critical pods when its ranking reaches them, keeps pods within their
request while one above its request remains, and stops when the pressure is over. Under
LimitedSwap a memory hog is swapping when pressure begins: swap counts neither in the signal nor
in the ranking (a peer of the hog's priority ranks before it on working sets, after it were its
swap counted); under NoSwap the same Burstable pods never touch swap.

The pressure comes from the threshold, not from exhausting the node: every pod is deployed
and holding first; the signal the kubelet will act on (/stats/summary node memory) is checked
against the node's own cgroup files; then evictionSoft memory.available is set with a grace
period (through the provider, confirmed by /configz, restored afterwards) so that evicting
every pod ranked before the hog and the hog cannot end the pressure, the critical pods ranked
next must be passed over, and evicting the pod after them (the within-request pod) does end it
(e2e/eviction.py plan_pressure, from the oracle's ranking). The same test therefore means the
same on a 4 GiB VM and on a large host. The grace period is there because setting a threshold
restarts the kubelet, which then has no stats for some pods for a while, and ranks a pod
without stats first (seen on kind: the first ranking came before two of the pods had any)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

from clusters import waits
from clusters.provider import NotCoveredError, Provider, SwapNode
from e2e import oracle
from e2e.claims import claim
from e2e.workspace import Workspace, observer_of
from e2e.eviction import (
    DesignError,
    EvictionWatch,
    Moment,
    PressurePlan,
    account,
    check_node_memory_signal,
    extra_evictions,
    key_of,
    plan_pressure,
    swap_reorders,
)
from e2e.gate import could_not_test
from e2e.verdict import HOSTS_THE_API_SERVER
from e2e.agent import is_agent
from e2e.observe import absent, once, sent, unique_name, wait_for
from workloads.pods import GUARANTEED, Mi, alloc_command, of_the_suite, stress_pod

PRIORITIES = {"low": -10, "high": 10}  # this run's PriorityClasses
HOG_REQUEST, HOG_LIMIT = 128 * Mi, 256 * Mi  # a swap share of at least 32 MiB on the suite's nodes (hog_allocation)
PEER_REQUEST = 32 * Mi
WATCH_SECONDS = waits.EVICTION_WATCH
# evictionSoftGracePeriod: seconds the threshold is met before the first eviction. Until a
# restarted kubelet has a pod's memory stats it ranks it first (no stats at all) or as within its
# request (listed, no working set: eviction/helpers.go memoryUsage is 0), so it may evict out of
# the full-stats order. The grace lets the stats come first (a kubelet restart takes about 4 s on
# the vm node and 8-18 s on kind), but the test does not trust it blindly: the first eviction
# must come at least STATS_LEAD seconds after /stats/summary showed a working set for every pod
# on the node again, or the ranking could not be compared (a skip, a failure under --gate),
# never a false alarm about the order.
GRACE = 60
STATS_LEAD = 10  # the eviction manager's monitoring interval: one synchronize with every pod's stats
FIRST_EVICTION_SECONDS = waits.FIRST_EVICTION  # plus GRACE: the kubelet restarts with the threshold, then synchronizes every 10 s
POLL_SECONDS = 2
SETTLE_SECONDS = waits.STATS_SETTLED
TAINT_SECONDS = waits.TAINT
QUIET_SECONDS = 60  # pressure over: no eviction for this long and no MemoryPressure (kept 30 s after the signal clears)
LEFTOVER_SECONDS = waits.LEFTOVER_PODS  # namespaces are deleted with grace period 0


@dataclass(frozen=True)
class Designed:
    name: str
    request: int
    limit: int | None
    allocate: int
    priority_class: str | None = None  # "low"/"high": this run's PriorityClasses; or a class's name


# Far apart in every key the ranking uses, so the expected order does not hang on a few KiB.
# The hog is the last pod above its request the kubelet may evict (highest priority among them,
# after the peer of its priority, whose working set is further above its request: peer_allocation);
# after it the ranking reaches the critical pods (above their requests, priority >= 2000000000:
# evictPod refuses them) and then the within-request pods: "within" first (usage - request about
# -9 MiB, against about -30 MiB for "guaranteed"). Pressure lasts until "within" is evicted and
# ends with it: half its working set (about 75 MiB) is the margin either side. (A container whose
# memory request equals its limit gets no swap, so a swapping hog cannot stay within its request.)
DESIGNED = (
    Designed("low-big", 32 * Mi, None, 96 * Mi, "low"),      # above request, priority -10, +64 MiB
    Designed("low-small", 32 * Mi, None, 64 * Mi, "low"),    # above request, priority -10, +32 MiB
    Designed("above", 32 * Mi, None, 80 * Mi),               # above request, priority 0, +48 MiB
    Designed("peer", PEER_REQUEST, None, 0, "high"),         # above request, priority 10: before the hog (peer_allocation)
    Designed("hog", HOG_REQUEST, HOG_LIMIT, 0, "high"),      # above request, priority 10; swaps (LimitedSwap)
    Designed("critical", 32 * Mi, None, 96 * Mi, "system-node-critical"),  # above, ranked next, never evicted
    Designed("within", 160 * Mi, None, 148 * Mi),            # within its request, priority 0: evicted last
    Designed("guaranteed", 64 * Mi, 64 * Mi, 32 * Mi),       # Guaranteed, within its limit, priority 0: stays
)


@pytest.fixture
def priority_classes(swap_node: SwapNode, swap_provider: Provider) -> Iterator[dict[str, str]]:
    from kubernetes import client

    if not swap_provider.reconfigures_kubelets:
        yield {}  # the test could not test
        return
    api = client.SchedulingV1Api(observer_of(swap_node).api)
    names = {}
    try:
        for which, value in PRIORITIES.items():
            name = names[which] = unique_name(f"ksc-{which}")
            once(f"priority class {name} created",
                 lambda: api.create_priority_class({"metadata": {"name": name}, "value": value, "globalDefault": False,
                                                    "description": "kube-swap-conformance eviction test"}))
        yield names
    finally:
        for name in names.values():
            sent(f"priority class {name} deleted", lambda: api.delete_priority_class(name), landed=absent)


def hog_share(node: SwapNode) -> int:
    """The hog's memory.swap.max were the node running LimitedSwap."""
    pod = stress_pod("hog", "x", "ns", "t", [], {"memory": HOG_REQUEST}, {"memory": HOG_LIMIT})
    return oracle.expected_swap_max("LimitedSwap", pod, "stress", node.memory_capacity, node.swap_capacity)


def hog_allocation(node: SwapNode) -> int:
    """Under LimitedSwap the hog goes past its limit by half its swap share: it is swapping
    when pressure begins. Under NoSwap it stays below its limit (no swap to go to)."""
    if node.behavior != "LimitedSwap":
        return HOG_LIMIT - 24 * Mi
    share = hog_share(node)
    assert share >= 32 * Mi, f"the hog's swap share {share} is too small to swap meaningfully on {node.describe()}"
    return HOG_LIMIT + share // 2 // Mi * Mi


def peer_allocation(node: SwapNode) -> int:
    """The peer's usage above its request lies halfway between the most the swapping hog's
    working set can be above its request (its limit holds it) and the least its working set
    plus swap is (what it allocated): a quarter of the hog's share from either. So a ranking
    by working sets puts the peer first, one that counted swap the hog: the order the kubelet
    evicts the two in says which it ranks by. Sized the same under NoSwap, where the hog does
    not swap and the peer comes first either way."""
    return PEER_REQUEST + (HOG_LIMIT - HOG_REQUEST) + hog_share(node) // 4 // Mi * Mi


def allocation(d: Designed, node: SwapNode) -> int:
    sized = {"hog": hog_allocation, "peer": peer_allocation}.get(d.name)
    return sized(node) if sized else d.allocate


def deploy_designed(ws: Workspace, classes: dict[str, str]) -> list[str]:
    manifests = []
    for d in DESIGNED:
        target = allocation(d, ws.node)
        requests = {"memory": d.request}
        limits = {"memory": d.limit} if d.limit else {}
        if d.name == "guaranteed":
            requests["cpu"] = limits["cpu"] = GUARANTEED["cpu"]
        priority = classes.get(d.priority_class or "", d.priority_class)
        manifests.append(stress_pod(d.name, ws.image, ws.namespace, ws.test, alloc_command(target), requests, limits,
                                    priority_class=priority))
    ws.deploy_sampled(*manifests, interval="500ms")
    for d in DESIGNED:
        ws.running(d.name)
        ws.observer.wait_log_line(ws.namespace, d.name, "stress", f"holding {allocation(d, ws.node)}")
    return [f"{ws.namespace}/{d.name}" for d in DESIGNED]


def holding(ws: Workspace) -> dict[str, int]:
    """What /stats/summary must show each designed pod holding once it has filled. The hog holds
    at most its limit in RAM (the rest, under LimitedSwap, is in swap)."""
    needs = {f"{ws.namespace}/{d.name}": allocation(d, ws.node) for d in DESIGNED}
    needs[f"{ws.namespace}/hog"] = HOG_REQUEST + (min(needs[f"{ws.namespace}/hog"], HOG_LIMIT) - HOG_REQUEST) // 2
    return needs


def swapped_out(ws: Workspace) -> dict[str, int]:
    """What /stats/summary must show each designed pod holding in swap once it has filled: the
    hog's allocation past its limit, which memory.max keeps out of RAM (none under NoSwap, where
    it stays below its limit)."""
    hog = next(d for d in DESIGNED if d.name == "hog")
    return {f"{ws.namespace}/hog": max(0, allocation(hog, ws.node) - HOG_LIMIT)}


def settled_moment(watch: EvictionWatch, needs: dict[str, int], swap_needs: dict[str, int]) -> Moment:
    """The first look whose /stats/summary shows every pod holding what it allocated, in RAM and
    in swap, and a node sample taken since: the summary is refreshed every 10-15 s, container by
    container, and a stale one ranks a pod by its usage before it filled (a hog ranked within its
    request; a hog whose working set had reached its limit while the rest of its allocation was
    still going out to swap, so that its swap did not yet outweigh the peer's lead), or gives the
    node's available memory from before a pod filled (the threshold would then be too high by
    what that pod holds). A node sample that changed after a look showed every pod holding was
    taken after they all held."""
    seen: dict[str, tuple[int | None, int | None]] = {}
    full: list[Moment] = []

    def probe() -> Moment | None:
        moment = watch.poll()
        seen.update({k: (moment.working_set.get(k), moment.swap.get(k)) for k in needs})
        if not (all((moment.working_set.get(k) or 0) >= need for k, need in needs.items())
                and all((moment.swap.get(k) or 0) >= need for k, need in swap_needs.items())):
            return None
        if not full:
            full.append(moment)
            return None
        return moment if moment.node_memory != full[0].node_memory else None

    return wait_for("/stats/summary to show every pod's allocation, and a node sample since", probe, SETTLE_SECONDS,
                    lambda: f"(working set, swap) {seen}, at least {needs} and swap {swap_needs}; node memory"
                            f" {full[0].node_memory if full else 'not looked at yet'}")


def wait_for_other_tests_pods_to_go(ws: Workspace) -> list[str]:
    """Wait (bounded) until no pod of another of the suite's tests is on the node; returns the
    ones that were there at first."""
    def others() -> list[dict]:
        return [p for p in ws.observer.pods_on_node()
                if of_the_suite(p) and not is_agent(p) and p["metadata"]["namespace"] != ws.namespace]

    first = others()
    seen = list(first)

    def gone() -> bool | None:
        seen[:] = others()
        return True if not seen else None

    if first:
        # Which side is slow, when they stay: a pod not yet marked for deletion waits for the
        # namespace controller, a terminating one for the kubelet.
        wait_for(f"other tests' pods to leave {ws.node.name}", gone, LEFTOVER_SECONDS,
                 lambda: f"still there: {[leftover(p) for p in seen]}")
    return [key_of(p) for p in first]


def leftover(pod: dict) -> str:
    deleted = pod["metadata"].get("deletionTimestamp")
    phase = (pod.get("status") or {}).get("phase")
    return f"{key_of(pod)} ({f'terminating since {deleted}' if deleted else 'not marked for deletion'}, {phase})"


def hugepages_taken_off(ws: Workspace, config: dict) -> int:
    """The hugepages capacity the kubelet takes off node availableBytes (0 where it does not)."""
    if not oracle.hugepage_aware_eviction(ws.node.kubelet_version, config.get("featureGates")):
        return 0
    capacity = (ws.observer.node_status().get("status") or {}).get("capacity") or {}
    return sum(oracle.quantity_bytes(v) for k, v in capacity.items() if k.startswith("hugepages-"))


def stats_in_time(request: pytest.FixtureRequest, watch: EvictionWatch, stats_back: float | None, behavior: str) -> None:
    """The ranking the test compares assumes the kubelet had every pod's stats when it first
    evicted: a restarted kubelet ranks a pod it has none for first. If the first eviction came
    less than STATS_LEAD s after /stats/summary showed every pod's working set again (or before),
    the order says nothing about the kubelet's ranking: could not test, with the pods it lacked."""
    if not watch.evictions:
        return  # nothing evicted: the checks say so
    first = watch.evictions[0].t
    if stats_back is not None and first - stats_back >= STATS_LEAD:
        return
    before = watch.before_first_eviction()
    could_not_test(request.config, f"the restarted kubelet evicted {watch.evictions[0].key} at {first:.0f}s of the watch,"
                   f" {'before' if stats_back is None else f'{first - stats_back:.0f}s after'} /stats/summary showed every"
                   f" pod's working set again (at least {STATS_LEAD}s needed); no working set at the last look before it:"
                   f" {before.unranked() if before else 'no look'}. The grace period ({GRACE}s) was too short for this"
                   " node's restart: the eviction order cannot be compared with the ranking.", behavior)


def plan_at(settled: Moment, hog: str) -> PressurePlan:
    try:
        return plan_pressure(list(settled.pods.values()), settled.working_set, settled.node_available, hog)
    except DesignError as error:
        pytest.fail(f"this node's pods do not allow the planned pressure episode: {error}; working sets"
                    f" {settled.working_set}, node available {settled.node_available}", pytrace=False)


# First among its behavior's tests, so that no other test's pods are still leaving the node:
# right after the pod shapes (16 pods deleted together) the node can take minutes to let them go.
@pytest.mark.needs_behavior("NoSwap", "LimitedSwap")
@pytest.mark.runs_alone("drives the node into memory pressure and restarts its kubelet")
@pytest.mark.runs_first("waits until no other test's pods are on the node")
def test_memory_pressure_evicts_in_the_kubelets_order(swap_node: SwapNode, swap_provider: Provider,
                                                       workspace: Callable[[SwapNode], Workspace],
                                                       priority_classes: dict[str, str],
                                                       request: pytest.FixtureRequest) -> None:
    """Under memory pressure the kubelet sets MemoryPressure and its taint, evicts pods in its
    ranking's order, passing over critical pods, says on each why, and stops when the pressure is
    over.

    Before the threshold is set, /stats/summary's node memory (the signal) is checked against the
    node's own files. Under LimitedSwap the node swaps before the first eviction and the hog swaps,
    and the peer of its priority, further above its request on working set, goes first: swap
    counts nowhere in the ranking (where the measured figures cannot tell, could not test);
    under NoSwap no pod's memory.swap.current leaves 0. The order is judged only where the
    restarted kubelet had every pod's stats a monitoring interval before its first eviction (else
    it could not be tested); a critical pod evicted fails either way."""
    if not swap_provider.reconfigures_kubelets:
        # A required check of the gate (e2e/verdict.py): where a provider cannot reconfigure a
        # kubelet for one test (existing: not the suite's cluster) it could not be tested: a skip
        # saying so, a failure under --gate.
        could_not_test(request.config, f"the {swap_provider.name} provider cannot set a kubelet's eviction"
                       " thresholds for one test", swap_node.behavior)
    ws = workspace(swap_node)
    # Other tests' pods still terminating when this test's turn came (seen on kind: 1.4 GB of
    # pod shapes) would free their memory during the episode, under the plan's feet. This test
    # runs alone, so nothing new arrives meanwhile.
    leftovers = wait_for_other_tests_pods_to_go(ws)
    ws.record.phase("other tests' pods gone")
    reader = ws.node_files()
    with ws.burst():  # not while the other node's pods start too
        designed = deploy_designed(ws, priority_classes)
    hog = f"{ws.namespace}/hog"
    watch = EvictionWatch(ws.observer)
    settled = settled_moment(watch, holding(ws), swapped_out(ws))
    ws.record.phase("settled")

    # The signal the plan rests on, against what the node really has: an inflated availableBytes
    # would make the threshold meaningless (a plan that does not fit the node: a skip where a
    # wrong signal should fail).
    config = ws.observer.configz()
    signal = check_node_memory_signal(ws.observer, reader, hugepages_taken_off(ws, config))
    ws.record.phase("signal checked")
    claim(ws.record, "/stats/summary node memory against the node's cgroup files", [], signal.problems,
          f"availableBytes = MemTotal - workingSetBytes; workingSetBytes = usage - inactive_file; {signal.judged()}",
          explain=signal.describe)

    plan = plan_at(settled, hog)
    others = {key: oracle.pod_memory_request(p) for key, p in settled.pods.items() if key not in designed}
    elsewhere = f"also on the node (memory requests): {others}; other tests' pods waited out first: {leftovers}"
    critical = f"{ws.namespace}/critical"
    peer = f"{ws.namespace}/peer"
    # Whether the order of the peer and the hog can show that swap is left out of the ranking:
    # only where counting the hog's swap would put it first (LimitedSwap, the hog swapping).
    swap_told = swap_reorders(list(settled.pods.values()), settled.working_set, settled.swap, peer, hog)
    claim(ws.record, "critical pods ranked before the last expected eviction", "includes critical",
          plan.passed_over, plan.describe(settled.working_set), ok=critical in plan.passed_over,
          explain="the design does not make the kubelet's ranking reach the critical pod")

    stats_back: float | None = None  # when, on the watch's clock, the restarted kubelet had every pod's stats
    try:
        with swap_provider.eviction_thresholds(swap_node, {"memory.available": str(plan.threshold)}, f"{GRACE}s"):
            ws.record.phase("threshold live")
            began = time.monotonic()
            deadline = began + waits.bound(WATCH_SECONDS)
            # Until the pressure is over (no eviction for QUIET_SECONDS and no MemoryPressure),
            # not until the last expected eviction: a kubelet that does not stop is seen. An
            # eviction the plan does not have fails the test whatever follows: the watch ends
            # there (a kubelet that never stops is not watched for the whole 15 minutes).
            while time.monotonic() < deadline and not watch.over(QUIET_SECONDS):
                if not watch.evictions and time.monotonic() - began > waits.bound(FIRST_EVICTION_SECONDS) + GRACE:
                    break  # nothing happens: the checks below say so
                if extra_evictions(watch.evictions, plan.expected):
                    break
                # Working sets and swap until the first eviction; then quick looks, as the
                # kubelet evicts the next pod as soon as the last one is cleaned up (seconds).
                moment = watch.look(stats=not watch.evictions)
                if moment and stats_back is None and not watch.evictions and not moment.unranked():
                    stats_back = moment.t
                    ws.record.phase("every pod's stats back")
                pending = any(k not in {e.key for e in watch.evictions} for k in plan.expected)
                time.sleep(0.2 if watch.evictions and pending else POLL_SECONDS)
            ws.record.phase("pressure over" if watch.over(QUIET_SECONDS) else "watch ended")
            # The episode can be over in seconds; the node's condition is posted with its status
            # (every 10 s) and the taint follows it: keep looking a little while for both.
            settle = time.monotonic() + waits.bound(TAINT_SECONDS)
            while not all(watch.pressure_seen()) and time.monotonic() < settle:
                watch.look(stats=False)
                time.sleep(POLL_SECONDS)
    except NotCoveredError as error:  # the provider said it could, then could not
        pytest.fail(str(error))

    ws.record.phase("kubelet restored")
    series = ws.stop_sampling()
    watch.refresh()
    usage = settled.working_set
    context = account(watch, designed, plan.threshold, GRACE, "\n".join([
        f"oracle inputs at settle: {plan.describe(usage)}", elsewhere, signal.describe(),
        f"every pod's stats back after the restart: {'never' if stats_back is None else f'at {stats_back:.0f}s'}"]))
    evicted = watch.evicted(plan.expected)
    # Usage is constant once every pod holds its allocation: the ranking the kubelet applies at
    # each eviction is the one at settle.
    problems = oracle.eviction_order_problems(list(settled.pods.values()), usage, evicted, designed)

    pressure, taint = watch.pressure_seen()

    claim(ws.record, "MemoryPressure condition and taint seen", "both",
          "both" if pressure and taint else f"pressure {pressure}, taint {taint}",
          f"threshold {plan.threshold}, available at settle {settled.node_available}", explain=context)
    claim(ws.record, "critical pods evicted", [],
          [k for k in evicted if k in settled.pods and oracle.is_critical_pod(settled.pods[k])],
          f"evictPod must pass over {plan.passed_over}", explain=context)
    # Evicting a critical pod is wrong whatever the kubelet's stats; the order is judged only on full stats.
    stats_in_time(request, watch, stats_back, swap_node.behavior)
    mine = [k for k in evicted if k in designed]
    expected_mine = [k for k in plan.expected if k in designed]
    claim(ws.record, "eviction order (this test's pods)", [k.split("/")[1] for k in expected_mine],
          [k.split("/")[1] for k in mine], f"ranking {plan.ranking}; working sets {usage}", explain=context)
    claim(ws.record, "order problems (every pod)", [], problems, "rankMemoryPressure over active pods", explain=context)
    claim(ws.record, "evictions beyond the oracle's, until pressure was over", [],
          extra_evictions(watch.evictions, plan.expected),
          f"expected {plan.expected}; over: {QUIET_SECONDS}s without an eviction or MemoryPressure", explain=context)
    claim(ws.record, "the oracle's evictions that did not happen", [], [k for k in plan.expected if k not in evicted],
          f"expected {plan.expected}", explain=context)
    claim(ws.record, "pressure over after the last expected eviction", True, watch.over(QUIET_SECONDS),
          f"within {waits.bound(WATCH_SECONDS):.0f}s", explain=context)
    claim(ws.record, "what evicted pods say", [], watch.problems_with_evicted_pods(),
          "DisruptionTarget/TerminationByKubelet naming memory; Failed: reason Evicted; Succeeded only with exit 0"
          " (kubernetes#120182)", explain=context)
    survivors = [k for k in designed if k not in evicted]
    assert critical in survivors, context
    if swap_node.behavior == "LimitedSwap":
        first = watch.before_first_eviction()
        claim(ws.record, "node swap usage before the first eviction", "> 0", first.node_swap if first else None,
              "summary node.swap.swapUsageBytes", ok=bool(first and first.node_swap), explain=context)
        hog_series = series[("hog", "stress")]
        assert any(s for s in hog_series.swap if s), "the hog never swapped: " + context
        if not swap_told:
            # Every other check held; the one this design adds could not be made on this node.
            could_not_test(request.config, f"at settle the hog's swap did not outweigh the peer's lead: working set"
                           f" + swap would rank them as working sets do, so the order the kubelet evicted them in says"
                           f" nothing about swap in its ranking (working sets {settled.working_set}, swap"
                           f" {settled.swap})", swap_node.behavior)
    else:
        swapped = {pod: max((s for s in sampled.swap if s is not None), default=None)
                   for (pod, _), sampled in series.items()}
        claim(ws.record, "memory.swap.current of every pod, every sample", "0 for all", swapped,
              "NoSwap: memory.swap.max 0", ok=all(v == 0 for v in swapped.values()), explain=context)


# The pods' own signal under a hard threshold: the reservation brings the pods cgroup's limit
# close to what the pods use, so one pod filling FILL takes the pods' signal MARGIN below the
# threshold while the node's, far above it, never gets there.
HARD_THRESHOLD, FILL, MARGIN = 384 * Mi, 384 * Mi, 128 * Mi
# What the kubelet evicts from is: the test's own evidence comes from its eviction message
# (eviction/helpers.go evictionMessage: the met threshold's signal as the kubelet observed it).
THRESHOLD_MET = re.compile(r"Threshold quantity: (\S+), available: (\S+?)\.")


def reservation(node: SwapNode, pods_working_set: int) -> int:
    """systemReserved memory that leaves the pods cgroup (its limit: capacity minus it) room for
    what the pods hold now, FILL and the threshold less MARGIN: filled, their signal is MARGIN
    below the threshold."""
    return node.memory_capacity - (pods_working_set + FILL + HARD_THRESHOLD - MARGIN)


def signal_met(eviction_message: str) -> int | None:
    """The available memory the kubelet saw when it evicted, from its message; None without one."""
    from kubernetes.utils import parse_quantity

    found = THRESHOLD_MET.search(eviction_message)
    try:
        return int(parse_quantity(found.group(2))) if found else None
    except ValueError:  # not a quantity: the message does not say
        return None


@pytest.mark.needs_behavior("NoSwap", "LimitedSwap")
@pytest.mark.runs_alone("reserves most of the node's memory for the system and sets a hard threshold")
def test_pressure_on_the_pods_alone_evicts_under_a_hard_threshold(swap_node: SwapNode, swap_provider: Provider,
                                                                   workspace: Callable[[SwapNode], Workspace],
                                                                   priority_classes: dict[str, str],
                                                                   request: pytest.FixtureRequest) -> None:
    """Under a hard memory.available threshold, pods whose own signal (their cgroup's limit minus
    their working set, free swap not counted) falls below it are evicted while the node's stays above.

    A hard memory.available threshold is also one on allocatableMemory.available, the pods
    cgroup's availableBytes in /stats/summary: its limit (capacity minus the reservations) minus
    the pods' working set (eviction/helpers.go addAllocatableThresholds, makeSignalObservations).
    The test reserves memory for the system (systemReserved) so that the pods cgroup's limit sits
    just above what the pods hold, restarts the kubelet with the threshold, then one BestEffort
    pod of the lowest priority fills: the pods' signal drops MARGIN below the threshold, the
    node's stays above it. The kubelet must set MemoryPressure and evict exactly the oracle's
    pods for that signal (the filler, first whatever the age of its stats), which ends it. A
    kubelet that counted the node's free swap (at least twice MARGIN here) as available, or
    watched only the node's signal, evicts nothing. The kubelet's eviction message says what it
    saw; a node where its own signal falls too could not test."""
    from clusters.kubelet_config import hard_memory_threshold

    if not swap_provider.reconfigures_kubelets:
        could_not_test(request.config, f"the {swap_provider.name} provider cannot set a kubelet's eviction thresholds"
                       " for one test", swap_node.behavior)
    ws = workspace(swap_node)
    leftovers = wait_for_other_tests_pods_to_go(ws)
    before = EvictionWatch(ws.observer).poll()
    # The reservation squeezes the pods cgroup to the pods' usage: where the API server is one of
    # them (a single-node cluster: the vm node) it starves (leases time out, /configz stops
    # answering for minutes under emulation). A stated skip the gate accepts (e2e/verdict.py):
    # the node's topology, not the kubelet, rules the test out; a worker node runs it.
    apiserver = [k for k in before.pods if k.startswith("kube-system/kube-apiserver")]
    if apiserver:
        pytest.skip(f"{HOSTS_THE_API_SERVER} ({apiserver[0]} on {swap_node.name}): a worker node runs this test")
    pods_ws = before.pods_memory.get("workingSetBytes")
    if pods_ws is None:
        could_not_test(request.config, "/stats/summary has no working set for the pods cgroup: the reservation cannot"
                       f" be sized from it (pods container {before.pods_memory})", swap_node.behavior)
    reserved = reservation(swap_node, int(pods_ws))
    # The restarted kubelet admits its pods again against the new allocatable (capacity minus the
    # reservation and the hard threshold): their requests must fit in it (the filler has none).
    requested = sum(oracle.pod_memory_request(p) for p in before.pods.values())
    allocatable = swap_node.memory_capacity - reserved - HARD_THRESHOLD
    free_swap = swap_node.swap_capacity - (before.node_swap or 0)
    if reserved <= 0 or requested > allocatable or (before.node_available or 0) - FILL < HARD_THRESHOLD + MARGIN \
            or free_swap < 2 * MARGIN:
        could_not_test(request.config, f"this node cannot hold the pods' signal below {HARD_THRESHOLD} with the node's"
                       f" {MARGIN} above it and {2 * MARGIN} of free swap: node available {before.node_available}, pods"
                       f" {before.pods_memory}, capacity {swap_node.memory_capacity}, requests {requested} against"
                       f" allocatable {allocatable}, free swap {free_swap}", swap_node.behavior)
    filler = f"{ws.namespace}/filler"
    try:
        with swap_provider.reconfigured_kubelet(swap_node, hard_memory_threshold(reserved, HARD_THRESHOLD)):
            ws.record.phase("threshold live")
            watch = EvictionWatch(ws.observer)
            ws.deploy(stress_pod("filler", ws.image, ws.namespace, ws.test, alloc_command(FILL), {}, {},
                                 priority_class=priority_classes.get("low")))
            # Until the first eviction (bounded), then until pressure is over: no eviction for
            # QUIET_SECONDS and no MemoryPressure (bounded too: a kubelet that goes on is seen).
            deadline = time.monotonic() + waits.bound(FIRST_EVICTION_SECONDS)
            extended = False
            while time.monotonic() < deadline and not watch.over(QUIET_SECONDS):
                watch.look(stats=not watch.evictions)
                if watch.evictions and not extended:
                    deadline, extended = max(deadline, time.monotonic() + 2 * QUIET_SECONDS), True
                time.sleep(POLL_SECONDS)
            ws.record.phase("pressure over" if watch.over(QUIET_SECONDS) else "watch ended")
    except NotCoveredError as error:
        pytest.fail(str(error))
    watch.refresh()
    first = watch.evictions[0].t if watch.evictions else float("inf")
    looks = [m for m in watch.moments if m.t < first and m.pods_memory]
    seen_by_kubelet = signal_met(watch.evictions[0].message) if watch.evictions else None
    context = (f"systemReserved {reserved}, evictionHard memory.available {HARD_THRESHOLD}; before: node available"
               f" {before.node_available}, pods {before.pods_memory}, free swap {free_swap}; other tests' pods waited"
               f" out first: {leftovers}\n"
               + "\n".join(f"t={m.t:.0f}s node available {m.node_available}, pods available {m.pods_available},"
                           f" pods working set {m.pods_memory.get('workingSetBytes')}, filler working set"
                           f" {m.working_set.get(filler)}, MemoryPressure {m.pressure}" for m in watch.moments[-15:])
               + f"\nevictions: {[(e.key, round(e.t), e.message) for e in watch.evictions]}")
    # What the design rests on: the pods' signal below the threshold (as a look before the first
    # eviction saw it, or as the kubelet said it saw it), the node's never. Else the node did not
    # let the design happen: could not test, which says nothing of the kubelet.
    node_low = [m.t for m in watch.moments if m.t < first and m.node_available is not None
                and m.node_available < HARD_THRESHOLD]
    if node_low:
        could_not_test(request.config, f"the node's own signal fell below the threshold too (t={node_low[0]:.0f}s):"
                       " which signal the kubelet acted on cannot be told. " + context, swap_node.behavior)
    low = [m for m in looks if m.pods_available is not None and m.pods_available < HARD_THRESHOLD]
    signal = seen_by_kubelet if seen_by_kubelet is not None and seen_by_kubelet < HARD_THRESHOLD else \
        (low[-1].pods_available if low else None)
    pressure, _ = watch.pressure_seen()
    if signal is None or not looks:
        could_not_test(request.config, "the pods' signal was never seen below the threshold, by a look or in the"
                       f" kubelet's eviction message (MemoryPressure {pressure}): " + context, swap_node.behavior)
    last = looks[-1]
    # The filler ranks first whatever its stats say once it has any (above its request of 0, the
    # lowest priority) or none (a pod without stats first): its designed holding stands in.
    usage = {**last.working_set, filler: max(last.working_set.get(filler, 0), FILL)}
    ranked = [p for k, p in last.pods.items() if k in usage]
    expected = oracle.expected_evictions(ranked, usage, signal, HARD_THRESHOLD)
    claim(ws.record, "MemoryPressure on the pods' signal alone", True, pressure,
          f"pods available {signal} < {HARD_THRESHOLD} <= node available (lowest seen"
          f" {min((m.node_available for m in looks if m.node_available is not None), default=None)})",
          explain=context)
    claim(ws.record, "evictions for the pods' signal", [k.split("/")[1] for k in expected],
          [k.split("/")[1] for k in watch.evicted(expected)], f"rankMemoryPressure; working sets {usage}; signal {signal}",
          explain=context)
    claim(ws.record, "what evicted pods say", [], watch.problems_with_evicted_pods(),
          "DisruptionTarget/TerminationByKubelet naming memory", explain=context)
    assert filler in expected, f"the oracle would not evict the filler: {expected}\n{context}"
