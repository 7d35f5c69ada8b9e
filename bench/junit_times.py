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
import json
import xml.etree.ElementTree as ET
from pathlib import Path

from e2e.record import CALLS_PROPERTY, PHASE_PROPERTY, TURN_PROPERTY


def cases(junit: Path) -> list[tuple[float, str, str, list[dict]]]:
    """(seconds, module, test name, phases) per test case."""
    found = []
    for case in ET.parse(junit).iter("testcase"):
        phases = [json.loads(p.get("value", "{}")) for p in case.iter("property") if p.get("name") == PHASE_PROPERTY]
        found.append((float(case.get("time") or 0), (case.get("classname") or "").rsplit(".", 1)[-1],
                      case.get("name") or "", phases))
    return found


def calls(junit: Path) -> dict[str, collections.Counter[str]]:
    """Per module, what its tests asked of the nodes (summed CALLS_PROPERTY)."""
    found: dict[str, collections.Counter[str]] = {}
    for case in ET.parse(junit).iter("testcase"):
        module = (case.get("classname") or "").rsplit(".", 1)[-1]
        for p in case.iter("property"):
            if p.get("name") == CALLS_PROPERTY:
                found.setdefault(module, collections.Counter()).update(json.loads(p.get("value", "{}")))
    return found


def turns(junit: Path) -> list[dict]:
    """Each test's turn: {"worker", "alone", "scope", "start", "waited", "end"} (tests that got
    one; "scope": what an alone test held, "host" or its node, absent before 2026-11-26)."""
    return [json.loads(p.get("value", "{}")) for case in ET.parse(junit).iter("testcase")
            for p in case.iter("property") if p.get("name") == TURN_PROPERTY]


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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.junit_times", description=__doc__.split("\n\n")[0])
    ap.add_argument("junit", type=Path)
    ap.add_argument("--slowest", type=int, default=10)
    a = ap.parse_args(argv)
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
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
