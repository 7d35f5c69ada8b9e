"""The release gate and the coverage report: the pure rules (e2e/verdict.py), then whole runs of
the suite's wiring (pytest in a subprocess) whose node fixture is a fake provider, since what
is under test here is the verdict on results, not a node."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from e2e import verdict
from e2e.verdict import Result
from tests.suite_project import the_suite

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parent.parent


# --- the rules -------------------------------------------------------------------------------

def passing(behavior: str, modules: tuple[str, ...] | None = None) -> list[Result]:
    return [Result(f"e2e/{m}.py::test_a[{behavior}]", behavior, "passed") for m in modules or verdict.checks_for(behavior)]


def test_final_result_takes_the_worst_phase() -> None:
    phases = [
        ("e2e/test_metrics.py::t[NoSwap]", "NoSwap", "setup", "passed", ""),
        ("e2e/test_metrics.py::t[NoSwap]", "NoSwap", "call", "passed", ""),
        ("e2e/test_metrics.py::t[NoSwap]", "NoSwap", "teardown", "failed", ""),
        ("e2e/test_metrics.py::s[NoSwap]", "NoSwap", "setup", "skipped", "needs kubelet >= 1.34"),
        ("e2e/test_metrics.py::s[NoSwap]", "NoSwap", "teardown", "passed", ""),
        ("e2e/test_metrics.py::p[NoSwap]", "NoSwap", "setup", "passed", ""),
        ("e2e/test_metrics.py::p[NoSwap]", "NoSwap", "call", "passed", ""),
        ("e2e/test_metrics.py::p[NoSwap]", "NoSwap", "teardown", "passed", ""),
        ("tests/test_oracle.py::x", "", "call", "passed", ""),  # no behavior: not counted
    ]
    results = {r.nodeid.split("::")[1]: r for r in verdict.final_results(phases)}
    assert {k: r.outcome for k, r in results.items()} == {"t[NoSwap]": "failed", "s[NoSwap]": "skipped",
                                                           "p[NoSwap]": "passed"}
    assert results["s[NoSwap]"].reason == "needs kubelet >= 1.34" and results["p[NoSwap]"].module == "test_metrics"


def test_gate_passes_only_when_every_required_check_of_every_required_behavior_passed() -> None:
    results = passing("NoSwap") + passing("LimitedSwap")
    assert verdict.gate_problems(results, ["NoSwap", "LimitedSwap"]) == []
    assert verdict.gate_problems(passing("NoSwap"), ["NoSwap", "LimitedSwap"]) == [
        f"LimitedSwap: {m}: no test ran" for m in verdict.checks_for("LimitedSwap")]
    # the four modules that used to be optional are required now
    for module in ("test_eviction", "test_kubelet_restart", "test_resize", "test_static_pods"):
        without = [r for r in passing("NoSwap") if r.module != module]
        assert verdict.gate_problems(without, ["NoSwap"]) == [f"NoSwap: {module}: no test ran"]


def test_inside_the_gate_a_skip_is_not_covered() -> None:
    results = passing("NoSwap") + [Result("e2e/test_metrics.py::old[NoSwap]", "NoSwap", "skipped", "needs kubelet >= 1.34")]
    assert verdict.gate_problems(results, ["NoSwap"]) == [
        "NoSwap: test_metrics: 1 passed, 0 failed, 1 skipped (needs kubelet >= 1.34)"]


def skipped(behavior: str, module: str, reason: str) -> list[Result]:
    """Every module passing but `module`, whose one test skipped with `reason`."""
    return [r for r in passing(behavior) if r.module != module] + [
        Result(f"e2e/{module}.py::test_s[{behavior}]", behavior, "skipped", reason)]


@pytest.mark.parametrize(("module", "reason", "accepted"), [
    # a provider that cannot do what the test needs: could not test
    ("test_eviction", "the existing provider cannot set a kubelet's eviction thresholds for one test", False),
    ("test_kubelet_restart", "the existing provider cannot restart a kubelet for one test", False),
    ("test_static_pods", "no node of this cluster runs static pods (a cluster without a self-hosted control plane)", False),
    # the node fixture's min_kubernetes / min_kernel skip, re-checked against the versions it names
    ("test_resize", "needs kubelet >= 1.33; node n1 runs v1.32.4", True),
    ("test_resize", "needs kubelet >= 1.33; node n1 runs v1.37.1", False),  # not older: a lie
    ("test_resize", "needs kubelet >= 1.33", False),  # not the fixture's wording: unchecked
    ("test_eviction", "needs kernel >= 6.4; node n1 runs 6.1.0-18-amd64", True),
    ("test_eviction", "needs kernel >= 6.4; node n1 runs 6.12.48+deb13-amd64", False),
    # core modules: no skip is accepted, a checked version reason neither
    ("test_metrics", "needs kubelet >= 1.34; node n1 runs v1.33.2", False),
    ("test_stress_outcomes", "needs kernel >= 6.4; node n1 runs 6.1.0-18-amd64", False),
    # KEP-5359 absent: accepted on NoSwap (the field has nothing to change there)
    ("test_workload_controlled_swap", verdict.NO_LIMITS_SWAP_API + ': Pod "limits-swap-probe" is invalid: ...', True),
    ("test_workload_controlled_swap", "the API server refuses the probe for another reason", False),
    # a topology skip: accepted for its one test only (test_s here: no such test)
    ("test_eviction", verdict.HOSTS_THE_API_SERVER + " (kube-system/kube-apiserver-n1 on n1): a worker node runs this test",
     False),
])
def test_a_required_module_accepts_only_checked_skips(module: str, reason: str, accepted: bool) -> None:
    problems = verdict.gate_problems(skipped("NoSwap", module, reason), ["NoSwap"])
    if accepted:
        assert problems == []
    else:
        assert len(problems) == 1 and problems[0].startswith(f"NoSwap: {module}: ") and reason in problems[0], problems


@pytest.mark.parametrize("reason", list(verdict.TOPOLOGY_SKIPS))
def test_a_topology_skip_is_accepted_for_its_one_test_only(reason: str) -> None:
    module, function = verdict.TOPOLOGY_SKIPS[reason]
    assert function in vars(importlib.import_module(f"e2e.{module}")), f"{module}.{function} is no test"
    said = f"{reason} (what the test saw)"
    results = [r for r in passing("NoSwap") if r.module != module]
    own = Result(f"e2e/{module}.py::{function}[NoSwap]", "NoSwap", "skipped", said)
    other = Result(f"e2e/{module}.py::test_other[NoSwap]", "NoSwap", "skipped", said)
    assert verdict.gate_problems(results + [own], ["NoSwap"]) == []
    assert verdict.gate_problems(results + [own, other], ["NoSwap"]) == [
        f"NoSwap: {module}: 0 passed, 0 failed, 2 skipped (could not test: {said})"]
    assert not verdict.accepted_skip("NoSwap", module, "another reason", function)


def test_a_failure_in_a_required_module_fails_the_gate_even_beside_accepted_skips() -> None:
    results = skipped("LimitedSwap", "test_resize", "needs kubelet >= 1.33; node n1 runs v1.32.4") + [
        Result("e2e/test_resize.py::test_t[LimitedSwap]", "LimitedSwap", "failed")]
    assert verdict.gate_problems(results, ["LimitedSwap"]) == ["LimitedSwap: test_resize: 0 passed, 1 failed, 1 skipped"]


def test_a_failure_fails_the_gate_and_workload_controlled_swap_needs_its_own_checks() -> None:
    failed = passing("LimitedSwap") + [Result("e2e/test_cgroup_limits.py::b[LimitedSwap]", "LimitedSwap", "failed")]
    assert verdict.gate_problems(failed, ["LimitedSwap"]) == ["LimitedSwap: test_cgroup_limits: 1 passed, 1 failed, 0 skipped"]
    shapes_only = [r for r in passing("WorkloadControlledSwap") if r.module != "test_workload_controlled_swap"]
    assert verdict.gate_problems(shapes_only, ["WorkloadControlledSwap"]) == [
        "WorkloadControlledSwap: test_workload_controlled_swap: no test ran"]
    # there the KEP-5359 skip is "could not test": the behavior has nothing else to prove
    no_api = skipped("WorkloadControlledSwap", "test_workload_controlled_swap", verdict.NO_LIMITS_SWAP_API + ": x")
    assert verdict.gate_problems(no_api, ["WorkloadControlledSwap"]) == [
        f"WorkloadControlledSwap: test_workload_controlled_swap: 0 passed, 0 failed, 1 skipped ({verdict.NO_LIMITS_SWAP_API}: x)"]


def test_workload_controlled_swap_can_pass_its_gate() -> None:
    """It has no eviction or restart tests (needs_behavior): they are not required. Its stress
    tests (a Guaranteed pod with and without limits.swap) are, and are core; so is its resize
    test (KEP-5359 carries out what LimitedSwap refuses)."""
    assert verdict.gate_problems(passing("WorkloadControlledSwap"), ["WorkloadControlledSwap"]) == []
    for module in ("test_eviction", "test_kubelet_restart"):
        assert module not in verdict.checks_for("WorkloadControlledSwap")
    assert "test_resize" in verdict.checks_for("WorkloadControlledSwap")
    assert "test_stress_outcomes" in verdict.checks_for("WorkloadControlledSwap")
    assert verdict.is_core("WorkloadControlledSwap", "test_stress_outcomes")


COLLECTOR = '''
import json, os

import pytest

NAMED = {"no_swap_node": "NoSwap", "limited_swap_node": "LimitedSwap",
         "workload_controlled_swap_node": "WorkloadControlledSwap"}


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session, config, items):
    found = {}
    for item in items:
        callspec = getattr(item, "callspec", None)
        behaviors = [callspec.params["swap_node"]] if callspec and "swap_node" in callspec.params else []
        behaviors += [b for f, b in NAMED.items() if f in item.fixturenames]
        module = item.nodeid.split("::")[0].rsplit("/", 1)[-1].removesuffix(".py")
        for behavior in behaviors:
            found.setdefault(behavior, set()).add(module)
    with open(os.environ["KSC_COLLECTED"], "w") as out:
        json.dump({b: sorted(m) for b, m in found.items()}, out)
'''


def test_required_checks_are_the_modules_with_tests_for_each_behavior(tmp_path: Path) -> None:
    """REQUIRED_CHECKS against the e2e modules as pytest collects them (needs_behavior markers,
    node fixtures): a module or marker added or changed without the table fails here."""
    import json
    import os
    import subprocess
    import sys

    (tmp_path / "ksc_collector.py").write_text(COLLECTOR)
    out = tmp_path / "collected.json"
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{REPO}", "KSC_COLLECTED": str(out)}
    done = subprocess.run([sys.executable, "-m", "pytest", "e2e", "--collect-only", "-q", "-p", "ksc_collector",
                           "-p", "no:cacheprovider"], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    collected = json.loads(out.read_text())
    assert collected == {b: sorted(m) for b, m in verdict.REQUIRED_CHECKS.items()}


def test_summary_is_derived_from_results() -> None:
    results = passing("LimitedSwap") + [
        Result("e2e/test_metrics.py::a[LimitedSwap]", "LimitedSwap", "skipped", "needs kubelet >= 1.34"),
        Result("e2e/test_metrics.py::b[LimitedSwap]", "LimitedSwap", "skipped", "needs kubelet >= 1.34"),
        Result("e2e/test_cgroup_limits.py::x[WorkloadControlledSwap]", "WorkloadControlledSwap", "skipped", "nope"),
    ]
    lines = verdict.summary_lines(results, ["LimitedSwap", "WorkloadControlledSwap"], {"LimitedSwap": "kind:c/n"},
                                  {"WorkloadControlledSwap": "needs a KEP-5359 node image"})
    assert lines == [
        "NoSwap: NOT SELECTED",
        f"LimitedSwap: {len(verdict.checks_for('LimitedSwap'))} passed, 0 failed, 2 skipped on kind:c/n",
        "    2 skipped: needs kubelet >= 1.34",
        "WorkloadControlledSwap: NOT COVERED: needs a KEP-5359 node image",
    ]


# --- whole runs ------------------------------------------------------------------------------

FAKE_PROVIDER = '''
from tests.standin_provider import StandInProvider

class FakeProvider(StandInProvider):
    name = "fake"
    def __init__(self, progress):
        self.progress = progress
    def coverage(self, behaviors):
        return {b: "a fake cluster has no KEP-5359 build" if b == "WorkloadControlledSwap" else None for b in behaviors}
    def prepare(self, behaviors):
        for b in behaviors:
            self.progress(f"creating the {b} cluster")
    def node_name(self, behavior):
        return "node-" + behavior.lower()

def pytest_ksc_make_provider(config):  # the suite's hook: this plugin (-p fake) offers the provider
    from e2e.plugin.state import progress_for

    return FakeProvider(progress_for(config, "fake"))
'''

CORE_TEST = '''
import pytest

def test_claim(swap_node):
    pass

@pytest.mark.needs_behavior("LimitedSwap")
def test_old(swap_node):
    pytest.skip("needs kubelet >= 9.99; node runs v1.37.1")
'''


MODULES = sorted({m for modules in verdict.REQUIRED_CHECKS.values() for m in modules})
N = len(MODULES)  # each module of the fake suite has a test of every behavior; the fake offers NoSwap and LimitedSwap


@pytest.fixture
def gated_suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    return the_suite(pytester, monkeypatch, fake=FAKE_PROVIDER, **{m: CORE_TEST for m in MODULES})


def run(suite: pytest.Pytester, *args: str):
    from tests.test_bad_inputs import kubeconfig_for

    kubeconfig = kubeconfig_for(suite.path / "kubeconfig", "https://127.0.0.1:9")  # read, never asked: the fake provides
    result = suite.runpytest_subprocess("-p", "fake", "--provider=existing", f"--kubeconfig={kubeconfig}", *args)
    return result, result.stdout.str()


def test_gate_passes_a_complete_run(gated_suite: pytest.Pytester) -> None:
    result, out = run(gated_suite, "--gate", "-k", "not old")
    assert result.ret == 0, out
    assert "PASSED: every core check of every required behavior ran and passed" in out
    assert f"NoSwap: {N} passed, 0 failed, 0 skipped on fake:c/node-noswap" in out


def test_gate_fails_when_the_selected_tests_all_skip(gated_suite: pytest.Pytester) -> None:
    result, out = run(gated_suite, "--gate", "-k", "old")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, out
    assert "FAILED NoSwap: test_metrics: no test ran" in out
    assert "FAILED LimitedSwap: test_metrics: 0 passed, 0 failed, 1 skipped (needs kubelet >= 9.99" in out


def test_gate_fails_when_a_required_behavior_was_not_selected(gated_suite: pytest.Pytester) -> None:
    result, out = run(gated_suite, "--gate", "--behaviors", "NoSwap", "-k", "not old")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, out
    assert "FAILED LimitedSwap: test_cgroup_limits: no test ran" in out and "LimitedSwap: NOT SELECTED" in out
    result, out = run(gated_suite, "--gate", "--behaviors", "NoSwap", "--gate-behaviors", "NoSwap", "-k", "not old")
    assert result.ret == 0, out


def test_without_the_gate_skips_are_reported_not_failed(gated_suite: pytest.Pytester) -> None:
    result, out = run(gated_suite)
    assert result.ret == 0, out
    assert f"LimitedSwap: {N} passed, 0 failed, {N} skipped on fake:c/node-limitedswap" in out
    assert f"{N} skipped: needs kubelet >= 9.99; node runs v1.37.1" in out
    assert "WorkloadControlledSwap: NOT COVERED: a fake cluster has no KEP-5359 build" in out


EVICTION_TEST = '''
import pytest

@pytest.mark.needs_behavior("NoSwap", "LimitedSwap")
def test_eviction(swap_node, swap_provider):
    pytest.skip(f"the {swap_provider.name} provider cannot set a kubelet's eviction thresholds for one test")
'''

RESIZE_TEST = '''
import pytest

@pytest.mark.needs_behavior("NoSwap", "LimitedSwap")
@pytest.mark.min_kubernetes("9.99")
def test_resize(swap_node):
    pass
'''


def test_gate_fails_when_eviction_could_not_be_tested(gated_suite: pytest.Pytester) -> None:
    gated_suite.makepyfile(test_eviction=EVICTION_TEST)
    result, out = run(gated_suite, "--gate", "-k", "not old")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, out
    assert ("FAILED LimitedSwap: test_eviction: 0 passed, 0 failed, 1 skipped (could not test: the fake provider"
            " cannot set a kubelet's eviction thresholds for one test)") in out


def test_gate_accepts_the_node_fixtures_version_skip_in_a_required_module(gated_suite: pytest.Pytester) -> None:
    gated_suite.makepyfile(test_resize=RESIZE_TEST)
    result, out = run(gated_suite, "--gate", "-k", "not old")
    assert result.ret == 0, out
    assert "1 skipped: needs kubelet >= 9.99; node node-limitedswap runs v1.37.1" in out
    assert "PASSED" in out


RECORDING_TEST = '''
from e2e.record import Recorder, Series

def test_records(swap_node, request):
    recorder = Recorder(request.node.user_properties)
    recorder.series(Series("pod/stress", [0.0, 1.0], [1 << 20, 2 << 20], [0, 1 << 20], 2 << 20, 1 << 20))
    assert recorder.check("memory.swap.max of stress", "1048576", "1048576" if swap_node.behavior == "LimitedSwap" else "0",
                          "request 1Mi")
'''


def test_a_run_writes_its_report_even_from_xdist_workers(gated_suite: pytest.Pytester) -> None:
    gated_suite.makepyfile(test_recording=RECORDING_TEST)
    result, out = run(gated_suite, "-n", "2", "-k", "records", "--results-dir", "out")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, out  # NoSwap reads 0 where 1048576 is expected
    assert "conformance matrix" in out and "test_recording::test_records  ✗ 1 failed  ✓ 1" in out
    results = gated_suite.path / "out"
    assert f"report: {results / 'report.html'}" in out
    markdown = (results / "matrix.md").read_text()
    assert "| test_recording::test_records | memory.swap.max of stress | 1048576 | request 1Mi | 0 | ✗ failed |" in markdown
    assert len(list((results / "plots").glob("*.png"))) == 2


@pytest.mark.parametrize("workers", [["-n", "2"], []], ids=["xdist", "one-process"])
def test_progress_reaches_the_terminal(gated_suite: pytest.Pytester, workers: list[str]) -> None:
    # In one process, creation runs inside a fixture, where pytest captures output (a version
    # that wrote past the capture only under xdist showed nothing here).
    result, out = run(gated_suite, *workers, "-k", "not old")
    assert result.ret == 0, out
    # written once (one process prepares for the run), shown live
    assert out.count("fake: creating the LimitedSwap cluster") == 1, out
    assert "kube-swap-conformance [" in out


def test_unknown_gate_behavior_is_a_usage_error(gated_suite: pytest.Pytester) -> None:
    result = gated_suite.runpytest_subprocess("--gate-behaviors", "Limited")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--gate-behaviors: unknown swap behavior 'Limited'*"])
