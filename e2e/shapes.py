"""The pod shapes of test_cgroup_limits, as they ran on a node under one behavior: deployed once
per node and behavior in the whole run (by whichever test of whichever xdist worker needs them
first), every container's cgroup files read in one batch by the node agent, then deleted.

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
from e2e.nodefiles import CgroupRead
from e2e.observe import explanation, unique_name
from e2e.workspace import Workspace, observer_of
from workloads.pods import QOS_SHAPES, PodShape, labels

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
    explanations: dict[str, str] = field(default_factory=dict)  # shape id -> the pod and its events

    def pod(self, shape: PodShape) -> dict[str, Any]:
        """The shape's pod; a skip where the API server dropped its pod-level resources (the
        PodLevelResources gate turned off there: the pod would be another shape)."""
        if shape.id in self.dropped:
            pytest.skip(self.dropped[shape.id])
        return self.pods[shape.id]

    def read(self, shape: PodShape, container: str, cgroup_file: str) -> str:
        assert self.cgroups is not None
        return self.cgroups.value(container_id(self.pods[shape.id], container), cgroup_file)

    def report(self, shape: PodShape) -> str:
        return f"node: {self.node.describe()}\n" + self.explanations.get(shape.id, "")

    def to_json(self) -> dict[str, Any]:
        """What every xdist worker's tests read (the node is each worker's own)."""
        return {"namespace": self.namespace, "pods": self.pods, "built": self.built, "dropped": self.dropped,
                "cgroups": dataclasses.asdict(self.cgroups) if self.cgroups else None,
                "explanations": self.explanations}

    @classmethod
    def from_json(cls, node: SwapNode, data: dict[str, Any]) -> "ShapePods":
        cgroups = CgroupRead(**data["cgroups"]) if data.get("cgroups") else None
        return cls(node, data["namespace"], data["pods"], data["built"], data["dropped"], cgroups, data["explanations"])


def container_id(pod: dict[str, Any], container: str) -> str:
    """The running container's id (sidecars are init containers), as its cgroup directory names it."""
    status = pod.get("status") or {}
    for cs in (status.get("containerStatuses") or []) + (status.get("initContainerStatuses") or []):
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
        ids = [container_id(deployed.pods[s.id], c) for s in supported for c in s.container_names()]
        deployed.cgroups = reader.read_cgroups(ids, CGROUP_FILES)
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
