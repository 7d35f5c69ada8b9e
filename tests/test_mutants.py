"""The mutant bench's verdicts and table (bench/mutants), and that every mutant patch in the
repository is well-formed (that each applies to every supported release, or is rebased onto it
or declared not applicable there: tests/test_mutant_releases.py)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench import mutants as model
from bench.mutants import docs
from clusters import cli, versions
from clusters.vm import k8s_source
from tests import api_failures


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


def _pytest_junit(tmp: Path, selection: str) -> Path:
    """The JUnit XML of a real pytest run of ``-k selection`` from tests that fail as a run on a
    node whose control plane restarted: a 403 to the suite's credentials in the test, a refused
    connection in setup and in the test; and tests that fail by the node's verdict or pass."""
    project = tmp / selection.replace(" ", "-")
    (project / "e2e").mkdir(parents=True)
    (project / "conftest.py").write_text(api_failures.CONFTEST)
    (project / "e2e" / "test_x.py").write_text(
        "import pytest\n\n"
        "from conftest import lost\n\n"
        "@pytest.fixture\n"
        "def api():\n    lost()\n\n"
        "def test_refused_in_the_test():\n    from conftest import refused\n    refused()\n\n"
        "@pytest.fixture\n"
        "def node():\n    from conftest import refused_discovery\n    refused_discovery()\n\n"
        "def test_refused_in_setup(node):\n    pass\n\n"
        "def test_lost_in_setup(api):\n    pass\n\n"
        "def test_lost_in_the_test():\n    lost()\n\n"
        "def test_assert():\n    assert 35041280 == 70082560\n\n"
        "def test_pass():\n    pass\n")
    junit = project / "junit.xml"
    subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", f"--junitxml={junit}", "-k",
                    selection, "e2e"], cwd=project, capture_output=True, timeout=120,
                   env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)})
    return junit


def test_a_failure_the_node_had_no_say_in_never_catches_a_mutant(tmp_path: Path) -> None:
    """Mutant 31's kubelet, swapped into the shared VM, re-created the control plane's containers
    and the suite met a 403 (decision 0042): a catch is a failure that reached the node's
    verdict, so that run could not test it and the mutant gets a fresh VM."""
    o = model.judge("m", "b", _pytest_junit(tmp_path, "refused_in_the_test or lost_in_setup or pass"), 1)
    assert o.verdict == model.NOT_RUN and o.unjudged == ["test_refused_in_the_test", "test_lost_in_setup"]
    assert o.detail.startswith("every failure never reached the node's verdict (test_refused_in_the_test,"
                               " test_lost_in_setup):"
                               " kubernetes.client.exceptions.ForbiddenException: (403)")
    o = model.judge("m", "b", _pytest_junit(tmp_path, "refused_in_the_test or assert"), 1)
    assert o.verdict == model.CAUGHT and model.seen(o) == ["test_assert"] and "70082560" in o.detail
    assert "| m | caught | test_assert |" in model.table([o], None)
    # the node fixture's discovery refused (403), beside a test that passed: no setup on this
    # build failed by the node (mutant 31 on the shared VM of v1.37.2)
    o = model.judge("m", "b", _pytest_junit(tmp_path, "refused_in_setup or pass"), 1)
    assert o.verdict == model.NOT_RUN and o.unjudged == ["test_refused_in_setup"]
    assert "does not allow the kubeconfig's user to read node ksc-node's kubelet /configz (403 Forbidden)" in o.detail
    # lost in the test itself: what the test did to the node may be why, so it stays a catch
    o = model.judge("m", "b", _pytest_junit(tmp_path, "lost_in_the_test"), 1)
    assert o.verdict == model.CAUGHT and o.unjudged == []


def test_a_build_that_failed_is_not_run() -> None:
    o = model.judge("m", "b", None, None, "go build failed\nswap.go:5:9: undefined: x\n")
    assert o.verdict == model.NOT_RUN and "undefined: x" in o.detail


def test_table_counts_caught_and_false_alarms() -> None:
    caught = model.Outcome("a", "b1", model.CAUGHT, failed=["e2e/test_x.py::test_a[LimitedSwap]"], seconds=60)
    survived = model.Outcome("b", "b2", model.SURVIVED, passed=3, seconds=120)
    base = model.Outcome("baseline", "v1.37.1", model.SURVIVED, passed=10, seconds=600, selection="full suite")
    text = model.table([caught, survived], base, "2026-11-23", "v1.37.1")
    assert text.startswith("Mutant bench on v1.37.1 (2026-11-23)\n")
    assert "| a | caught | test_a[LimitedSwap] |" in text
    assert "| b | SURVIVED | — |" in text
    assert text.splitlines()[-1] == "caught 1/2 mutants on v1.37.1, 0 not applicable, 0 false alarms"
    alarm = model.Outcome("baseline", "v1.37.1", model.CAUGHT, failed=["t"], passed=9)
    assert model.table([caught], alarm).splitlines()[-1] == "caught 1/1 mutants, 0 not applicable, 1 false alarms"


def test_outcomes_survive_a_round_trip() -> None:
    o = model.Outcome("a", "b", model.CAUGHT, failed=["t"], seconds=1.5, suite="abc")
    assert model.Outcome.from_json(o.to_json()) == o


def suite_tree(root: Path, files: dict[str, str]) -> Path:
    """A project with the suite's inputs (e2e/, workloads/, conftest.py) and ``files`` in it."""
    (root / "e2e").mkdir()
    (root / "workloads").mkdir()
    (root / "conftest.py").write_text("x = 1\n")
    for name, text in files.items():
        (root / name).write_text(text)
    return root


def test_suite_hash_follows_the_tests(tmp_path: Path) -> None:
    before = model.suite_hash(suite_tree(tmp_path, {"e2e/test_a.py": "def test(): pass\n"}))
    (tmp_path / "e2e" / "test_a.py").write_text("def test(): assert 0\n")
    assert model.suite_hash(tmp_path) != before


@pytest.mark.parametrize(("edit", "kept"), [
    ('"""The claim, worded better."""\ndef test():\n    """Says it."""\n    x = "a"  # why\n', True),
    ('def test():\n    x = "a"\n', True),
    ('def test():\n    """Says it."""\n    x = "b"\n', False),  # a string that runs
    ('def test():\n    """Says it."""\n    y = "a"\n', False),
])
def test_suite_hash_ignores_prose_and_follows_code(tmp_path: Path, edit: str, kept: bool) -> None:
    before = model.suite_hash(suite_tree(tmp_path, {"e2e/test_a.py": 'def test():\n    """Says it."""\n    x = "a"\n'}))
    (tmp_path / "e2e" / "test_a.py").write_text(edit)
    assert (model.suite_hash(tmp_path) == before) is kept


def test_suite_hash_is_pinned_so_every_python_computes_the_same(tmp_path: Path) -> None:
    """The value each of Python 3.10-3.13 computes for this tree: a kept result's suite version is
    checked on whatever Python the next machine runs (ast.dump is not the same: 3.12 adds fields,
    and 3.12.1 an empty piece to this f-string's format spec)."""
    suite_tree(tmp_path, {"conftest.py": "import pytest\n", "e2e/test_a.py":
                          'def test(x: int = 1, /, *a, k: str = "v", **kw) -> None:\n'
                          '    """Claim."""\n'
                          '    y = f"{x!r:>{k}}"\n'
                          '    assert [i async for i in a] if a else {**kw}, y\n'})
    assert model.suite_hash(tmp_path) == "93f49d4434be"


def test_a_scoped_suite_hash_follows_what_the_run_took_in(tmp_path: Path) -> None:
    """Of a run of test_a alone: test_b's code is not in it, its name is (a new or removed test
    module changes it); the shared code and test_a are."""
    tree = suite_tree(tmp_path, {"e2e/test_a.py": "def test(): pass\n", "e2e/test_b.py": "def test(): pass\n",
                                 "e2e/oracle.py": "X = 1\n", "conftest.py": ""})
    scoped, full = model.suite_hash(tree, ["test_a.py"]), model.suite_hash(tree)
    assert scoped != full and model.suite_hash(tree, ["test_a.py", "test_b.py"]) == full
    (tree / "e2e" / "test_b.py").write_text("def test(): assert 0\n")
    assert model.suite_hash(tree, ["test_a.py"]) == scoped and model.suite_hash(tree) != full
    for path, text in (("e2e/test_a.py", "def test(): assert 0\n"), ("e2e/oracle.py", "X = 2\n"),
                       ("e2e/test_c.py", "def test(): pass\n")):
        before = (tree / path).read_text() if (tree / path).exists() else None
        (tree / path).write_text(text)
        assert model.suite_hash(tree, ["test_a.py"]) != scoped, path
        (tree / path).unlink() if before is None else (tree / path).write_text(before)
    assert model.suite_hash(tree, ["test_a.py"]) == scoped


def test_a_kept_result_stands_while_what_its_run_took_in_is_unchanged(tmp_path: Path) -> None:
    """A result scoped to the modules its selection collected stands after a change to another
    test module, not after one to its own, to shared code, or when its -k now reaches a new test
    elsewhere; a result without a scope stands only for its whole suite."""
    from bench.mutants import standing

    tree = suite_tree(tmp_path, {"e2e/test_a.py": "def test_alpha(): pass\n",
                                 "e2e/test_b.py": "def test_beta(): pass\n", "e2e/shared.py": "X = 1\n"})
    o = standing.keep(model.Outcome("m", "b", model.CAUGHT), tmp_path / "m.json",
                      standing.before_run(["-k", "alpha"], tree), tree)
    assert (o.modules, o.collect_args, o.suite) == (["test_a.py"], ["-k", "alpha"], model.suite_hash(tree))
    unscoped = model.Outcome("m", "b", model.CAUGHT, suite=o.suite)
    (tree / "e2e" / "test_b.py").write_text("def test_beta(): assert 0\n")
    now = model.suite_hash(tree)
    assert now != o.suite and standing.stands(o, now, tree) and not standing.stands(unscoped, now, tree)
    for path, text in (("e2e/test_b.py", "def test_beta(): pass\ndef test_alphabet(): pass\n"),  # -k alpha reaches it
                       ("e2e/test_a.py", "def test_alpha(): assert 0\n"), ("e2e/shared.py", "X = 2\n")):
        before = (tree / path).read_text()
        (tree / path).write_text(text)
        standing._collected.cache_clear()
        assert not standing.stands(o, model.suite_hash(tree), tree), path
        (tree / path).write_text(before)
    standing._collected.cache_clear()
    assert standing.stands(o, model.suite_hash(tree), tree)
    broken = standing.keep(model.Outcome("m", "b", model.CAUGHT), tmp_path / "b.json",
                           standing.before_run(["--no-such-option"], tree), tree)
    assert broken.modules == [] and not standing.stands(broken, "y", tree)  # collection failed: no scope


def test_a_result_whose_suite_changed_while_it_ran_stands_for_no_suite(tmp_path: Path) -> None:
    """What a run took in is read before it starts; if the tree changed by its end, any version
    of it may have run, so the result is written but stands neither for the old suite nor, by its
    scope, for the new one (nor the old one back)."""
    from bench.mutants import standing

    tree = suite_tree(tmp_path, {"e2e/test_a.py": "def test_alpha(): pass\n", "e2e/shared.py": "X = 1\n"})
    taken = standing.before_run(["-k", "alpha"], tree)
    (tree / "e2e" / "shared.py").write_text("X = 2\n")  # mid-run
    said: list[str] = []
    o = standing.keep(model.Outcome("m", "b", model.CAUGHT), tmp_path / "m.json", taken, tree, said.append)
    assert model.Outcome.from_json((tmp_path / "m.json").read_text()).verdict == model.CAUGHT
    assert not standing.stands(o, model.suite_hash(tree), tree)
    (tree / "e2e" / "shared.py").write_text("X = 1\n")
    assert not standing.stands(o, taken.suite, tree)
    assert said and "changed while it ran" in said[0]


def test_suite_hash_counts_a_non_python_file_by_its_bytes(tmp_path: Path) -> None:
    stress = "workloads/stress.c"
    before = model.suite_hash(suite_tree(tmp_path, {stress: "/* a */ int main(void) { return 0; }\n"}))
    (tmp_path / stress).write_text("/* b */ int main(void) { return 0; }\n")
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


def test_a_mutant_the_shared_vm_could_not_test_gets_a_fresh_vm(tmp_path: Path, monkeypatch, fake_vm_cli) -> None:
    """Mutant 31 re-created the shared node's control plane when its kubelet was swapped in; the
    suite met an API server still starting (403) and the next mutant met a refused connection."""
    from bench.mutants import __main__ as bench

    runs: list[bool] = []  # per run: was it on the shared VM?

    def run_one(name, patches, behaviors, selection, label, provider, out_dir, extra, shared=None, base=None, **kw):
        runs.append(shared is not None)
        if shared is not None:
            return model.Outcome(name, "b", model.NOT_RUN, detail="")  # a reason may be empty
        return model.Outcome(name, "b", model.CAUGHT, failed=["test_resize[LimitedSwap]"])

    monkeypatch.setattr(bench, "run_one", run_one)
    m = next(m for m in model.load(model.HERE) if m.name == "hash-includes-resources")
    args = bench.argparse.Namespace(rerun=True, k=None, provider="vm", fresh_vm=False, pytest_args=[],
                                    release=versions.KUBERNETES)
    shared = bench.SharedVm()
    shared.swap_in([], [])  # the bench boots the shared VM
    fake_vm_cli.calls.clear()
    o = bench._run_mutant(args, 1, m, 1, "suite", tmp_path, tmp_path, shared)
    assert runs == [True, False] and o.verdict == model.CAUGHT
    downs = [call[0] for call in fake_vm_cli.calls]
    assert downs == ["down"] and not shared.booted  # the next mutant boots a fresh shared VM
    assert bench.running_vm(shared.state_dir) is None



@pytest.mark.parametrize("unjudged", [[], ["test_a[LimitedSwap]"]])
def test_a_shared_vm_whose_api_server_was_lost_or_refused_is_not_trusted_for_the_next_mutant(
        tmp_path: Path, monkeypatch, fake_vm_cli, unjudged: list[str]) -> None:
    """Mutant 31, caught on v1.36.5's shared VM by its resize checks beside two 403s: the next
    mutant's kubelet would re-create every container 31's wrote, so the VM goes; a run without
    such a failure keeps it."""
    from bench.mutants import __main__ as bench

    def run_one(name, patches, behaviors, selection, label, provider, out_dir, extra, shared=None, base=None, **kw):
        return model.Outcome(name, "b", model.CAUGHT, failed=["test_a[LimitedSwap]", "test_b[LimitedSwap]"],
                             unjudged=unjudged, passed=3)

    monkeypatch.setattr(bench, "run_one", run_one)
    m = next(m for m in model.load(model.HERE) if m.name == "hash-includes-resources")
    args = bench.argparse.Namespace(rerun=True, k=None, provider="vm", fresh_vm=False, pytest_args=[],
                                    release=versions.KUBERNETES)
    shared = bench.SharedVm()
    shared.swap_in([], [])
    fake_vm_cli.calls.clear()
    o = bench._run_mutant(args, 1, m, 1, "suite", tmp_path, tmp_path, shared)
    assert o.verdict == model.CAUGHT and model.seen(o) == [t for t in o.failed if t not in unjudged]
    assert [call[0] for call in fake_vm_cli.calls] == (["down"] if unjudged else [])
    assert shared.booted is not bool(unjudged)


def test_a_result_kept_in_another_directory_is_resumed_from_not_run_again(tmp_path: Path, monkeypatch) -> None:
    """--kept: a result another machine kept (committed in the checkout) counts while the
    mutant's build and the suite are unchanged; a changed suite runs it again."""
    from bench.mutants import __main__ as bench

    ran: list[str] = []

    def run_one(name, *args, **kw):
        ran.append(name)
        return model.Outcome(name, "b", model.SURVIVED, passed=1)

    monkeypatch.setattr(bench, "run_one", run_one)
    monkeypatch.setattr(bench, "_say", lambda line: None)
    m = next(m for m in model.load(model.HERE) if m.name == "hash-includes-resources")
    args = bench.argparse.Namespace(rerun=False, k=None, provider="vm", fresh_vm=True, pytest_args=[],
                                    release=versions.KUBERNETES)
    kept_dir, runs = tmp_path / "kept", tmp_path / "results" / "mutants"
    kept_dir.mkdir()
    build = k8s_source.release(versions.KUBERNETES, m.patches).build_id
    elsewhere = model.Outcome(m.name, build, model.CAUGHT, failed=["test_x[LimitedSwap]"], suite="s1")
    (kept_dir / f"{m.name}-{m.content_hash}-{versions.KUBERNETES}-vm.json").write_text(elsewhere.to_json())
    monkeypatch.setattr(bench.SharedVm, "down", lambda self: None)

    o = bench._run_mutant(args, 1, m, 1, "s1", kept_dir, runs, bench.SharedVm(tmp_path / "state"))
    assert (ran, o.verdict, o.failed) == ([], model.CAUGHT, ["test_x[LimitedSwap]"])

    now = model.suite_hash(bench.ROOT)  # the suite the run took in, read as it started
    o = bench._run_mutant(args, 1, m, 1, now, kept_dir, runs, bench.SharedVm(tmp_path / "state"))
    assert (ran, o.verdict, o.suite) == ([m.name], model.SURVIVED, now)
    kept = model.Outcome.from_json((kept_dir / f"{m.name}-{m.content_hash}-{versions.KUBERNETES}-vm.json").read_text())
    assert kept.suite == now  # the new result is kept where the old one was, for the next machine

# --- the bench's VMs: a state directory of its own, and only what it started is stopped -----------

class FakeVmCli:
    """`python -m clusters.vm` as the bench calls it, without booting: `up` starts a stand-in
    qemu (a sleeping process whose command line names qemu-system and the pid file, as
    qemu.read_pid checks) and writes the state file; `down` stops the one its state directory
    names; `status` says Ready while it runs. Every call must name a state directory."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Path]] = []
        self.procs: list[subprocess.Popen] = []

    def start(self, state_dir: Path) -> tuple[int, float]:
        import json
        import sys
        import time

        state_dir.mkdir(parents=True, exist_ok=True)
        pidfile = state_dir / "qemu.pid"
        proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", "qemu-system-x86_64",
                                 "-pidfile", str(pidfile)])
        self.procs.append(proc)
        started = time.time()
        pidfile.write_text(f"{proc.pid}\n")
        (state_dir / "state.json").write_text(json.dumps({"pid": proc.pid, "started_at": started}))
        for _ in range(100):  # until /proc has its command line
            if b"qemu-system" in Path(f"/proc/{proc.pid}/cmdline").read_bytes():
                break
            time.sleep(0.02)
        return proc.pid, started

    def __call__(self, *args: str) -> subprocess.CompletedProcess:
        import json

        from clusters.vm import qemu

        assert "--state-dir" in args, f"clusters.vm {' '.join(args)}: no --state-dir (the default one is not the bench's)"
        state_dir = Path(args[args.index("--state-dir") + 1])
        self.calls.append((args[0], state_dir))
        pid = qemu.read_pid(qemu.VmPaths(state_dir))
        out = ""
        if args[0] == "up":
            self.start(state_dir)
        elif args[0] == "down" and pid is not None:
            next(p for p in self.procs if p.pid == pid).kill()
            next(p for p in self.procs if p.pid == pid).wait()
            (state_dir / "qemu.pid").unlink()
            (state_dir / "state.json").unlink()
        elif args[0] == "status":
            out = json.dumps({"running": pid is not None, "node_ready": pid is not None})
        return subprocess.CompletedProcess(args, 0, out, None)

    def stop_all(self) -> None:
        for proc in self.procs:
            proc.kill()
            proc.wait()


@pytest.fixture
def fake_vm_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from bench.mutants import __main__ as bench

    monkeypatch.setenv("KSC_CACHE_DIR", str(tmp_path / "cache"))
    fake = FakeVmCli()
    monkeypatch.setattr(bench, "_vm", fake)
    monkeypatch.setattr(bench, "_say", lambda line: None)
    yield fake
    fake.stop_all()


def test_the_bench_runs_its_vms_in_its_own_state_directory_and_stops_only_those(tmp_path: Path, fake_vm_cli) -> None:
    from bench.mutants import __main__ as bench
    from clusters.vm.paths import default_state_dir

    someone_elses = fake_vm_cli.start(default_state_dir())  # `python -m clusters.vm up`, by someone else
    shared = bench.SharedVm()
    assert shared.state_dir == tmp_path / "cache" / "bench" / "vm-run"
    assert bench.claim(shared.state_dir) is None  # the default directory's VM is none of its business
    assert shared.swap_in([], []) is None
    ours = bench.running_vm(shared.state_dir)
    assert ours is not None and shared.started == ours
    shared.after()  # Ready: kept for the next mutant
    assert shared.swap_in([], []) is None and bench.running_vm(shared.state_dir) == ours  # not booted again
    shared.down()
    assert bench.running_vm(shared.state_dir) is None
    assert bench.running_vm(default_state_dir()) == someone_elses
    assert [call[0] for call in fake_vm_cli.calls] == ["up", "swap-kubelet", "status", "status", "swap-kubelet", "down"]
    assert {call[1] for call in fake_vm_cli.calls} == {shared.state_dir}


def test_a_vm_the_bench_did_not_start_is_left_alone(tmp_path: Path, fake_vm_cli, monkeypatch) -> None:
    from bench.mutants import __main__ as bench

    shared = bench.SharedVm(tmp_path / "bench state")
    stranger = fake_vm_cli.start(shared.state_dir)  # a VM left by an earlier bench, or started by hand
    refused = bench.claim(shared.state_dir)
    assert refused and f"pid {stranger[0]}" in refused and "clusters.vm down --state-dir" in refused, refused
    assert shared.swap_in([], []) == refused  # not swapped into, not stopped to boot anew
    shared.down()
    shared.after()
    monkeypatch.setattr(bench.subprocess, "Popen", lambda *a, **kw: pytest.fail("a pytest run started"))
    o = bench.run_one("m", [], None, [], "all", "vm", tmp_path / "out", [], state_dir=shared.state_dir)
    assert o.verdict == model.NOT_RUN and f"pid {stranger[0]}" in o.detail  # its own VM's run would stop it
    assert bench.running_vm(shared.state_dir) == stranger
    assert [call[0] for call in fake_vm_cli.calls] == []


def test_a_vm_the_bench_started_but_that_was_replaced_is_left_alone(tmp_path: Path, fake_vm_cli) -> None:
    from bench.mutants import __main__ as bench

    shared = bench.SharedVm(tmp_path / "state")
    assert shared.swap_in([], []) is None
    fake_vm_cli("down", "--state-dir", str(shared.state_dir))  # stopped by hand, and another booted there
    other = fake_vm_cli.start(shared.state_dir)
    fake_vm_cli.calls.clear()
    shared.down()
    assert bench.running_vm(shared.state_dir) == other and fake_vm_cli.calls == []


def test_a_second_bench_on_the_same_state_directory_is_refused(tmp_path: Path, fake_vm_cli) -> None:
    from bench.mutants import __main__ as bench

    assert bench.claim(tmp_path / "state") is None
    refused = bench.claim(tmp_path / "state")
    assert refused and refused.startswith(f"another bench (pid {os.getpid()}) runs its VMs in"), refused


def test_the_bench_does_not_start_beside_a_vm_it_did_not_start(tmp_path: Path, fake_vm_cli, capsys) -> None:
    from bench.mutants import __main__ as bench

    fake_vm_cli.start(tmp_path / "state")
    code = bench.main(["--state-dir", str(tmp_path / "state"), "--mutant", "hash-includes-resources",
                       "--results-dir", str(tmp_path / "results")])
    # the host is not ready for the bench (exit 3, clusters/cli.py Exit), not an interruption (2)
    assert code == cli.Exit.PREFLIGHT and "a VM this bench did not start runs in" in capsys.readouterr().err
    assert fake_vm_cli.calls == [] and not (tmp_path / "results").exists()


def _guest_state(kind: str, pid: int, started: float):
    from clusters.vm.cluster import VmState
    from clusters.vm.kindhost import KindHostState

    if kind == "vm":
        return VmState(pid=pid, port=1, k8s_version="v1.37.1", kernel="6.12", kernel_release="6.12.0", memory_mb=4096,
                       swap_mb=2048, cpus=2, behavior="LimitedSwap", image_key="k", started_at=started)
    return KindHostState(pid=pid, docker_port=1, api_ports={}, kernel="6.12", kernel_release="6.12.0", memory_mb=8192,
                         swap_mb=4096, cpus=2, accel="tcg", image_key="k", started_at=started)


@pytest.mark.parametrize(("kind", "bench_module"), [("vm", "vm_bench"), ("kind-host", "kind_bench")])
def test_the_vm_and_kind_benches_stop_only_the_guest_they_booted(tmp_path: Path, fake_vm_cli, monkeypatch, capsys,
                                                                 kind: str, bench_module: str) -> None:
    import importlib

    from clusters.vm.cluster import VmCluster
    from clusters.vm.kindhost import KindHost

    module = importlib.import_module(f"bench.{bench_module}")
    guest = VmCluster(tmp_path / "state") if kind == "vm" else KindHost(tmp_path / "state")
    assert module.not_started_here(guest, "stop") is None and not module.started_here(guest, None)
    booted = _guest_state(kind, *fake_vm_cli.start(guest.state_dir))  # as up() would have
    guest.save_state(booted)
    assert module.started_here(guest, booted)  # the bench's end stops it
    refused = module.not_started_here(guest, f"python -m clusters.vm{' kind-host' if kind != 'vm' else ''} down")
    assert refused and f"pid {booted.pid}" in refused and f"down --state-dir {guest.state_dir}" in refused, refused
    # a bench run now, with this directory, refuses to start (its up() would stop this guest first)
    assert module.main(["--state-dir", str(guest.state_dir)]) == cli.Exit.PREFLIGHT and refused in capsys.readouterr().err
    fake_vm_cli("down", "--state-dir", str(guest.state_dir))  # stopped by hand, another booted there
    guest.save_state(_guest_state(kind, *fake_vm_cli.start(guest.state_dir)))
    assert not module.started_here(guest, booted)  # the bench's end leaves that one alone


def test_the_docs_table_is_the_bench_own(tmp_path: Path) -> None:
    """--docs writes the run's own table into the page's generated block, and only there."""
    page = tmp_path / "mutants.md"
    page.write_text("# Bench\n\nbefore\n<!-- mutants:begin -->\nold table\n<!-- mutants:end -->\nafter\n")
    outcome = model.Outcome("01-x", "v1.37.1+patch.abc", model.CAUGHT, ["test_a[LimitedSwap]"], passed=3, seconds=120)
    baseline = model.Outcome("baseline", "v1.37.1", model.SURVIVED, passed=4, seconds=60)
    docs.write(page, "v1.37.1", model.table([outcome], baseline, "2026-11-27", "v1.37.1"), "abc123")
    text = page.read_text()
    assert "old table" not in text and text.startswith("# Bench\n\nbefore\n") and text.endswith("<!-- mutants:end -->\nafter\n")
    assert "Suite version `abc123`" in text and "| 01-x | caught | test_a[LimitedSwap] |" in text
    assert "caught 1/1 mutants on v1.37.1, 0 not applicable, 0 false alarms" in text
    assert "| v1.37.1 | 1/1 | 0 | 0 | 2026-11-27 | `abc123` |" in text


def test_a_docs_page_without_the_block_is_refused_before_any_run(tmp_path: Path, capsys) -> None:
    from bench.mutants.__main__ import main

    page = tmp_path / "mutants.md"
    page.write_text("no block here\n")
    assert main(["--docs", str(page), "--mutant", "01-limitedswap-uses-limit", "--state-dir", str(tmp_path / "s")]) == 4
    assert "has no generated block" in capsys.readouterr().err


def test_a_partial_run_says_so_in_the_docs(tmp_path: Path) -> None:
    page = tmp_path / "mutants.md"
    page.write_text("<!-- mutants:begin -->\n<!-- mutants:end -->\n")
    docs.write(page, "v1.37.1", "table\n", "abc", ran=4, total=41)
    assert "A partial run: 4 of the bench's 41 mutants." in page.read_text()
    docs.write(page, "v1.37.1", "table\n", "abc", ran=41, total=41)
    assert "partial" not in page.read_text()


MUTANT = """# mutant: swap-rounded-up
# wrong: the share is rounded up
# area: formula
# binaries: kubelet
# tests: test_cgroup_limits
# behaviors: LimitedSwap
# not-applicable: 1.34: the code differs
# expect: caught
diff --git a/pkg/kubelet/x.go b/pkg/kubelet/x.go
--- a/pkg/kubelet/x.go
+++ b/pkg/kubelet/x.go
@@ -1 +1 @@
-a
+b
"""


@pytest.mark.parametrize(("old", "new", "same_build", "same_results"), [
    ("# wrong: the share is rounded up", "# wrong: the LimitedSwap share is rounded up to a page", True, True),
    ("# area: formula", "# area: formula\n# a comment of the author's", True, True),
    # the build reads the source, but the bench runs a kubelet-only mutant on a shared VM
    ("# binaries: kubelet", "# binaries: kubelet, kube-apiserver", True, False),
    ("# mutant: swap-rounded-up", "# mutant: swap-rounded-up-to-a-page", True, True),
    ("# tests: test_cgroup_limits", "# tests: test_cgroup_limits or test_metrics", True, False),
    ("# behaviors: LimitedSwap", "# behaviors: NoSwap,LimitedSwap", True, False),
    # where it does not apply: a row made from the header each time, never a kept run's
    ("# not-applicable: 1.34: the code differs", "# not-applicable: 1.34: the code differs\n"
                                                  "# not-applicable: 1.35: so does this", True, True),
    ("# not-applicable: 1.34: the code differs", "# not-applicable: 1.34: the function is newer", True, True),
    ("# expect: caught", "# expect: survived", True, False),
    ("# area: formula", "# area: formula\n# feature-gates: WorkloadControlledSwap", False, False),
    ("+b", "+c", False, False),
])
def test_a_mutants_build_and_results_follow_what_builds_and_runs_it_not_its_prose(
        tmp_path: Path, old: str, new: str, same_build: bool, same_results: bool) -> None:
    def mutant(text: str) -> model.Mutant:
        path = tmp_path / f"{len(list(tmp_path.iterdir()))}-m.patch"
        path.write_text(text)
        return model.Mutant(k8s_source.read_patch(path))

    before, after = mutant(MUTANT), mutant(MUTANT.replace(old, new))
    build = [k8s_source.release("v1.37.2", [m.patch.path]).build_id for m in (before, after)]
    assert (build[0] == build[1]) is same_build
    assert (before.content_hash == after.content_hash) is same_results
    assert after.patch.diff.startswith("diff --git") and before.patch.header()["expect"] == "caught"


# --- --build-only: the runs' builds, readied beside a running VM ---------------------------------

def test_build_only_builds_what_the_runs_would_and_nothing_boots(tmp_path: Path, monkeypatch, capsys) -> None:
    """Each base's unmodified build, then each mutant without a standing kept result, in the
    bench's own order and on the release's form of each mutant; a failed build is said and the
    next goes on (exit 1); nothing is claimed, booted or run."""
    from bench.mutants import __main__ as bench
    from bench.mutants import standing

    built: list[tuple[str, ...]] = []
    room_and_priority(monkeypatch)

    def build_all(source, progress=print):
        built.append(tuple(p.path.name for p in source.patches))
        if source.patches and source.patches[-1].path.name.startswith("20-"):
            raise RuntimeError("go build ./cmd/kubelet: exit status 1\nmore")
    monkeypatch.setattr(bench.vbuild, "build_all", build_all)
    for costly in ("claim", "SharedVm", "run_one"):
        monkeypatch.setattr(bench, costly, lambda *a, **kw: pytest.fail("the build-only bench went past building"))
    kept = tmp_path / "kept"
    kept.mkdir()
    m19 = next(m for m in model.load(model.HERE) if m.patch.path.name.startswith("19-"))
    build = k8s_source.release(versions.KUBERNETES, m19.patches).build_id
    standing_result = model.Outcome(m19.name, build, model.CAUGHT, failed=["test_x"], suite=model.suite_hash(bench.ROOT))
    standing.mutant_path(kept, m19, versions.KUBERNETES, "vm").write_text(standing_result.to_json())
    argv = ["--build-only", "--kept", str(kept), "--results-dir", str(tmp_path / "results"),
            "--k8s-version", versions.KUBERNETES, "--matrix-cells", str(tmp_path)]
    names = ("19-summary-swap-available-is-limit", "20-resource-metrics-drop-node-swap", "21-swap-capacity-in-kib",
             "33-wcs-guaranteed-ignores-limits-swap")
    for n in names:
        argv += ["--mutant", n]

    assert bench.main(argv) == cli.Exit.FAILED
    base = "kep-5359.patch"
    assert built == [(), (base,), (names[1] + ".patch",), (names[2] + ".patch",), (base, names[3] + ".patch")]
    err = capsys.readouterr().err
    assert "build(s) failed: resource-metrics-drop-node-swap" in err
    assert "exit status 1" in err and "more" not in err  # the error's first line, not its log
    assert not (tmp_path / "results" / "mutants").exists()  # no run directory: nothing ran


def room_and_priority(monkeypatch, free: int = 100 << 30) -> list[int]:
    """The cache's disk as having ``free`` bytes; os.nice recorded, not applied to the self-tests."""
    from clusters import diskspace

    monkeypatch.setattr(diskspace, "free_bytes", lambda path: free)
    niced: list[int] = []
    monkeypatch.setattr(os, "nice", niced.append)
    return niced


def test_build_only_leaves_out_the_baseline_that_stands_or_is_not_wanted(tmp_path: Path, monkeypatch) -> None:
    """The release's unmodified build is built only for a baseline the runs would make: not with
    --no-baseline, not where a kept baseline of this suite covers the mutants; the prototype's
    base still is (no kept result of it). On kind too, only binaries: a node image made ahead
    would be pruned before its run (the cache keeps two)."""
    from bench.mutants import __main__ as bench
    from bench.mutants import standing

    built: list[tuple[str, ...]] = []
    niced = room_and_priority(monkeypatch)
    monkeypatch.setattr(bench.vbuild, "build_all", lambda source, progress=print: built.append(
        tuple(p.path.name for p in source.patches)))
    from clusters.vm import nodeimage
    monkeypatch.setattr(nodeimage, "build_node_image", lambda *a, **kw: pytest.fail("a node image made ahead"))
    names = ("19-summary-swap-available-is-limit", "33-wcs-guaranteed-ignores-limits-swap")
    argv = ["--build-only", "--results-dir", str(tmp_path / "results"), "--k8s-version", versions.KUBERNETES,
            "--matrix-cells", str(tmp_path), *(w for n in names for w in ("--mutant", n))]
    both = [(), ("kep-5359.patch",), (names[0] + ".patch",), ("kep-5359.patch", names[1] + ".patch")]

    assert bench.main([*argv, "--no-baseline"]) == cli.Exit.OK
    assert built == [both[2], both[3]] and niced == [19]
    built.clear()
    kept = tmp_path / "kept"
    kept.mkdir()
    m19 = next(m for m in model.load(model.HERE) if m.patch.path.name == names[0] + ".patch")
    green = model.Outcome("baseline", versions.KUBERNETES, model.SURVIVED, suite=model.suite_hash(bench.ROOT),
                          selection=standing.baseline_selection([m19], None)[1])
    standing.baseline_path(kept, versions.KUBERNETES, "kind").write_text(green.to_json())
    assert bench.main([*argv, "--kept", str(kept), "--provider", "kind"]) == cli.Exit.OK
    assert built == both[1:]
    built.clear()
    assert bench.main([*argv, "--kept", str(kept)]) == cli.Exit.OK  # vm: the kind provider's baseline is not its own
    assert built == both


def test_build_only_refuses_a_cache_disk_without_room_before_any_build(tmp_path: Path, monkeypatch, capsys) -> None:
    from bench.mutants import __main__ as bench

    niced = room_and_priority(monkeypatch, free=1 << 30)
    monkeypatch.setattr(bench.vbuild, "build_all", lambda *a, **kw: pytest.fail("built without room"))
    assert bench.main(["--build-only", "--results-dir", str(tmp_path), "--mutant", "19-summary-swap-available-is-limit"]) == cli.Exit.PREFLIGHT
    assert "1.0 GiB free" in capsys.readouterr().err and niced == []


def test_build_only_refuses_what_only_a_run_takes(capsys) -> None:
    from bench.mutants import __main__ as bench

    for extra in (["--docs", "docs/mutants.md"], ["--fresh-vm"], ["--baseline-only"], ["--", "-x"]):
        assert bench.main(["--build-only", *extra]) == cli.Exit.USAGE, extra
        assert "not for --build-only" in capsys.readouterr().err


def test_build_only_with_blind_builds_each_group_without_a_kept_result(tmp_path: Path, monkeypatch) -> None:
    from bench.mutants import __main__ as bench
    from bench.mutants import blind

    built: list[tuple[str, ...]] = []
    room_and_priority(monkeypatch)
    monkeypatch.setattr(bench.vbuild, "build_all", lambda source, progress=print: built.append(
        tuple(p.path.name for p in source.patches)))
    # 49 touches the lines another touches: it builds alone
    monkeypatch.setattr(blind, "applies_on", lambda release, env: lambda patches: len(patches) == 1 or not any(
        p.name.startswith("49-") for p in patches))
    argv = ["--build-only", "--blind", "--results-dir", str(tmp_path)]
    for n in ("42-resize-judges-the-allocated-pod-only", "48-node-swap-gate-not-locked",
              "49-pod-cgroups-swap-within-memory-limit", "53-wcs-accepted-without-its-gate", "58-wcs-allocated-skips-init-containers"):
        argv += ["--mutant", n]
    groups = [("42-resize-judges-the-allocated-pod-only.patch", "48-node-swap-gate-not-locked.patch"),
              ("49-pod-cgroups-swap-within-memory-limit.patch",),
              ("kep-5359.patch", "53-wcs-accepted-without-its-gate.patch", "58-wcs-allocated-skips-init-containers.patch")]
    assert bench.main(argv) == cli.Exit.OK
    assert built == groups
    # the first group's result kept on this suite, for its selection: its build is not made again
    first = [m for m in model.load(model.HERE) if m.name in ("resize-judges-the-allocated-pod-only",
                                                            "node-swap-gate-not-locked")]
    label = blind.selection(first, None, [])[1]
    survived = model.Outcome("blind", versions.KUBERNETES, model.SURVIVED, suite=model.suite_hash(bench.ROOT),
                             selection=label)
    (tmp_path / "mutants").mkdir(exist_ok=True)
    (tmp_path / "mutants" / f"blind-{blind.key(first)}-{versions.KUBERNETES}-vm.json").write_text(survived.to_json())
    built.clear()
    assert bench.main(argv) == cli.Exit.OK
    assert built == groups[1:]


def test_kind_without_a_kind_host_is_refused_only_when_something_would_run(tmp_path: Path, monkeypatch,
                                                                           capsys) -> None:
    """DOCKER_HOST is asked for before anything boots, but only by a bench with runs to make: one
    whose every result is kept (writing --docs again) runs nothing and needs no host."""
    from bench.mutants import __main__ as bench
    from bench.mutants import standing

    monkeypatch.delenv("DOCKER_HOST", raising=False)
    monkeypatch.setattr(bench, "run_one", lambda *a, **kw: pytest.fail("a run started"))
    m = next(m for m in model.load() if m.name == "limitedswap-uses-limit")
    keep = tmp_path / "kept"
    argv = ["--provider", "kind", "--mutant", m.name, "--no-baseline", "--kept", str(keep),
            "--results-dir", str(tmp_path / "results")]
    assert bench.main(argv) == cli.Exit.PREFLIGHT
    err = capsys.readouterr().err
    assert "needs the kind host's DOCKER_HOST for 1 run(s) (limitedswap-uses-limit)" in err, err
    assert "kind-host up" in err and not (tmp_path / "results").exists()
    keep.mkdir()
    build = k8s_source.release(versions.KUBERNETES, m.patches).build_id
    standing.keep(model.Outcome(m.name, build, model.CAUGHT, ["t[LimitedSwap]"]),
                  standing.mutant_path(keep, m, versions.KUBERNETES, "kind"), standing.Taken(model.suite_hash(model.PROJECT)))
    assert bench.main(argv) == cli.Exit.OK
    assert "| limitedswap-uses-limit | caught | t[LimitedSwap] |" in capsys.readouterr().out
