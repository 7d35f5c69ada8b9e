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


def test_every_new_test_named_is_a_test_of_the_suite_and_every_mutant_a_mutant() -> None:
    tests = set(_test_modules())
    assert set(blind.NEW_TESTS) <= set(MUTANTS)
    for name, new in blind.NEW_TESTS.items():
        named = [w for w in new.expression.replace("(", " ").replace(")", " ").split() if w not in ("or", "and", "not")]
        assert named and set(named) <= tests, (name, set(named) - tests)


def test_the_new_tests_are_among_those_the_bench_runs_for_the_mutant() -> None:
    """A mutant's own run (``# tests:``, -k words joined by "or") must include its new tests:
    they are what catch it."""
    module = _test_modules()
    for name, new in blind.NEW_TESTS.items():
        runs = (MUTANTS[name].tests or "").split(" or ")
        for test in new.expression.split(" or "):
            assert any(word in test or word in module[test] for word in runs), (name, test, runs)


def _fake(names: list[str]) -> list[model.Mutant]:
    return [MUTANTS[n] for n in names]


def test_groups_keep_apart_what_does_not_apply_together_extended_claims_and_bases() -> None:
    clash = {MUTANTS["resize-judges-the-allocated-pod-only"].patch.path,
             MUTANTS["resize-refuses-memory-limit-changes"].patch.path}
    asked: list[list[str]] = []

    def applies(patches) -> bool:
        asked.append([p.stem for p in patches])
        return not clash <= set(patches)

    mutants = _fake(["resize-judges-the-allocated-pod-only", "hash-includes-resources",  # no tests of its own
                     "resize-refuses-memory-limit-changes", "init-containers-get-no-swap",
                     "cadvisor-metrics-without-memory-usage", "wcs-accepted-without-its-gate",
                     "no-behavior-log-inverted", "wcs-allocated-skips-init-containers"])
    got = [[m.name for m in g] for g in blind.groups(mutants, applies)]
    assert got == [["resize-judges-the-allocated-pod-only", "init-containers-get-no-swap"],
                   ["resize-refuses-memory-limit-changes"],
                   ["cadvisor-metrics-without-memory-usage", "no-behavior-log-inverted"],
                   ["wcs-accepted-without-its-gate", "wcs-allocated-skips-init-containers"]]
    prototype = blind.patches_of(_fake(["wcs-accepted-without-its-gate", "wcs-allocated-skips-init-containers"]))
    assert prototype[0] == MUTANTS["wcs-accepted-without-its-gate"].base and len(prototype) == 3
    with pytest.raises(ValueError):
        blind.patches_of(_fake(["init-containers-get-no-swap", "wcs-accepted-without-its-gate"]))


def test_the_run_deselects_each_members_new_tests_once_within_the_benchs_k() -> None:
    group = _fake(["resize-refuses-memory-limit-changes", "resize-refuses-cpu-request-changes",
                   "init-containers-get-no-swap"])
    args, label = blind.selection(group)
    assert args == ["-k", "not (test_resizes_keeping_the_memory_request_are_carried_out_with_swap)"
                          " and not (test_init_container_memory_swap_max)"]
    assert label.startswith("the suite without: test_resizes_keeping")
    args, label = blind.selection(group, "LimitedSwap")
    assert args[1].startswith("(LimitedSwap) and not (") and label.endswith("within -k LimitedSwap")
    assert blind.behaviors(_fake(["node-swap-gate-not-locked", "init-containers-get-no-swap"])) == "NoSwap,LimitedSwap"
    assert blind.behaviors(_fake(["wcs-accepted-without-its-gate"])) == "WorkloadControlledSwap"


@pytest.mark.parametrize(("verdict", "says"), [(model.SURVIVED, "blind before"), (model.CAUGHT, "seen by older tests"),
                                               (model.NOT_RUN, "could not test")])
def test_a_groups_run_says_what_it_proved(verdict: str, says: str) -> None:
    o = model.Outcome("blind-x", "b", verdict, failed=["e2e/test_a.py::test_a[LimitedSwap]"], passed=3)
    assert blind.verdict(o).startswith(says)
    text = blind.table([(_fake(["init-containers-get-no-swap"]), o)], "2026-11-29", "v1.37.2")
    assert f"was blind to {1 if verdict == model.SURVIVED else 0}/1 mutants" in text


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
    assert set(where) == set(blind.NEW_TESTS)
    assert where["resize-judges-the-allocated-pod-only"] != where["resize-refuses-memory-limit-changes"]
    assert all(applies(blind.patches_of(g)) for g in groups)


def test_blind_runs_each_group_once_keeps_it_and_fails_when_one_was_seen(tmp_path: Path, monkeypatch) -> None:
    from bench.mutants import __main__ as bench

    ran: list[tuple[str, str, str]] = []

    def run_one(name, patches, behaviors, selection, label, provider, out_dir, extra, shared=None, **kw):
        ran.append((name, behaviors, selection[1]))
        seen = "test_memory_swap_max" if len(patches) == 1 else None
        return model.Outcome(name, "b", model.CAUGHT if seen else model.SURVIVED, failed=[seen] if seen else [],
                             passed=5, selection=label)

    monkeypatch.setattr(bench, "run_one", run_one)
    monkeypatch.setattr(blind, "applies_on", lambda release, env: lambda patches: len(patches) < 3)
    args = bench.argparse.Namespace(rerun=False, k=None, provider="vm", pytest_args=[], release=versions.KUBERNETES,
                                    results_dir=tmp_path)
    mutants = _fake(["init-containers-get-no-swap", "ephemeral-containers-swap-unset", "node-swap-gate-not-locked"])
    shared = bench.SharedVm(tmp_path / "state")
    assert bench._blind(args, mutants, "suite", tmp_path, tmp_path, shared) == cli.Exit.FAILED
    assert [r[1] for r in ran] == ["NoSwap,LimitedSwap", "NoSwap"]
    assert "blind to 2/3 mutants" in (tmp_path / "blind.md").read_text()
    ran.clear()
    assert bench._blind(args, mutants, "suite", tmp_path, tmp_path, shared) == cli.Exit.FAILED
    assert ran == []  # both kept
    bench._blind(args, mutants, "another suite", tmp_path, tmp_path, shared)
    assert len(ran) == 2


def test_blind_without_a_mutant_of_its_own_tests_is_refused_before_anything(tmp_path: Path, capsys) -> None:
    from bench.mutants import __main__ as bench

    code = bench.main(["--blind", "--mutant", "hash-includes-resources", "--state-dir", str(tmp_path / "s"),
                       "--results-dir", str(tmp_path / "r")])
    assert code == cli.Exit.USAGE and "none of these mutants has tests of its own" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()
