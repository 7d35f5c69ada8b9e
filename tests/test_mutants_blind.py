"""Blind before their tests (bench/mutants/blind.py, ``python -m bench.mutants --blind``): which
mutants share a build, what the suite runs without, and what a run says of its members."""
from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

from bench import mutants as model
from bench.mutants import blind
from clusters import cli, versions
from clusters.vm import build as vbuild
from clusters.vm import k8s_source

ROOT = Path(__file__).resolve().parents[1]
MUTANTS = {m.name: m for m in model.load()}


def _test_modules() -> dict[str, str]:
    """Each test function of the suite, with its module's name (what pytest -k also matches)."""
    out: dict[str, str] = {}
    for path in (ROOT / "e2e").rglob("test_*.py"):
        out |= {n.name: path.stem for n in ast.walk(ast.parse(path.read_text()))
                if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")}
    return out


def test_every_own_test_named_is_a_test_of_the_suite_and_every_mutant_a_mutant() -> None:
    tests = set(_test_modules())
    assert set(blind.OWN_TESTS) <= set(MUTANTS)
    for name in blind.OWN_TESTS:
        named = blind.own_tests(MUTANTS[name])
        assert named and set(named) <= tests, (name, set(named) - tests)


def test_deselecting_an_own_test_deselects_no_other_test() -> None:
    """pytest -k matches a word anywhere in a test's name, its module's and its parameters': a name
    inside another test's or module's name would silently take that test out of the blind run too."""
    assert not _deselected_beside(sorted(blind.NEW | {t for o in blind.OWN_TESTS.values() for t in o.extended}))


def _deselected_beside(own: list[str]) -> dict[str, set[str]]:
    """Each own test's -k word against the suite's other test functions and every module."""
    module = _test_modules()
    found = {}
    for test in own:
        word = test.lower()
        inside = {f for f in module if word in f.lower() and f != test} | {m for m in module.values() if word in m.lower()}
        if inside:
            found[test] = inside
    return found


def test_the_deselection_guard_sees_a_name_inside_another() -> None:
    assert _deselected_beside(["test_resize", "test_memory_resize_of_a_sidecar"]) == {
        "test_resize": {"test_resize"} | {f for f, m in _test_modules().items() if "test_resize" in f},
        "test_memory_resize_of_a_sidecar": {"test_memory_resize_of_a_sidecar_with_swap_is_infeasible"}}


def test_own_tests_are_among_those_the_bench_runs_for_the_mutant() -> None:
    """A mutant's own run (``# tests:``, -k words joined by "or") must include its own tests:
    they are what catch it."""
    module = _test_modules()
    for name in blind.OWN_TESTS:
        runs = (MUTANTS[name].tests or "").split(" or ")
        assert all(runs), (name, "names no tests")
        for test in blind.own_tests(MUTANTS[name]):
            assert any(word in test or word in module[test] for word in runs), (name, test, runs)


def _fake(names: list[str]) -> list[model.Mutant]:
    return [MUTANTS[n] for n in names]


def test_groups_keep_apart_what_does_not_apply_together_older_tests_and_bases() -> None:
    clash = {MUTANTS["resize-judges-the-allocated-pod-only"].patch.path,
             MUTANTS["resize-refuses-memory-limit-changes"].patch.path}

    def applies(patches) -> bool:
        return not clash <= set(patches)

    mutants = _fake(["resize-judges-the-allocated-pod-only", "hash-includes-resources",  # no tests of its own
                     "resize-refuses-memory-limit-changes", "init-containers-get-no-swap",
                     "cadvisor-metrics-without-memory-usage", "wcs-accepted-without-its-gate",
                     "no-behavior-log-inverted", "system-containers-without-swap",
                     "resize-sets-pod-swap-to-its-limit", "wcs-allocated-skips-init-containers"])
    got = [[m.name for m in g] for g in blind.groups(mutants, applies)]
    assert got == [
        # 54 extended a test that is itself new (43's): it goes without no older test
        ["resize-judges-the-allocated-pod-only", "init-containers-get-no-swap", "resize-sets-pod-swap-to-its-limit"],
        ["resize-refuses-memory-limit-changes"],
        # both extended the same older test, and 51 a new one
        ["cadvisor-metrics-without-memory-usage", "system-containers-without-swap"],
        ["wcs-accepted-without-its-gate", "wcs-allocated-skips-init-containers"],
        ["no-behavior-log-inverted"]]
    prototype = blind.patches_of(_fake(["wcs-accepted-without-its-gate", "wcs-allocated-skips-init-containers"]))
    assert prototype[0] == MUTANTS["wcs-accepted-without-its-gate"].base and len(prototype) == 3
    with pytest.raises(ValueError):
        blind.patches_of(_fake(["init-containers-get-no-swap", "wcs-accepted-without-its-gate"]))


def test_the_run_deselects_each_own_test_once_within_the_benchs_k_and_names_its_arguments() -> None:
    group = _fake(["resize-refuses-memory-limit-changes", "resize-refuses-cpu-request-changes",
                   "init-containers-get-no-swap"])
    args, label = blind.selection(group)
    assert args == ["-k", "not test_resizes_keeping_the_memory_request_are_carried_out_with_swap"
                          " and not test_init_container_memory_swap_max"]
    assert label == ("the suite without: test_resizes_keeping_the_memory_request_are_carried_out_with_swap,"
                     " test_init_container_memory_swap_max")
    args, narrowed = blind.selection(group, "LimitedSwap", ["-m", "slow"])
    assert args[1].startswith("(LimitedSwap) and not ") and narrowed == label + ", within -k LimitedSwap, with -m slow"
    assert blind.behaviors(_fake(["node-swap-gate-not-locked", "init-containers-get-no-swap"])) == "NoSwap,LimitedSwap"
    assert blind.behaviors(_fake(["wcs-accepted-without-its-gate"])) == "WorkloadControlledSwap"


def test_a_group_survived_only_where_pytest_and_the_gate_say_so_too() -> None:
    def run(exit_code: int) -> model.Outcome:
        return model.Outcome("blind-x", "b", model.SURVIVED, passed=3, exit_code=exit_code)

    assert blind.judged(run(0), []).verdict == model.SURVIVED
    assert blind.judged(run(2), []).verdict == model.NOT_RUN  # interrupted: the report holds what ran
    refused = blind.judged(run(0), ["e2e/test_a.py::test_a[NoSwap]: cannot read memory.swap.max"])
    assert refused.verdict == model.NOT_RUN and "cannot read memory.swap.max" in refused.detail


@pytest.mark.parametrize(("verdict", "says"), [(model.SURVIVED, "blind before"), (model.CAUGHT, "seen by a remaining"),
                                               (model.NOT_RUN, "could not test")])
def test_a_groups_run_says_what_it_proved(verdict: str, says: str) -> None:
    o = model.Outcome("blind-x", "b", verdict, failed=["e2e/test_a.py::test_a[LimitedSwap]"], passed=3)
    assert blind.verdict(o).startswith(says)
    na = model.Outcome("wcs-accepted-without-its-gate", "v1.34.12", model.NOT_APPLICABLE, detail="no prototype")
    text = blind.table([(_fake(["init-containers-get-no-swap"]), o), (na.name, na)], "2026-11-29", "v1.37.2")
    assert f"was blind to {1 if verdict == model.SURVIVED else 0}/1 mutants, 1 not applicable" in text
    assert "| wcs-accepted-without-its-gate | not applicable: no prototype |" in text


@pytest.mark.skipif(not shutil.which("patch") or not shutil.which("go"), reason="needs patch(1) and go")
def test_on_the_real_release_the_clashing_resize_mutants_get_builds_of_their_own() -> None:
    """The pinned release's source: 42 and 43 (and 45) change the same lines of the resize
    admission, so they cannot share a build; every group's patches apply together."""
    try:
        applies = blind.applies_on(versions.KUBERNETES, vbuild.go_env())
    except k8s_source.SourceError as error:
        pytest.fail(f"the release's source: {error}")
    groups = blind.groups(list(MUTANTS.values()), applies)
    where = {m.name: i for i, g in enumerate(groups) for m in g}
    assert set(where) == set(blind.OWN_TESTS)
    assert where["resize-judges-the-allocated-pod-only"] != where["resize-refuses-memory-limit-changes"]
    assert all(applies(blind.patches_of(g)) for g in groups)


def test_blind_runs_each_group_once_keeps_it_and_fails_when_one_was_seen(tmp_path: Path, monkeypatch) -> None:
    from bench.mutants import __main__ as bench
    from bench.mutants import releases

    ran: list[tuple[str, str, str]] = []

    def run_one(name, patches, behaviors, selection, label, provider, out_dir, extra, shared=None, **kw):
        ran.append((name, behaviors, selection[1]))
        seen = "test_memory_swap_max" if len(patches) == 1 else None
        return model.Outcome(name, "b", model.CAUGHT if seen else model.SURVIVED, failed=[seen] if seen else [],
                             passed=5, selection=label, exit_code=1 if seen else 0)

    monkeypatch.setattr(bench, "run_one", run_one)
    monkeypatch.setattr(blind, "applies_on", lambda release, env: lambda patches: len(patches) < 3)
    args = bench.argparse.Namespace(rerun=False, k=None, provider="vm", pytest_args=[], release=versions.KUBERNETES,
                                    results_dir=tmp_path, docs=None)
    forms = [*_fake(["init-containers-get-no-swap", "ephemeral-containers-swap-unset", "node-swap-gate-not-locked"]),
             releases.NotApplicable(MUTANTS["wcs-accepted-without-its-gate"], "v1.34.12", "no prototype")]
    shared = bench.SharedVm(tmp_path / "state")
    assert bench._blind(args, forms, "suite", tmp_path, tmp_path, shared) == cli.Exit.FAILED
    assert [r[1] for r in ran] == ["NoSwap,LimitedSwap", "NoSwap"]
    assert "blind to 2/3 mutants, 1 not applicable" in (tmp_path / "blind.md").read_text()
    ran.clear()
    assert bench._blind(args, forms, "suite", tmp_path, tmp_path, shared) == cli.Exit.FAILED
    assert ran == []  # both kept
    args.k = "LimitedSwap"  # a narrower selection is not the kept one
    bench._blind(args, forms, "suite", tmp_path, tmp_path, shared)
    assert len(ran) == 2
    ran.clear()
    args.k = None
    bench._blind(args, forms, "another suite", tmp_path, tmp_path, shared)
    assert len(ran) == 2


@pytest.mark.parametrize(("extra", "said"), [(["--mutant", "hash-includes-resources"], "none of these mutants has tests"),
                                             (["--fresh-vm"], "--fresh-vm is not for --blind"),
                                             (["--docs", "README.md"], "README.md has no generated block"
                                                                       " (<!-- blind:begin -->")])
def test_blind_refuses_what_it_cannot_do_before_anything(tmp_path: Path, capsys, extra: list[str], said: str) -> None:
    from bench.mutants import __main__ as bench

    code = bench.main(["--blind", *extra, "--state-dir", str(tmp_path / "s"), "--results-dir", str(tmp_path / "r")])
    assert code == cli.Exit.USAGE and said in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_the_docs_blind_table_lists_every_group_kept_or_not_yet(tmp_path: Path, monkeypatch) -> None:
    """--blind --docs: the page's block holds every group of the bench on the release, from what
    is kept for this suite; a group this run did not take reads "not run on this suite", and the
    count says so, never as blind to all."""
    from bench.mutants import __main__ as bench
    from bench.mutants import docs

    def run_one(name, patches, behaviors, selection, label, provider, out_dir, extra, shared=None, **kw):
        return model.Outcome(name, "v1.37.2+patch.x", model.SURVIVED, passed=5, selection=label, exit_code=0)

    monkeypatch.setattr(bench, "run_one", run_one)
    monkeypatch.setattr(blind, "applies_on", lambda release, env: lambda patches: len(patches) == 1)  # one group each
    page = tmp_path / "mutants.md"
    page.write_text("# bench\n\n<!-- blind:begin -->\nold\n<!-- blind:end -->\n\nafter\n")
    args = bench.argparse.Namespace(rerun=True, k=None, provider="vm", pytest_args=[], release=versions.KUBERNETES,
                                    results_dir=tmp_path, docs=page, patches=model.HERE)
    one = _fake(["init-containers-get-no-swap"])
    assert bench._blind(args, one, "suite", tmp_path, tmp_path, bench.SharedVm(tmp_path / "state")) == cli.Exit.OK
    text = page.read_text()
    body = docs.sections(page, docs.BLIND)[versions.KUBERNETES]
    assert text.startswith("# bench\n") and text.endswith("<!-- blind:end -->\n\nafter\n") and "old" not in text
    groups = [line for line in body.splitlines() if line.startswith("| v1.37.2+patch.x") or line.startswith("| —")]
    assert len(groups) == len(blind.OWN_TESTS) - sum(1 for line in body.splitlines() if "not applicable:" in line)
    assert sum("blind before" in line for line in groups) == 1
    assert sum("| not run on this suite |" in line for line in groups) == len(groups) - 1
    assert "was blind to 1/1 mutants" in body and f"{len(groups) - 1} builds not run on this suite yet" in body


def test_the_blind_count_says_one_mutant_in_one_build_in_the_singular() -> None:
    """One group of one mutant not yet run: "1 mutant in 1 build", not "1 mutants in 1 builds"."""
    body = blind.table([(_fake(["no-behavior-log-inverted"]), None)], "2026-12-06", "v1.37.2")
    assert body.endswith("; 1 mutant in 1 build not run on this suite yet\n")


def test_a_blind_run_on_some_behaviors_loses_no_test_to_the_behaviors_it_left_out(tmp_path: Path) -> None:
    """A group that runs on LimitedSwap alone: the other behaviors' "not selected" skips are the
    run's own scope (in no cell of it, as in the matrix), not tests it could not take; a skip the
    gate refuses on the behavior it ran still is."""
    from bench.mutants import __main__ as bench

    def case(name: str, behavior: str, skipped: str | None = None) -> str:
        inner = f'<skipped type="pytest.skip" message="{skipped}">e2e/x.py:1: {skipped}</skipped>' if skipped else ""
        return (f'<testcase classname="e2e.test_kubelet_startup" name="{name}[{behavior}]"><properties><property'
                f' name="swap_behavior" value="{behavior}"/></properties>{inner}</testcase>')

    junit = tmp_path / "junit.xml"
    junit.write_text('<testsuites><testsuite name="pytest">'
                     + case("test_a", "LimitedSwap")
                     + case("test_a", "NoSwap", "NoSwap not selected (--behaviors LimitedSwap)")
                     + case("test_b", "WorkloadControlledSwap",
                            "WorkloadControlledSwap not selected (--behaviors LimitedSwap)")
                     + "</testsuite></testsuites>")
    assert bench._refused_skips(junit, "LimitedSwap") == []
    assert bench._refused_skips(junit, "NoSwap,LimitedSwap") == ["e2e/test_kubelet_startup.py::test_a[NoSwap]: NoSwap not selected (--behaviors LimitedSwap)"]
