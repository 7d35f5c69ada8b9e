"""Under -n, each worker takes one behavior's tests where each behavior has a node of its own."""

from __future__ import annotations

from pathlib import Path

import pytest

from e2e.plugin.nodes import behavior_in_nodeid, pytest_xdist_make_scheduler

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


def test_a_worker_takes_one_behaviors_tests(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    config = _config(pytester, monkeypatch, "--provider", "kind", "-p", "xdist", "--tx", "2*popen", "--dist", "load")
    scheduler = pytest_xdist_make_scheduler(config, None)
    assert scheduler is not None
    ids = ["e2e/a.py::t[NoSwap]", "e2e/a.py::t[LimitedSwap]", "e2e/b.py::u[NoSwap-x]", "e2e/b.py::u[LimitedSwap-x]",
           "e2e/b.py::v"]
    assert [scheduler._split_scope(i) for i in ids] == ["NoSwap", "LimitedSwap", "NoSwap", "LimitedSwap", "e2e/b.py"]


@pytest.mark.parametrize("args", [("--provider", "vm", "--dist", "load"), ("--provider", "kind", "--dist", "loadfile")])
def test_the_vm_provider_and_an_explicit_dist_keep_xdists_scheduling(pytester: pytest.Pytester,
                                                                      monkeypatch: pytest.MonkeyPatch,
                                                                      args: tuple[str, ...]) -> None:
    config = _config(pytester, monkeypatch, "-p", "xdist", *args)
    assert pytest_xdist_make_scheduler(config, None) is None


WORKERS = """
import os
import pytest

@pytest.mark.parametrize("behavior", ["NoSwap", "LimitedSwap"])
@pytest.mark.parametrize("n", range(6))
def test_one(n, behavior, tmp_path_factory):
    with open(os.environ["KSC_TEST_LOG"], "a") as f:
        f.write(f"{behavior} {os.environ['PYTEST_XDIST_WORKER']}\\n")
"""


def test_under_xdist_each_behavior_runs_on_one_worker_and_the_two_on_two(pytester: pytest.Pytester,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makeconftest((REPO / "conftest.py").read_text())
    pytester.makepyfile(test_workers=WORKERS)
    log = pytester.path / "workers.log"
    monkeypatch.setenv("KSC_TEST_LOG", str(log))
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    result = pytester.runpytest_subprocess("-n", "2", "-p", "no:cacheprovider", "--provider", "kind")
    assert result.ret == 0, result.stdout.str()
    seen: dict[str, set[str]] = {}
    for line in log.read_text().splitlines():
        behavior, worker = line.split()
        seen.setdefault(behavior, set()).add(worker)
    assert all(len(workers) == 1 for workers in seen.values()), seen
    assert seen["NoSwap"] != seen["LimitedSwap"], seen
