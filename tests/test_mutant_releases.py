"""Every mutant on every supported release (bench/mutants/releases.py): on each pinned release's
real source the mutant, or its variant rebased onto that minor, applies exactly, or its header
declares it not applicable there; and the bench runs that form, reports the others as n/a, and
keeps each release's results and docs section apart."""
from __future__ import annotations

import dataclasses
import itertools
import shutil
import subprocess
from pathlib import Path

import pytest

from bench import mutants as model
from bench.cells import PASSED, Cell
from bench.mutants import docs, releases
from clusters import cli, versions
from clusters.vm import build as vbuild
from clusters.vm import k8s_source
from tests import k8s_pins

MUTANTS = model.load()
# the release the mutants are written against, then every supported minor's pin
PINS = list(dict.fromkeys([versions.KUBERNETES, *versions.SUPPORTED.values()]))
HEADER = "# mutant: m\n# wrong: w\n# area: a\n# binaries: kubelet\n# behaviors: LimitedSwap\n# expect: caught\n"
DIFF = "diff --git a/x.go b/x.go\n--- a/x.go\n+++ b/x.go\n@@ -1 +1 @@\n-a\n+b\n"


def _copy(module: Path, files: set[str], tree: Path) -> Path:
    """The release's own copy of each file a patch touches (those it has): what patch(1) reads."""
    for name in files:
        if (module / name).is_file():
            (tree / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(module / name, tree / name)
    return tree


def _patch(tree: Path, patch: Path, *dry: str) -> subprocess.CompletedProcess[str]:
    # --fuzz=0: a hunk whose context differs on this release is a place to look at, and rebase
    return subprocess.run(["patch", "-p1", *dry, "--batch", "--forward", "--fuzz=0", "-d", str(tree), "-i", str(patch)],
                          capture_output=True, text=True)


@pytest.mark.skipif(not shutil.which("patch"), reason="patch(1) is not installed (apt-get install patch)")
@pytest.mark.parametrize("release", PINS)
def test_every_mutant_applies_or_is_declared_on_every_pin(release: str, tmp_path: Path) -> None:
    """The real source of each pinned release from the Go module proxy: each mutant's form on it
    (releases.on: itself, or its variant rebased onto the minor) dry-runs with no fuzz, or the
    mutant is declared not applicable there. A mutant of a prototype is dry-run on the release with
    its base applied for real (once per base): the base must apply too wherever one of its mutants
    runs. A mutant touching a staging module is applied for real, staging module and all."""
    module = k8s_pins.source(release)
    forms = [releases.on(m, release) for m in MUTANTS]
    runnable = [f for f in forms if isinstance(f, model.Mutant)]
    skipped = [f for f in forms if isinstance(f, releases.NotApplicable)]
    assert len(runnable) + len(skipped) == len(MUTANTS) and all(f.reason for f in skipped)
    files = {name for f in runnable for p in f.patches for name in k8s_source.read_patch(p).files}
    tree = _copy(module, files, tmp_path / "tree")
    problems = []
    based: dict[Path, Path] = {}
    for base in sorted({m.base for m in runnable if m.base is not None}):
        based[base] = shutil.copytree(tree, tmp_path / f"base-{base.stem}")
        out = _patch(based[base], base)
        if out.returncode != 0:
            problems.append(k8s_source.patch_failure(k8s_source.read_patch(base), release, out.stdout + out.stderr))
    for m in runnable:
        if m.patch.staging_modules and m.base is None:
            try:
                k8s_source.apply_patches(k8s_source.KubernetesSource(release, (m.patch,)), tmp_path / m.name,
                                         vbuild.go_env())
            except k8s_source.SourceError as error:
                problems.append(str(error))
            continue
        out = _patch(based.get(m.base, tree) if m.base is not None else tree, m.patch.path, "--dry-run")
        if out.returncode != 0:
            problems.append(k8s_source.patch_failure(m.patch, release, out.stdout + out.stderr))
    assert not problems, "\n".join(problems)


def test_a_rebased_variant_is_its_mutant_with_a_reason() -> None:
    """rebased/<minor>/<file>: a supported minor, a mutant of that file name, the mutant's header
    word for word plus a `# rebased:` line, and a diff of its own."""
    variants = releases.variants(model.HERE)
    assert variants, "no rebased variant: the mutants apply unchanged to every supported minor?"
    by_file = {m.patch.path.name: m for m in MUTANTS}
    for path in variants:
        minor = path.parent.name
        assert minor in versions.SUPPORTED, f"{path}: {minor} is not a supported minor"
        assert path.name in by_file, f"{path}: no mutant {path.name} in {model.HERE}"
        original, variant = by_file[path.name], k8s_source.read_patch(path)
        header = dict(variant.header())
        assert len(header.pop("rebased", "")) >= 20, f"{path}: no '# rebased:' line saying what differs on {minor}"
        assert header == original.patch.header(), f"{path}: its header is not {original.patch.path.name}'s"
        assert variant.text.partition("diff ")[2] != original.patch.text.partition("diff ")[2], f"{path}: the same diff"
        assert releases.on(original, versions.SUPPORTED[minor]).patch.path == path


def test_every_declaration_names_supported_minors_and_why() -> None:
    declared = {m.name: releases.not_applicable(m.patch) for m in MUTANTS}
    for name, minors in declared.items():
        for minor, reason in minors.items():
            if minor in releases.PROVIDERS:
                continue  # below
            assert minor in versions.SUPPORTED, f"{name}: not applicable to {minor}, which is not supported"
            assert len(reason) >= 20, f"{name}: {reason!r} says too little"
    assert any(declared.values()), "no mutant declared not applicable anywhere"


def test_a_provider_is_declared_only_where_the_gate_accepts_its_tests_skip_there() -> None:
    """A mutant is not applicable to a provider only where its tests cannot reach a verdict on
    that provider's nodes by design: its `# tests:` is exactly one test whose skip the release
    gate accepts for the node's topology (e2e/verdict.py TOPOLOGY_SKIPS), named in the reason,
    and the other provider runs it."""
    from e2e import verdict

    skips = {name: value for name, value in vars(verdict).items()
             if isinstance(value, str) and value in verdict.TOPOLOGY_SKIPS}
    seen = 0
    for m in MUTANTS:
        for where, reason in releases.not_applicable(m.patch).items():
            if where not in releases.PROVIDERS:
                continue
            seen += 1
            named = [n for n in skips if n in reason]
            assert len(named) == 1, f"{m.name}: on {where}: the reason names no skip of TOPOLOGY_SKIPS ({sorted(skips)})"
            module, test = verdict.TOPOLOGY_SKIPS[skips[named[0]]]
            assert m.tests == test, f"{m.name}: its tests ({m.tests}) are not {module}.{test} alone: others may run"
            others = set(releases.PROVIDERS) - set(releases.not_applicable(m.patch))
            assert others, f"{m.name}: not applicable to every provider"
            assert isinstance(releases.on(m, versions.KUBERNETES, where), releases.NotApplicable)
            assert releases.on(m, versions.KUBERNETES, others.pop()) is m
    assert seen, "no mutant declared for a provider: this test checks nothing"


def _mutant(directory: Path, name: str, extra: str = "", diff: str = DIFF) -> model.Mutant:
    path = directory / f"{name}.patch"
    path.write_text(HEADER.replace("# mutant: m", f"# mutant: {name}") + extra + diff)
    return model.Mutant(k8s_source.read_patch(path))


def test_not_applicable_lines_are_read_and_a_malformed_one_refused(tmp_path: Path) -> None:
    m = _mutant(tmp_path, "x", "# not-applicable: 1.34, 1.35: the code path is newer\n"
                               "# not-applicable: 1.36: a release defect hides it\n"
                               "# not-applicable: vm: its test skips there\n")
    assert releases.not_applicable(m.patch) == {"1.34": "the code path is newer", "1.35": "the code path is newer",
                                                "1.36": "a release defect hides it", "vm": "its test skips there"}
    assert releases.on(m, "v1.37.2", "vm") == releases.NotApplicable(m, "v1.37.2", "on vm: its test skips there")
    assert releases.on(m, "v1.37.2", "kind") is m and releases.on(m, "v1.37.2") is m
    assert releases.on(m, "v1.36.5", "kind").reason == "a release defect hides it"
    after_the_diff = _mutant(tmp_path, "y", diff=DIFF + "# not-applicable: 1.34: in the diff, not the header\n")
    assert releases.not_applicable(after_the_diff.patch) == {}
    for line in ("# not-applicable: 1.34 the reason without a colon", "# not-applicable: 1.34:",
                 "# not-applicable: v1.34.12: a release, not a minor", "# not-applicable: 1.34, 1.34: twice",
                 "# not-applicable: docker: not a provider of the bench"):
        bad = _mutant(tmp_path, "z", line + "\n")
        with pytest.raises(k8s_source.SourceError, match=str(bad.patch.path)):
            releases.not_applicable(bad.patch)


def test_each_release_gets_its_variant_its_declaration_or_the_mutant(tmp_path: Path) -> None:
    m = _mutant(tmp_path, "x", "# not-applicable: 1.35: the code path is newer\n")
    (tmp_path / "rebased" / "1.34").mkdir(parents=True)
    variant = tmp_path / "rebased" / "1.34" / "x.patch"
    variant.write_text(m.patch.text.replace("# not-applicable", "# rebased: other context\n# not-applicable")
                       .replace("+b", "+c"))
    on_34 = releases.on(m, "v1.34.12")
    assert isinstance(on_34, model.Mutant) and on_34.patch.path == variant and on_34.patches == [variant]
    assert on_34.name == m.name and on_34.content_hash != m.content_hash
    on_35 = releases.on(m, "v1.35.8")
    assert isinstance(on_35, releases.NotApplicable) and on_35.reason == "the code path is newer"
    assert releases.on(m, "v1.36.5") is m
    (tmp_path / "rebased" / "1.35").mkdir()
    (tmp_path / "rebased" / "1.35" / "x.patch").write_text(variant.read_text())
    with pytest.raises(k8s_source.SourceError, match="declared not applicable to 1.35, and rebased onto it"):
        releases.on(m, "v1.35.8")


# --- the bench on another release ---------------------------------------------------------------


@pytest.fixture
def bench_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Three mutants (one with a variant for 1.35, one not applicable there) and a bench whose
    pytest runs are recorded instead of run: each says caught."""
    from bench.mutants import __main__ as bench
    from bench.mutants import standing

    patches = tmp_path / "patches"
    patches.mkdir()
    _mutant(patches, "01-plain")
    rebased = _mutant(patches, "02-rebased")
    _mutant(patches, "03-newer", "# not-applicable: 1.34, 1.35: the code path is newer\n")
    (patches / "rebased" / "1.35").mkdir(parents=True)
    (patches / "rebased" / "1.35" / "02-rebased.patch").write_text(
        rebased.patch.text.replace("# expect: caught\n", "# expect: caught\n# rebased: other context there\n"))
    runs: list[dict] = []

    def run_one(name, patches, behaviors, selection, label, provider, out_dir, extra, shared=None, base=None,
                state_dir=None, release=None):
        runs.append({"name": name, "patches": [Path(p) for p in patches], "release": release})
        if name.startswith("baseline"):
            return model.Outcome(name, release, model.SURVIVED, passed=2, selection=label)
        return model.Outcome(name, "b", model.CAUGHT, failed=["test_x[LimitedSwap]"], selection=label)

    monkeypatch.setenv("KSC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(bench, "run_one", run_one)
    monkeypatch.setattr(bench, "_say", lambda line: None)
    monkeypatch.setattr(standing, "MATRIX_CELLS", tmp_path / "no-matrix-cells")  # not the checkout's
    return patches, runs


@pytest.mark.parametrize("given", ["option", "variable"])
def test_the_bench_runs_each_mutants_form_on_the_release_and_reports_the_others_as_na(
        tmp_path: Path, bench_dir, monkeypatch: pytest.MonkeyPatch, capsys, given: str) -> None:
    from bench.mutants import __main__ as bench

    patches, runs = bench_dir
    argv = ["--patches", str(patches), "--state-dir", str(tmp_path / "state"), "--results-dir", str(tmp_path / "r")]
    if given == "option":
        monkeypatch.setenv("KSC_MUTANTS_RELEASE", "v1.36.5")  # the option wins
        argv += ["--k8s-version", "v1.35.8"]
    else:
        monkeypatch.setenv("KSC_MUTANTS_RELEASE", "v1.35.8")
    assert bench.main(argv) == cli.Exit.OK
    table = capsys.readouterr().out
    ran = {r["name"]: r for r in runs}
    assert set(ran) == {"baseline", "01-plain", "02-rebased"}  # 03 is not applicable: never run
    assert {r["release"] for r in runs} == {"v1.35.8"}
    assert ran["02-rebased"]["patches"] == [patches / "rebased" / "1.35" / "02-rebased.patch"]
    assert ran["01-plain"]["patches"] == [patches / "01-plain.patch"]
    assert "| 03-newer | n/a | not applicable: the code path is newer | — | — |" in table
    assert table.startswith("Mutant bench on v1.35.8 (")
    assert table.splitlines()[-1] == "caught 2/2 mutants on v1.35.8, 1 not applicable, 0 false alarms"
    assert (tmp_path / "r" / "mutants" / "baseline-v1.35.8-vm.json").is_file()


def test_where_a_mutant_does_not_apply_is_read_afresh_and_keeps_its_runs_elsewhere(
        tmp_path: Path, bench_dir, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    """A not-applicable row is made from the header, never kept: its reason corrected, or a minor
    added to it, neither reruns the mutant where it still applies nor shows a kept run where it
    no longer does."""
    from bench.mutants import __main__ as bench

    patches, runs = bench_dir
    recorded = bench.run_one

    def run_one(name, patches, *args, release=None, **kwargs):  # a result of the build it was asked for
        o = recorded(name, patches, *args, release=release, **kwargs)
        return o if name.startswith("baseline") else \
            dataclasses.replace(o, build=k8s_source.release(release, patches).build_id)

    monkeypatch.setattr(bench, "run_one", run_one)
    newer = patches / "03-newer.patch"
    states = itertools.count()  # a state directory each: a bench holds its own until its process ends

    def bench_on(release: str) -> str:
        runs.clear()
        argv = ["--patches", str(patches), "--state-dir", str(tmp_path / f"state-{next(states)}"), "--results-dir",
                str(tmp_path / "r"), "--kept", str(tmp_path / "keep"), "--k8s-version", release]
        assert bench.main(argv) == cli.Exit.OK
        return capsys.readouterr().out

    assert "| 03-newer | caught |" in bench_on("v1.36.5") and "03-newer" in [r["name"] for r in runs]
    newer.write_text(newer.read_text().replace("the code path is newer", "the function does not exist before 1.36"))
    assert "| 03-newer | caught |" in bench_on("v1.36.5") and runs == []  # kept: nothing ran
    assert "| 03-newer | n/a | not applicable: the function does not exist before 1.36 |" in bench_on("v1.35.8")
    newer.write_text(newer.read_text().replace("1.34, 1.35:", "1.34, 1.35, 1.36:"))
    table = bench_on("v1.36.5")
    assert "| 03-newer | n/a |" in table and "| 03-newer | caught |" not in table and runs == []


def test_a_bad_declaration_stops_the_bench_before_it_runs_anything(tmp_path: Path, bench_dir, capsys) -> None:
    from bench.mutants import __main__ as bench

    patches, runs = bench_dir
    _mutant(patches, "04-typo", "# not-applicable: 1.34 1.35 the reason\n")
    argv = ["--patches", str(patches), "--state-dir", str(tmp_path / "state"), "--k8s-version", "v1.37.2"]
    assert bench.main(argv) == cli.Exit.USAGE
    assert "04-typo.patch" in capsys.readouterr().err and runs == [] and not (tmp_path / "state").exists()


def test_kept_results_are_the_releases_own(tmp_path: Path, bench_dir) -> None:
    """A mutant's result kept for one release is not another release's; one kept before results
    were named per release still counts for the release whose build it records."""
    from bench.mutants import __main__ as bench

    patches, runs = bench_dir
    m = model.load(patches)[0]
    legacy = tmp_path / "keep" / f"{m.name}-{m.content_hash}-vm.json"
    legacy.parent.mkdir()
    build = k8s_source.release("v1.37.1", m.patches).build_id
    legacy.write_text(model.Outcome(m.name, build, model.CAUGHT, failed=["t"], suite="s").to_json())

    def args(release: str):
        return bench.argparse.Namespace(rerun=False, k=None, provider="vm", fresh_vm=True, pytest_args=[],
                                        release=release)

    shared = bench.SharedVm(tmp_path / "state", "v1.37.1")
    assert bench._run_mutant(args("v1.37.1"), 1, m, 1, "s", tmp_path / "keep", tmp_path / "runs", shared).build == build
    assert runs == []
    o = bench._run_mutant(args("v1.34.12"), 1, m, 1, "s", tmp_path / "keep", tmp_path / "runs", shared)
    assert [r["release"] for r in runs] == ["v1.34.12"] and o.verdict == model.CAUGHT
    assert (tmp_path / "keep" / f"{m.name}-{m.content_hash}-v1.34.12-vm.json").is_file()


def test_the_suite_is_asked_for_the_benchs_release(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """vm: the suite builds clusters/versions.py KUBERNETES unless told: each run names the release."""
    from bench.mutants import __main__ as bench

    seen: list[list[str]] = []

    class Popen:
        def __init__(self, argv, **kw):
            seen.append(argv)
            self.stdout = iter(())

        def wait(self) -> int:
            return 4

    monkeypatch.setenv("KSC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(bench.subprocess, "Popen", Popen)
    patch = MUTANTS[0].patch.path
    o = bench.run_one("m", [patch], None, [], "all", "vm", tmp_path / "out", [], state_dir=tmp_path / "state",
                      release="v1.34.12")
    argv = seen[0]
    assert argv[argv.index("--k8s-version") + 1] == "v1.34.12" and f"--k8s-patch={patch}" in argv
    assert o.build == k8s_source.release("v1.34.12", [patch]).build_id and o.verdict == model.NOT_RUN


def test_the_docs_keep_every_releases_section(tmp_path: Path) -> None:
    """--docs on one release replaces that release's section and summary row only; the rows come
    out oldest release first, read from each section as the bench wrote it (the form without "on
    RELEASE" and the not-applicable count, older, too)."""
    page = tmp_path / "mutants.md"
    old = ("### v1.37.1\n\nA partial run: 4 of the bench's 41 mutants. Suite version `aaa` (x).\n\n"
           "Mutant bench (2026-11-27)\n\n| table |\n\ncaught 4/4 mutants, 0 false alarms\n")
    page.write_text(f"intro\n{docs.BEGIN}\n<!-- mutants:v1.37.1:begin -->\n{old}<!-- mutants:v1.37.1:end -->\n"
                    f"{docs.END}\nafter\n")
    na = model.Outcome("03-newer", "v1.34.12", model.NOT_APPLICABLE, detail="the code path is newer")
    caught = model.Outcome("01-plain", "b", model.CAUGHT, failed=["t"])
    baseline = model.Outcome("baseline", "v1.34.12", model.CAUGHT, failed=["t_alarm"], passed=1)
    docs.write(page, "v1.34.12", model.table([caught, na], baseline, "2026-12-01", "v1.34.12"), "bbb", 2, 41)
    text = page.read_text()
    assert text.startswith("intro\n") and text.endswith(f"{docs.END}\nafter\n") and old in text
    rows = [line for line in text.splitlines() if line.startswith("| v1.")]
    assert rows == ["| v1.34.12 | 1/1 | 1 | 1 | 2026-12-01; partial: 2 of 41 mutants | `bbb` |",
                    "| v1.37.1 | 4/4 | 0 | 0 | 2026-11-27; partial: 4 of 41 mutants | `aaa` (changed since) |"]
    docs.write(page, "v1.34.12", model.table([caught], None, "2026-12-02", "v1.34.12"), "ccc", 41, 41)
    rows = [line for line in page.read_text().splitlines() if line.startswith("| v1.")]
    assert rows == ["| v1.34.12 | 1/1 | 0 | no baseline run | 2026-12-02 | `ccc` |",
                    "| v1.37.1 | 4/4 | 0 | 0 | 2026-11-27; partial: 4 of 41 mutants | `aaa` (changed since) |"]
    assert list(docs.sections(page)) == ["v1.34.12", "v1.37.1"] and "bbb" not in page.read_text()
    # a run on kind is a section of its own beside the release's, which stays
    docs.write(page, "v1.34.12", model.table([caught], None, "2026-12-03", "v1.34.12"), "ddd", 1, 41, "kind")
    rows = [line for line in page.read_text().splitlines() if line.startswith("| v1.")]
    assert rows == ["| v1.34.12 | 1/1 | 0 | no baseline run | 2026-12-02 | `ccc` (changed since) |",
                    "| v1.34.12 on kind | 1/1 | 0 | no baseline run | 2026-12-03; partial: 1 of 41 mutants | `ddd` |",
                    "| v1.37.1 | 4/4 | 0 | 0 | 2026-11-27; partial: 4 of 41 mutants | `aaa` (changed since) |"]
    assert list(docs.sections(page)) == ["v1.34.12", "v1.34.12-kind", "v1.37.1"]
    assert "### v1.34.12 on kind\n" in page.read_text()
    # a run on another patch of a minor replaces that minor's section on its provider only: the
    # page never shows two tables of one minor that disagree
    docs.write(page, "v1.37.2", model.table([caught], None, "2026-12-07", "v1.37.2"), "eee", 41, 41)
    assert list(docs.sections(page)) == ["v1.34.12", "v1.34.12-kind", "v1.37.2"]
    rows = [line for line in page.read_text().splitlines() if line.startswith("| v1.")]
    assert rows[-1] == "| v1.37.2 | 1/1 | 0 | no baseline run | 2026-12-07 | `eee` |" and "`aaa`" not in page.read_text()
    # ...but a run on an older patch leaves a newer patch's section beside its own
    docs.write(page, "v1.37.1", model.table([caught], None, "2026-12-08", "v1.37.1"), "fff", 1, 41)
    assert list(docs.sections(page)) == ["v1.34.12", "v1.34.12-kind", "v1.37.1", "v1.37.2"]


def _cell(cells: Path, behavior: str, **fields) -> None:
    cell = Cell("1.36", "vm", behavior, "v1.36.5", gate=PASSED, passed=90, skipped=6, build="v1.36.5",
                seconds=2800.0, date="2026-11-29", suite=model.suite_hash(model.HERE.parents[1]),
                results_dir=f"~/.cache/m/v1.36.5/vm/{behavior}")
    for name, value in fields.items():
        setattr(cell, name, value)
    (cells / "v1.36.5" / "vm").mkdir(parents=True, exist_ok=True)
    (cells / "v1.36.5" / "vm" / f"{behavior}.json").write_text(cell.to_json())


@pytest.mark.parametrize(("cells", "extra", "from_matrix"), [
    ({"LimitedSwap": {}}, [], True),
    ({"LimitedSwap": {}}, ["-k", "test_x"], True),  # -k narrows the full suite: still covered
    ({"LimitedSwap": {}}, ["--rerun"], False),
    ({"LimitedSwap": {}}, ["--", "--reuse-clusters"], False),  # pytest arguments: another run
    ({"NoSwap": {}}, [], False),  # the baseline runs on LimitedSwap (the mutants' behavior)
    ({"LimitedSwap": {"suite": "another00000"}}, [], False),
    ({"LimitedSwap": {"gate": "FAILED", "failed": 1}}, [], False),
    ({"LimitedSwap": {"could_not_test": 1}}, [], False),
    ({"LimitedSwap": {"build": "v1.36.5+patch.0123456789ab"}}, [], False),  # a patched kubelet's run
    ({"LimitedSwap": {"version": "v1.36.4", "build": "v1.36.4"}}, [], False),  # another pin's
    ({"LimitedSwap": {"pytest_args": ["-k", "not test_x"]}}, [], False),  # a narrowed matrix run
    ({"LimitedSwap": {"pytest_args": ["-n", "2"]}}, [], True),  # spread over two processes: the same tests
    ({"LimitedSwap": {"pytest_args": ["-n2", "--dist=load"]}}, [], True),
    ({"LimitedSwap": {"pytest_args": ["-n", "2", "-x"]}}, [], False),  # stops at the first failure
], ids=["passed", "narrowed-bench", "rerun", "pytest-args", "other-behavior", "other-suite", "gate-failed",
        "could-not-test", "patched", "other-pin", "narrowed-matrix", "xdist", "xdist-joined", "xdist-and-more"])
def test_the_baseline_is_the_matrixs_gate_passed_run_of_this_suite(tmp_path: Path, bench_dir, capsys, cells: dict,
                                                                   extra: list[str], from_matrix: bool,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the version matrix kept a gate-passed cell of this suite on the unmodified release for
    every behavior the baseline runs, that run of the full suite is the baseline (kept, said in the
    table); anything less, or --rerun, or pytest arguments, and the baseline runs."""
    from bench.mutants import __main__ as bench

    monkeypatch.setattr(bench, "pytest_args_problem", lambda provider, args: None)  # no pytest --collect-only here
    patches, runs = bench_dir
    for behavior, fields in cells.items():
        _cell(tmp_path / "cells", behavior, **fields)
    argv = ["--patches", str(patches), "--state-dir", str(tmp_path / "state"), "--results-dir", str(tmp_path / "r"),
            "--k8s-version", "v1.36.5", "--matrix-cells", str(tmp_path / "cells"), *extra]
    assert bench.main(argv) == cli.Exit.OK
    table = capsys.readouterr().out
    assert ("baseline" not in {r["name"] for r in runs}) is from_matrix
    kept = model.Outcome.from_json((tmp_path / "r" / "mutants" / "baseline-v1.36.5-vm.json").read_text())
    assert kept.selection.startswith("full suite on LimitedSwap: from the version matrix's gate-passed cells"
                                     " (LimitedSwap 2026-11-29") is from_matrix
    if from_matrix:
        assert (kept.passed, kept.skipped, kept.seconds, kept.verdict) == (90, 6, 2800.0, model.SURVIVED)
        assert "unmodified build v1.36.5: 90 passed, 0 failed, 6 skipped in 46.7 min" in table
        assert table.splitlines()[-1].endswith(", 0 false alarms")


@pytest.mark.parametrize(("same_run", "seconds"), [(True, 2800.0), (False, 5600.0)])
def test_a_baseline_of_both_behaviors_counts_each_run_of_the_matrix_once(tmp_path: Path, same_run: bool,
                                                                         seconds: float) -> None:
    from bench.mutants import standing

    suite = model.suite_hash(model.HERE.parents[1])
    for behavior in ("NoSwap", "LimitedSwap"):
        _cell(tmp_path, behavior, results_dir="~/m/NoSwap+LimitedSwap" if same_run else f"~/m/{behavior}")
    o = standing.from_matrix(tmp_path, "v1.36.5", "vm", None, suite)
    assert o is not None and (o.passed, o.skipped, o.seconds) == (180, 12, seconds)
    assert o.selection.startswith("full suite on NoSwap,LimitedSwap: ")
    (tmp_path / "v1.36.5" / "vm" / "NoSwap.json").unlink()
    assert standing.from_matrix(tmp_path, "v1.36.5", "vm", None, suite) is None  # one behavior of two
    assert standing.from_matrix(tmp_path, "v1.36.5", "vm", "LimitedSwap", suite) is not None


def test_a_full_suite_baseline_stands_for_any_selection_on_its_behaviors() -> None:
    from bench.mutants import standing

    full = model.Outcome("baseline", "v1.36.5", model.SURVIVED, selection="full suite on NoSwap,LimitedSwap: from x")
    narrow = model.Outcome("baseline", "v1.36.5", model.SURVIVED, selection="-k (test_a) on LimitedSwap")
    assert standing.covers(full, "-k (test_a) on LimitedSwap", "LimitedSwap")
    assert standing.covers(full, "full suite on NoSwap,LimitedSwap", None)
    assert standing.covers(narrow, "-k (test_a) on LimitedSwap", "LimitedSwap")
    assert not standing.covers(narrow, "-k ((test_a) or (test_b)) on LimitedSwap", "LimitedSwap")
    one = model.Outcome("baseline", "v1.36.5", model.SURVIVED, selection="full suite on LimitedSwap")
    assert not standing.covers(one, "full suite on NoSwap,LimitedSwap", None)
