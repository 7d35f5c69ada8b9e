"""e2e/test_eviction.py run end to end against a simulated node: a kubelet written here from
v1.37.1's eviction manager (synchronize: one eviction per pass while available < threshold,
once it has been for the soft threshold's grace period; rankMemoryPressure order, a pod without
stats first; evictPod refusing critical pods; the summary's node memory from the root cgroup;
after the restart that sets the threshold, no stats for two pods for a while, as seen on kind),
and the kubelet mutants the test must catch. What is under test is the test's own wiring (the
plan, the grace period, the watch until pressure is over, the signal check), not Kubernetes:
the real kubelet is the vm and kind runs."""

from __future__ import annotations

import json
import sys
import time
from contextlib import contextmanager
from typing import Any

import pytest

from clusters import waits

from clusters.provider import SwapNode
from e2e import test_eviction
from e2e.workspace import Workspace
from e2e.record import Recorder

Mi = 1 << 20
Gi = 1 << 30
PRIORITY = {"ksc-low": -10, "ksc-high": 10, "system-node-critical": 2_000_001_000,
            "system-cluster-critical": 2_000_000_000}
OVERHEAD = 3 * Mi  # what a stress container's working set has beyond what it allocated
FILE, INACTIVE = 600 * Mi, 300 * Mi  # the root's page cache (host), never reclaimed here
STATLESS_SECONDS = 40  # after the restart, how long the kubelet has no stats for these pods
STATLESS = ("ns/low-small", "ns/above")


class Clock:
    def __init__(self, world: "World"):
        self.now = time.monotonic()
        self.start = self.now
        self.world = world

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        self.world.tick()


class World:
    """One node, its pods, and its kubelet (`mutant`: None, or how it is broken)."""

    def __init__(self, behavior: str, host: str, mutant: str | None):
        self.behavior, self.host, self.mutant = behavior, host, mutant
        self.capacity, self.swap_capacity = (4 * Gi, 2 * Gi) if host == "vm" else (8 * Gi, 4 * Gi)
        self.base = Gi if host == "vm" else 150 * Mi  # what no pod accounts for (a kind node: its own container)
        self.clock = Clock(self)
        self.pods: dict[str, dict[str, Any]] = {}
        self.ws: dict[str, int] = {}
        self.swap: dict[str, int] = {}
        self.threshold: int | None = None
        self.grace = 0.0
        self.hard = False  # a hard memory.available threshold: allocatable's signal is watched too
        self.reserved = 0  # systemReserved memory: the pods cgroup's limit is capacity minus it
        self.stale_pods_stats = False
        # the summary's first looks at a pod show half its swap: its working set had reached its
        # limit while the rest of its allocation was still going out to swap (seen on kind)
        self.swap_lag_summaries = 0
        self.created_at_summary: dict[str, int] = {}
        self.restarted_at = 0.0
        self.first_observed: float | None = None  # thresholdsFirstObservedAt
        self.last_sync = 0.0
        self.pressure_at: float | None = None
        self.stopping_done = False
        self.summaries = 0
        self.sample: dict[str, Any] = {}
        self.followed: list[str] = []
        self.decided: dict[str, str] = {}  # the kubelet's "Evicted" events
        # an API server too loaded to take some pods' Evicted events, and the marks (DisruptionTarget)
        # those pods got seconds after the decision (kind run 45: above's, a minute late)
        self.lost_events: set[str] = set()
        self.mark_delays: dict[str, int] = {}
        for name, ns, priority, request, ws, notes in (
                ("kube-proxy-x", "kube-system", "system-node-critical", None, 20 * Mi, {}),
                ("etcd-node", "kube-system", None, 100 * Mi, 180 * Mi,
                 {"kubernetes.io/config.mirror": "x", "kubernetes.io/config.source": "file"}),
                ("metrics-server-x", "kube-system", None, 200 * Mi, 20 * Mi, {})):  # ranked last
            resources = {"requests": {"memory": str(request)}} if request else {}
            self.create({"metadata": {"name": name, "namespace": ns, "annotations": notes},
                         "spec": {"containers": [{"name": "c", "command": ["x"], "resources": resources}],
                                  **({"priorityClassName": priority} if priority else {})}})
            self.ws[f"{ns}/{name}"] = ws

    # --- the kubelet ------------------------------------------------------------------------------

    def active(self) -> list[str]:
        return [k for k, p in self.pods.items() if p["status"]["phase"] == "Running"]

    def node_ws(self) -> int:
        return self.base + sum(self.ws[k] for k in self.active())

    def available(self) -> int:
        return self.capacity - self.reported_ws() + (64 * Mi if self.mutant == "inflated-available" else 0)

    def pods_ws(self) -> int:
        return sum(self.ws[k] for k in self.active())

    def pods_available(self) -> int:
        """The pods cgroup's availableBytes: its limit minus the pods' working set."""
        return self.capacity - self.reserved - self.pods_ws()

    def signals(self) -> list[int]:
        """What the eviction manager compares with the threshold: memory.available, and for a hard
        one allocatableMemory.available too (addAllocatableThresholds), unless the mutant drops it
        or counts the node's free swap in it."""
        signals = [self.available()]
        if self.hard and self.mutant != "no-allocatable-threshold":
            free_swap = self.swap_capacity - sum(self.swap[k] for k in self.active())
            signals.append(self.pods_available() + (free_swap if self.mutant == "allocatable-counts-free-swap" else 0))
        return signals

    def reported_ws(self) -> int:
        """The node working set the kubelet reports and acts on."""
        return self.node_ws() - (FILE - INACTIVE if self.mutant == "ws-excludes-active-file" else 0)

    def tick(self) -> None:
        if self.mutant == "ignores-threshold":
            return
        if self.threshold is not None and self.clock.now - self.last_sync >= 10:
            self.last_sync = self.clock.now
            self.synchronize()

    def has_stats(self, key: str) -> bool:
        return key not in STATLESS or self.clock.now - self.restarted_at >= STATLESS_SECONDS

    def rank(self) -> list[str]:
        def request(key: str) -> int:
            return sum(int((c.get("resources") or {}).get("requests", {}).get("memory", 0))
                       for c in self.pods[key]["spec"]["containers"])

        def key(k: str) -> tuple:
            if not self.has_stats(k):  # "prioritize evicting the pod for which no stats were found"
                return (False, -(1 << 40), STATLESS.index(k))
            # ranks-with-swap: the size compared is working set + swap (bench mutant 60)
            size = self.ws[k] + (self.swap[k] if self.mutant == "ranks-with-swap" else 0)
            return (not self.ws[k] > request(k), self.pods[k]["spec"].get("priority", 0), request(k) - size)

        return sorted(self.active(), key=key)

    def critical(self, key: str) -> bool:
        pod = self.pods[key]
        return "kubernetes.io/config.mirror" in pod["metadata"].get("annotations", {}) \
            or pod["spec"].get("priority", 0) >= 2_000_000_000

    def synchronize(self) -> None:
        # never-resolves: a threshold once met stays met (bench mutant 32)
        if min(self.signals()) >= self.threshold and not (self.mutant == "never-resolves" and self.pressure_at):
            if self.mutant == "does-not-stop" and self.pressure_at is not None and not self.stopping_done:
                self.stopping_done = True  # one eviction more than the pressure needs: the last ranked pod
                self.evict([k for k in self.rank() if not self.critical(k)][-1])
            self.first_observed = None
            return
        self.pressure_at = self.clock.now
        if self.first_observed is None:
            self.first_observed = self.clock.now
        if self.clock.now - self.first_observed < self.grace:
            return
        for key in self.rank():
            if self.critical(key) and self.mutant == "gives-up-at-critical":
                return  # a refusal ends the pass: the pods ranked after a critical one are never reached
            if self.critical(key) and self.mutant != "evicts-critical":
                continue  # evictPod: "cannot evict a critical pod"
            self.evict(key)
            return

    def evict(self, key: str) -> None:
        pod = self.pods[key]
        decided = 1_800_000_000 + self.clock.now - self.clock.start
        if key not in self.lost_events:
            self.decided[key] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(decided))
        # "late-marks": a pod's DisruptionTarget stamped 30 s after the decision, when its status
        # was written (kind run 23: a slower pod's mark after the next pod's)
        late = 30 if self.mutant == "late-marks" and key.endswith("/hog") else self.mark_delays.get(key, 0)
        at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(decided + late))
        met = min(self.signals())
        message = f"The node was low on resource: memory. Threshold quantity: {self.threshold}, available: {met // 1024}Ki. "
        pod["status"].update(phase="Failed", reason="Evicted", message=message, conditions=[
            {"type": "DisruptionTarget", "status": "True", "reason": "TerminationByKubelet", "message": message,
             "lastTransitionTime": at}])
        for cs in pod["status"]["containerStatuses"]:
            cs["state"] = {"terminated": {"exitCode": 137, "reason": "Error", "finishedAt": at}}

    def pressure(self) -> bool:
        return self.pressure_at is not None and self.clock.now - self.pressure_at < 30

    # --- what the API server and the node's files show --------------------------------------------

    def create(self, manifest: dict[str, Any]) -> None:
        meta, spec = manifest["metadata"], manifest["spec"]
        key = f"{meta['namespace']}/{meta['name']}"
        uid = f"{len(self.pods):08d}-0000-0000-0000-000000000000"
        if spec.get("priorityClassName"):
            spec["priority"] = PRIORITY[spec["priorityClassName"]]
        meta["uid"] = uid
        manifest["status"] = {"phase": "Running", "containerStatuses": [
            {"name": c["name"], "containerID": f"containerd://{uid[:8]}{i}", "state": {"running": {}}}
            for i, c in enumerate(spec["containers"])]}
        self.pods[key] = manifest
        self.created_at_summary[key] = self.summaries
        command = spec["containers"][0]["command"]
        target = int(command[command.index("--target") + 1]) if "--target" in command else 0
        limit = (spec["containers"][0].get("resources") or {}).get("limits", {}).get("memory")
        ram = target + 2 * Mi + OVERHEAD if not limit else min(target + OVERHEAD, int(limit) - Mi)
        self.ws[key] = ram
        self.swap[key] = max(0, target + OVERHEAD - ram) if self.behavior == "LimitedSwap" and limit else 0

    def usage(self) -> int:
        return self.node_ws() + INACTIVE

    def stat(self) -> str:
        anon = self.usage() - FILE
        return f"anon {anon}\nfile {FILE}\nactive_file {FILE - INACTIVE}\ninactive_file {INACTIVE}\n"

    def summary(self) -> dict[str, Any]:
        self.summaries += 1
        if self.summaries % 3 == 1:  # cAdvisor's cache: a new sample now and then
            ws = self.reported_ws()
            pods = self.sample.get("pods")
            self.sample = {"time": f"t{self.summaries}", "usageBytes": self.usage(), "workingSetBytes": ws,
                           "availableBytes": self.available(), "rssBytes": self.usage() - FILE}
            if pods is not None and self.stale_pods_stats:
                self.sample["pods"] = pods
        active = self.active()
        if "pods" not in self.sample or not self.stale_pods_stats:  # stale: the summary never shows the fill
            self.sample["pods"] = {"availableBytes": self.pods_available(), "workingSetBytes": self.pods_ws()}
        pods = {"name": "pods", "memory": dict(self.sample["pods"])}
        return {"node": {"memory": {k: v for k, v in self.sample.items() if k != "pods"}, "swap": {"swapUsageBytes": sum(self.swap[k] for k in active)},
                         "systemContainers": [pods]},
                "pods": [{"podRef": {"namespace": k.split("/")[0], "name": k.split("/")[1]},
                          "memory": {"workingSetBytes": self.ws[k]}, "swap": {"swapUsageBytes": self.reported_swap(k)}}
                         for k in active if self.has_stats(k)]}

    def reported_swap(self, key: str) -> int:
        filling = self.summaries - self.created_at_summary.get(key, 0) <= self.swap_lag_summaries
        return self.swap[key] // 2 if filling else self.swap[key]


class Response:
    def __init__(self, data: Any):
        self.data = json.dumps(data).encode()


class FakeObserver:
    def __init__(self, world: World):
        self.world = world

    def create(self, manifest: dict[str, Any]) -> None:
        self.world.create(manifest)

    def pod(self, namespace: str, name: str) -> dict[str, Any]:
        return self.world.pods[f"{namespace}/{name}"]

    def wait_running(self, namespace: str, name: str, seconds: float = 0) -> dict[str, Any]:
        return self.pod(namespace, name)

    def wait_log_line(self, namespace: str, pod: str, container: str, prefix: str, seconds: float = 0) -> str:
        return prefix

    def pods_on_node(self, node: str | None = None) -> list[dict[str, Any]]:
        self.world.tick()
        return json.loads(json.dumps(list(self.world.pods.values())))

    def node_status(self) -> dict[str, Any]:
        w = self.world
        return {"status": {"capacity": {"memory": str(w.capacity), "hugepages-2Mi": "0"},
                           "conditions": [{"type": "MemoryPressure", "status": "True" if w.pressure() else "False"}]},
                "spec": {"taints": [{"key": "node.kubernetes.io/memory-pressure"}] if w.pressure() else []}}

    def configz(self) -> dict[str, Any]:
        return {"featureGates": {}}

    def node_proxy(self, path: str) -> str:
        assert path == "stats/summary", path
        return json.dumps(self.world.summary())

    def exec(self, namespace: str, pod: str, container: str, argv: list[str], allowed: tuple[int, ...] = (0,),
             seconds: float = 120):
        from e2e.observe import ExecResult

        w = self.world
        if argv[1] == "fill":
            assert argv[argv.index("--path") + 1].endswith("/stop"), argv
            return ExecResult("", "")
        if argv[1] == "touch":  # pods to follow, all in one exec
            w.followed.extend(path.rsplit("/pod", 1)[1].split("@")[0] for path in argv[2:])
            return ExecResult("", "")
        if argv[1] == "read-cgroups":
            return ExecResult(self.read_cgroups(argv[2:]), "")
        assert argv[1] == "cat", argv
        out = []
        for path in argv[2:]:
            if path.endswith("/memory.current") and w.host == "kind":
                out.append(f"{w.usage()}\n")
            elif path.endswith("/memory.current") or path.endswith("/memory.swap.current"):
                raise AssertionError(f"`cat {path}` exited 1: no such file")  # a host's root cgroup
            elif path.endswith("/memory.stat"):
                out.append(w.stat())
            elif path == "/proc/meminfo":
                out.append(f"MemTotal: {w.capacity // 1024} kB\nSwapTotal: {w.swap_capacity // 1024} kB\n")
            elif "/samples/pod" in path:
                out.append(self.samples(path.rsplit("/pod", 1)[1]))
            else:
                raise AssertionError(f"unexpected read {path}")
        return ExecResult("".join(out), "")

    def read_cgroups(self, args: list[str]) -> str:
        """`swapstress read-cgroups` of the node's root (the only cgroup the test reads so)."""
        w = self.world
        meminfo = "--meminfo" in args
        root, files, *parts = [a for a in args if a != "--meminfo"]
        assert parts in ([], ["."]), parts
        values = {f: (f"{w.usage()}\n" if f == "memory.current" and w.host == "kind" else
                      w.stat() if f == "memory.stat" else None) for f in files.split(",")}
        document: dict[str, Any] = {"unix_ms": 0, "cgroups": {p: {"path": root, "files": values} for p in parts}}
        if meminfo:
            document["meminfo"] = f"MemTotal: {w.capacity // 1024} kB\nSwapTotal: {w.swap_capacity // 1024} kB\n"
        return json.dumps(document)

    def samples(self, uid: str) -> str:
        """The node agent's file of samples of pod `uid` (e2e/agent.py)."""
        lines = []
        for key, pod in self.world.pods.items():
            if pod["metadata"]["uid"] != uid or uid not in self.world.followed:
                continue
            cid = pod["status"]["containerStatuses"][0]["containerID"].rpartition("://")[2]
            for ms in (1000, 2000):
                lines.append(f"sample {ms} cri-containerd-{cid}.scope {self.world.ws[key]} {self.world.swap[key]} max max")
        return "".join(line + "\n" for line in lines)

    def eviction_events(self) -> dict[str, str]:
        return dict(self.world.decided)

    def create_namespace(self, name: str, labels: dict[str, str]) -> str:
        return name


class FakeProvider:
    name = "fake"
    reconfigures_kubelets = True

    def __init__(self, world: World):
        self.world = world

    @contextmanager
    def eviction_thresholds(self, node: SwapNode, soft: dict[str, str], grace: str):
        self.world.threshold = int(soft["memory.available"])
        self.world.grace = float(grace.removesuffix("s")) if self.world.mutant != "no-grace" else 0
        self.world.last_sync = self.world.restarted_at = self.world.clock.now
        try:
            yield
        finally:
            self.world.threshold = None

    @contextmanager
    def reconfigured_kubelet(self, node: SwapNode, change):
        config: dict[str, Any] = {}
        change.apply(config)
        assert change.live(config), change.what
        w = self.world
        w.threshold = int(config["evictionHard"]["memory.available"])
        w.reserved, w.hard, w.grace = int(config["systemReserved"]["memory"]), True, 0
        w.last_sync = w.restarted_at = w.clock.now
        try:
            yield
        finally:
            w.threshold, w.reserved, w.hard = None, 0, False


class Options:
    def __init__(self, gate: bool):
        self.gate = gate
        self.stash: dict = {}  # no plugin: the gate requires its defaults (NoSwap, LimitedSwap)

    def getoption(self, name: str) -> bool:
        assert name == "gate", name
        return self.gate


class Request:
    """What the test asks of pytest's request: whether the run is a gate (e2e/gate.py)."""

    def __init__(self, gate: bool):
        self.config = Options(gate)


def run(behavior: str, host: str, mutant: str | None, monkeypatch: pytest.MonkeyPatch, gate: bool = False,
        test: Any = None, stale_pods_stats: bool = False, swap_lag_summaries: int = 0,
        lost_events: set[str] = frozenset(), mark_delays: dict[str, int] | None = None) -> World:
    """One run of `test` (default: the ranking test) against a simulated node and kubelet."""
    world = World(behavior, host, mutant)
    world.lost_events, world.mark_delays = set(lost_events), dict(mark_delays or {})
    world.stale_pods_stats = stale_pods_stats
    world.swap_lag_summaries = swap_lag_summaries
    monkeypatch.setattr(time, "monotonic", world.clock.monotonic)
    monkeypatch.setattr(time, "sleep", world.clock.sleep)
    node = SwapNode(behavior, "fake", "c", "kc", "node-1", "v1.37.1", "6.12.0", world.capacity, world.capacity,
                    world.swap_capacity, True)
    observer = FakeObserver(world)
    observer.node = node
    ws = Workspace(node, observer, "ns", "img", "t", Recorder([]))  # type: ignore[arg-type]
    (test or test_eviction.test_memory_pressure_evicts_in_the_kubelets_order)(
        node, FakeProvider(world), lambda _: ws, {"low": "ksc-low", "high": "ksc-high"}, Request(gate))  # type: ignore[arg-type]
    return world


def evicted(world: World) -> list[str]:
    return [k for k, p in world.pods.items() if p["status"]["phase"] == "Failed"]


@pytest.mark.parametrize("behavior", ["NoSwap", "LimitedSwap"])
@pytest.mark.parametrize("host", ["vm", "kind"])
def test_a_correct_kubelet_passes(behavior: str, host: str, monkeypatch: pytest.MonkeyPatch) -> None:
    world = run(behavior, host, None, monkeypatch)
    assert sorted(evicted(world)) == sorted(f"ns/{n}" for n in ("low-big", "low-small", "above", "peer", "hog", "within"))
    assert not any(pod.endswith("/room") for pod in world.pods)  # a soft threshold leaves allocatable alone


@pytest.mark.parametrize(("mutant", "says"), [
    # the first critical pod the ranking reaches here is the etcd mirror pod (above its request, priority 0)
    ("evicts-critical", "critical pods evicted: expected [], observed ['kube-system/etcd-node']"),
    ("gives-up-at-critical", "eviction order (this test's pods): expected ['low-big', 'low-small', 'above', 'peer',"
                             " 'hog', 'within'], observed ['low-big', 'low-small']"),
    ("ranks-with-swap", "eviction order (this test's pods): expected ['low-big', 'low-small', 'above', 'peer', 'hog',"
                        " 'within'], observed ['low-big', 'low-small', 'above', 'hog', 'peer', 'within']"),
    ("does-not-stop", "evictions beyond the oracle's, until pressure was over: expected [], observed"
                      " ['kube-system/metrics-server-x at t="),
    ("inflated-available", "availableBytes"),
    ("ignores-threshold", "MemoryPressure condition and taint seen: expected both, observed pressure False"),
    ("ws-excludes-active-file", "workingSetBytes"),
])
def test_a_broken_kubelet_fails(mutant: str, says: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(AssertionError) as failure:
        run("LimitedSwap", "vm", mutant, monkeypatch)
    assert says in str(failure.value), str(failure.value)[:3000]


def test_a_kubelet_that_counts_swap_in_its_ranking_passes_where_no_pod_swaps(monkeypatch: pytest.MonkeyPatch) -> None:
    """Under NoSwap the hog does not swap: the two rankings agree, and the test cannot tell them
    apart there (it asks it under LimitedSwap)."""
    world = run("NoSwap", "vm", "ranks-with-swap", monkeypatch)
    assert "ns/peer" in evicted(world)


def test_a_peer_the_hogs_swap_cannot_overtake_could_not_test_and_fails_a_gate(monkeypatch: pytest.MonkeyPatch) -> None:
    """A peer sized past the hog's working set plus swap ranks first either way: the order
    cannot show that swap is left out, which a gate run calls a failure, never a pass."""
    monkeypatch.setattr(test_eviction, "peer_allocation", lambda node: 220 * Mi)
    with pytest.raises(pytest.fail.Exception, match=r"\[gate\] at settle the hog's swap did not outweigh the peer's lead"):
        run("LimitedSwap", "vm", None, monkeypatch, gate=True)


@pytest.mark.parametrize("mutant", [None, "ranks-with-swap"])
def test_the_settle_waits_for_the_hogs_swap_not_only_its_working_set(mutant: str | None,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A summary that shows the hog at its limit while half of what it put past it has reached
    swap would have the peer's lead look unbeatable (a gate failure on a correct kubelet): the
    settle waits for the hog's swap too, and the order then tells a kubelet that ranks with swap."""
    if mutant is None:
        world = run("LimitedSwap", "kind", None, monkeypatch, gate=True, swap_lag_summaries=12)
        assert "ns/peer" in evicted(world) and "ns/hog" in evicted(world)
    else:
        with pytest.raises(AssertionError, match=r"observed \['low-big', 'low-small', 'above', 'hog', 'peer'"):
            run("LimitedSwap", "kind", mutant, monkeypatch, gate=True, swap_lag_summaries=12)


def test_without_the_grace_period_a_correct_kubelet_is_not_judged(monkeypatch: pytest.MonkeyPatch) -> None:
    """Why the threshold is soft: a kubelet that acts at once, while it has no stats for two
    pods after its restart, ranks them first (here: low-small, above, then low-big). The test
    must not call that a wrong order: it could not test, naming the pods without stats."""
    with pytest.raises(pytest.skip.Exception) as skipped:
        run("NoSwap", "kind", "no-grace", monkeypatch)
    assert "no working set at the last look before it: ['ns/above', 'ns/low-small']" in str(skipped.value), \
        str(skipped.value)
    assert "before /stats/summary showed every pod's working set again" in str(skipped.value)


def test_a_grace_period_shorter_than_the_stats_gap_could_not_test_and_fails_a_gate(monkeypatch: pytest.MonkeyPatch) -> None:
    """A kubelet whose stats come back only 65 s after its restart: with the 60 s grace it
    evicts less than one monitoring interval after every pod has stats again."""
    monkeypatch.setattr(sys.modules[__name__], "STATLESS_SECONDS", 65)
    with pytest.raises(pytest.fail.Exception, match=r"\[gate\] the restarted kubelet evicted ns/low-big at \d+s of the watch, [0-4]s after"):
        run("NoSwap", "vm", None, monkeypatch, gate=True)


def test_critical_pods_evicted_fail_even_when_the_order_could_not_be_judged(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys.modules[__name__], "STATLESS_SECONDS", 300)
    with pytest.raises(AssertionError, match="critical pods evicted: expected \\[\\], observed \\['kube-system/etcd-node'\\]"):
        run("LimitedSwap", "vm", "evicts-critical", monkeypatch)


def test_the_watch_ends_at_the_first_eviction_the_plan_does_not_have(monkeypatch: pytest.MonkeyPatch) -> None:
    started = time.monotonic()  # the simulated clock starts here
    with pytest.raises(AssertionError, match=r"observed \['low-big', 'low-small', 'above', 'peer', 'hog', 'within', 'guaranteed'\]"):
        run("LimitedSwap", "vm", "never-resolves", monkeypatch)
    # settle, threshold, grace, six evictions, the extra one: minutes, not the 15-minute watch
    assert time.monotonic() - started < waits.bound(test_eviction.WATCH_SECONDS) / 2


def test_the_order_is_the_kubelets_decisions_not_when_each_pod_was_marked(monkeypatch: pytest.MonkeyPatch) -> None:
    """A correct kubelet whose hog is marked (DisruptionTarget) 30 s after it was evicted, after
    the next pod's mark, passes: the order is its "Evicted" events' (kind run 23)."""
    world = run("NoSwap", "kind", "late-marks", monkeypatch)
    assert [k.split("/")[1] for k in evicted(world) if k.startswith("ns/")]  # the episode happened


def test_a_pod_whose_evicted_event_was_lost_is_ordered_by_what_its_mark_allows(monkeypatch: pytest.MonkeyPatch) -> None:
    """A correct kubelet; the API server lost above's Evicted event and above was marked a minute
    after its eviction, after the next two pods were decided (kind run 45). Its mark is no time
    on the events' clock: above stands where the oracle puts it, as nothing contradicts it."""
    world = run("NoSwap", "kind", None, monkeypatch, lost_events={"ns/above"}, mark_delays={"ns/above": 60})
    assert "ns/above" in evicted(world) and "ns/above" not in world.decided  # the case happened


def test_a_misordered_pod_whose_evicted_event_was_lost_fails_by_its_mark(monkeypatch: pytest.MonkeyPatch) -> None:
    """A kubelet that evicts the hog before the peer (bench mutant 60), the hog's event lost: the
    hog was marked before the peer, expected ahead of it, was decided, so it cannot have come after."""
    with pytest.raises(AssertionError) as failure:
        run("LimitedSwap", "vm", "ranks-with-swap", monkeypatch, lost_events={"ns/hog"})
    assert ("eviction order (this test's pods): expected ['low-big', 'low-small', 'above', 'peer', 'hog', 'within'],"
            " observed ['low-big', 'low-small', 'above', 'hog', 'peer', 'within']") in str(failure.value)
    assert "no Evicted event for ['ns/hog']" in str(failure.value)


# --- the pods' own signal under a hard threshold (test_pressure_on_the_pods_alone_evicts_under_a_hard_threshold)

def run_hard(behavior: str, host: str, mutant: str | None, monkeypatch: pytest.MonkeyPatch, gate: bool = False,
             stale_pods_stats: bool = False) -> World:
    return run(behavior, host, mutant, monkeypatch, gate,
               test_eviction.test_pressure_on_the_pods_alone_evicts_under_a_hard_threshold, stale_pods_stats)


@pytest.mark.parametrize("behavior", ["NoSwap", "LimitedSwap"])
@pytest.mark.parametrize("host", ["vm", "kind"])
def test_the_pods_signal_alone_evicts_the_filler_on_a_correct_kubelet(behavior: str, host: str,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    world = run_hard(behavior, host, None, monkeypatch)
    assert evicted(world) == ["ns/filler"]
    assert world.available() > test_eviction.HARD_THRESHOLD  # the node's signal never fell below it


@pytest.mark.parametrize("mutant", ["no-allocatable-threshold", "allocatable-counts-free-swap"])
def test_a_kubelet_blind_to_the_pods_signal_fails(mutant: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(AssertionError, match="MemoryPressure on the pods' signal alone: expected True, observed False"):
        run_hard("LimitedSwap", "vm", mutant, monkeypatch)


def test_a_kubelet_that_evicts_before_any_look_sees_the_fill_is_judged_on_what_it_said(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """/stats/summary is cached; the kubelet reads fresh stats and evicts at once under a hard
    threshold: no look need ever see the pods' signal low. Its eviction message says what it saw."""
    world = run_hard("LimitedSwap", "vm", None, monkeypatch, gate=True, stale_pods_stats=True)
    assert evicted(world) == ["ns/filler"]


def test_a_node_whose_own_signal_falls_too_could_not_test_and_fails_a_gate(monkeypatch: pytest.MonkeyPatch) -> None:
    """The node's signal below the threshold as well: which one the kubelet acted on cannot be
    told, so a correct kubelet is neither passed nor failed on it."""
    monkeypatch.setattr(World, "available", lambda self: self.capacity - self.reported_ws() - 2700 * Mi)
    with pytest.raises(pytest.fail.Exception, match=r"\[gate\] (this node cannot hold|the node's own signal fell)"):
        run_hard("NoSwap", "vm", None, monkeypatch, gate=True)
