"""memory.swap.max and memory.max of every container of every pod shape, read from the
container's cgroup on the node (all containers in one read, by a privileged pod), against the
oracle for the node's behavior, memory and swap capacity. The shapes' deployment and the one
read of their cgroups: e2e/shapes.py. Two kinds of container are read otherwise, within the same
deployment: a plain init container, ended before any read, prints its own cgroup files to its
log; an ephemeral container is added to a running shape's pod and read in the batch.

Shapes with pod-level resources carry their own minimum kubelet version (PodShape.min_kubernetes):
their tests skip, saying so, on an older node, and they are not deployed there."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from clusters import waits
from clusters.provider import NotCoveredError, Provider, SwapNode
from e2e import oracle
from e2e.claims import Claims, claim
from e2e.observe import wait_for
from e2e.record import Recorder
from e2e.shapes import ShapePods  # the shape_pods fixture: e2e/conftest.py
from e2e.sizing import burstable_sizing
from e2e.workspace import Workspace
from workloads.pods import QOS_SHAPES, Mi, PodShape, stress_pod

CRITICAL_PRIORITY = {"system-node-critical": 2_000_001_000, "system-cluster-critical": 2_000_000_000}


def _shape_param(shape: PodShape) -> Any:
    marks = [pytest.mark.min_kubernetes(shape.min_kubernetes)] if shape.min_kubernetes else []
    return pytest.param(shape, id=shape.id, marks=marks)


SHAPES = [_shape_param(s) for s in QOS_SHAPES]


@pytest.mark.parametrize("shape", SHAPES)
def test_pod_is_the_shape_that_was_built(swap_node: SwapNode, shape_pods: ShapePods, shape: PodShape) -> None:
    """Every pod shape runs as the QoS class it was built as, with its priority class's priority
    (0 without one), and the pod-level resources the API server stored are the oracle's defaulting
    of the built ones.

    What was built is asserted before any outcome: upstream once ran every "QoS case" as
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
    """Under LimitedSwap a container of a non-critical Burstable pod whose memory request is not its
    limit reads its request's share of the node's swap as memory.swap.max, page-floored; every
    other container, under any behavior, reads 0.

    The expectation is the oracle's (oracle.decide_swap) for the node's behavior, memory and swap
    capacity, with the rule and its inputs recorded beside each container's value."""
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
    """Every container's memory.max is its own memory limit, else the pod-level memory limit,
    else `max`, page-floored.

    The kubelet's getMemoryLimit."""
    pod = shape_pods.pod(shape)
    pod_limit = ((pod["spec"].get("resources") or {}).get("limits") or {}).get("memory")
    each = Claims(record)
    for container in shape.container_names():
        limit = (oracle.find_container(pod, container).get("resources", {}).get("limits") or {}).get("memory")
        inputs = f"limits.memory {limit or 'none'}" + (f", pod-level limits.memory {pod_limit}" if pod_limit else "")
        each.claim(f"memory.max of {container}", oracle.expected_memory_max(pod, container),
                   shape_pods.read(shape, container, "memory.max"), inputs)
    each.hold(explain=shape_pods.report(shape))


@pytest.mark.parametrize("shape", SHAPES)
def test_no_swap_limit_above_the_container(swap_node: SwapNode, shape_pods: ShapePods, shape: PodShape,
                                           record: Recorder) -> None:
    """The cgroups the kubelet makes above a container (the pod's, its QoS class's, the node
    allocatable `kubepods`) read memory.swap.max `max` under every behavior: the kubelet bounds
    swap per container only.

    Read in the shapes' one batch, each cgroup found from the container's path; a Guaranteed pod
    has no QoS cgroup of its own. A pod-level swap limit would take swap from containers that
    have a share, or give none to containers the kubelet left unlimited."""
    shape_pods.pod(shape)
    each = Claims(record)
    for path, value in shape_pods.swap_max_above(shape).items():
        each.claim(f"memory.swap.max of {path}", oracle.PARENT_SWAP_MAX, value, oracle.PARENT_SWAP_MAX_RULE)
    each.hold(explain=shape_pods.report(shape))


INIT_SHAPES = [_shape_param(s) for s in QOS_SHAPES if s.printing_init_containers()]
EPHEMERAL_SHAPES = [_shape_param(s) for s in QOS_SHAPES if s.ephemeral]


@pytest.mark.parametrize("shape", INIT_SHAPES)
def test_init_container_memory_swap_max(swap_node: SwapNode, shape_pods: ShapePods, shape: PodShape,
                                        record: Recorder) -> None:
    """Under LimitedSwap a plain init container of a Burstable pod, its memory request below its
    limit, reads its own request's share of the node's swap as memory.swap.max (0 under any other
    behavior) and its own limit as memory.max.

    The kubelet creates init containers through the same startContainer path as app containers
    (oracle.container_kind, klr/kuberuntime_manager.go SyncPod "init container"), so decide_swap
    decides them alike, on the init container's own request, not the app container's (32Mi
    against 96Mi in burstable-init-container). It has ended before any reader could see its
    cgroup, so it prints its own memory.swap.max and memory.max (`swapstress read-cgroups` of
    /sys/fs/cgroup, its cgroup namespace) and the shapes' deployment keeps its log."""
    pod = shape_pods.pod(shape)
    each = Claims(record)
    for container in shape.printing_init_containers():
        kind = oracle.container_kind(pod, container)
        assert kind == oracle.INIT_CONTAINER, (container, kind)  # the design: a plain init container, not a sidecar
        decision = oracle.decide_swap(
            swap_node.behavior, pod, container, swap_node.memory_capacity, swap_node.swap_capacity, cgroup_v2=True
        )
        each.claim(f"memory.swap.max of {kind} {container}, as it printed it", oracle.readback_swap_max(decision.value),
                   shape_pods.printed_value(shape, container, "memory.swap.max"), str(decision))
        limit = (oracle.find_container(pod, container).get("resources", {}).get("limits") or {}).get("memory")
        each.claim(f"memory.max of {kind} {container}, as it printed it", oracle.expected_memory_max(pod, container),
                   shape_pods.printed_value(shape, container, "memory.max"), f"limits.memory {limit or 'none'}")
    each.hold(explain=shape_pods.report(shape))


@pytest.mark.parametrize("shape", EPHEMERAL_SHAPES)
def test_ephemeral_container_gets_no_swap(swap_node: SwapNode, shape_pods: ShapePods, shape: PodShape,
                                          record: Recorder) -> None:
    """An ephemeral (debug) container added to a running Burstable pod reads memory.swap.max 0 under
    every behavior, and memory.max `max` (it has no resources, and the pod no pod-level limit).

    The API server refuses resources on an ephemeral container; the kubelet starts it as any
    container (ephemeralContainerStartSpec -> startContainer), so GetContainerSwapBehavior finds
    neither a memory request nor a limit: NoSwap, which writes memory.swap.max 0 explicitly
    (a kubelet that sent no swap setting would leave the runtime's default, `max`); getMemoryLimit
    gives it the pod-level memory limit where one is set, else none. Under LimitedSwap the pod's
    app container has a share, read in the same batch: the pod does swap, its debugger may not."""
    pod = shape_pods.pod(shape)
    each = Claims(record)
    for container in shape.ephemeral:
        kind = oracle.container_kind(pod, container)
        assert kind == oracle.EPHEMERAL_CONTAINER, (container, kind)  # the design: it was added as one
        decision = oracle.decide_swap(
            swap_node.behavior, pod, container, swap_node.memory_capacity, swap_node.swap_capacity, cgroup_v2=True
        )
        assert decision.value == 0, decision  # the claim itself, as the oracle models the kubelet
        each.claim(f"memory.swap.max of {kind} {container}", oracle.readback_swap_max(decision.value),
                   shape_pods.read(shape, container, "memory.swap.max"), str(decision))
        each.claim(f"memory.max of {kind} {container}", oracle.expected_memory_max(pod, container),
                   shape_pods.read(shape, container, "memory.max"),
                   "no resources of its own (ephemeral container); pod-level limits.memory "
                   + str(((pod["spec"].get("resources") or {}).get("limits") or {}).get("memory", "none")))
    each.hold(explain=shape_pods.report(shape))


@pytest.mark.touches_no_node("computes expectations from the node's capacities")
def test_limited_swap_shapes_actually_differ(limited_swap_node: SwapNode) -> None:
    """On the LimitedSwap node's capacities the oracle expects memory.swap.max above 0 for some
    shape's container and 0 for another, and the node has swap.

    Guard against a suite that passes by accident: under LimitedSwap at least one container
    must have a non-zero expected swap limit, or the cgroup tests above prove nothing."""
    memory, swap = limited_swap_node.memory_capacity, limited_swap_node.swap_capacity

    def page_edge(near: int) -> int:
        return oracle.page_edge_request(near, memory, swap)

    expected = [
        oracle.expected_swap_max("LimitedSwap", shape.manifest("x", "ns", "t", page_edge), c, memory, swap)
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
    """On a node that reserves memory for the system, a Burstable container's LimitedSwap share
    is still of the node's memory capacity, not of its allocatable memory.

    The LimitedSwap share divides by the node's memory capacity (cAdvisor's MemoryCapacity,
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
                     waits.NODE_STATUS, lambda: str(ws.observer.node_status()["status"]["allocatable"]))
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
