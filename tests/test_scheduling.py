"""Under -n, each worker takes one behavior's tests where each behavior has a node of its own, and
takes another's from the back once its own are handed out."""

from __future__ import annotations

from pathlib import Path

import pytest

from e2e.plugin.workers import behavior_in_nodeid, pick, pytest_xdist_make_scheduler
from tests.suite_project import the_suite

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("nodeid, behavior", [
    ("e2e/test_cgroup_limits.py::test_memory_swap_max[LimitedSwap-burstable-request-below-limit]", "LimitedSwap"),
    ("e2e/test_eviction.py::test_memory_pressure_evicts_in_the_kubelets_order[NoSwap]", "NoSwap"),
    ("e2e/test_x.py::test_y[best-effort-NoSwap]", "NoSwap"),
    ("e2e/test_cgroup_limits.py::test_limited_swap_shapes_actually_differ", None),
    ("e2e/test_x.py::test_y[NoSwapish]", None),
])
def test_the_behavior_in_a_test_id(nodeid: str, behavior: str | None) -> None:
    assert behavior_in_nodeid(nodeid) == behavior


def _config(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, *args: str) -> pytest.Config:
    pytester.makeconftest((REPO / "conftest.py").read_text())
    monkeypatch.syspath_prepend(str(REPO))
    return pytester.parseconfigure(*args)


PENDING = ["e2e/a.py::t[NoSwap]", "e2e/a.py::t[LimitedSwap]", "e2e/b.py::u[NoSwap-x]", "e2e/b.py::v",
           "e2e/b.py::u[LimitedSwap-x]", "e2e/c.py::w[LimitedSwap]"]


def test_a_worker_takes_its_behaviors_tests_and_those_of_none_from_the_front() -> None:
    assert pick(PENDING, {"NoSwap"}, 2) == [0, 2]
    assert pick(PENDING, {"NoSwap"}, 5) == [0, 2, 3]
    assert pick(PENDING, {"LimitedSwap"}, 1) == [1]


def test_once_its_own_are_handed_out_a_worker_takes_anothers_from_the_back() -> None:
    rest = ["e2e/a.py::t[LimitedSwap]", "e2e/b.py::u[LimitedSwap-x]", "e2e/c.py::w[LimitedSwap]"]
    assert pick(rest, {"NoSwap"}, 2) == [2, 1]
    assert pick([], {"NoSwap"}, 2) == []


@pytest.mark.parametrize("args", [("--provider", "vm", "--dist", "load"), ("--provider", "kind", "--dist", "loadfile")])
def test_the_vm_provider_and_an_explicit_dist_keep_xdists_scheduling(pytester: pytest.Pytester,
                                                                      monkeypatch: pytest.MonkeyPatch,
                                                                      args: tuple[str, ...]) -> None:
    config = _config(pytester, monkeypatch, "-p", "xdist", *args)
    assert pytest_xdist_make_scheduler(config, None) is None


WORKERS = """
import os
import time
import pytest

# NoSwap: 3 quick tests; LimitedSwap: 6 slow ones (collected in this order: the sort is by behavior)
@pytest.mark.parametrize("behavior, n", [("NoSwap", n) for n in range(3)] + [("LimitedSwap", n) for n in range(6)])
def test_one(behavior, n):
    with open(os.environ["KSC_TEST_LOG"], "a") as f:
        f.write(f"{behavior} {n} {os.environ['PYTEST_XDIST_WORKER']}\\n")
    time.sleep(0.8 if behavior == "LimitedSwap" else 0)
"""


def test_under_xdist_each_behavior_starts_on_a_worker_of_its_own_and_the_idle_one_takes_the_last(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    the_suite(pytester, monkeypatch, pyproject=False, test_workers=WORKERS)
    log = pytester.path / "workers.log"
    monkeypatch.setenv("KSC_TEST_LOG", str(log))
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    result = pytester.runpytest_subprocess("-n", "2", "-p", "no:cacheprovider", "--provider", "kind")
    assert result.ret == 0, result.stdout.str()
    ran = [line.split() for line in log.read_text().splitlines()]
    worker = {(b, int(n)): w for b, n, w in ran}
    no_swap = {w for (b, _), w in worker.items() if b == "NoSwap"}
    assert len(no_swap) == 1, ran
    assert worker[("LimitedSwap", 0)] not in no_swap, f"the LimitedSwap worker starts with its first test: {ran}"
    taken = sorted(n for (b, n), w in worker.items() if b == "LimitedSwap" and w in no_swap)
    assert taken and taken == list(range(6 - len(taken), 6)), \
        f"the NoSwap worker, once done, takes LimitedSwap tests from the back: {ran}"
