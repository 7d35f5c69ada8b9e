"""bench.junit_times reads a run's turns back from its JUnit XML: what the tests that run alone
held and what each worker waited."""

from __future__ import annotations

import json
from pathlib import Path

from bench import junit_times
from e2e.record import TURN_PROPERTY


def _junit(tmp_path: Path, turns: list[dict]) -> Path:
    cases = "".join(
        f'<testcase classname="e2e.test_x" name="t{i}" time="1"><properties>'
        f'<property name="{TURN_PROPERTY}" value=\'{json.dumps(t)}\'/></properties></testcase>'
        for i, t in enumerate(turns))
    path = tmp_path / "junit.xml"
    path.write_text(f'<testsuites><testsuite name="pytest">{cases}</testsuite></testsuites>')
    return path


def test_the_time_alone_and_the_waits_come_from_the_turns(tmp_path: Path) -> None:
    # gw0 runs a shared test 0-100; gw1 waits for it (0-100) and runs alone 100-300; gw0 waits
    # for that (100-300) and runs a shared test 300-400
    path = _junit(tmp_path, [
        {"worker": "gw0", "alone": False, "start": 1000.0, "waited": 0.0, "end": 1100.0},
        {"worker": "gw1", "alone": True, "start": 1000.0, "waited": 100.0, "end": 1300.0},
        {"worker": "gw0", "alone": False, "start": 1100.0, "waited": 200.0, "end": 1400.0},
    ])
    assert junit_times.turn_summary(junit_times.turns(path)) == [
        "400 s from the first test's turn to the last; 1 tests ran alone",
        "  on the host (nothing else ran): 200 s (50 %)",
        "  gw0: 2 tests, ran 200 s, waited 200 s for a turn",
        "  gw1: 1 tests, ran 200 s, waited 100 s for a turn",
    ]


def test_alone_on_a_node_and_on_the_host_are_told_apart(tmp_path: Path) -> None:
    path = _junit(tmp_path, [
        {"worker": "gw0", "alone": True, "scope": "NoSwap", "start": 0.0, "waited": 0.0, "end": 300.0},
        {"worker": "gw1", "alone": True, "scope": "LimitedSwap", "start": 0.0, "waited": 0.0, "end": 200.0},
        {"worker": "gw1", "alone": True, "scope": "host", "start": 200.0, "waited": 100.0, "end": 400.0},
    ])
    assert junit_times.turn_summary(junit_times.turns(path))[:4] == [
        "400 s from the first test's turn to the last; 3 tests ran alone",
        "  on LimitedSwap (nothing else on that node): 200 s (50 %)",
        "  on NoSwap (nothing else on that node): 300 s (75 %)",
        "  on the host (nothing else ran): 100 s (25 %)",
    ]


def test_a_run_without_turns_says_so(tmp_path: Path) -> None:
    assert junit_times.turn_summary(junit_times.turns(_junit(tmp_path, []))) == [
        "no turns recorded (a run before the suite recorded them)"]
