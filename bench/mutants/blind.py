"""Was the suite blind to these mutants before their tests? (``python -m bench.mutants --blind``)

A mutant written with a new claim (issue 44's blind areas, docs/coverage.md) has tests written for
it, ``NEW_TESTS``. The claim closed a blind area only if the suite without those tests let the
mutant pass: the other half of "caught by its new test". One build carries a group of such
mutants at once, and the suite runs on it with every member's new tests deselected: a run that
passes shows that each member survived everything else (one full suite for many mutants, not one
each). A failure says that a test that is not new already saw one of them; the run does not say
which, so the group's members then need a run each.

Where the claim was a check added to an existing test (``extended``), that whole test is
deselected: the run then shows that no other test sees the mutant, and says nothing of the
test's older checks. Such mutants are grouped apart, so that the other groups lose only new tests.

Two mutants whose patches touch the same lines cannot share a build: grouping is greedy, in the
mutants' order, and asks ``applies`` whether a group's patches apply together.

The tests are named here, not in the patch's header: the header is part of the build's identity
(``KubernetesSource.build_id`` hashes the patch text), and a new line there would rebuild every
mutant and drop every result kept for it.
"""
from __future__ import annotations

import hashlib
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from clusters.vm import k8s_source

from . import CAUGHT, NOT_RUN, SURVIVED, Mutant, Outcome

Applies = Callable[[Sequence[Path]], bool]


@dataclass(frozen=True)
class NewTests:
    expression: str  # pytest -k
    extended: bool = False  # the claim is a check added to these (older) tests


NEW_TESTS: dict[str, NewTests] = {
    "resize-restart-policy-ignored": NewTests("test_memory_resize_with_restart_policy_restarts_the_container"),
    "init-containers-get-no-swap": NewTests("test_init_container_memory_swap_max"),
    "ephemeral-containers-swap-unset": NewTests("test_ephemeral_container_gets_no_swap"),
    "resize-judges-the-allocated-pod-only":
        NewTests("test_memory_resize_that_would_give_a_container_swap_is_infeasible"),
    "resize-refuses-memory-limit-changes": NewTests("test_resizes_keeping_the_memory_request_are_carried_out_with_swap"),
    "resize-ignores-sidecars": NewTests("test_memory_resize_of_a_sidecar_with_swap_is_infeasible"),
    "resize-refuses-cpu-request-changes": NewTests("test_resizes_keeping_the_memory_request_are_carried_out_with_swap"),
    "fail-swap-on-defaults-to-false":
        NewTests("test_kubelet_with_fail_swap_on_left_out_refuses_to_start_on_a_node_with_swap"),
    "unlimited-swap-accepted": NewTests("test_kubelet_with_an_unknown_swap_behavior_refuses_to_start"),
    "node-swap-gate-not-locked": NewTests("test_kubelet_with_the_node_swap_gate_off_refuses_to_start"),
    "pod-cgroups-swap-within-memory-limit": NewTests("test_no_swap_limit_above_the_container"),
    "summary-swap-available-where-unlimited": NewTests("test_swap_available_is_left_out_where_swap_is_unlimited"),
    "system-containers-without-swap": NewTests(
        "test_swap_usage_metrics_match_the_cgroups or test_swap_available_is_left_out_where_swap_is_unlimited",
        extended=True),
    "swap-limit-metric-left-out-at-zero": NewTests("test_a_container_without_swap_reports_zero_swap"),
    "wcs-accepted-without-its-gate":
        NewTests("test_kubelet_with_workload_controlled_swap_but_not_its_gate_refuses_to_start"),
    "resize-sets-pod-swap-to-its-limit": NewTests("test_resizes_keeping_the_memory_request_are_carried_out_with_swap"),
    "cadvisor-metrics-without-memory-usage": NewTests("test_swap_usage_metrics_match_the_cgroups", extended=True),
    "no-behavior-log-inverted":
        NewTests("test_swap_limits_across_a_kubelet_restart_and_a_behavior_switch", extended=True),
    "pod-level-resize-refused-for-swap": NewTests("test_pod_level_memory_resize_is_carried_out_with_swap"),
    "wcs-allocated-skips-init-containers": NewTests("test_node_swap_allocated_is_the_sum_of_limits_swap"),
    "fail-swap-on-flag-ignored":
        NewTests("test_kubelet_with_fail_swap_on_on_its_command_line_refuses_to_start_on_a_node_with_swap"),
    "eviction-ranks-by-working-set-plus-swap": NewTests("test_memory_pressure_evicts_in_the_kubelets_order",
                                                        extended=True),
    "allocatable-available-counts-free-swap": NewTests("test_pressure_on_the_pods_alone_evicts_under_a_hard_threshold"),
    "node-swap-reported-without-swap": NewTests("test_a_kubelet_started_without_swap_reports_no_node_swap"),
}
BEHAVIOR_ORDER = ("NoSwap", "LimitedSwap", "WorkloadControlledSwap")


def patches_of(group: Sequence[Mutant]) -> list[Path]:
    """What the group's build applies, in order: the shared base (if any), then each mutant."""
    bases = {m.base for m in group}
    if len(bases) != 1:
        raise ValueError(f"a group shares one base, these have {len(bases)}: {[m.name for m in group]}")
    base = bases.pop()
    return [*([base] if base is not None else []), *(m.patch.path for m in group)]


def groups(mutants: Sequence[Mutant], applies: Applies) -> list[list[Mutant]]:
    """The mutants with new tests, in groups whose patches apply together on one base."""
    out: list[list[Mutant]] = []
    for m in mutants:
        if m.name not in NEW_TESTS:
            continue
        for group in out:
            same_kind = group[0].base == m.base and NEW_TESTS[group[0].name].extended == NEW_TESTS[m.name].extended
            if same_kind and applies(patches_of([*group, m])):
                group.append(m)
                break
        else:
            out.append([m])
    return out


def selection(group: Sequence[Mutant], k: str | None = None) -> tuple[list[str], str]:
    """(pytest arguments, label): the whole suite less every member's new tests, within ``-k``."""
    named = list(dict.fromkeys(NEW_TESTS[m.name].expression for m in group))
    without = " and ".join(f"not ({e})" for e in named)
    expression = f"({k}) and {without}" if k else without
    return ["-k", expression], f"the suite without: {' or '.join(named)}" + (f", within -k {k}" if k else "")


def behaviors(group: Sequence[Mutant]) -> str:
    """Every behavior a member runs on: the suite is blind to a mutant only where it looked."""
    named = {b.strip() for m in group for b in (m.behaviors or "NoSwap,LimitedSwap").split(",")}
    return ",".join(sorted(named, key=lambda b: (BEHAVIOR_ORDER + (b,)).index(b)))


def key(group: Sequence[Mutant]) -> str:
    """Of the group's patches (a changed mutant or base is another build)."""
    h = hashlib.sha256()
    for p in patches_of(group):
        h.update(p.read_bytes())
    return h.hexdigest()[:12]


def applies_on(release: str, env: dict[str, str], find_module=k8s_source.module_dir) -> Applies:
    """A predicate on the release's real source: the patches, applied in order with patch(1) to
    a scratch copy of the files they touch, all apply, as the build applies them."""
    module = find_module("k8s.io/kubernetes", release, env)

    def applies(patches: Sequence[Path]) -> bool:
        files = {name for p in patches for name in k8s_source.read_patch(p).files}
        with tempfile.TemporaryDirectory(prefix="ksc-blind-") as scratch:
            tree = Path(scratch)
            for name in files:
                if (module / name).is_file():
                    (tree / name).parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(module / name, tree / name)
            for p in patches:
                done = subprocess.run([*k8s_source.PATCH, "-d", str(tree), "-i", str(p.resolve())],
                                      capture_output=True, text=True)
                if done.returncode != 0:
                    return False
        return True

    return applies


def verdict(o: Outcome) -> str:
    """What one group's run says of its members."""
    if o.verdict == SURVIVED:
        return f"blind before: each survived the rest of the suite ({o.passed} passed, {o.skipped} skipped)"
    if o.verdict == CAUGHT:
        seen = ", ".join(sorted({t.rsplit("::", 1)[-1] for t in o.failed + o.errors}))
        return f"seen by older tests: {seen} (run the members one by one to say which)"
    return f"could not test: {o.detail}"[:300]


def table(done: Sequence[tuple[Sequence[Mutant], Outcome]], date: str, release: str) -> str:
    rows = ["| build | mutants | verdict | wall time | selection |", "|---|---|---|---|---|"]
    for group, o in done:
        names = ", ".join(m.patch.path.stem for m in group)
        rows.append(f"| {o.build} | {names} | {verdict(o)} | {o.seconds / 60:.1f} min | {o.selection} |")
    blind_to = sum(len(g) for g, o in done if o.verdict == SURVIVED)
    total = sum(len(g) for g, _ in done)
    return "\n".join([f"Blind before their tests, on {release} ({date})", "", *rows, "",
                      f"the suite without their own tests was blind to {blind_to}/{total} mutants"
                      + ("" if all(o.verdict != NOT_RUN for _, o in done) else " (some could not be tested)")]) + "\n"
