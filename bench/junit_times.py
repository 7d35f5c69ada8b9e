"""Where a run of the suite spent its time, from its JUnit XML (not a test).

    python -m bench.junit_times results/junit.xml [--slowest 10]

Prints the time per module (summed over tests, so with -n N it exceeds the wall time), the
slowest tests, and for each of those the phases it recorded (e2e/record.py Recorder.phase:
"<pod> running", the eviction test's steps), so a slow test says where its time went; then the
run's turns (e2e/alone.py, recorded as TURN_PROPERTY): how long the tests that run alone held the
whole run, and how long each worker waited for a turn; and what each module asked of the nodes
(CALLS_PROPERTY: execs, node proxy scrapes, pods created)."""

from __future__ import annotations

import argparse
import collections
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from clusters import cli, inputs
from e2e.record import CALLS_PROPERTY, PHASE_PROPERTY, TURN_PROPERTY


class Phase(BaseModel):
    """A test's phase as e2e/record.py Recorder.phase writes it (PHASE_PROPERTY)."""

    model_config = ConfigDict(strict=True, extra="allow")
    phase: str
    t: float


class Turn(BaseModel):
    """A test's turn as e2e/plugin/nodes.py writes it (TURN_PROPERTY); "scope" since 2026-11-26."""

    model_config = ConfigDict(strict=True, extra="allow")
    worker: str
    alone: bool
    start: float
    waited: float
    end: float
    scope: str | None = None


def _report(junit: Path) -> inputs.JUnitReport:
    return inputs.read_junit(junit, "")


def _property(case: inputs.JUnitCase, name: str, model: Any, junit: Path) -> list[Any]:
    """The values of a test's property ``name`` (JSON), each parsed into ``model``; a UsageError
    naming the report, the test and the property for one that is not."""
    return [inputs.load_json(value, model, f"{junit}: {case.name}: property {name}") for value in case.values(name)]


def cases(junit: Path) -> list[tuple[float, str, str, list[dict]]]:
    """(seconds, module, test name, phases) per test case."""
    return [(case.time, case.classname.rsplit(".", 1)[-1], case.name,
             [phase.model_dump() for phase in _property(case, PHASE_PROPERTY, Phase, junit)])
            for case in _report(junit).cases]


def calls(junit: Path) -> dict[str, collections.Counter[str]]:
    """Per module, what its tests asked of the nodes (summed CALLS_PROPERTY)."""
    found: dict[str, collections.Counter[str]] = {}
    for case in _report(junit).cases:
        module = case.classname.rsplit(".", 1)[-1]
        for spent in _property(case, CALLS_PROPERTY, dict[str, int], junit):
            found.setdefault(module, collections.Counter()).update(spent)
    return found


def turns(junit: Path) -> list[dict]:
    """Each test's turn: {"worker", "alone", "scope", "start", "waited", "end"} (tests that got
    one; "scope": what an alone test held, "host" or its node, absent before 2026-11-26)."""
    return [turn.model_dump(exclude_none=True) for case in _report(junit).cases
            for turn in _property(case, TURN_PROPERTY, Turn, junit)]


def turn_summary(found: list[dict]) -> list[str]:
    """Lines that say how the run's time was shared: the span from the first test asking for its
    turn to the last giving it back, the part the tests that run alone held, by what they held
    (the host: nothing else ran; a node: nothing else on it), and per worker the time it ran
    tests and the time it waited for a turn."""
    if not found:
        return ["no turns recorded (a run before the suite recorded them)"]
    span = max(t["end"] for t in found) - min(t["start"] for t in found)
    def ran(turn: dict) -> float:
        return turn["end"] - turn["start"] - turn["waited"]

    alone = [t for t in found if t["alone"]]
    if not span:
        lines = ["no time between turns"]
    else:
        lines = [f"{span:.0f} s from the first test's turn to the last; {len(alone)} tests ran alone"]
        # Turns recorded before tests could run alone on one node held the whole host.
        for scope in sorted({t.get("scope") or "host" for t in alone}):
            held = sum(ran(t) for t in alone if (t.get("scope") or "host") == scope)
            where = "the host (nothing else ran)" if scope == "host" else f"{scope} (nothing else on that node)"
            lines.append(f"  on {where}: {held:.0f} s ({100 * held / span:.0f} %)")
    for worker in sorted({t["worker"] for t in found}):
        mine = [t for t in found if t["worker"] == worker]
        waited = sum(t["waited"] for t in mine)
        lines.append(f"  {worker}: {len(mine)} tests, ran {sum(ran(t) for t in mine):.0f} s, "
                     f"waited {waited:.0f} s for a turn")
    return lines


def parser() -> cli.Parser:
    ap = cli.Parser(prog="python -m bench.junit_times", description=__doc__.split("\n\n")[0])
    ap.add_argument("junit", type=inputs.junit_file, help="a JUnit XML report of a run of the suite")
    ap.add_argument("--slowest", type=cli.count, default=10, help="how many of the slowest tests to list (10)")
    ap.add_argument("--debug", action="store_true", help="a failure's traceback too")
    return ap


def main(argv: list[str] | None = None) -> int:
    return cli.run(_main, parser().parse_args(argv), command="bench.junit_times")


def _main(a: argparse.Namespace) -> int:
    rows = cases(a.junit)
    modules: collections.Counter[str] = collections.Counter()
    for seconds, module, _, _ in rows:
        modules[module] += seconds
    print(f"{len(rows)} tests, {sum(r[0] for r in rows):.0f} s summed over tests")
    for module, seconds in modules.most_common():
        print(f"{seconds:8.0f} s  {module}")
    print(f"\nslowest {a.slowest}:")
    for seconds, module, name, phases in sorted(rows, key=lambda r: r[0], reverse=True)[: a.slowest]:
        print(f"{seconds:8.0f} s  {module}::{name}")
        if phases:
            print("            " + ", ".join(f"{p['phase']} +{p['t']:.0f}s" for p in phases))
    per_module = calls(a.junit)
    if per_module:
        print("\nasked of the nodes (execs, node proxy paths, objects created):")
        for module, spent in sorted(per_module.items(), key=lambda kv: -kv[1]["exec"]):
            print(f"  {module}: " + ", ".join(f"{k} {v}" for k, v in spent.most_common()))
    print("\nturns:")
    print("\n".join(turn_summary(turns(a.junit))))
    return cli.Exit.OK


if __name__ == "__main__":
    raise SystemExit(main())
