"""Fixtures of the conformance tests: a workspace on a node (namespace, image, observer)."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pytest

from clusters.provider import NotCoveredError, SwapNode
from e2e.gate import could_not_test
from e2e.observe import NodeObserver, unique_name
from e2e.record import Recorder, Series
from workloads.pods import labels

if TYPE_CHECKING:
    from e2e.nodefiles import NodeFiles
    from e2e.sampler import CgroupSampler

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
    record: Recorder = field(default_factory=lambda: Recorder([]))
    deployed: list[str] = field(default_factory=list)
    sampling: dict[tuple[str, str], CgroupSampler] = field(default_factory=dict)
    _files: NodeFiles | None = None

    def deploy(self, manifest: dict[str, Any]) -> dict[str, Any]:
        self.observer.create(manifest)
        if manifest["kind"] == "Pod":
            self.deployed.append(manifest["metadata"]["name"])
        return manifest

    def deploy_sampled(self, manifest: dict[str, Any], container: str = "stress") -> dict[str, Any]:
        """Deploy a pod whose container's memory is sampled from its cgroup on the node from
        before it starts until the test ends (or `samples` is called): the report plots it."""
        from e2e.nodefiles import NodeFiles
        from e2e.sampler import CgroupSampler

        if self._files is None:
            self._files = NodeFiles.on(self, self.node.name, name="cgroup-sampler")
        sampler = CgroupSampler(self._files).start()
        name = manifest["metadata"]["name"]
        self.sampling[(name, container)] = sampler
        self.deploy(manifest)
        sampler.follow(self.observer.pod(self.namespace, name)["metadata"]["uid"])
        return manifest

    def samples(self, pod: str, container: str = "stress") -> Series:
        """Stop sampling that container and return (and record) its series."""
        from e2e.sampler import parse_series

        output = self.sampling.pop((pod, container)).stop()
        statuses = self.observer.pod(self.namespace, pod).get("status", {}).get("containerStatuses") or []
        status = next((cs for cs in statuses if cs["name"] == container), {})
        container_id = str(status.get("containerID", "")).rpartition("://")[2]
        terminated = (status.get("state") or {}).get("terminated") or (status.get("lastState") or {}).get("terminated")
        series = parse_series(output, f"{pod}/{container}", container_id or "<no container id>", terminated)
        self.record.series(series)
        return series

    def finish_sampling(self) -> None:
        for pod, container in list(self.sampling):
            try:
                self.samples(pod, container)
            except Exception as error:  # noqa: BLE001 - a missing plot must not hide the test's own outcome
                warnings.warn(f"{self.namespace}/{pod}/{container}: memory samples lost: {error}", stacklevel=1)

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
        made.append(Workspace(node, observer, namespace, image, request.node.name, Recorder(request.node.user_properties)))
        return made[-1]

    yield make
    for ws in made:
        ws.finish_sampling()
        ws.observer.delete_namespace(ws.namespace)


@pytest.fixture
def record(request: pytest.FixtureRequest) -> Recorder:
    """Checks recorded for the report: `record.check(name, expected, observed, inputs)`."""
    return Recorder(request.node.user_properties)
