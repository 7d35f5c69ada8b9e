"""The pod shapes of test_cgroup_limits, as they ran on a node under one behavior: deployed once
per node and behavior in the whole run (by whichever test of whichever xdist worker needs them
first), every container's cgroup files read in one batch by the node agent, then deleted.

Two kinds of container are not there when the pod starts running, and are read otherwise: a
plain init container has ended by then, so it prints its own cgroup files and its log is kept;
an ephemeral container is added to a running pod (PodShape.ephemeral) before the batch read.

Shapes with pod-level resources carry their own minimum kubelet version (PodShape.min_kubernetes):
they are not deployed on an older node."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from clusters import shared
from clusters.provider import SwapNode
from e2e import oracle
from e2e.alone import burst
from e2e.nodefiles import CgroupRead, kubelet_cgroups_above, part_of
from e2e.observe import NodeObserver, explanation, unique_name
from e2e.workspace import Workspace, observer_of
from workloads.pods import QOS_SHAPES, PodShape, ephemeral_container, labels

CGROUP_FILES = ("memory.swap.max", "memory.max")


@dataclass
class ShapePods:
    """All QoS shapes the node's kubelet supports, as they ran on it under one behavior: the
    pods as the API server returned them and every container's cgroup files, read together."""

    node: SwapNode
    namespace: str
    pods: dict[str, dict[str, Any]]  # shape id -> the pod as the API server returned it, running
    built: dict[str, dict[str, Any]] = field(default_factory=dict)  # shape id -> the manifest sent
    dropped: dict[str, str] = field(default_factory=dict)  # shape id -> why the API server changed it
    cgroups: CgroupRead | None = None
    above: CgroupRead | None = None  # the cgroups above the containers (kubelet_cgroups_above): memory.swap.max
    explanations: dict[str, str] = field(default_factory=dict)  # shape id -> the pod and its events
    printed: dict[str, dict[str, str]] = field(default_factory=dict)  # shape id -> init container -> its log
    problems: dict[str, str] = field(default_factory=dict)  # "shape id/container" -> why it could not be read

    def pod(self, shape: PodShape) -> dict[str, Any]:
        """The shape's pod; a skip where the API server dropped its pod-level resources (the
        PodLevelResources gate turned off there: the pod would be another shape)."""
        if shape.id in self.dropped:
            pytest.skip(self.dropped[shape.id])
        return self.pods[shape.id]

    def read(self, shape: PodShape, container: str, cgroup_file: str) -> str:
        self._no_problem(shape, container)
        assert self.cgroups is not None
        return self.cgroups.value(container_id(self.pods[shape.id], container), cgroup_file)

    def printed_value(self, shape: PodShape, container: str, cgroup_file: str) -> str:
        """A file of its own cgroup as a container that has ended printed it (PRINT_OWN_CGROUP):
        its log is one `swapstress read-cgroups` document whose part "." is the container's cgroup."""
        self._no_problem(shape, container)
        log = self.printed.get(shape.id, {}).get(container)
        assert log is not None, f"{shape.id}/{container}: its log was not kept"
        documents = [line for line in log.splitlines() if line.startswith("{")]
        assert len(documents) == 1, f"{shape.id}/{container}: expected one JSON document in its log, got {log!r}"
        return CgroupRead.parse(documents[0]).value(".", cgroup_file)

    def swap_max_above(self, shape: PodShape) -> dict[str, str]:
        """memory.swap.max of each cgroup the kubelet made above the pod's containers (its pod's,
        its QoS class's, kubepods), by path, innermost first."""
        assert self.cgroups is not None and self.above is not None
        self._no_problem(shape, shape.container_names()[0])
        container = container_id(self.pods[shape.id], shape.container_names()[0])
        return {path: self.above.value(part_of(path), "memory.swap.max")
                for path in kubelet_cgroups_above(self.cgroups.path(container))}

    def _no_problem(self, shape: PodShape, container: str) -> None:
        """An ephemeral container that could not be added, or an init container's log that could
        not be read, fails the tests that read it (only those: every other shape check stands)."""
        problem = self.problems.get(f"{shape.id}/{container}")
        if problem:
            raise AssertionError(problem)

    def report(self, shape: PodShape) -> str:
        return f"node: {self.node.describe()}\n" + self.explanations.get(shape.id, "")

    def to_json(self) -> dict[str, Any]:
        """What every xdist worker's tests read (the node is each worker's own)."""
        return {"namespace": self.namespace, "pods": self.pods, "built": self.built, "dropped": self.dropped,
                "cgroups": dataclasses.asdict(self.cgroups) if self.cgroups else None,
                "above": dataclasses.asdict(self.above) if self.above else None,
                "explanations": self.explanations, "printed": self.printed, "problems": self.problems}

    @classmethod
    def from_json(cls, node: SwapNode, data: dict[str, Any]) -> "ShapePods":
        cgroups = CgroupRead(**data["cgroups"]) if data.get("cgroups") else None
        above = CgroupRead(**data["above"]) if data.get("above") else None
        return cls(node, data["namespace"], data["pods"], data["built"], data["dropped"], cgroups, above,
                   data["explanations"], data.get("printed", {}), data.get("problems", {}))


def container_id(pod: dict[str, Any], container: str) -> str:
    """The running container's id (sidecars are init containers; ephemeral containers have
    statuses of their own), as its cgroup directory names it."""
    status = pod.get("status") or {}
    for cs in ((status.get("containerStatuses") or []) + (status.get("initContainerStatuses") or [])
               + (status.get("ephemeralContainerStatuses") or [])):
        if cs["name"] == container and cs.get("containerID"):
            return cs["containerID"].rpartition("://")[2]
    raise AssertionError(f"{pod['metadata']['name']}/{container}: no container id in the pod's status")


# Once per node and behavior in the whole run: the shapes are deployed, read and deleted before
# the first test asserts anything, by whichever xdist worker needs them first; the others wait
# for it and read what it read (clusters/shared.py, in the run's directory). The node holds them
# only while they are read: they request memory that a later test's kubelet restart re-admits,
# and would be candidates when a test drives the node into memory pressure.
def shapes_on(node: SwapNode, image: str, run_dir: Path) -> ShapePods:
    """Every pod shape, deployed once per node and behavior (pods are created while the node
    runs that behavior: the kubelet fixes a container's swap limit when it creates the
    container), read in one batch on the node, then deleted: the `shape_pods` fixture
    (e2e/conftest.py)."""

    def deploy() -> dict[str, Any]:
        with burst(run_dir):  # not while another node's shapes start: both can stall the API server
            return deploy_and_read(node, image).to_json()

    deployed = deployed_once(run_dir, f"{node.cluster}/{node.name}", node.behavior, deploy)
    return ShapePods.from_json(node, deployed)


def deployed_once(run_dir: Path, node: str, behavior: str, deploy: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """The shapes of one node and behavior, deployed by the first test of the run that needs
    them, in whichever process. A failed deployment is not tried again by every later test:
    each attempt deploys every shape again onto a node that just failed to take them, and on an
    overloaded kind host that snowballed (seen: 26 shape tests erroring in a row). The first
    test has the whole error; the others fail at once, quoting it."""
    key = "shapes-" + re.sub(r"[^A-Za-z0-9_.-]", "_", f"{node}-{behavior}")
    try:
        return shared.get_or_create(run_dir, key, deploy)
    except shared.SharedCreationError as error:
        pytest.fail(f"the pod shapes could not be deployed on {node} under {behavior} (the first test of that"
                    f" behavior has the whole error): {str(error)[:500]}", pytrace=False)


def add_extras(observer: NodeObserver, namespace: str, image: str, shapes: list[PodShape], deployed: ShapePods) -> list[str]:
    """What some shapes have beyond their running containers, once their pods run: the log of each
    init container that printed its own cgroup (kept in `deployed.printed`), and each ephemeral
    container, added and waited for (the pod as it then is replaces the one in `deployed.pods`).
    Returns the ephemeral containers' ids, for the one batch read. What goes wrong here is kept
    in `deployed.problems` and fails only the tests that read that container."""
    def failed(shape: PodShape, container: str, what: str, error: Exception) -> None:
        deployed.problems[f"{shape.id}/{container}"] = (f"{shape.id}/{container}: {what} failed: {type(error).__name__}:"
                                                        f" {str(error)[:500]}")

    for shape in shapes:
        for name in shape.ephemeral:
            try:
                observer.add_ephemeral_container(namespace, shape.id, ephemeral_container(name, image))
            except Exception as error:  # noqa: BLE001 - kept for the tests that read this container
                failed(shape, name, "adding the ephemeral container (pods/ephemeralcontainers)", error)
    ids = []
    for shape in shapes:
        for name in shape.ephemeral:
            if f"{shape.id}/{name}" in deployed.problems:
                continue
            try:
                deployed.pods[shape.id] = observer.wait_ephemeral_running(namespace, shape.id, name)
                ids.append(container_id(deployed.pods[shape.id], name))
            except Exception as error:  # noqa: BLE001 - kept for the tests that read this container
                failed(shape, name, "waiting for the ephemeral container to run", error)
        for name in shape.printing_init_containers():
            try:
                deployed.printed.setdefault(shape.id, {})[name] = observer.log(namespace, shape.id, name)
            except Exception as error:  # noqa: BLE001 - kept for the tests that read this container
                failed(shape, name, "reading the init container's log", error)
    return ids


def above_containers(read: CgroupRead) -> list[str]:
    """The parts naming every cgroup above the containers found. A container whose cgroup was not
    found, or is not below kubepods, fails the tests that read it (ShapePods), not the deployment."""
    parts = set()
    for path in filter(None, read.paths.values()):
        try:
            parts.update(part_of(above) for above in kubelet_cgroups_above(path))
        except (AssertionError, ValueError):
            continue
    return sorted(parts)


def deploy_and_read(node: SwapNode, image: str) -> ShapePods:
    observer = observer_of(node)
    namespace = observer.create_namespace(unique_name(f"ksc-shapes-{node.behavior.lower()}"), labels("qos-shapes"))
    try:
        deployed = ShapePods(node, namespace, {})
        supported = [s for s in QOS_SHAPES if not s.min_kubernetes or node.kubelet_at_least(s.min_kubernetes)]
        for shape in supported:
            deployed.built[shape.id] = shape.manifest(
                image, namespace, f"qos-shapes-{shape.id}",
                lambda near: oracle.page_edge_request(near, node.memory_capacity, node.swap_capacity))
            observer.create(deployed.built[shape.id])
        reader = Workspace(node, observer, namespace, image, "qos-shapes").node_files()
        for shape in supported:
            deployed.pods[shape.id] = observer.wait_running(namespace, shape.id)
            if (shape.pod_requests or shape.pod_limits) and not deployed.pods[shape.id]["spec"].get("resources"):
                deployed.dropped[shape.id] = (f"the API server dropped the pod's spec.resources (PodLevelResources off"
                                              f" there), so {shape.id} cannot be built on {node.name}")
        extras = add_extras(observer, namespace, image, supported, deployed)
        ids = [container_id(deployed.pods[s.id], c) for s in supported for c in s.container_names()] + extras
        deployed.cgroups = reader.read_cgroups(ids, CGROUP_FILES)
        deployed.above = reader.read_cgroups(above_containers(deployed.cgroups), ("memory.swap.max",))
        events = observer.events_by_object(namespace)
        deployed.explanations = {s.id: explanation(deployed.pods[s.id], events.get(s.id, [])) for s in supported}
    except BaseException as error:
        # The deployment's own error is the one every shape test quotes: a deletion refused by
        # the same overloaded API server must not take its place (every shape test would quote
        # only the deletion's read timeout).
        try:
            observer.delete_namespace(namespace)
        except Exception as cleanup:  # noqa: BLE001 - said beside the error that matters
            error.add_note(f"deleting namespace {namespace} afterwards failed too: {type(cleanup).__name__}: {cleanup}")
        raise
    observer.delete_namespace(namespace)
    return deployed
