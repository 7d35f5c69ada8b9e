"""The table of waits: on an emulated node every bound is what the suite was sized for; on a fast
node only the part the node's speed decides shrinks, never the part timers decide."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from clusters import waits

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _unknown_speed():
    waits.use_nodes(None)
    yield
    waits.use_nodes(None)


def test_unknown_and_emulated_nodes_get_the_whole_bound() -> None:
    wait = waits.Wait(100, clock=20)
    assert waits.bound(wait) == 120
    waits.use_nodes(True)
    assert waits.bound(wait) == 120


def test_a_fast_node_shrinks_only_the_work() -> None:
    waits.use_nodes(False)
    assert waits.bound(waits.Wait(100, clock=20)) == 20 + 100 * waits.NATIVE_WORK_FACTOR
    assert waits.bound(waits.NODE_SIGNAL) == 60  # cAdvisor's intervals: timers alone
    assert waits.bound(7.5) == 7.5  # a plain number is a rule, never scaled


def test_the_table_is_the_one_place_for_bounds() -> None:
    """No module of the suite defines a *_SECONDS bound of its own as a bare number: bounds are
    in clusters/waits.py (rules such as a grace period or a hold, and poll intervals, stay
    where they are defined and are listed here)."""
    rules = {"POLL_SECONDS", "QUIET_SECONDS", "HOLD_SECONDS", "WINDOW_SECONDS", "SCRAPE_EVERY_SECONDS",
             "READ_SLACK_SECONDS", "EVENT_TTL_SECONDS", "KIND_VERSION_SECONDS", "STATS_LEAD", "GRACE",
             "SUMMARY_RETRY_SECONDS"}
    found = []
    for path in [*ROOT.glob("e2e/**/*.py"), *ROOT.glob("clusters/**/*.py")]:
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) \
                    and isinstance(node.value.value, (int, float)):
                for target in node.targets:
                    if isinstance(target, ast.Name) and target.id.endswith("_SECONDS") and target.id not in rules:
                        found.append(f"{path.relative_to(ROOT)}:{node.lineno} {target.id}")
    assert not found, f"bounds outside clusters/waits.py: {found}"
