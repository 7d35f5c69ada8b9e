"""Fixtures of the conformance tests: a workspace on a node (namespace, image, observer)."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator

import pytest

from clusters.provider import NotCoveredError, SwapNode
from e2e.gate import could_not_test
from e2e.observe import unique_name
from e2e.plugin.state import the_run
from e2e.record import Recorder
from e2e.shapes import ShapePods, shapes_on
from e2e.workspace import Workspace, observer_of
from workloads.pods import labels


@pytest.fixture
def workspace(request: pytest.FixtureRequest) -> Iterator[Callable[[SwapNode], Workspace]]:
    """`workspace(node)`: a fresh namespace on that node, deleted when the test ends."""
    made: list[Workspace] = []

    def make(node: SwapNode) -> Workspace:
        provider = request.getfixturevalue("swap_provider")
        try:
            image = provider.stress_image(node)
        except NotCoveredError as error:
            could_not_test(request.config, str(error), node.behavior)
        observer = observer_of(node)
        namespace = observer.create_namespace(unique_name("ksc"), labels(request.node.name))
        made.append(Workspace(node, observer, namespace, image, request.node.name, Recorder(request.node.user_properties),
                              run_dir=the_run(request.config).directory))
        return made[-1]

    yield make
    for ws in made:
        ws.finish_sampling()
        ws.observer.delete_namespace(ws.namespace)


@pytest.fixture(scope="session", autouse=True)
def _node_agents() -> Iterator[None]:
    """The node agents this process started go with it (e2e/agent.py)."""
    from e2e.agent import remove_agents

    yield
    for problem in remove_agents():
        warnings.warn(problem, stacklevel=1)


@pytest.fixture
def record(request: pytest.FixtureRequest) -> Recorder:
    """Checks recorded for the report: `claim(record, name, expected, observed, inputs)` (e2e/claims.py)."""
    return Recorder(request.node.user_properties)


@pytest.fixture
def shape_pods(swap_node: SwapNode, request: pytest.FixtureRequest) -> ShapePods:
    """Every pod shape on the node under test, deployed once per node and behavior in the whole
    run, read in one batch, then deleted (e2e/shapes.py)."""
    image = request.getfixturevalue("swap_provider").stress_image(swap_node)
    return shapes_on(swap_node, image, the_run(request.config).directory)
