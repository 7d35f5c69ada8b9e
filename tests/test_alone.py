"""The run's locks: a `runs_alone` test never overlaps another test on its node (with host=True,
none at all), tests on another node go on, nothing is starved, and two bursts never overlap."""

from __future__ import annotations

import multiprocessing
import time
from pathlib import Path

import pytest

from e2e import alone
from e2e.alone import AloneTimeout, turn


def _hold(run_dir: str, is_alone: bool, seconds: float, log: str, name: str, start_after: float,
          node: str | None = None, host: bool = False) -> None:
    time.sleep(start_after)
    with turn(Path(run_dir), is_alone, node, host=host):
        with open(log, "a") as f:
            f.write(f"{time.monotonic():.3f} start {name}\n")
        time.sleep(seconds)
        with open(log, "a") as f:
            f.write(f"{time.monotonic():.3f} end {name}\n")


def _intervals(log: Path) -> dict[str, tuple[float, float]]:
    spans: dict[str, list[float]] = {}
    for line in log.read_text().splitlines():
        t, _, name = line.split()
        spans.setdefault(name, []).append(float(t))
    return {name: (a, b) for name, (a, b) in spans.items()}


def test_an_alone_test_overlaps_no_other_and_is_not_starved(tmp_path: Path) -> None:
    log = tmp_path / "log"
    ctx = multiprocessing.get_context("fork")
    # Two workers keep taking shared turns back to back; the alone test asks in the middle.
    jobs = [("s1", False, 0.4, 0.0), ("s2", False, 0.4, 0.2), ("s3", False, 0.4, 0.45), ("s4", False, 0.4, 0.65),
            ("alone", True, 0.5, 0.3), ("s5", False, 0.4, 0.9), ("s6", False, 0.4, 1.1)]
    procs = [ctx.Process(target=_hold, args=(str(tmp_path), a, s, str(log), n, d)) for n, a, s, d in jobs]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    spans = _intervals(log)
    a0, a1 = spans.pop("alone")
    for name, (s0, s1) in spans.items():
        assert s1 <= a0 or s0 >= a1, f"{name} {s0}-{s1} overlapped the alone test {a0}-{a1}"
    # Shared turns asked for after the alone test waited behind it: no starvation.
    assert spans["s5"][0] >= a1 and spans["s6"][0] >= a1
    shared = [spans[n] for n in ("s1", "s2")]
    assert any(s0 < b1 and b0 < s1 for (s0, s1) in shared for (b0, b1) in shared if (s0, s1) != (b0, b1)), \
        "shared turns must overlap each other"


def test_waiting_is_bounded_with_a_message(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(alone, "POLL_SECONDS", 0.05)
    with turn(tmp_path, alone=False):
        ctx = multiprocessing.get_context("fork")
        queue = ctx.Queue()

        def try_alone() -> None:
            try:
                with turn(tmp_path, alone=True, seconds=0.3):
                    queue.put("got it")
            except AloneTimeout as error:
                queue.put(str(error))

        p = ctx.Process(target=try_alone)
        p.start()
        p.join(10)
        assert queue.get(timeout=5) == "waited 0.3s for the tests running on the host now to finish, to run alone"


def test_the_wait_for_runs_first_tests_is_bounded_and_names_what_did_not_end(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(alone, "POLL_SECONDS", 0.02)
    alone.mark_ended(tmp_path, "e2e/test_eviction.py::test_x[NoSwap]")
    assert alone.wait_until_ended(tmp_path, ["e2e/test_eviction.py::test_x[NoSwap]"], seconds=5) == []
    assert alone.wait_until_ended(tmp_path, ["e2e/test_eviction.py::test_x[NoSwap]", "t::other"],
                                  seconds=0.1) == ["t::other"]


def _run(tmp_path: Path, jobs: list[tuple]) -> dict[str, tuple[float, float]]:
    log = tmp_path / "log"
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_hold, args=(str(tmp_path), a, s, str(log), n, d, node, host))
             for n, a, s, d, node, host in jobs]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    return _intervals(log)


def _overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def test_a_test_alone_on_its_node_lets_the_other_nodes_tests_run(tmp_path: Path) -> None:
    spans = _run(tmp_path, [
        ("a-shared", False, 0.4, 0.0, "NoSwap", False),
        ("a-alone", True, 1.0, 0.2, "NoSwap", False),
        ("a-later", False, 0.2, 0.4, "NoSwap", False),
        ("b-1", False, 0.4, 0.5, "LimitedSwap", False),
        ("b-2", False, 0.4, 0.7, "LimitedSwap", False),
    ])
    for name in ("a-shared", "a-later"):
        assert not _overlap(spans[name], spans["a-alone"]), spans
    assert spans["a-later"][0] >= spans["a-alone"][1], "a shared test asked for later waits behind it"
    assert _overlap(spans["b-1"], spans["a-alone"]) and _overlap(spans["b-2"], spans["a-alone"]), \
        f"tests on the other node must go on: {spans}"


def test_a_test_alone_on_the_host_overlaps_no_test_on_any_node(tmp_path: Path) -> None:
    spans = _run(tmp_path, [
        ("a-1", False, 0.4, 0.0, "NoSwap", False),
        ("b-1", False, 0.4, 0.1, "LimitedSwap", False),
        ("host", True, 0.6, 0.2, "LimitedSwap", True),
        ("a-2", False, 0.3, 0.4, "NoSwap", False),
        ("b-alone", True, 0.3, 0.5, "LimitedSwap", False),
    ])
    host = spans.pop("host")
    for name, span in spans.items():
        assert not _overlap(span, host), f"{name} {span} overlapped the host's alone test {host}"


def _burst(run_dir: str, log: str, name: str) -> None:
    with alone.burst(Path(run_dir)):
        with open(log, "a") as f:
            f.write(f"{time.monotonic():.3f} start {name}\n")
        time.sleep(0.3)
        with open(log, "a") as f:
            f.write(f"{time.monotonic():.3f} end {name}\n")


def test_two_bursts_never_overlap(tmp_path: Path) -> None:
    log = tmp_path / "log"
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_burst, args=(str(tmp_path), str(log), n)) for n in ("x", "y", "z")]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    spans = list(_intervals(log).values())
    assert len(spans) == 3
    assert not any(_overlap(a, b) for i, a in enumerate(spans) for b in spans[i + 1:]), spans


def test_a_turn_says_what_it_holds_alone(tmp_path: Path) -> None:
    with turn(tmp_path, False, "NoSwap") as held:
        assert held is None
    with turn(tmp_path, True, "NoSwap") as held:
        assert held == "NoSwap"
    with turn(tmp_path, True, "NoSwap", host=True) as held:
        assert held == alone.HOST
    with turn(tmp_path, True) as held:
        assert held == alone.HOST
