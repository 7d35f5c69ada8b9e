"""What a run proved, per swap behavior, read from its test results, and the release gate's
verdict on it. Pure functions of the results, so every rule is self-tested.

* A behavior is covered by what ran on it: passed / failed / skipped counts, skips grouped by
  reason. Nothing is reported as "tested" before its tests ran.
* The gate (``--gate``) requires, of every required behavior, every e2e module that has tests
  for it (REQUIRED_CHECKS: a self-test compares the table with the modules' markers, so a new
  module or marker cannot leave it stale). A required module fails the gate when no test of it
  ran, when one failed, or when one skipped, except that:
  - in the core modules (CORE_CHECKS, and test_workload_controlled_swap under
    WorkloadControlledSwap) a skip is "could not test", whatever its reason;
  - elsewhere a skip is accepted only with a reason this module can check: the node fixture's
    `min_kubernetes`/`min_kernel` skip ("needs kubelet >= 1.33; node N runs v1.32.4", re-checked
    here: the version it names must really be older), or, on NoSwap and LimitedSwap, the
    KEP-5359 test's "the API server does not keep resources.limits.swap" (raised only after the
    server's own message named the field as refused, or its answer to a dry run lacked it), or one of TOPOLOGY_SKIPS, each for its one
    test: the hard-threshold eviction test's "the node runs the API server in its pods cgroup"
    (raised only after the API server's pod was seen on that node: the vm node, kind's control
    plane; squeezing the pods cgroup would starve the control plane) and the swapoff test's "the
    node's swap is its host's" (raised where the provider says so: kind). A provider that cannot do what a
    test needs ("cannot set a kubelet's eviction thresholds") is "could not test": it fails the gate.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from clusters.behaviors import ALL_BEHAVIORS, LIMITED_SWAP, NO_SWAP, WORKLOAD_CONTROLLED_SWAP
from clusters.provider import version_tuple

BEHAVIOR_PROPERTY = "swap_behavior"  # the user property every node fixture records on its test

# The claims a release is gated on whatever the reason a test skipped (one module each): cgroup
# limits, memory-backed volumes, stress outcomes, metrics. Under WorkloadControlledSwap its
# limits.swap module is core too: the shape tests alone expect 0 everywhere there and cannot
# tell it from NoSwap.
CORE_CHECKS: tuple[str, ...] = ("test_cgroup_limits", "test_memory_backed_volumes", "test_stress_outcomes",
                                "test_metrics")
# Every e2e module with a test for the behavior (its needs_behavior markers and node fixtures;
# tests/test_gate.py collects e2e/ and compares), so each gate requires only what can run under
# it. WorkloadControlledSwap has stress tests (a Guaranteed pod with and without limits.swap)
# and a resize test (KEP-5359 lifts the refusal) but no eviction or restart tests: requiring
# those there would make its gate impossible to pass.
_EVERYWHERE = ("test_cgroup_limits", "test_memory_backed_volumes", "test_metrics", "test_static_pods",
               "test_workload_controlled_swap", "test_stress_outcomes", "test_resize")
_SWAP_BEHAVIORS = ("test_eviction", "test_kubelet_restart")
# The kubelet's start-up refusals do not depend on the behavior: asked of the NoSwap node, and
# of the WorkloadControlledSwap node for the KEP-5359 prototype's own (its behavior without its gate).
_STARTUP = ("test_kubelet_startup",)
REQUIRED_CHECKS: dict[str, tuple[str, ...]] = {
    NO_SWAP: _EVERYWHERE + _SWAP_BEHAVIORS + _STARTUP,
    LIMITED_SWAP: _EVERYWHERE + _SWAP_BEHAVIORS,
    WORKLOAD_CONTROLLED_SWAP: _EVERYWHERE + _STARTUP,
}
WORKLOAD_CONTROLLED_SWAP_CHECKS: tuple[str, ...] = REQUIRED_CHECKS[WORKLOAD_CONTROLLED_SWAP]
DEFAULT_REQUIRED: tuple[str, ...] = (NO_SWAP, LIMITED_SWAP)

# The skip of e2e/test_workload_controlled_swap.py where the API server refuses the field itself
# (its probe's rejection names only resources.limits/requests[swap] as an invalid resource name)
# or takes the probe pod and drops the field (it is off there).
NO_LIMITS_SWAP_API = "the API server does not keep resources.limits.swap (no KEP-5359)"
# The skip of e2e/test_eviction.py's hard-threshold test where the node it would squeeze hosts the
# API server (seen among the node's pods first).
HOSTS_THE_API_SERVER = "the node runs the API server in its pods cgroup, which this test squeezes"
# The skip of e2e/test_kubelet_restart.py's swapoff test where the provider says the node's swap is
# its host's, shared by every node there (clusters.provider.SharedSwapError: kind).
SWAP_SHARED_BY_NODES = "the node's swap is its host's, shared with other nodes"
# Skips a provider's node topology forces on one test, accepted for that test only (decision 0022).
TOPOLOGY_SKIPS: dict[str, tuple[str, str]] = {
    HOSTS_THE_API_SERVER: ("test_eviction", "test_pressure_on_the_pods_alone_evicts_under_a_hard_threshold"),
    SWAP_SHARED_BY_NODES: ("test_kubelet_restart", "test_a_kubelet_started_without_swap_reports_no_node_swap"),
}
# e2e/plugin/nodes.py skip_if_too_old: f"needs {what} >= {version}; node {name} runs {have}"
_TOO_OLD = re.compile(r"needs (?P<what>kubelet|kernel) >= (?P<needed>\S+); node (?P<node>\S+) runs (?P<have>\S+)")


@dataclass(frozen=True)
class Result:
    nodeid: str
    behavior: str
    outcome: str  # "passed", "failed" or "skipped"
    reason: str = ""  # why it was skipped

    @property
    def module(self) -> str:
        return self.nodeid.split("::", 1)[0].rsplit("/", 1)[-1].removesuffix(".py")

    @property
    def function(self) -> str:
        return self.nodeid.split("::", 1)[-1].split("[", 1)[0]


def final_results(phases: Iterable[tuple[str, str, str, str, str]]) -> list[Result]:
    """One Result per test from its phase reports (nodeid, behavior, when, outcome, reason).

    A failure in any phase (teardown included) fails the test; a skip in setup skips it."""
    order = {"passed": 0, "skipped": 1, "failed": 2}
    best: dict[str, Result] = {}
    for nodeid, behavior, when, outcome, reason in phases:
        if not behavior or (outcome == "passed" and when != "call"):
            continue
        result = Result(nodeid, behavior, outcome, reason if outcome == "skipped" else "")
        if nodeid not in best or order[outcome] > order[best[nodeid].outcome]:
            best[nodeid] = result
    return list(best.values())


def checks_for(behavior: str) -> tuple[str, ...]:
    """Every module the gate requires of `behavior`."""
    return REQUIRED_CHECKS[behavior]


def is_core(behavior: str, module: str) -> bool:
    """A core check: any skip of it fails the gate."""
    return module in CORE_CHECKS or (behavior == WORKLOAD_CONTROLLED_SWAP and module == "test_workload_controlled_swap")


def too_old(reason: str) -> bool:
    """The node fixture's min_kubernetes/min_kernel skip, and the node really is older."""
    match = _TOO_OLD.fullmatch(reason.strip())
    if not match:
        return False
    try:
        return version_tuple(match["have"]) < version_tuple(match["needed"])
    except ValueError:
        return False


def accepted_skip(behavior: str, module: str, reason: str, function: str = "") -> bool:
    """A skip the gate accepts in a required module (module docstring); `function`: the test's."""
    if is_core(behavior, module):
        return False
    if too_old(reason):
        return True
    for prefix, where in TOPOLOGY_SKIPS.items():
        if reason.startswith(prefix):
            return (module, function) == where
    return (module == "test_workload_controlled_swap" and behavior != WORKLOAD_CONTROLLED_SWAP
            and reason.startswith(NO_LIMITS_SWAP_API))


def summary_lines(results: Sequence[Result], selected: Sequence[str], nodes: Mapping[str, str],
                  not_covered: Mapping[str, str]) -> list[str]:
    """One line per behavior (plus one per skip reason), in the order reports list behaviors."""
    lines = []
    for behavior in ALL_BEHAVIORS:
        mine = [r for r in results if r.behavior == behavior]
        if behavior not in selected:
            lines.append(f"{behavior}: NOT SELECTED")
            continue
        if behavior in not_covered and not any(r.outcome != "skipped" for r in mine):
            lines.append(f"{behavior}: NOT COVERED: {not_covered[behavior]}")
            continue
        counts = Counter(r.outcome for r in mine)
        where = f" on {nodes[behavior]}" if behavior in nodes else ""
        lines.append(f"{behavior}: {counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped{where}")
        for reason, n in Counter(r.reason for r in mine if r.outcome == "skipped").most_common():
            lines.append(f"    {n} skipped: {reason}")
    return lines


def gate_problems(results: Sequence[Result], required: Sequence[str]) -> list[str]:
    """Why the release gate fails (empty: it passes)."""
    problems = []
    for behavior in required:
        for module in checks_for(behavior):
            mine = [r for r in results if r.behavior == behavior and r.module == module]
            counts = Counter(r.outcome for r in mine)
            head = f"{behavior}: {module}: {counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped"
            if not mine:
                problems.append(f"{behavior}: {module}: no test ran")
            elif is_core(behavior, module):
                if counts["failed"] or counts["skipped"] or not counts["passed"]:
                    reasons = sorted({r.reason for r in mine if r.outcome == "skipped"})
                    problems.append(head + (f" ({'; '.join(reasons)})" if reasons else ""))
            else:
                refused = sorted({r.reason for r in mine if r.outcome == "skipped"
                                  and not accepted_skip(behavior, module, r.reason, r.function)})
                if counts["failed"] or refused:
                    problems.append(head + (f" (could not test: {'; '.join(refused)})" if refused else ""))
    return problems
