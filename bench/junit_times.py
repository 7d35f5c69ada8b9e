"""Where a run of the suite spent its time, from its JUnit XML (not a test).

    python -m bench.junit_times results/junit.xml [--slowest 10]

Prints the time per module (summed over tests, so with -n N it exceeds the wall time), the
slowest tests, and for each of those the phases it recorded (e2e/record.py Recorder.phase:
"<pod> running", the eviction test's steps), so a slow test says where its time went."""

from __future__ import annotations

import argparse
import collections
import json
import xml.etree.ElementTree as ET
from pathlib import Path

from e2e.record import PHASE_PROPERTY


def cases(junit: Path) -> list[tuple[float, str, str, list[dict]]]:
    """(seconds, module, test name, phases) per test case."""
    found = []
    for case in ET.parse(junit).iter("testcase"):
        phases = [json.loads(p.get("value", "{}")) for p in case.iter("property") if p.get("name") == PHASE_PROPERTY]
        found.append((float(case.get("time") or 0), (case.get("classname") or "").rsplit(".", 1)[-1],
                      case.get("name") or "", phases))
    return found


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
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
