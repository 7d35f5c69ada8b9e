"""The run's lock: a `runs_alone` test never overlaps another test, and cannot be starved."""

from __future__ import annotations

import multiprocessing
import time
from pathlib import Path

import pytest

from e2e import alone
from e2e.alone import AloneTimeout, turn


def _hold(run_dir: str, is_alone: bool, seconds: float, log: str, name: str, start_after: float) -> None:
    time.sleep(start_after)
    with turn(Path(run_dir), is_alone):
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
        assert queue.get(timeout=5) == "waited 0.3s for the tests running now to finish, to run alone"


def test_the_wait_for_runs_first_tests_is_bounded_and_names_what_did_not_end(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(alone, "POLL_SECONDS", 0.02)
    alone.mark_ended(tmp_path, "e2e/test_eviction.py::test_x[NoSwap]")
    assert alone.wait_until_ended(tmp_path, ["e2e/test_eviction.py::test_x[NoSwap]"], seconds=5) == []
    assert alone.wait_until_ended(tmp_path, ["e2e/test_eviction.py::test_x[NoSwap]", "t::other"],
                                  seconds=0.1) == ["t::other"]
