"""Was the suite blind to these mutants before their tests? (``python -m bench.mutants --blind``)

Issue 44's mutants (39-62) each came with a new claim, in tests of its own (``OWN_TESTS``): new
tests, or a check added to an older test. The claim closed a blind area only if the suite
without those tests let the mutant pass: the other half of "caught by its new test". One build
carries a group of such mutants together, and the suite runs on it without the group's own
tests, on every behavior a member runs on: a run that passes shows that each member survived the
suite as it was before issue 44's tests (less, for a check added to an older test, that test).
A failure says that a remaining test already saw one of them; the run does not say which, so the
members then need a run each.

A group deselects the new tests of all its members, which did not exist before issue 44 anyway,
but an older test only where every member extended that same test: otherwise one member's claim
would be judged without a test that might have seen it. Mutants whose patches touch the same
lines cannot share a build. Grouping is greedy, in the mutants' order.

The tests are named here, not in the patch's header: a header's `tests:` line is what the mutant
bench runs on the mutant (part of its kept results' key, `Mutant.content_hash`), and these are
the tests the blind run leaves out.
"""
from __future__ import annotations

import hashlib
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from clusters.behaviors import ALL_BEHAVIORS
from clusters.vm import k8s_source
from clusters.vm.k8s_source import BUILD_KEYS

from . import CAUGHT, NOT_APPLICABLE, NOT_RUN, RUN_KEYS, SURVIVED, Mutant, Outcome, seen
from .standing import BOTH

Applies = Callable[[Sequence[Path]], bool]


@dataclass(frozen=True)
class OwnTests:
    new: tuple[str, ...] = ()  # test functions written for the claim
    extended: tuple[str, ...] = ()  # test functions that existed before and gained its check


def _new(*tests: str) -> OwnTests:
    return OwnTests(new=tests)


def _extended(*tests: str) -> OwnTests:
    return OwnTests(extended=tests)


OWN_TESTS: dict[str, OwnTests] = {
    "resize-restart-policy-ignored": _new("test_memory_resize_with_restart_policy_restarts_the_container"),
    "init-containers-get-no-swap": _new("test_init_container_memory_swap_max"),
    "ephemeral-containers-swap-unset": _new("test_ephemeral_container_gets_no_swap"),
    "resize-judges-the-allocated-pod-only": _new("test_memory_resize_that_would_give_a_container_swap_is_infeasible"),
    "resize-refuses-memory-limit-changes": _new("test_resizes_keeping_the_memory_request_are_carried_out_with_swap"),
    "resize-ignores-sidecars": _new("test_memory_resize_of_a_sidecar_with_swap_is_infeasible"),
    "resize-refuses-cpu-request-changes": _new("test_resizes_keeping_the_memory_request_are_carried_out_with_swap"),
    "fail-swap-on-defaults-to-false": _new("test_kubelet_with_fail_swap_on_left_out_refuses_to_start_on_a_node_with_swap"),
    "unlimited-swap-accepted": _new("test_kubelet_with_an_unknown_swap_behavior_refuses_to_start"),
    "node-swap-gate-not-locked": _new("test_kubelet_with_the_node_swap_gate_off_refuses_to_start"),
    "pod-cgroups-swap-within-memory-limit": _new("test_no_swap_limit_above_the_container"),
    "summary-swap-available-where-unlimited": _new("test_swap_available_is_left_out_where_swap_is_unlimited"),
    "system-containers-without-swap": _extended("test_swap_usage_metrics_match_the_cgroups",
                                                "test_swap_available_is_left_out_where_swap_is_unlimited"),
    "swap-limit-metric-left-out-at-zero": _new("test_a_container_without_swap_reports_zero_swap"),
    "wcs-accepted-without-its-gate": _new("test_kubelet_with_workload_controlled_swap_but_not_its_gate_refuses_to_start"),
    "resize-sets-pod-swap-to-its-limit": _extended("test_resizes_keeping_the_memory_request_are_carried_out_with_swap"),
    "cadvisor-metrics-without-memory-usage": _extended("test_swap_usage_metrics_match_the_cgroups"),
    "no-behavior-log-inverted": _extended("test_swap_limits_across_a_kubelet_restart_and_a_behavior_switch"),
    "pod-level-resize-refused-for-swap": _new("test_pod_level_memory_resize_is_carried_out_with_swap"),
    "wcs-allocated-skips-init-containers": _new("test_node_swap_allocated_is_the_sum_of_limits_swap"),
    "fail-swap-on-flag-ignored":
        _new("test_kubelet_with_fail_swap_on_on_its_command_line_refuses_to_start_on_a_node_with_swap"),
    "eviction-ranks-by-working-set-plus-swap": _extended("test_memory_pressure_evicts_in_the_kubelets_order"),
    "allocatable-available-counts-free-swap": _new("test_pressure_on_the_pods_alone_evicts_under_a_hard_threshold"),
    "node-swap-reported-without-swap": _new("test_a_kubelet_started_without_swap_reports_no_node_swap"),
}
NEW = frozenset(t for own in OWN_TESTS.values() for t in own.new)  # none of these existed before issue 44


def own_tests(m: Mutant) -> list[str]:
    own = OWN_TESTS[m.name]
    return [*own.new, *own.extended]


def older(m: Mutant) -> frozenset[str]:
    """The tests from before issue 44 that its run must go without: those it extended."""
    return frozenset(OWN_TESTS[m.name].extended) - NEW


def patches_of(group: Sequence[Mutant]) -> list[Path]:
    """What the group's build applies, in order: the shared base (if any), then each mutant."""
    bases = {m.base for m in group}
    if len(bases) != 1:
        raise ValueError(f"a group shares one base, these have {len(bases)}: {[m.name for m in group]}")
    base = bases.pop()
    return [*([base] if base is not None else []), *(m.patch.path for m in group)]


def groups(mutants: Sequence[Mutant], applies: Applies) -> list[list[Mutant]]:
    """The mutants with tests of their own, in groups on one base, going without the same older
    tests, whose patches apply together."""
    out: list[list[Mutant]] = []
    for m in mutants:
        if m.name not in OWN_TESTS:
            continue
        for group in out:
            alike = group[0].base == m.base and older(group[0]) == older(m)
            if alike and applies(patches_of([*group, m])):
                group.append(m)
                break
        else:
            out.append([m])
    return out


def selection(group: Sequence[Mutant], k: str | None = None, extra: Sequence[str] = ()) -> tuple[list[str], str]:
    """(pytest arguments, label): the suite without every member's own tests, within the bench's
    ``-k``; the label also names the pytest arguments every run gets (``extra``), so that a kept
    result stands only for the same selection."""
    named = list(dict.fromkeys(t for m in group for t in own_tests(m)))
    without = " and ".join(f"not {t}" for t in named)
    expression = f"({k}) and {without}" if k else without
    label = f"the suite without: {', '.join(named)}" + (f", within -k {k}" if k else "")
    return ["-k", expression], label + (f", with {shlex.join(extra)}" if extra else "")


def behaviors(group: Sequence[Mutant]) -> str:
    """Every behavior a member runs on: the suite is blind to a mutant only where it looked."""
    named = {b.strip() for m in group for b in (m.behaviors or BOTH).split(",")}
    return ",".join(sorted(named, key=lambda b: (ALL_BEHAVIORS + (b,)).index(b)))


def key(group: Sequence[Mutant]) -> str:
    """Of the group's build and run: each patch's diff and the header lines that build or choose
    its run (its behaviors decide the blind run's), not a header's prose."""
    h = hashlib.sha256()
    for p in patches_of(group):
        h.update(k8s_source.read_patch(p).text_of(BUILD_KEYS + RUN_KEYS).encode())
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


def judged(o: Outcome, refused_skips: Sequence[str]) -> Outcome:
    """A group survived only if pytest said so too (exit 0: not interrupted, no internal error)
    and it skipped nothing the release gate would not accept (``refused_skips``): a test that
    could not run would otherwise count as one the mutants got past. (A failure that never
    reached the node's verdict is no sight of a mutant: judge() already said so.)"""
    if o.verdict == SURVIVED and (o.exit_code != 0 or refused_skips):
        o.verdict = NOT_RUN
        o.detail = (f"pytest exit {o.exit_code}" if o.exit_code != 0 else
                    f"skipped where the gate does not accept it: {'; '.join(refused_skips)}")[:300]
    return o


def verdict(o: Outcome) -> str:
    """What one group's run says of its members."""
    if o.verdict == SURVIVED:
        return f"blind before: each survived the suite without the group's own tests ({o.passed} passed)"
    if o.verdict == CAUGHT:
        names = ", ".join(sorted({t.rsplit("::", 1)[-1] for t in seen(o)}))
        return f"seen by a remaining test: {names} (run the members one by one to say which)"
    if o.verdict == NOT_APPLICABLE:
        return f"not applicable: {o.detail}"
    return f"could not test: {o.detail}"[:300]


def table(done: Sequence[tuple[Sequence[Mutant] | str, Outcome | None]], date: str, release: str) -> str:
    """One row per build (and per mutant not applicable to the release), then the count; a build
    with no result of this suite (None) reads "not run on this suite", counted apart."""
    rows = ["| build | mutants | verdict | wall time | selection |", "|---|---|---|---|---|"]
    for group, o in done:
        names = group if isinstance(group, str) else ", ".join(m.patch.path.stem for m in group)
        if o is None:
            rows.append(f"| — | {names} | not run on this suite | — | — |")
            continue
        took = "—" if o.verdict == NOT_APPLICABLE else f"{o.seconds / 60:.1f} min"
        rows.append(f"| {o.build} | {names} | {verdict(o)} | {took} | {o.selection or '—'} |")
    ran = [(g, o) for g, o in done if o is not None and o.verdict != NOT_APPLICABLE]
    waiting = [g for g, o in done if o is None]
    blind_to = sum(len(g) for g, o in ran if o.verdict == SURVIVED)
    total = sum(len(g) for g, _ in ran)
    na = len(done) - len(ran) - len(waiting)
    count = f"the suite without their own tests was blind to {blind_to}/{total} mutants, {na} not applicable"
    if waiting:
        mutants = sum(map(len, waiting))
        count += (f"; {mutants} mutant{'s' * (mutants != 1)} in {len(waiting)} build{'s' * (len(waiting) != 1)}"
                  " not run on this suite yet")
    if any(o.verdict == NOT_RUN for _, o in ran):
        count += "; some could not be tested"
    return "\n".join([f"Blind before their tests, on {release} ({date})", "", *rows, "", count]) + "\n"
