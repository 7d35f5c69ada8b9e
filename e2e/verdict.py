"""What a run proved, per swap behavior, read from its test results, and the release gate's
verdict on it. Pure functions of the results, so every rule is self-tested.

* A behavior is covered by what ran on it: passed / failed / skipped counts, skips grouped by
  reason. Nothing is reported as "tested" before its tests ran.
* The gate (``--gate``) passes only if every required behavior had each of its core checks
  pass: at least one test of each core module ran on it and passed, and none of them failed
  or skipped. Inside the gate a skip is "could not test", whatever its reason.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from clusters.behaviors import ALL_BEHAVIORS, LIMITED_SWAP, NO_SWAP, WORKLOAD_CONTROLLED_SWAP

BEHAVIOR_PROPERTY = "swap_behavior"  # the user property every node fixture records on its test

# The claims a release is gated on (one module each): cgroup limits, memory-backed volumes,
# stress outcomes, metrics. WorkloadControlledSwap adds its limits.swap module: the shape tests
# alone expect 0 everywhere there and cannot tell it from NoSwap.
CORE_CHECKS: tuple[str, ...] = ("test_cgroup_limits", "test_memory_backed_volumes", "test_stress_outcomes",
                                "test_metrics")
WORKLOAD_CONTROLLED_SWAP_CHECKS: tuple[str, ...] = CORE_CHECKS + ("test_workload_controlled_swap",)
DEFAULT_REQUIRED: tuple[str, ...] = (NO_SWAP, LIMITED_SWAP)


@dataclass(frozen=True)
class Result:
    nodeid: str
    behavior: str
    outcome: str  # "passed", "failed" or "skipped"
    reason: str = ""  # why it was skipped

    @property
    def module(self) -> str:
        return self.nodeid.split("::", 1)[0].rsplit("/", 1)[-1].removesuffix(".py")


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
    return WORKLOAD_CONTROLLED_SWAP_CHECKS if behavior == WORKLOAD_CONTROLLED_SWAP else CORE_CHECKS


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
            if not mine:
                problems.append(f"{behavior}: {module}: no test ran")
            elif counts["failed"] or counts["skipped"] or not counts["passed"]:
                reasons = sorted({r.reason for r in mine if r.outcome == "skipped"})
                problems.append(f"{behavior}: {module}: {counts['passed']} passed, {counts['failed']} failed,"
                                f" {counts['skipped']} skipped" + (f" ({'; '.join(reasons)})" if reasons else ""))
    return problems
