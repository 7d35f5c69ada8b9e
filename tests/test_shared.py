"""The run's shared bookkeeping (clusters/shared.py) that xdist workers coordinate through."""

from __future__ import annotations

from pathlib import Path

from clusters import shared


def test_a_behavior_is_finished_when_every_test_collected_for_it_is(tmp_path: Path) -> None:
    shared.record_tests(tmp_path, "NoSwap", ["e2e/a.py::t[NoSwap]", "e2e/b.py::t[NoSwap]"])
    shared.record_tests(tmp_path, "NoSwap", ["ignored: the first process to collect wins"])
    assert shared.unfinished(tmp_path, "NoSwap") == ["e2e/a.py::t[NoSwap]", "e2e/b.py::t[NoSwap]"]
    shared.record_finished(tmp_path, "e2e/b.py::t[NoSwap]")
    shared.record_finished(tmp_path, "e2e/a.py::t[LimitedSwap]")  # another behavior's: no help
    assert shared.unfinished(tmp_path, "NoSwap") == ["e2e/a.py::t[NoSwap]"]
    shared.record_finished(tmp_path, "e2e/a.py::t[NoSwap]")
    assert shared.unfinished(tmp_path, "NoSwap") == []
    assert shared.unfinished(tmp_path, "LimitedSwap") == []  # nothing collected for it: nothing to wait for


def test_creation_is_recorded_once_and_its_failure_reaches_every_caller(tmp_path: Path) -> None:
    calls = []
    assert shared.get_or_create(tmp_path, "c", lambda: calls.append(1) or {"x": 1}) == {"x": 1}
    assert shared.get_or_create(tmp_path, "c", lambda: calls.append(2) or {"x": 2}) == {"x": 1}
    assert calls == [1] and shared.recorded_ok(tmp_path, "c")

    def fails() -> dict:
        raise RuntimeError("kind said no")

    for _ in range(2):
        try:
            shared.get_or_create(tmp_path, "d", fails)
        except (RuntimeError, shared.SharedCreationError) as error:
            assert "kind said no" in str(error)
    assert not shared.recorded_ok(tmp_path, "d") and "kind said no" in shared.recorded_error(tmp_path, "d")
