"""The run's shared bookkeeping (clusters/shared.py) that xdist workers coordinate through."""

from __future__ import annotations

from pathlib import Path

from clusters import shared


def test_creation_is_recorded_once_and_its_failure_reaches_every_caller(tmp_path: Path) -> None:
    calls = []
    assert shared.get_or_create(tmp_path, "c", lambda: calls.append(1) or {"x": 1}) == {"x": 1}
    assert shared.get_or_create(tmp_path, "c", lambda: calls.append(2) or {"x": 2}) == {"x": 1}
    assert calls == [1] and shared.recorded_error(tmp_path, "c") is None

    def fails() -> dict:
        raise RuntimeError("kind said no")

    for _ in range(2):
        try:
            shared.get_or_create(tmp_path, "d", fails)
        except (RuntimeError, shared.SharedCreationError) as error:
            assert "kind said no" in str(error)
    assert "kind said no" in (shared.recorded_error(tmp_path, "d") or "")
