"""In-place resize (pods/resize) of containers with and without swap, as the kubelet decides
(oracle.resize_refused_for_swap cites it): the API server accepts every resize; the kubelet
refuses a memory-request change of a container with swap, with its condition, message, metric
and event, and leaves the container's cgroup as it was; the same change of a container without
swap is carried out."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client

from clusters.provider import SwapNode
from e2e import oracle
from e2e.claims import claim
from e2e.workspace import Workspace
from e2e.metrics import find, parse_prometheus
from e2e.observe import wait_for
from e2e.sizing import burstable_sizing
from e2e.wcs import needs_limits_swap_api
from workloads.pods import GUARANTEED, Mi, STRESS, stress_pod

RESIZE_SECONDS = 180
STEP = 16 * Mi  # the request grows by this much
LIMITS_SWAP = 48 * Mi  # KEP-5359: the WorkloadControlledSwap container's own swap


def resize_memory(ws: Workspace, name: str, request: int, limit: int | None) -> dict[str, Any]:
    """PATCH pods/<name>/resize (JSON patch: a merge patch would replace the containers list);
    returns the pod the API server answered with."""
    ops = [{"op": "replace", "path": "/spec/containers/0/resources/requests/memory", "value": str(request)}]
    if limit is not None:
        ops.append({"op": "replace", "path": "/spec/containers/0/resources/limits/memory", "value": str(limit)})
    api = client.CoreV1Api(ws.observer.api)
    return api.api_client.sanitize_for_serialization(api.patch_namespaced_pod_resize(name, ws.namespace, ops))


def resize_condition(pod: dict[str, Any]) -> dict[str, Any] | None:
    return next((c for c in pod.get("status", {}).get("conditions") or []
                 if c["type"] in ("PodResizePending", "PodResizeInProgress")), None)


def allocated_request(pod: dict[str, Any]) -> int:
    status = pod["status"]["containerStatuses"][0]
    return oracle.quantity_bytes(((status.get("resources") or {}).get("requests") or {}).get("memory", "0"))


def infeasible_count(ws: Workspace) -> float:
    name, labels = oracle.RESIZE_SWAP_METRIC
    sample = find(parse_prometheus(ws.observer.node_proxy("metrics")), name, **labels)
    return sample.value if sample else 0.0  # a counter vector shows a label set once it is incremented


def container_identity(pod: dict[str, Any]) -> tuple[str | None, int]:
    """(containerID, restartCount): an in-place resize, carried out or refused, keeps both."""
    status = pod["status"]["containerStatuses"][0]
    return status.get("containerID"), status.get("restartCount", 0)


def cgroup(ws: Workspace, name: str) -> dict[str, str]:
    return {f: ws.observer.cgroup_value(ws.namespace, name, "stress", f) for f in ("memory.max", "memory.swap.max")}


@pytest.mark.needs_behavior("LimitedSwap")
@pytest.mark.min_kubernetes("1.33")  # the swap rule exists since resize went beta and on by default
@pytest.mark.runs_alone("reads a node-wide counter of infeasible resizes")
def test_memory_resize_of_a_container_with_swap_is_infeasible(swap_node: SwapNode, workspace: Callable[[SwapNode], Workspace]) -> None:
    """Under LimitedSwap the API server accepts a memory-request resize of a Burstable container
    with swap and the kubelet refuses it (Infeasible, its message, metric and event), leaving the
    container, its allocated request and its cgroup unchanged.

    The counter is checked from 1.34, the event from 1.36: the kubelet has them since."""
    ws = workspace(swap_node)
    size = burstable_sizing(swap_node, headroom=32 * Mi)
    pod = ws.deploy(stress_pod("swapping", ws.image, ws.namespace, ws.test, [STRESS, "pause"], *size.resources()))
    started = container_identity(ws.running("swapping"))
    before, counted = cgroup(ws, "swapping"), infeasible_count(ws)
    desired = copy.deepcopy(pod)
    desired["spec"]["containers"][0]["resources"]["requests"]["memory"] = str(size.request + STEP)
    refused = oracle.resize_refused_for_swap(swap_node.behavior, pod, desired)
    inputs = f"{size}, memory request -> {size.request + STEP}, resizePolicy memory NotRequired (default)"
    assert refused == ["stress"], refused  # the design: the oracle refuses it

    answered = resize_memory(ws, "swapping", size.request + STEP, None)
    claim(ws.record, "spec after PATCH pods/resize (accepted)", size.request + STEP,
          oracle.quantity_bytes(answered["spec"]["containers"][0]["resources"]["requests"]["memory"]), inputs)
    generation = answered["metadata"]["generation"]
    observed = wait_for("the kubelet to decide the resize", lambda: _decided(ws, "swapping", generation), RESIZE_SECONDS,
                        lambda: ws.explain("swapping"))
    condition = resize_condition(observed) or {}
    context = f"{inputs}\ncondition {condition}\n" + ws.explain("swapping")
    claim(ws.record, "resize condition", ("PodResizePending", "True", oracle.RESIZE_SWAP_REASON),
          (condition.get("type"), condition.get("status"), condition.get("reason")), inputs, explain=context)
    claim(ws.record, "resize message", oracle.RESIZE_SWAP_MESSAGE, condition.get("message"), inputs, explain=context)
    claim(ws.record, "allocated memory request", size.request, allocated_request(observed), inputs, explain=context)
    claim(ws.record, "cgroup after the refused resize", before, cgroup(ws, "swapping"), inputs, explain=context)
    assert before["memory.swap.max"] == oracle.readback_swap_max(size.swap_limit), context  # it does have swap
    claim(ws.record, "container kept (containerID, restartCount)", started,
          container_identity(ws.observer.pod(ws.namespace, "swapping")), inputs, explain=context)
    if swap_node.kubelet_at_least("1.34"):  # the counter exists since 1.34
        name, labels = oracle.RESIZE_SWAP_METRIC
        claim(ws.record, f"{name}{labels} increase", 1, infeasible_count(ws) - counted, inputs, explain=context)
    if swap_node.kubelet_at_least("1.36"):  # the admit handler emits the event since 1.36
        events = ws.observer.events(ws.namespace, "swapping")
        claim(ws.record, f"{oracle.RESIZE_SWAP_EVENT} event naming the message", True,
              any(oracle.RESIZE_SWAP_EVENT in e and oracle.RESIZE_SWAP_MESSAGE in e for e in events), inputs,
              explain=f"events: {events}\n{context}")


@pytest.mark.needs_behavior("NoSwap", "LimitedSwap", "WorkloadControlledSwap")
@pytest.mark.min_kubernetes("1.33")
def test_memory_resize_of_a_container_without_swap_is_carried_out(swap_node: SwapNode,
                                                                   workspace: Callable[[SwapNode], Workspace],
                                                                   request: pytest.FixtureRequest) -> None:
    """A memory resize the swap rule allows (under NoSwap; of a Guaranteed pod under LimitedSwap,
    or of one with limits.swap under WorkloadControlledSwap) is carried out in place: new request
    and memory.max, memory.swap.max 0 or its limits.swap.

    NoSwap: the very pod and resize refused under LimitedSwap. LimitedSwap: a Guaranteed pod
    (no swap) whose memory request and limit grow together. WorkloadControlledSwap (KEP-5359
    lifts the refusal): that Guaranteed pod with limits.swap, which does swap and keeps its
    limits.swap across the resize."""
    ws = workspace(swap_node)
    if swap_node.behavior == "NoSwap":
        size = burstable_sizing(swap_node, headroom=32 * Mi)
        (requests, limits), new_limit = size.resources(), None
        new_request = size.request + STEP
    else:
        requests, limits = {"memory": 64 * Mi, "cpu": GUARANTEED["cpu"]}, {"memory": 64 * Mi, "cpu": GUARANTEED["cpu"]}
        new_request = new_limit = 64 * Mi + STEP
    if swap_node.behavior == "WorkloadControlledSwap":
        needs_limits_swap_api(ws, swap_node, request)
        limits["swap"] = str(LIMITS_SWAP)
    pod = ws.deploy(stress_pod("resized", ws.image, ws.namespace, ws.test, [STRESS, "pause"], requests, limits))
    started = container_identity(ws.running("resized"))
    desired = copy.deepcopy(pod)
    desired["spec"]["containers"][0]["resources"]["requests"]["memory"] = str(new_request)
    if new_limit is not None:
        desired["spec"]["containers"][0]["resources"]["limits"]["memory"] = str(new_limit)
    inputs = f"{swap_node.behavior}, memory request {requests['memory']} -> {new_request}, limit {limits['memory']} -> {new_limit or limits['memory']}"
    assert oracle.resize_refused_for_swap(swap_node.behavior, pod, desired) == [], inputs  # the design: allowed

    generation = resize_memory(ws, "resized", new_request, new_limit)["metadata"]["generation"]
    observed = wait_for("the kubelet to decide the resize", lambda: _decided(ws, "resized", generation), RESIZE_SECONDS,
                        lambda: ws.explain("resized"))
    context = f"{inputs}\ncondition {resize_condition(observed)}\n" + ws.explain("resized")
    claim(ws.record, "resize condition", None, resize_condition(observed), inputs, explain=context)
    claim(ws.record, "allocated memory request", new_request, allocated_request(observed), inputs, explain=context)
    expected_max = oracle.expected_memory_max(desired, "stress")
    swap = oracle.readback_swap_max(oracle.expected_swap_max(swap_node.behavior, desired, "stress",
                                                            swap_node.memory_capacity, swap_node.swap_capacity))
    claim(ws.record, "cgroup after the resize", {"memory.max": expected_max, "memory.swap.max": swap},
          cgroup(ws, "resized"), inputs, explain=context)
    if swap_node.behavior == "WorkloadControlledSwap":  # the design: this container does have swap
        assert swap == oracle.readback_swap_max(LIMITS_SWAP), (swap, inputs)
    # in place: the very container, not a re-created one that happens to have the new values
    claim(ws.record, "container kept in place (containerID, restartCount)", started,
          container_identity(ws.observer.pod(ws.namespace, "resized")), inputs, explain=context)


def _decided(ws: Workspace, name: str, generation: int) -> dict[str, Any] | None:
    """The pod once the kubelet has acted on this generation: refused (PodResizePending) or
    carried out (no resize condition, the allocated request changed)."""
    pod = ws.observer.pod(ws.namespace, name)
    seen = pod.get("status", {}).get("observedGeneration")  # PodObservedGenerationTracking, on from 1.34
    if seen is not None and seen < generation:
        return None
    condition = resize_condition(pod)
    if condition is None:
        spec_request = oracle.quantity_bytes(pod["spec"]["containers"][0]["resources"]["requests"]["memory"])
        return pod if allocated_request(pod) == spec_request else None
    return pod if condition["type"] == "PodResizePending" else None
