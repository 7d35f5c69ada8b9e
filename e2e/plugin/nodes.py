"""What tests ask for: a node running a behavior.

Tests never ask for a provider. They ask for `swap_node` (parametrized over the behaviors the
run selects), for a named node (`limited_swap_node`, `no_swap_node`,
`workload_controlled_swap_node`), or mark themselves `needs_behavior("LimitedSwap")`.
"""

from __future__ import annotations

import json
import os
import time
import warnings
from collections.abc import Iterator

import pytest

from clusters import behaviors as swap_behaviors
from clusters import shared, waits
from clusters.checks import PreflightError
from clusters.provider import NotCoveredError, Provider, SwapNode
from e2e import record, verdict
from e2e.gate import could_not_test
from e2e.plugin.options import settings
from e2e.plugin.state import the_run
from e2e.plugin.summary import record_coverage

NAMED = {"no_swap_node": swap_behaviors.NO_SWAP, "limited_swap_node": swap_behaviors.LIMITED_SWAP,
         "workload_controlled_swap_node": swap_behaviors.WORKLOAD_CONTROLLED_SWAP}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "swap_node" not in metafunc.fixturenames:
        return
    marker = metafunc.definition.get_closest_marker("needs_behavior")
    wanted = [swap_behaviors.normalize(b) for b in marker.args] if marker else list(swap_behaviors.ALL_BEHAVIORS)
    # Behaviors the user did not select are not generated at all; a test none of whose
    # behaviors is selected keeps them, to skip once with that reason.
    selected = [b for b in wanted if b in settings(metafunc.config).behaviors] or wanted
    metafunc.parametrize("swap_node", selected, indirect=True, ids=selected)


def behavior_of(item: pytest.Item) -> str | None:
    """The behavior a test runs on: its `swap_node` parameter, or the named node it asks for."""
    callspec = getattr(item, "callspec", None)
    behavior = callspec.params.get("swap_node") if callspec else None
    return behavior or next((b for f, b in NAMED.items() if f in getattr(item, "fixturenames", ())), None)


def _behavior_index(item: pytest.Item) -> int:
    behavior = behavior_of(item)
    return swap_behaviors.ALL_BEHAVIORS.index(behavior) if behavior else -1


def _order(item: pytest.Item) -> tuple[int, bool, bool]:
    return (_behavior_index(item), item.get_closest_marker("runs_first") is None,
            item.get_closest_marker("runs_alone") is None)


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    # One behavior after another: a node that switches behavior in place (vm) switches once
    # per behavior, and a failure report reads by behavior. The sort is stable within one.
    # (A deployment several tests share is made once per run, in whichever xdist worker needs
    # it first, through the run's directory: e2e/shapes.py, the pod shapes.) Within a
    # behavior, `runs_first` tests come first, while the node holds no other test's pods; then
    # the tests that run alone on the node, so that what is left at the end of a behavior's list
    # (what another xdist worker takes once its own are done, e2e/plugin/workers.py) can run
    # beside its own worker's tests, instead of waiting for that behavior's alone tests while
    # they wait for it.
    items.sort(key=_order)


def _firsts_of_its_behavior(item: pytest.Item) -> list[str]:
    """The `runs_first` tests of the run that `item` must let go first (none if it is one)."""
    if item.get_closest_marker("runs_first") is not None:
        return []
    behavior = behavior_of(item)
    return [i.nodeid for i in item.session.items
            if i.get_closest_marker("runs_first") is not None and behavior_of(i) == behavior]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[object]:
    from e2e.alone import mark_ended

    try:
        return (yield)
    finally:  # whatever its outcome, skipped before any fixture included
        if item.get_closest_marker("runs_first") is not None:
            mark_ended(the_run(item.config).directory, item.nodeid)


def node_lock(config: pytest.Config, item: pytest.Item) -> str | None:
    """The node whose lock a test takes (e2e/alone.py): its behavior's, where each behavior has a
    node of its own; the one node's where one node runs every behavior; None for a test that
    asks for no node."""
    behavior = behavior_of(item)
    if behavior is None:
        return None
    return "the-node" if the_run(config).provider.one_node_for_every_behavior else behavior


@pytest.fixture(autouse=True)
def _alone_or_together(request: pytest.FixtureRequest) -> Iterator[None]:
    """Under -n, a `runs_alone` test runs while no other test on its node runs (with
    `host=True`, while no other test of the run does), and a test waits for its behavior's
    `runs_first` tests to end (e2e/alone.py). Its turn goes into the report
    (record.TURN_PROPERTY)."""
    from e2e.alone import AloneTimeout, turn, wait_until_ended

    # A test that will skip, or touches no node, takes no turn: it would hold its worker for
    # nothing (a test of an unselected behavior would wait minutes behind the host-wide
    # overcommit only to skip, a test that only computes behind the eviction test). Not where
    # one node runs every behavior: asking for its node may switch that node's behavior.
    skip_unless_selected(request, behavior_of(request.node))
    if request.node.get_closest_marker("touches_no_node") is not None \
            and not the_run(request.config).provider.one_node_for_every_behavior:
        yield
        return
    run_dir = the_run(request.config).directory
    marker = request.node.get_closest_marker("runs_alone")
    alone = marker is not None
    asked = time.time()
    # Under -n, the sort alone cannot make a runs_first test run first: another worker may start
    # a later test of its behavior at the same moment (the shapes' deployment, say).
    not_ended = wait_until_ended(run_dir, _firsts_of_its_behavior(request.node))
    if not_ended:
        warnings.warn(f"{request.node.nodeid} went on without waiting longer for {not_ended} to end "
                      f"({time.time() - asked:.0f}s): the worker running it may have died", stacklevel=1)
    try:
        with turn(run_dir, alone, node_lock(request.config, request.node),
                  host=alone and bool(marker.kwargs.get("host"))) as held:
            given = time.time()
            try:
                yield
            finally:
                request.node.user_properties.append((record.TURN_PROPERTY, json.dumps({
                    "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"), "alone": alone,
                    "scope": held,
                    "start": round(asked, 1), "waited": round(given - asked, 1), "end": round(time.time(), 1)})))
    except AloneTimeout as error:
        pytest.fail(str(error), pytrace=False)


@pytest.fixture(autouse=True)
def _node_calls(request: pytest.FixtureRequest) -> Iterator[None]:
    """What the test asked of the nodes (observe.CALLS), for a run's timing (bench.junit_times)."""
    from e2e.observe import CALLS

    before = CALLS.copy()
    yield
    spent = CALLS - before
    if spent:
        request.node.user_properties.append((record.CALLS_PROPERTY, json.dumps(dict(sorted(spent.items())))))


@pytest.fixture(scope="session")
def swap_provider(pytestconfig: pytest.Config) -> Provider:
    run = the_run(pytestconfig)
    if run.owner:
        run.preflight_or_stop()  # done at collection already, unless the test was not seen to need it
    else:
        try:
            run.preflight()  # the controller's outcome (it stopped the run had it failed)
        except (PreflightError, shared.SharedCreationError) as error:
            pytest.fail(str(error), pytrace=False)
    behaviors = settings(pytestconfig).behaviors
    shared.get_or_create(run.directory, "prepared", lambda: run.provider.prepare(behaviors) or {})
    return run.provider


def _not_covered(config: pytest.Config, behavior: str, reason: str) -> None:
    record_coverage(config, behavior, None, reason)
    could_not_test(config, f"{behavior} not covered: {reason}", behavior)


def skip_unless_selected(request: pytest.FixtureRequest, behavior: str | None) -> None:
    """Record the test's behavior for the report, and skip it if that behavior is not selected."""
    if behavior is None:
        return
    properties = request.node.user_properties
    if (verdict.BEHAVIOR_PROPERTY, behavior) not in properties:  # the report knows its behavior
        properties.append((verdict.BEHAVIOR_PROPERTY, behavior))
    if behavior not in settings(request.config).behaviors:
        pytest.skip(f"{behavior} not selected (--behaviors {request.config.getoption('behaviors')})")


def node_running(request: pytest.FixtureRequest, behavior: str) -> SwapNode:
    """The node for `behavior`, or a skip (a failure in gate mode) that says why there is none.

    Called for every test: providers cache their nodes, and a node that switches behavior in
    place (vm) is switched back here if an earlier test needed another behavior."""
    config = request.config
    skip_unless_selected(request, behavior)
    provider: Provider = request.getfixturevalue("swap_provider")
    reason = provider.coverage([behavior])[behavior]
    if reason:
        _not_covered(config, behavior, reason)
    try:
        node = provider.node_for(behavior)
    except NotCoveredError as error:
        _not_covered(config, behavior, error.reason)
    except shared.SharedCreationError as error:
        # The full output went to the terminal once, as progress; each test says what and why.
        lines = str(error).strip().splitlines()
        pytest.fail(f"no {behavior} node: {lines[0]}" + (f" ... {lines[-1].strip()}" if len(lines) > 1 else ""),
                    pytrace=False)
    except Exception as error:  # noqa: BLE001 - a provider's failure (kind, qemu, the API): its message, no traceback
        pytest.fail(f"no {behavior} node: {type(error).__name__}: {error}", pytrace=False)
    record_coverage(config, behavior, node.describe(), None)
    skip_if_too_old(request, node)
    waits.use_nodes(node.emulated)  # every bound this process waits with, scaled for its nodes
    return node


def skip_if_too_old(request: pytest.FixtureRequest, node: SwapNode) -> None:
    """`min_kubernetes("1.34")` / `min_kernel("6.4")`: skip, saying so, only when the node is older."""
    for marker, at_least, have, what in (("min_kubernetes", node.kubelet_at_least, node.kubelet_version, "kubelet"),
                                         ("min_kernel", node.kernel_at_least, node.kernel, "kernel")):
        mark = request.node.get_closest_marker(marker)
        if mark and not at_least(mark.args[0]):
            pytest.skip(f"needs {what} >= {mark.args[0]}; node {node.name} runs {have}")


@pytest.fixture
def swap_node(request: pytest.FixtureRequest) -> SwapNode:
    """A node running the behavior this test instance is parametrized with."""
    return node_running(request, request.param)


@pytest.fixture
def no_swap_node(request: pytest.FixtureRequest) -> SwapNode:
    return node_running(request, swap_behaviors.NO_SWAP)


@pytest.fixture
def limited_swap_node(request: pytest.FixtureRequest) -> SwapNode:
    return node_running(request, swap_behaviors.LIMITED_SWAP)


@pytest.fixture
def workload_controlled_swap_node(request: pytest.FixtureRequest) -> SwapNode:
    return node_running(request, swap_behaviors.WORKLOAD_CONTROLLED_SWAP)
