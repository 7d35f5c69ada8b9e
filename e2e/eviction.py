"""Watching a node under memory pressure: what the kubelet reported and did, moment by moment
(pods on the node, their working sets and swap from /stats/summary, the node's condition and
taint, evictions as they happen), and the account a failed eviction test prints. Also the plan
of a pressure episode (which pods the kubelet must evict at which threshold, from the oracle's
ranking) and the check of the signal itself: /stats/summary's node memory against the node's
own cgroup files."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from clusters import waits
from e2e import oracle
from e2e.metrics import summary_system_container
from e2e.observe import NodeObserver, unless_overloaded

if TYPE_CHECKING:
    from e2e.nodefiles import NodeFiles

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
    node_memory: dict[str, Any] = field(default_factory=dict)  # the summary's node.memory, its sample time included
    # the summary's "pods" system container's memory: the kubepods cgroup, allocatable's signal
    pods_memory: dict[str, Any] = field(default_factory=dict)

    @property
    def pods_available(self) -> int | None:
        """allocatableMemory.available as the eviction manager reads it: the pods container's
        availableBytes (eviction/helpers.go makeSignalObservations)."""
        value = self.pods_memory.get("availableBytes")
        return None if value is None else int(value)

    def unranked(self) -> list[str]:
        """Active pods /stats/summary gave no working set for: the eviction manager ranks such a
        pod first (no stats) or as within its request (usage 0), whatever it really holds."""
        return sorted(k for k in self.pods if k not in self.working_set)


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
    decided: str = ""  # the kubelet's "Evicted" event's firstTimestamp (whole seconds), "" if none was seen


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
    # looked up when the watch starts, not bound at import: the clock is whatever time.monotonic
    # is then (the simulated kubelet's, in tests/test_eviction_simulated.py)
    start: float = field(default_factory=lambda: time.monotonic())
    moments: list[Moment] = field(default_factory=list)
    evictions: list[Eviction] = field(default_factory=list)
    missed: list[str] = field(default_factory=list)  # looks the API server answered overloaded

    def look(self, stats: bool = True) -> Moment | None:
        """poll() in a loop with its own deadline: None where the API server answered overloaded
        (that look is lost, counted in `missed`; the next one sees what it would have)."""
        return unless_overloaded(lambda: self.poll(stats), self.missed)

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
                        MEMORY_PRESSURE_TAINT in taints, dict(node_stats.get("memory") or {}),
                        dict((summary_system_container(summary, "pods") or {}).get("memory") or {}))
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

    def evicted(self, expected: Sequence[str] = ()) -> list[str]:
        """In the order the kubelet decided them: its "Evicted" events' seconds, then the marks'
        (the DisruptionTarget condition's), then the order the watch saw them. The mark alone can
        misorder two evictions: a pod slower to die is marked after the pod the kubelet evicted
        next.

        An eviction whose event never reached the API server (one too loaded to take it) was
        decided at its mark or before, and no earlier bound is seen: a mark is no time on the
        events' clock to sort by. It is put where ``expected`` puts it, unless a pod ahead of it
        there was decided after its mark; then, or when ``expected`` does not have it, at the
        latest place its mark allows: before the first pod decided after it was marked (so a pod
        marked before a pod expected ahead of it was decided is out of order)."""
        order = sorted((e for e in self.evictions if e.decided), key=lambda e: (e.decided, e.at, e.t))
        rank = {key: i for i, key in enumerate(expected)}
        unknown = sorted((e for e in self.evictions if not e.decided),
                         key=lambda e: (rank.get(e.key, len(rank)), e.at, e.t))
        for e in unknown:
            bound = e.at or "\uffff"  # without a mark either, nothing bounds it
            latest = next((i for i, o in enumerate(order) if o.decided and o.decided > bound), len(order))
            wanted = (next((i for i, o in enumerate(order) if rank.get(o.key, len(rank)) > rank[e.key]), len(order))
                      if e.key in rank else latest)
            order.insert(min(wanted, latest), e)
        return [e.key for e in order]

    def refresh(self) -> None:
        """Evicted pods reach their final phase after the mark: read each one's last status, and
        when the kubelet decided each eviction."""
        decided = self.observer.eviction_events()
        for i, eviction in enumerate(self.evictions):
            namespace, name = eviction.key.split("/", 1)
            self.evictions[i] = replace(_eviction(self.observer.pod(namespace, name), eviction.t),
                                        decided=decided.get(eviction.key, ""))

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


def account(watch: EvictionWatch, designed: list[str], threshold: int, grace: int, extra: str = "") -> str:
    """What a reader of a failed eviction test needs: the threshold and the signal, every pod's
    requests, limits, priority, working set and swap when the first eviction came, the oracle's
    order with its inputs, the evictions in order, and the node's condition over time."""
    lines = [f"evictionSoft memory.available: {threshold} ({threshold / Mi:.0f} MiB), grace period {grace}s"]
    if watch.missed:
        lines.append(f"{len(watch.missed)} looks lost to an overloaded API server (last: {watch.missed[-1]})")
    moment = watch.before_first_eviction()
    if moment:
        lines.append(f"at t={moment.t:.0f}s (last look before the first eviction): node memory.available"
                     f" {moment.node_available}, node swap usage {moment.node_swap}, MemoryPressure {moment.pressure},"
                     f" taint {moment.taint}")
        statless = moment.unranked()
        if statless:
            # A look, not the kubelet's own summary; but a pod without stats there may have had
            # none when the kubelet ranked: it then ranks it first (exceedMemoryRequests).
            lines.append(f"no stats in /stats/summary for {statless}: the kubelet ranks a pod without stats first")
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
    lost = [e.key for e in watch.evictions if not e.decided]
    if lost:
        lines.append(f"no Evicted event for {lost}: each was decided at its mark or before, and is ordered where the"
                     " oracle puts it unless a pod ahead of it there was decided after that mark (EvictionWatch.evicted)")
    lines.append("evictions seen: " + "; ".join(f"t={e.t:.0f}s (decided {e.decided or '?'}, marked {e.at}) {e.key}: {e.phase} {e.reason!r} exit {e.exit_codes}:"
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


# --- the plan: which pods a threshold makes the kubelet evict ---------------------------------

MIN_MARGIN = 32 * Mi  # the least distance between the signal and the threshold either side of the last eviction


@dataclass(frozen=True)
class PressurePlan:
    """A threshold that makes the kubelet evict every pod ranked before the hog, the hog, then
    pass over the critical pods ranked next and evict `next`, the first pod after them it may
    take, and stop: after `next` the signal is above the threshold by half `next`'s working
    set; before it, below by as much."""

    ranking: list[list[str]]  # rankMemoryPressure over every active pod with stats, critical ones included
    available: int  # the signal when the plan was made
    before: list[str]  # non-critical pods ranked before the hog
    hog: str
    next: str
    passed_over: list[str]  # critical pods ranked before `next`: evictPod refuses each
    threshold: int
    expected: list[str]  # oracle.expected_evictions at `threshold`: before + hog + next

    def describe(self, usage: Mapping[str, int]) -> str:
        return (f"plan: threshold {self.threshold} = available {self.available} + working sets of {self.before}"
                f" + the hog {self.hog} ({usage.get(self.hog)}) + half of {self.next} ({usage.get(self.next)});"
                f" expected evictions {self.expected}; critical pods the kubelet must pass over {self.passed_over};"
                f" ranking (critical included) {self.ranking}")


class DesignError(AssertionError):
    """The node's pods do not allow the planned episode (said with the figures)."""


def plan_pressure(pods: Sequence[Mapping[str, Any]], usage: Mapping[str, int], available: int, hog: str) -> PressurePlan:
    """The plan for these pods (active, with working sets in `usage`) and the signal `available`."""
    pods = [p for p in pods if _key(p) in usage]
    manifests = {_key(p): p for p in pods}
    ranking = oracle.eviction_ranking(pods, usage)
    order = [k for tier in ranking for k in tier]
    takeable = [k for k in order if not oracle.is_critical_pod(manifests[k])]
    if hog not in takeable:
        raise DesignError(f"the hog {hog} is not among the pods the kubelet may evict {takeable}")
    at = takeable.index(hog)
    if at + 1 >= len(takeable):
        raise DesignError(f"no pod the kubelet may evict is ranked after the hog: {ranking}")
    before, after = takeable[:at], takeable[at + 1]
    if usage[after] // 2 < MIN_MARGIN:
        raise DesignError(f"{after}, the next pod after the hog, holds {usage[after]}: half of it is below the"
                          f" {MIN_MARGIN} margin the threshold needs either side; ranking {ranking}")
    threshold = available + sum(usage[k] for k in before) + usage[hog] + usage[after] // 2
    try:
        expected = oracle.expected_evictions(pods, usage, available, threshold)
    except ValueError as error:
        raise DesignError(f"{error}; ranking {ranking}") from None
    if expected != [*before, hog, after]:
        raise DesignError(f"at threshold {threshold} the oracle expects {expected}, not {[*before, hog, after]}")
    passed_over = oracle.critical_pods_passed_over(pods, usage, expected)
    return PressurePlan(ranking, available, before, hog, after, passed_over, threshold, expected)


def swap_reorders(pods: Sequence[Mapping[str, Any]], usage: Mapping[str, int], swap: Mapping[str, int], first: str,
                  second: str) -> bool:
    """Whether `first` ranks strictly before `second` on working sets (the kubelet's usage,
    eviction/helpers.go memoryUsage) and strictly after it on working set plus swap: only then
    does the order the kubelet evicts the two in tell whether it counts swap."""
    if first not in usage or second not in usage:
        return False  # a pod the ranking does not see cannot be judged
    pods = [p for p in pods if _key(p) in usage]
    with_swap = {k: v + swap.get(k, 0) for k, v in usage.items()}

    def tier(ranking: list[list[str]], key: str) -> int:
        return next(i for i, keys in enumerate(ranking) if key in keys)

    by_working_set, by_total = oracle.eviction_ranking(pods, usage), oracle.eviction_ranking(pods, with_swap)
    return (tier(by_working_set, first) < tier(by_working_set, second)
            and tier(by_total, second) < tier(by_total, first))


def _key(pod: Mapping[str, Any]) -> str:
    return key_of(dict(pod))


def extra_evictions(evictions: Sequence[Eviction], expected: Sequence[str]) -> list[str]:
    """Evictions the plan does not have, each with when it came after the last expected one."""
    done = [e.t for e in evictions if e.key in expected]
    last = max(done) if done else None
    return [f"{e.key} at t={e.t:.0f}s" + (f" ({e.t - last:+.0f}s after the last expected eviction)" if last is not None
                                          else "") for e in sorted(evictions, key=lambda e: e.t) if e.key not in expected]


# --- the signal: /stats/summary's node memory against the node's cgroup files ------------------

# New samples judged before the check ends (it ends sooner on an exact one). More would only wait
# for an exact window, which a live node may never give (its root cgroup's files move between
# reads), at tens of seconds a round: a runc exec per round, while the node is held alone.
NODE_SIGNAL_SAMPLES = 2
# Summaries read before the check may end without a new sample: the bound is the node's clock
# (housekeeping intervals), but on a loaded node one round can take most of it, and one or two
# summaries are too few looks to say that cAdvisor took no sample.
NODE_SIGNAL_LOOKS = 4
SUMMARY_RETRY_SECONDS = 2.0


@dataclass(frozen=True)
class RootRead:
    """One read of the node's root cgroup memory files (one exec, the files back to back): what
    cAdvisor reads for "/" (oracle.node_memory_usage)."""

    current: int | None  # memory.current, where the root has one (a kind node's cgroup namespace)
    stat: Mapping[str, int]

    @property
    def usage(self) -> int:
        return oracle.node_memory_usage(self.current, self.stat)

    @property
    def working_set(self) -> int:
        return oracle.node_working_set(self.usage, self.stat)

    def __str__(self) -> str:
        source = "memory.current" if self.current is not None else "anon+file"
        return f"usage {self.usage} ({source}), inactive_file {self.stat.get('inactive_file')}, working set {self.working_set}"


def parse_root_read(text: str, has_current: bool) -> RootRead:
    """`cat memory.current memory.stat` (has_current) or `cat memory.stat`."""
    lines = [line.split() for line in text.splitlines() if line.strip()]
    current = None
    if has_current:
        if not lines or len(lines[0]) != 1:
            raise ValueError(f"expected memory.current first, got {text[:200]!r}")
        current = int(lines.pop(0)[0])
    stat = {fields[0]: int(fields[1]) for fields in lines if len(fields) == 2}
    missing = [k for k in ("inactive_file", *(() if has_current else ("anon", "file"))) if k not in stat]
    if missing:
        raise ValueError(f"memory.stat without {missing}: {text[:300]!r}")
    return RootRead(current, stat)


@dataclass(frozen=True)
class SampleWindow:
    """A summary whose node memory is a sample cAdvisor took between two of our reads of the
    node's files: reads[0] came before the summary served just before it (which still had the
    previous sample), reads[1] between the two summaries, reads[2] after the one with it."""

    memory: Mapping[str, Any]  # summary node.memory
    reads: tuple[RootRead, RootRead, RootRead]

    @property
    def exact(self) -> bool:
        """Nothing changed in the node's files across the window: the sample must be these figures."""
        return len({(r.usage, r.working_set) for r in self.reads}) == 1

    def bounds(self, what: str) -> tuple[int, int]:
        values = [getattr(r, what) for r in self.reads]
        return min(values), max(values)


def sample_windows(reads: Sequence[RootRead], memories: Sequence[Mapping[str, Any]]) -> list[SampleWindow]:
    """The windows of an alternating sequence reads[0], memories[0], reads[1], memories[1], ...,
    reads[n]: memories[k] differing from memories[k-1] is a sample cAdvisor took after the
    summary k-1 was served (which had the older one) and before summary k was: after reads[k-1]
    and before reads[k+1]. memories[0] has no known start."""
    return [SampleWindow(memories[k], (reads[k - 1], reads[k], reads[k + 1]))
            for k in range(1, len(memories)) if memories[k] != memories[k - 1] and k + 1 < len(reads)]


def node_memory_problems(windows: Sequence[SampleWindow], capacity: int, hugepages: int) -> list[str]:
    """How the summary's node memory departs from the kubelet's rule (empty: it does not).

    Exact, whatever the timing: availableBytes = capacity - workingSetBytes (- hugepages,
    oracle.node_memory_available). Against the node's files: usageBytes and workingSetBytes
    equal to the files' figures where nothing changed across the window; a window whose files
    moved is not judged against them (no bound there is both exact and correct)."""
    problems = []
    if not windows:
        return ["no new /stats/summary node memory sample came between two reads of the node's files"]
    for w in windows:
        m = w.memory
        at = f"sample at {m.get('time')}"
        figures = {k: m.get(k) for k in ("usageBytes", "workingSetBytes", "availableBytes")}
        if any(v is None for v in figures.values()):
            problems.append(f"{at}: node memory without {[k for k, v in figures.items() if v is None]}: {dict(m)}")
            continue
        usage, ws, available = (int(v) for v in figures.values())
        want = oracle.node_memory_available(capacity, ws, hugepages)
        if available != want:
            problems.append(f"{at}: availableBytes {available} != capacity {capacity} - workingSetBytes {ws}"
                            + (f" - hugepages {hugepages}" if hugepages else "") + f" = {want} ({available - want:+d})")
        if not w.exact:
            # A live node's memory moves by megabytes between reads a second apart, both ways
            # (seen on v1.37.1: +6.5 MB and -1.5 MB around correct samples), so a window whose
            # files changed bounds nothing exactly: only the identity above is judged there.
            continue
        for name, got, what in (("usageBytes", usage, "usage"), ("workingSetBytes", ws, "working_set")):
            low, high = w.bounds(what)
            if not low <= got <= high:
                off = got - high if got > high else got - low
                shown = f"= {low}" if low == high else f"in [{low}, {high}]"
                problems.append(f"{at}: {name} {got}, the node's files {shown} across the window ({off:+d})")
    return problems


def judged_enough(windows: Sequence[SampleWindow], samples: int = NODE_SIGNAL_SAMPLES) -> bool:
    """An exact window, or `samples` new samples: what the signal check waits for."""
    return any(w.exact for w in windows) or len(windows) >= samples


@dataclass
class SignalCheck:
    capacity: int
    hugepages: int
    reads: list[RootRead]
    memories: list[dict[str, Any]]
    windows: list[SampleWindow]
    problems: list[str]
    missed: list[str] = field(default_factory=list)  # summaries the API server answered overloaded

    def judged(self) -> str:
        return (f"{len(self.reads)} reads of the node's files, {len(self.memories)} summaries,"
                f" {len(self.windows)} new samples ({sum(w.exact for w in self.windows)} with the files unchanged)"
                + (f", {len(self.missed)} summaries lost to an overloaded API server (last: {self.missed[-1]})"
                   if self.missed else ""))

    def describe(self) -> str:
        lines = [f"node memory signal: capacity (MemTotal) {self.capacity}, hugepages taken off {self.hugepages};"
                 f" {self.judged()}"]
        for w in self.windows:
            lines.append(f"  summary {dict(w.memory)}")
            lines += [f"    files: {r}" for r in w.reads]
        return "\n".join(lines + [f"  problem: {p}" for p in self.problems])


def check_node_memory_signal(observer: NodeObserver, files: NodeFiles, hugepages: int,
                             seconds: float | waits.Wait = waits.NODE_SIGNAL, samples: int = NODE_SIGNAL_SAMPLES) -> SignalCheck:
    """Read the node's root cgroup files and /stats/summary in turn until a new summary sample
    falls between two reads of unchanged files (exact), `samples` new samples have come, or
    `seconds` have passed and at least NODE_SIGNAL_LOOKS summaries were asked for; judge every
    window.

    Why not exact every time: /stats/summary serves cAdvisor's cached sample ("external calls to
    the summary API use cached stats", server/stats/handler.go), taken at a moment we cannot
    read on the node's clock, every 10-15 s (housekeeping) or when the eviction manager asks for
    fresh stats; the node's memory moves meanwhile. The tightest bound that stays correct is
    what the files showed from before the sample to after it: the new sample lies between the
    summary before it and the summary with it, so between the reads either side of those. (It
    assumes the figures do not leave that range and come back between two reads a second or two
    apart, and that cAdvisor stores a sample within the round trip through the API server that
    separates our read from the next summary: it reads the files and stores the sample in
    milliseconds, manager/container.go updateStats. A failure prints every read.)"""
    from e2e.nodefiles import HOST_CGROUP

    first = files.read_cgroups(["."], ["memory.current"], meminfo=True)
    has_current = first.files["."].get("memory.current") is not None
    paths = ([f"{HOST_CGROUP}/memory.current"] if has_current else []) + [f"{HOST_CGROUP}/memory.stat"]
    capacity = first.meminfo["MemTotal"]

    def read() -> RootRead:
        out = observer.exec(files.ws.namespace, files.pod, "reader", ["/swapstress", "cat", *paths]).stdout
        return parse_root_read(out, has_current)

    def memory() -> dict[str, Any]:
        return dict((json.loads(observer.node_proxy("stats/summary")).get("node") or {}).get("memory") or {})

    reads, memories, missed = [read()], [], []
    seconds = waits.bound(seconds)
    deadline = time.monotonic() + seconds
    windows: list[SampleWindow] = []
    while not (judged_enough(windows, samples)
               or (time.monotonic() > deadline and len(memories) + len(missed) >= NODE_SIGNAL_LOOKS)):
        # a summary the API server answered overloaded is a look lost, not a read: the
        # alternation of reads and summaries the windows rest on goes on from the last read
        latest = unless_overloaded(memory, missed)
        if latest is None:
            time.sleep(SUMMARY_RETRY_SECONDS)  # a 429 comes back at once: not a loop of requests
            continue
        memories.append(latest)
        reads.append(read())
        windows = sample_windows(reads, memories)
    return SignalCheck(capacity, hugepages, reads, memories, windows, node_memory_problems(windows, capacity, hugepages),
                       missed)
