"""What a test records for the report besides pass/fail: the checks it made (expected value, the
oracle inputs behind it, observed value) and the memory series sampled while it ran.

Records travel as pytest user properties (JSON strings), so pytest-xdist hands them from the
workers to the controller with the reports, and the JUnit XML carries them too."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

CHECK_PROPERTY = "ksc_check"
SERIES_PROPERTY = "ksc_series"
PHASE_PROPERTY = "ksc_phase"  # {"phase": what was done, "t": seconds since the recorder was made}; for timing runs
# {"worker", "alone", "scope", "start", "waited", "end"}: when a test asked for its turn (e2e/alone.py), how
# long it waited for it and when it gave it back (epoch seconds), so a run's timeline can be drawn
TURN_PROPERTY = "ksc_turn"
CALLS_PROPERTY = "ksc_node_calls"  # {kind: count}: what the test asked of the nodes (observe.CALLS)


@dataclass(frozen=True)
class Check:
    name: str  # what was compared, e.g. "memory.swap.max of stress"
    expected: str
    observed: str
    inputs: str = ""  # what the expectation was computed from (the oracle's inputs)
    ok: bool = True


@dataclass(frozen=True)
class Series:
    """One container's memory over time, read from its cgroup on the node."""

    name: str  # "<pod>/<container>"
    t: list[float] = field(default_factory=list)  # seconds since the first sample
    current: list[int] = field(default_factory=list)  # memory.current
    swap: list[int | None] = field(default_factory=list)  # memory.swap.current (None: no swap accounting)
    memory_max: int | None = None  # None: "max" (unlimited)
    swap_max: int | None = None
    ended: str = ""  # how the container ended, e.g. "OOMKilled (exit 137)"; "" if still running
    ended_at: float | None = None  # seconds since the first sample: finishedAt, whole seconds
    oom_kills: int | None = None  # memory.events oom_kill in the container's cgroup (None: never read)

    @property
    def memory_max_as_read(self) -> int | str:
        """memory.max as the cgroup file reads it: "max" where unlimited."""
        return "max" if self.memory_max is None else self.memory_max

    @property
    def swap_max_as_read(self) -> int | str:
        """memory.swap.max as the cgroup file reads it: "max" where unlimited."""
        return "max" if self.swap_max is None else self.swap_max


class Recorder:
    """Appends records to a test item's user properties."""

    def __init__(self, properties: list[tuple[str, object]]):
        self.properties = properties
        self.started = time.monotonic()

    def check(self, name: str, expected: Any, observed: Any, inputs: str = "", ok: bool | None = None) -> bool:
        """Record a comparison and return whether it held (equality unless `ok` is given)."""
        ok = (expected == observed) if ok is None else ok
        self.properties.append((CHECK_PROPERTY, json.dumps(asdict(Check(name, str(expected), str(observed), inputs, ok)))))
        return ok

    def series(self, series: Series) -> None:
        self.properties.append((SERIES_PROPERTY, json.dumps(asdict(series))))

    def phase(self, what: str) -> None:
        """Mark that `what` is done, with the time since this test's recorder was made: the
        JUnit XML then says where a slow test spends its time."""
        self.properties.append((PHASE_PROPERTY, json.dumps({"phase": what, "t": round(time.monotonic() - self.started, 1)})))


def records(properties: Iterable[tuple[str, object]]) -> tuple[list[Check], list[Series]]:
    """The checks and series among a report's user properties, each once, in recorded order."""
    checks: list[Check] = []
    series: list[Series] = []
    seen: set[tuple[str, str]] = set()
    for key, value in properties:
        if key not in (CHECK_PROPERTY, SERIES_PROPERTY) or (key, str(value)) in seen:
            continue
        seen.add((key, str(value)))
        data = json.loads(str(value))
        if key == CHECK_PROPERTY:
            checks.append(Check(**data))
        else:
            series.append(Series(**data))
    return checks, series
