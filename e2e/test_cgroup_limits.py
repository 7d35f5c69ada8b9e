"""memory.swap.max and memory.max of every container of every pod shape, read from the
container's cgroup on the node (all containers in one read, by a privileged pod), against the
oracle for the node's behavior, memory and swap capacity.

Shapes with pod-level resources carry their own minimum kubelet version (PodShape.min_kubernetes):
their tests skip, saying so, on an older node, and they are not deployed there."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from clusters import shared
from clusters.provider import NotCoveredError, Provider, SwapNode
from e2e import oracle
from e2e.claims import Claims, claim
from e2e.alone import burst
from e2e.nodefiles import CgroupRead
from e2e.observe import explanation, unique_name, wait_for
from e2e.workspace import Workspace, observer_of
from e2e.record import Recorder
from e2e.sizing import burstable_sizing
from workloads.pods import QOS_SHAPES, Mi, PodShape, labels, stress_pod

CRITICAL_PRIORITY = {"system-node-critical": 2_000_001_000, "system-cluster-critical": 2_000_000_000}

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
@pytest.fixture
def shape_pods(swap_node: SwapNode, request: pytest.FixtureRequest) -> ShapePods:
    """Every pod shape, deployed once per node and behavior (pods are created while the node
    runs that behavior: the kubelet fixes a container's swap limit when it creates the
    container), read in one batch on the node, then deleted."""
    from e2e.plugin.run import the_run

    image = request.getfixturevalue("swap_provider").stress_image(swap_node)
    run_dir = the_run(request.config).directory

    def deploy() -> dict[str, Any]:
        with burst(run_dir):  # not while another node's shapes start too (kind run 6)
            return deploy_and_read(swap_node, image).to_json()

    deployed = deployed_once(run_dir, f"{swap_node.cluster}/{swap_node.name}", swap_node.behavior, deploy)
    return ShapePods.from_json(swap_node, deployed)


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
            deployed.built[shape.id] = shape.manifest(image, namespace, f"qos-shapes-{shape.id}",
                                                      node.memory_capacity, node.swap_capacity)
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
        # the same overloaded API server must not take its place (a kind run reported only the
        # deletion's read timeout, in 94 tests).
        try:
            observer.delete_namespace(namespace)
        except Exception as cleanup:  # noqa: BLE001 - said beside the error that matters
            error.add_note(f"deleting namespace {namespace} afterwards failed too: {type(cleanup).__name__}: {cleanup}")
        raise
    observer.delete_namespace(namespace)
    return deployed


def _shape_param(shape: PodShape) -> Any:
    marks = [pytest.mark.min_kubernetes(shape.min_kubernetes)] if shape.min_kubernetes else []
    return pytest.param(shape, id=shape.id, marks=marks)


SHAPES = [_shape_param(s) for s in QOS_SHAPES]


@pytest.mark.parametrize("shape", SHAPES)
def test_pod_is_the_shape_that_was_built(swap_node: SwapNode, shape_pods: ShapePods, shape: PodShape) -> None:
    """Assert what we built before asserting outcomes: upstream once ran every "QoS case" as
    BestEffort because its builder dropped the resources."""
    pod = shape_pods.pod(shape)
    assert pod["status"]["qosClass"] == shape.qos, shape_pods.report(shape)
    assert oracle.qos_class(pod) == shape.qos
    assert pod["spec"].get("priority", 0) == CRITICAL_PRIORITY.get(shape.priority_class or "", 0)
    # The API server defaulted the pod-level resources as the oracle does (exact values).
    expected = oracle.defaulted_pod(shape_pods.built[shape.id])["spec"].get("resources")
    assert _values(pod["spec"].get("resources")) == _values(expected), shape_pods.report(shape)


def _values(resources: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    from kubernetes.utils import parse_quantity

    return {kind: {name: parse_quantity(v) for name, v in values.items()}
            for kind, values in (resources or {}).items() if values}


@pytest.mark.parametrize("shape", SHAPES)
def test_memory_swap_max(swap_node: SwapNode, shape_pods: ShapePods, shape: PodShape, record: Recorder) -> None:
    pod = shape_pods.pod(shape)
    each = Claims(record)
    for container in shape.container_names():
        decision = oracle.decide_swap(
            swap_node.behavior, pod, container, swap_node.memory_capacity, swap_node.swap_capacity, cgroup_v2=True
        )
        each.claim(f"memory.swap.max of {container}", oracle.readback_swap_max(decision.value),
                   shape_pods.read(shape, container, "memory.swap.max"), str(decision))
    each.hold(explain=shape_pods.report(shape))


@pytest.mark.parametrize("shape", SHAPES)
def test_memory_max_is_the_limit(swap_node: SwapNode, shape_pods: ShapePods, shape: PodShape, record: Recorder) -> None:
    """The container's own memory limit, else the pod-level one (getMemoryLimit), else `max`."""
    pod = shape_pods.pod(shape)
    pod_limit = ((pod["spec"].get("resources") or {}).get("limits") or {}).get("memory")
    each = Claims(record)
    for container in shape.container_names():
        limit = (oracle.find_container(pod, container).get("resources", {}).get("limits") or {}).get("memory")
        inputs = f"limits.memory {limit or 'none'}" + (f", pod-level limits.memory {pod_limit}" if pod_limit else "")
        each.claim(f"memory.max of {container}", oracle.expected_memory_max(pod, container),
                   shape_pods.read(shape, container, "memory.max"), inputs)
    each.hold(explain=shape_pods.report(shape))


@pytest.mark.touches_no_node("computes expectations from the node's capacities")
def test_limited_swap_shapes_actually_differ(limited_swap_node: SwapNode) -> None:
    """Guard against a suite that passes by accident: under LimitedSwap at least one container
    must have a non-zero expected swap limit, or the cgroup tests above prove nothing."""
    memory, swap = limited_swap_node.memory_capacity, limited_swap_node.swap_capacity
    expected = [
        oracle.expected_swap_max("LimitedSwap", shape.manifest("x", "ns", "t", memory, swap), c, memory, swap)
        for shape in QOS_SHAPES
        for c in shape.container_names()
    ]
    assert any(v > 0 for v in expected) and any(v == 0 for v in expected)
    assert limited_swap_node.swap_capacity > 0, f"node has no swap: {limited_swap_node.describe()}"


SYSTEM_RESERVED = 512 * Mi  # far more than a page's worth of difference in any share


@pytest.mark.needs_behavior("LimitedSwap")
@pytest.mark.runs_alone("restarts the node's kubelet with memory reserved for the system")
def test_the_swap_share_is_of_the_nodes_capacity_not_its_allocatable(
        swap_node: SwapNode, swap_provider: Provider, workspace: Callable[[SwapNode], Workspace]) -> None:
    """The LimitedSwap share divides by the node's memory capacity (cAdvisor's MemoryCapacity,
    kuberuntime_container_linux.go calcSwapForBurstablePods), not by what the kubelet leaves
    pods: on a node that reserves memory (systemReserved) a kubelet dividing by allocatable
    writes a larger share. The suite's nodes reserve none, so this test reserves some."""
    from kubernetes.utils import parse_quantity

    from clusters.kubelet_config import settings

    if not swap_provider.reconfigures_kubelets:
        pytest.skip(f"the {swap_provider.name} provider cannot reconfigure a kubelet for one test")
    ws = workspace(swap_node)
    reserve = settings({"systemReserved": {"memory": str(SYSTEM_RESERVED)}}, f"systemReserved memory {SYSTEM_RESERVED}")
    try:
        with swap_provider.reconfigured_kubelet(swap_node, reserve):
            ws.record.phase("systemReserved live")
            hard = (ws.observer.configz().get("evictionHard") or {}).get("memory.available", "0")
            assert not hard.endswith("%"), f"evictionHard memory.available {hard}: a percentage is not modelled here"
            want_allocatable = swap_node.memory_capacity - SYSTEM_RESERVED - int(parse_quantity(hard))

            def allocatable() -> int | None:
                value = int(parse_quantity(ws.observer.node_status()["status"]["allocatable"]["memory"]))
                return value if value == want_allocatable else None

            # What was built, first: the node really reserves the memory (status every 10 s).
            wait_for(f"allocatable memory {want_allocatable} (capacity - systemReserved - evictionHard)", allocatable,
                     120, lambda: str(ws.observer.node_status()["status"]["allocatable"]))
            ws.record.phase("allocatable reserved")
            requests, limits = burstable_sizing(swap_node, headroom=32 * Mi).resources()
            pod = ws.deploy(stress_pod("reserved", ws.image, ws.namespace, ws.test, ["/swapstress", "pause"],
                                       requests, limits))
            ws.running("reserved")
            decision = oracle.decide_swap("LimitedSwap", pod, "stress", swap_node.memory_capacity, swap_node.swap_capacity)
            got = ws.observer.cgroup_value(ws.namespace, "reserved", "stress", "memory.swap.max")
            want = oracle.readback_swap_max(decision.value)
            claim(ws.record, "memory.swap.max on a node reserving memory", want, got,
                  f"{decision}; systemReserved {SYSTEM_RESERVED}, allocatable {want_allocatable}",
                  explain=lambda: ws.explain("reserved"))
    except NotCoveredError as error:
        pytest.fail(str(error))
