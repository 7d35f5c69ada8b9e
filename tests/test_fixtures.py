"""The suite's pytest wiring, run as a user would run it (pytest in a subprocess)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.suite_project import the_suite

pytest_plugins = ["pytester"]

TESTS = """
import pytest

def test_any(swap_node):
    pass

@pytest.mark.needs_behavior("LimitedSwap")
def test_limited_only(swap_node):
    pass

def test_named(limited_swap_node):
    pass
"""


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    return the_suite(pytester, monkeypatch, test_swap=TESTS)


def test_behaviors_parametrize_test_ids(suite: pytest.Pytester) -> None:
    result = suite.runpytest_subprocess("--collect-only", "-q")
    assert result.ret == 0
    ids = {line for line in result.stdout.lines if line.startswith("test_swap.py::")}
    # Tests are grouped by behavior (one cluster at a time), so compare as a set.
    assert ids == {
        "test_swap.py::test_any[NoSwap]",
        "test_swap.py::test_any[LimitedSwap]",
        "test_swap.py::test_any[WorkloadControlledSwap]",
        "test_swap.py::test_limited_only[LimitedSwap]",
        "test_swap.py::test_named",
    }
    assert "test_limited_only[NoSwap]" not in result.stdout.str()


def test_unknown_behavior_is_a_usage_error(suite: pytest.Pytester) -> None:
    result = suite.runpytest_subprocess("--behaviors", "NoSwap,Limited")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--behaviors: unknown swap behavior 'Limited': choose from NoSwap, LimitedSwap, WorkloadControlledSwap*"])


def test_missing_kubeconfig_is_a_usage_error(suite: pytest.Pytester, tmp_path: Path) -> None:
    result = suite.runpytest_subprocess("--provider=existing", f"--kubeconfig={tmp_path / 'nope'}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*kubeconfig*nope does not exist*"])


def test_failed_preflight_is_one_message_and_creates_nothing(suite: pytest.Pytester) -> None:
    # A kind binary that does not exist fails preflight on any host, whatever else it has.
    result = suite.runpytest_subprocess("--provider", "kind", "--kind-bin", "/nonexistent/kind")
    assert result.ret == 3
    output = result.stdout.str() + result.stderr.str()
    assert output.count("preflight failed (") == 1
    assert "[FAIL] kind: --kind-bin /nonexistent/kind does not exist" in output
    assert "fix: install it: go install sigs.k8s.io/kind@" in output
    assert "passed" not in output and "error" not in output.lower().replace("preflight", "")


def test_unreachable_cluster_is_one_message(suite: pytest.Pytester) -> None:
    # Port 9 on loopback: nothing listens there, so every connection is refused at once.
    kubeconfig = suite.path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:9', insecure-skip-tls-verify: true}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\nusers: [{name: u, user: {token: t}}]\n"
    )
    # --opt=value: a bare path argument would make pytest pick another rootdir.
    result = suite.runpytest_subprocess("--provider=existing", f"--kubeconfig={kubeconfig}")
    assert result.ret == 3
    output = result.stdout.str() + result.stderr.str()
    assert "[FAIL] cluster:" in output and "Connection refused" in output and "kubectl --kubeconfig" in output


ORDERED = """
import pytest

def test_a(swap_node):
    pass

@pytest.mark.runs_first("needs the node without other tests' pods")
def test_b(swap_node):
    pass

def test_c(swap_node):
    pass

@pytest.mark.runs_alone("drives the node")
def test_d(swap_node):
    pass
"""


def test_runs_first_then_runs_alone_tests_lead_their_behaviors_block(suite: pytest.Pytester) -> None:
    suite.makepyfile(test_order=ORDERED)
    result = suite.runpytest_subprocess("--collect-only", "-q", "--behaviors", "NoSwap,LimitedSwap")
    assert result.ret == 0, result.stdout.str()
    ids = [line for line in result.stdout.lines if line.startswith("test_order.py::")]
    assert ids == [f"test_order.py::test_{t}[{b}]" for b in ("NoSwap", "LimitedSwap") for t in "bdac"], ids


ALONE_AND_TOGETHER = """
import pytest

@pytest.mark.runs_alone("loads the node")
def test_alone():
    pass

def test_together():
    pass
"""


def test_every_test_records_its_turn_for_the_timeline(suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    from bench import junit_times

    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)  # when the self-tests run under -n
    suite.makepyfile(test_turns=ALONE_AND_TOGETHER)
    result = suite.runpytest_subprocess("test_turns.py", "--junitxml", "junit.xml", "-p", "no:cacheprovider")
    assert result.ret == 0, result.stdout.str()
    turns = junit_times.turns(suite.path / "junit.xml")
    assert [(t["worker"], t["alone"]) for t in turns] == [("main", True), ("main", False)]
    assert all(t["start"] <= t["start"] + t["waited"] <= t["end"] for t in turns), turns


FIRST_AND_OTHERS = """
import time
from pathlib import Path

import pytest

LOG = Path(__file__).parent / "order.log"

def _log(what):
    with LOG.open("a") as f:
        f.write(f"{what} {time.time()}\\n")

@pytest.mark.runs_first("needs the node without other tests' pods")
def test_first():
    _log("first-start")
    time.sleep(4)
    _log("first-end")

@pytest.mark.parametrize("n", range(4))
def test_other(n):
    _log(f"other{n}-start")
"""


def test_under_xdist_a_runs_first_test_ends_before_its_behaviors_other_tests_start(suite: pytest.Pytester) -> None:
    # With -n 2 the other worker gets test_other[0] at once; it must wait for test_first to end.
    suite.makepyfile(test_first_and_others=FIRST_AND_OTHERS)
    result = suite.runpytest_subprocess("test_first_and_others.py", "-n", "2", "-p", "no:cacheprovider")
    assert result.ret == 0, result.stdout.str()
    times = dict(line.split() for line in (suite.path / "order.log").read_text().splitlines())
    first_end = float(times.pop("first-end"))
    assert float(times.pop("first-start")) < first_end
    assert len(times) == 4 and all(float(t) >= first_end for t in times.values()), (first_end, times)


def test_a_runs_first_test_that_is_deselected_holds_nothing_back(suite: pytest.Pytester) -> None:
    suite.makepyfile(test_first_and_others=FIRST_AND_OTHERS)
    # Held back for it, the other tests would wait an hour: the subprocess would be killed.
    result = suite.runpytest_subprocess("test_first_and_others.py", "-n", "2", "-k", "other", "-p", "no:cacheprovider",
                                        timeout=120)
    assert result.ret == 0, result.stdout.str()


NO_TURN_NEEDED = """
import pytest

@pytest.mark.needs_behavior("WorkloadControlledSwap")
def test_unselected(swap_node):
    pass

@pytest.mark.touches_no_node("computes from figures the provider has")
def test_computes():
    pass

def test_together():
    pass
"""


def test_a_test_that_skips_for_its_behavior_or_touches_no_node_takes_no_turn(suite: pytest.Pytester,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    # A turn is a wait behind the tests that run alone (kind run 19: 183 s to skip, 114 s to compute).
    from bench import junit_times

    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    suite.makepyfile(test_turns=NO_TURN_NEEDED)
    result = suite.runpytest_subprocess("test_turns.py", "--behaviors", "NoSwap", "--junitxml", "junit.xml",
                                        "-p", "no:cacheprovider", "-rs")
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=2, skipped=1)
    result.stdout.fnmatch_lines(["*WorkloadControlledSwap not selected (--behaviors NoSwap)*"])
    assert len(junit_times.turns(suite.path / "junit.xml")) == 1  # test_together's


CALLING = """
from e2e.observe import CALLS

def test_calls():
    CALLS["exec"] += 2  # what NodeObserver.exec counts
    CALLS["stats/summary"] += 1

def test_quiet():
    pass
"""


def test_what_a_test_asked_of_the_nodes_goes_into_its_report(suite: pytest.Pytester) -> None:
    from bench import junit_times

    suite.makepyfile(test_calling=CALLING)
    result = suite.runpytest_subprocess("test_calling.py", "--junitxml", "junit.xml", "-p", "no:cacheprovider")
    assert result.ret == 0, result.stdout.str()
    assert junit_times.calls(suite.path / "junit.xml") == {"test_calling": {"exec": 2, "stats/summary": 1}}
