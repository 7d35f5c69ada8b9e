"""The mutant bench's verdicts and table (bench/mutants), and that every mutant patch in the
repository is well-formed and applies to the release it was written against."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from bench import mutants as model
from clusters import versions
from clusters.vm import build as vbuild
from clusters.vm import k8s_source


def _junit(tmp: Path, cases: list[tuple[str, str]]) -> Path:
    body = []
    for name, outcome in cases:
        inner = {"passed": "", "failed": '<failure message="AssertionError: 0 != 66797568"/>',
                 "error": '<error message="fixture failed"/>', "skipped": '<skipped message="needs 1.38"/>'}[outcome]
        body.append(f'<testcase classname="e2e.test_x" name="{name}">{inner}</testcase>')
    p = tmp / "junit.xml"
    p.write_text(f'<testsuites><testsuite name="pytest">{"".join(body)}</testsuite></testsuites>')
    return p


def test_a_failed_test_catches_the_mutant(tmp_path: Path) -> None:
    o = model.judge("m", "v1.37.1+patch.x", _junit(tmp_path, [("test_a[LimitedSwap]", "failed"),
                                                               ("test_b[LimitedSwap]", "passed")]), 1)
    assert o.verdict == model.CAUGHT and o.failed == ["test_a[LimitedSwap]"] and o.passed == 1
    assert "66797568" in o.detail


def test_all_green_is_a_survivor(tmp_path: Path) -> None:
    o = model.judge("m", "b", _junit(tmp_path, [("t1", "passed"), ("t2", "skipped")]), 0)
    assert o.verdict == model.SURVIVED


@pytest.mark.parametrize("cases", [[("t1", "error"), ("t2", "error")], [("t1", "skipped")], []])
def test_a_run_that_could_not_test_is_never_caught(tmp_path: Path, cases) -> None:
    assert model.judge("m", "b", _junit(tmp_path, cases), 1).verdict == model.NOT_RUN


def test_a_build_that_failed_is_not_run() -> None:
    o = model.judge("m", "b", None, None, "go build failed\nswap.go:5:9: undefined: x\n")
    assert o.verdict == model.NOT_RUN and "undefined: x" in o.detail


def test_table_counts_caught_and_false_alarms() -> None:
    caught = model.Outcome("a", "b1", model.CAUGHT, failed=["e2e/test_x.py::test_a[LimitedSwap]"], seconds=60)
    survived = model.Outcome("b", "b2", model.SURVIVED, passed=3, seconds=120)
    base = model.Outcome("baseline", "v1.37.1", model.SURVIVED, passed=10, seconds=600, selection="full suite")
    text = model.table([caught, survived], base, "2026-11-23")
    assert "| a | caught | test_a[LimitedSwap] |" in text
    assert "| b | SURVIVED | — |" in text
    assert text.splitlines()[-1] == "caught 1/2 mutants, 0 false alarms"
    alarm = model.Outcome("baseline", "v1.37.1", model.CAUGHT, failed=["t"], passed=9)
    assert model.table([caught], alarm).splitlines()[-1] == "caught 1/1 mutants, 1 false alarms"


def test_outcomes_survive_a_round_trip() -> None:
    o = model.Outcome("a", "b", model.CAUGHT, failed=["t"], seconds=1.5, suite="abc")
    assert model.Outcome.from_json(o.to_json()) == o


def test_suite_hash_follows_the_tests(tmp_path: Path) -> None:
    (tmp_path / "e2e").mkdir()
    (tmp_path / "workloads").mkdir()
    (tmp_path / "conftest.py").write_text("x = 1\n")
    (tmp_path / "e2e" / "test_a.py").write_text("def test(): pass\n")
    before = model.suite_hash(tmp_path)
    (tmp_path / "e2e" / "test_a.py").write_text("def test(): assert 0\n")
    assert model.suite_hash(tmp_path) != before


MUTANTS = model.load()
PROTOTYPE = model.PROJECT / "clusters" / "prototypes" / "kep-5359.patch"
HEADER_KEYS = ("mutant", "wrong", "area", "binaries", "behaviors", "expect")


def test_there_are_enough_mutants_covering_every_area() -> None:
    assert len(MUTANTS) >= 15
    areas = {m.area for m in MUTANTS}
    for area in ("formula", "qos", "critical", "static", "behavior", "tmpfs", "metrics", "capacity", "eviction",
                 "resize", "restart"):
        assert area in areas, f"no mutant for {area}"
    assert len({m.name for m in MUTANTS}) == len(MUTANTS)


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.name)
def test_every_mutant_says_what_it_breaks(mutant: model.Mutant) -> None:
    header = mutant.patch.header()
    for key in HEADER_KEYS:
        assert header.get(key), f"{mutant.patch.path.name}: no '# {key}:' line"
    assert set(mutant.behaviors.split(",")) <= {"NoSwap", "LimitedSwap", "WorkloadControlledSwap"}
    if mutant.base is not None:  # a mutant of a prototype: its base is one, in the project
        assert mutant.base.is_file(), f"{mutant.patch.path.name}: base {mutant.base} does not exist"
        assert k8s_source.read_patch(mutant.base).prototype, f"{mutant.base} has no '# prototype:' line"
        assert mutant.patches == [mutant.base, mutant.patch.path]


def test_the_prototypes_mutants_cover_what_the_issue_names() -> None:
    """KEP-5359 prototype: limits.swap ignored for Guaranteed pods, 0 read as unlimited, the
    field applied on a LimitedSwap node; each a small kubelet change on top of the prototype."""
    based = {m.name: m for m in MUTANTS if m.base == PROTOTYPE}
    assert {"wcs-guaranteed-ignores-limits-swap", "wcs-zero-is-unlimited",
            "wcs-limits-swap-applied-on-limitedswap"} <= set(based)
    assert based["wcs-limits-swap-applied-on-limitedswap"].behaviors == "LimitedSwap"
    for m in based.values():
        changed = [line for line in m.patch.text.splitlines() if line[:1] in "+-" and line[:3] not in ("+++", "---")]
        assert len(changed) <= 12, f"{m.name}: {len(changed)} changed lines; a mutant is one small mistake"


def test_a_based_mutant_builds_release_then_base_then_mutant() -> None:
    m = next(m for m in MUTANTS if m.base == PROTOTYPE)
    source = k8s_source.release(versions.KUBERNETES, m.patches)
    assert [p.path for p in source.patches] == [PROTOTYPE, m.patch.path]
    assert source.prototype_note.startswith("KEP-5359 WorkloadControlledSwap prototype (kep-5359.patch)")
    assert source.feature_gates == ("WorkloadControlledSwap",)
    assert source.build_id != k8s_source.release(versions.KUBERNETES, [PROTOTYPE]).build_id


def _module_cache_dir() -> Path | None:
    if not shutil.which("go") or not shutil.which("patch"):
        return None
    try:
        return k8s_source.module_dir("k8s.io/kubernetes", versions.KUBERNETES, vbuild._go_env())  # noqa: SLF001
    except k8s_source.SourceError:
        return None


@pytest.mark.skipif(not shutil.which("patch"), reason="patch(1) is not installed (apt-get install patch)")
def test_every_mutant_applies_to_the_release(tmp_path: Path) -> None:
    """The real release source from the Go module proxy (copied once, each mutant dry-run on it;
    those touching staging modules for real): a stale mutant fails here, not in a VM. A mutant
    of a prototype is dry-run on the release with its base applied for real (once per base):
    the base must apply to the release, and the mutant on top of it."""
    if _module_cache_dir() is None:
        pytest.fail(f"cannot download k8s.io/kubernetes {versions.KUBERNETES} through the Go proxy")
    tree = tmp_path / "tree"
    k8s_source.apply_patches(k8s_source.KubernetesSource(versions.KUBERNETES), tree, vbuild._go_env())  # noqa: SLF001
    based: dict[Path, Path] = {}
    for base in sorted({m.base for m in MUTANTS if m.base is not None}):
        based[base] = tmp_path / f"base-{base.stem}"
        k8s_source.apply_patches(k8s_source.release(versions.KUBERNETES, [base]), based[base],
                                 vbuild._go_env())  # noqa: SLF001 - raises, naming the hunk, if the base is stale
    problems = []
    for m in MUTANTS:
        if m.patch.staging_modules and m.base is None:
            k8s_source.apply_patches(k8s_source.KubernetesSource(versions.KUBERNETES, (m.patch,)), tmp_path / m.name,
                                     vbuild._go_env())  # noqa: SLF001
            continue
        on = based[m.base] if m.base is not None else tree
        out = subprocess.run(["patch", "-p1", "--dry-run", "--batch", "--forward", "-d", str(on),
                              "-i", str(m.patch.path)], capture_output=True, text=True)
        if out.returncode != 0:
            problems.append(k8s_source.patch_failure(m.patch, versions.KUBERNETES, out.stdout + out.stderr))
    assert not problems, "\n".join(problems)


def test_a_mutant_the_shared_vm_could_not_test_gets_a_fresh_vm(tmp_path: Path, monkeypatch) -> None:
    """Mutant 31 re-created the shared node's control plane when its kubelet was swapped in; the
    suite met an API server still starting (403) and the next mutant met a refused connection."""
    from bench.mutants import __main__ as bench

    runs: list[bool] = []  # per run: was it on the shared VM?

    def run_one(name, patches, behaviors, selection, label, provider, out_dir, extra, shared=None, base=None):
        runs.append(shared is not None)
        if shared is not None:
            return model.Outcome(name, "b", model.NOT_RUN, detail="")  # a reason may be empty
        return model.Outcome(name, "b", model.CAUGHT, failed=["test_resize[LimitedSwap]"])

    downs: list[str] = []
    monkeypatch.setattr(bench, "run_one", run_one)
    monkeypatch.setattr(bench, "_vm", lambda *args: downs.append(args[0]))
    monkeypatch.setattr(bench, "_say", lambda line: None)
    m = next(m for m in model.load(model.HERE) if m.name == "hash-includes-resources")
    args = bench.argparse.Namespace(rerun=True, k=None, provider="vm", fresh_vm=False, pytest_args=[])
    shared = bench.SharedVm()
    shared.booted = True
    o = bench._run_mutant(args, 1, m, 1, "suite", tmp_path, shared)
    assert runs == [True, False] and o.verdict == model.CAUGHT
    assert downs == ["down"] and not shared.booted  # the next mutant boots a fresh shared VM
