"""Fixtures of the conformance tests: a workspace on a node (namespace, image, observer)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from clusters.provider import NotCoveredError, SwapNode
from e2e.gate import could_not_test
from e2e.observe import NodeObserver, unique_name
from workloads.pods import labels

_observers: dict[tuple[str, str], NodeObserver] = {}


def observer_of(node: SwapNode) -> NodeObserver:
    key = (node.kubeconfig, node.name)
    if key not in _observers:
        _observers[key] = NodeObserver(node)
    # The node's behavior may have been switched since (vm): keep the observer's view current.
    _observers[key].node = node
    return _observers[key]


@dataclass
class Workspace:
    """One test's namespace on one node, the workload image there, and the node's observer."""

    node: SwapNode
    observer: NodeObserver
    namespace: str
    image: str
    test: str
    deployed: list[str] = field(default_factory=list)

    def deploy(self, manifest: dict[str, Any]) -> dict[str, Any]:
        self.observer.create(manifest)
        if manifest["kind"] == "Pod":
            self.deployed.append(manifest["metadata"]["name"])
        return manifest

    def running(self, name: str) -> dict[str, Any]:
        return self.observer.wait_running(self.namespace, name)

    def explain(self, name: str) -> str:
        return self.observer.explain(self.namespace, name)


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
        made.append(Workspace(node, observer, namespace, image, request.node.name))
        return made[-1]

    yield make
    for ws in made:
        ws.observer.delete_namespace(ws.namespace)
