"""In-place resize (pods/resize) of containers with and without swap, as the kubelet decides
(oracle.resize_refused_for_swap cites it): the API server accepts every resize; the kubelet
refuses a memory-request change of a container with swap, with its condition, message, metric
and event, and leaves the container's cgroup as it was; the same change of a container without
swap is carried out; and of a container with swap whose memory resizePolicy is RestartContainer,
carried out by restarting it with its new request's share (oracle.resize_outcome)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client

from clusters import waits
from clusters.provider import SwapNode
from e2e import oracle
from e2e.claims import claim
from e2e.workspace import Workspace
from e2e.metrics import find, parse_prometheus
from e2e.observe import sent, wait_for
from e2e.sizing import burstable_sizing
from e2e.wcs import needs_limits_swap_api
from workloads.pods import GUARANTEED, Mi, STRESS, stress_pod

STEP = 16 * Mi  # the request grows by this much
LIMITS_SWAP = 48 * Mi  # KEP-5359: the WorkloadControlledSwap container's own swap


def resize_memory(ws: Workspace, name: str, request: int, limit: int | None) -> dict[str, Any]:
    """PATCH pods/<name>/resize of the first container's memory; returns the pod the API server
    answered with."""
    ops = [{"op": "replace", "path": "/spec/containers/0/resources/requests/memory", "value": str(request)}]
    if limit is not None:
        ops.append({"op": "replace", "path": "/spec/containers/0/resources/limits/memory", "value": str(limit)})
    return _patch_resize(ws, name, ops)


def resize_to(ws: Workspace, name: str, pod: dict[str, Any], desired: dict[str, Any]) -> dict[str, Any]:
    """PATCH pods/<name>/resize with every container and pod-level resource `desired` changes from `pod`."""
    ops = []
    for kind in ("requests", "limits"):
        was = (pod["spec"].get("resources") or {}).get(kind) or {}
        for resource, value in ((desired["spec"].get("resources") or {}).get(kind) or {}).items():
            if was.get(resource) != value:
                ops.append({"op": "add", "path": f"/spec/resources/{kind}/{resource}", "value": str(value)})
    for key in ("initContainers", "containers"):
        for index, (old, new) in enumerate(zip(pod["spec"].get(key) or [], desired["spec"].get(key) or [])):
            for kind in ("requests", "limits"):
                was = (old.get("resources") or {}).get(kind) or {}
                for resource, value in ((new.get("resources") or {}).get(kind) or {}).items():
                    if was.get(resource) != value:  # "add" replaces a member that exists
                        ops.append({"op": "add", "path": f"/spec/{key}/{index}/resources/{kind}/{resource}", "value": str(value)})
    assert ops, "the desired pod changes no resource"
    return _patch_resize(ws, name, ops)


def _patch_resize(ws: Workspace, name: str, ops: list[dict[str, Any]]) -> dict[str, Any]:
    # A JSON patch: a merge patch would replace the containers list. Its operations set values at
    # paths, so resending one that was stored changes nothing.
    api = client.CoreV1Api(ws.observer.api)
    return api.api_client.sanitize_for_serialization(
        sent(f"resize of {ws.namespace}/{name}", lambda: api.patch_namespaced_pod_resize(name, ws.namespace, ops)))


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


def _status(pod: dict[str, Any], container: str | None) -> dict[str, Any]:
    statuses = (pod["status"].get("containerStatuses") or []) + (pod["status"].get("initContainerStatuses") or [])
    return statuses[0] if container is None else next(s for s in statuses if s["name"] == container)


def container_identity(pod: dict[str, Any], container: str | None = None) -> tuple[str | None, int]:
    """(containerID, restartCount): an in-place resize, carried out or refused, keeps both."""
    status = _status(pod, container)
    return status.get("containerID"), status.get("restartCount", 0)


def allocated(pod: dict[str, Any], container: str, kind: str, resource: str) -> str | None:
    """The container's allocated (status.resources) request or limit, as the kubelet reports it."""
    return ((_status(pod, container).get("resources") or {}).get(kind) or {}).get(resource)


def cgroup(ws: Workspace, name: str, container: str = "stress") -> dict[str, str]:
    return {f: ws.observer.cgroup_value(ws.namespace, name, container, f) for f in ("memory.max", "memory.swap.max")}


def claim_refused(ws: Workspace, name: str, observed: dict[str, Any], inputs: str, container: str,
                  request: int, cgroup_before: dict[str, str], started: tuple[str | None, int]) -> None:
    """The kubelet refused a resize for swap: Infeasible with its message, and the container's
    allocated memory request, cgroup and identity as they were."""
    condition = resize_condition(observed) or {}
    context = f"{inputs}\ncondition {condition}\n" + ws.explain(name)
    claim(ws.record, "resize condition", ("PodResizePending", "True", oracle.RESIZE_SWAP_REASON),
          (condition.get("type"), condition.get("status"), condition.get("reason")), inputs, explain=context)
    claim(ws.record, "resize message", oracle.RESIZE_SWAP_MESSAGE, condition.get("message"), inputs, explain=context)
    claim(ws.record, f"allocated memory request of {container}", request,
          oracle.quantity_bytes(allocated(observed, container, "requests", "memory") or "0"), inputs, explain=context)
    claim(ws.record, f"cgroup of {container} after the refused resize", cgroup_before, cgroup(ws, name, container), inputs,
          explain=context)
    claim(ws.record, f"{container} kept (containerID, restartCount)", started,
          container_identity(ws.observer.pod(ws.namespace, name), container), inputs, explain=context)


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
    observed = wait_for("the kubelet to decide the resize", lambda: _decided(ws, "swapping", generation), waits.RESIZE_DECIDED,
                        lambda: ws.explain("swapping"))
    context = f"{inputs}\ncondition {resize_condition(observed)}\n" + ws.explain("swapping")
    assert before["memory.swap.max"] == oracle.readback_swap_max(size.swap_limit), context  # the design: it has swap
    claim_refused(ws, "swapping", observed, inputs, "stress", size.request, before, started)
    if swap_node.kubelet_at_least(oracle.RESIZE_SWAP_METRIC_SINCE):
        name, labels = oracle.RESIZE_SWAP_METRIC
        claim(ws.record, f"{name}{labels} increase", 1, infeasible_count(ws) - counted, inputs, explain=context)
    if swap_node.kubelet_at_least(oracle.RESIZE_SWAP_EVENT_SINCE):
        events = ws.observer.events(ws.namespace, "swapping")
        claim(ws.record, f"{oracle.RESIZE_SWAP_EVENT} event naming the message", True,
              any(oracle.RESIZE_SWAP_EVENT in e and oracle.RESIZE_SWAP_MESSAGE in e for e in events), inputs,
              explain=f"events: {events}\n{context}")


@pytest.mark.needs_behavior("LimitedSwap")
@pytest.mark.min_kubernetes("1.33")
def test_memory_resize_that_would_give_a_container_swap_is_infeasible(swap_node: SwapNode,
                                                                     workspace: Callable[[SwapNode], Workspace]) -> None:
    """Under LimitedSwap a memory-request resize that would give a container without swap a share
    (request lowered below its limit, in a Burstable pod) is refused: Infeasible, the container,
    its allocated request and its memory.swap.max 0 unchanged.

    The kubelet judges the desired pod as well as the allocated one (disallowResizeForSwappableContainers:
    either container's swap behavior not NoSwap refuses). The pod is Burstable through a CPU
    request without a limit; its container's memory request equals its limit: NoSwap."""
    ws = workspace(swap_node)
    requests, limits = {"memory": 64 * Mi, "cpu": "100m"}, {"memory": 64 * Mi}
    pod = ws.deploy(stress_pod("noswap", ws.image, ws.namespace, ws.test, [STRESS, "pause"], requests, limits))
    started, before = container_identity(ws.running("noswap")), cgroup(ws, "noswap")
    desired = copy.deepcopy(pod)
    desired["spec"]["containers"][0]["resources"]["requests"]["memory"] = str(64 * Mi - STEP)
    memory, swap = swap_node.memory_capacity, swap_node.swap_capacity
    inputs = f"memory request 64Mi -> {64 * Mi - STEP} (limit 64Mi), cpu request 100m: {oracle.resize_outcome(swap_node.behavior, pod, desired, 'stress', memory, swap)}"
    # the design: no swap now, a share after, and the oracle refuses
    assert oracle.expected_swap_max(swap_node.behavior, pod, "stress", memory, swap) == 0, inputs
    assert oracle.expected_swap_max(swap_node.behavior, desired, "stress", memory, swap) > 0, inputs
    assert oracle.resize_refused_for_swap(swap_node.behavior, pod, desired) == ["stress"], inputs
    claim(ws.record, "memory.swap.max before the resize", "0", before["memory.swap.max"], inputs,
          explain=lambda: ws.explain("noswap"))

    generation = resize_to(ws, "noswap", pod, desired)["metadata"]["generation"]
    observed = wait_for("the kubelet to decide the resize", lambda: _decided(ws, "noswap", generation), waits.RESIZE_DECIDED,
                        lambda: ws.explain("noswap"))
    claim_refused(ws, "noswap", observed, inputs, "stress", 64 * Mi, before, started)


@pytest.mark.needs_behavior("LimitedSwap")
@pytest.mark.min_kubernetes("1.33")
def test_memory_resize_of_a_sidecar_with_swap_is_infeasible(swap_node: SwapNode,
                                                           workspace: Callable[[SwapNode], Workspace]) -> None:
    """Under LimitedSwap a memory-request resize of a sidecar (restartable init container) with
    swap is refused like an app container's: Infeasible, its message, the sidecar, its allocated
    request and its cgroup unchanged.

    disallowResizeForSwappableContainers walks the init containers as well as the app containers."""
    ws = workspace(swap_node)
    size = burstable_sizing(swap_node, headroom=32 * Mi)
    pod = stress_pod("sidecar", ws.image, ws.namespace, ws.test, [STRESS, "pause"], {"memory": 64 * Mi}, {"memory": 64 * Mi})
    sidecar = copy.deepcopy(pod["spec"]["containers"][0])
    requests, limits = size.resources()
    sidecar.update(name="sidecar", restartPolicy="Always",
                   resources={"requests": {"memory": str(requests["memory"])}, "limits": {"memory": str(limits["memory"])}})
    pod["spec"]["initContainers"] = [sidecar]
    pod = ws.deploy(pod)
    ws.running("sidecar")
    started, before = container_identity(ws.observer.pod(ws.namespace, "sidecar"), "sidecar"), cgroup(ws, "sidecar", "sidecar")
    desired = copy.deepcopy(pod)
    desired["spec"]["initContainers"][0]["resources"]["requests"]["memory"] = str(size.request + STEP)
    inputs = f"sidecar {size}, memory request -> {size.request + STEP}, resizePolicy memory NotRequired (default)"
    assert oracle.resize_refused_for_swap(swap_node.behavior, pod, desired) == ["sidecar"], inputs  # the design
    claim(ws.record, "the sidecar's memory.swap.max before the resize", oracle.readback_swap_max(size.swap_limit),
          before["memory.swap.max"], inputs, explain=lambda: ws.explain("sidecar"))

    generation = resize_to(ws, "sidecar", pod, desired)["metadata"]["generation"]
    observed = wait_for("the kubelet to decide the resize", lambda: _decided(ws, "sidecar", generation, "sidecar"),
                        waits.RESIZE_DECIDED, lambda: ws.explain("sidecar"))
    claim_refused(ws, "sidecar", observed, inputs, "sidecar", size.request, before, started)


@pytest.mark.needs_behavior("LimitedSwap")
@pytest.mark.min_kubernetes("1.33")
def test_resizes_keeping_the_memory_request_are_carried_out_with_swap(swap_node: SwapNode,
                                                                       workspace: Callable[[SwapNode], Workspace]) -> None:
    """Under LimitedSwap a memory-limit, then a CPU-request resize of a Burstable container with
    swap are carried out in place: new limit and request allocated, memory.max the new limit,
    memory.swap.max still its request's share, the pod cgroup's `max`.

    The swap rule refuses only a memory-*request* change (oracle.resize_outcome); what passes is
    applied by UpdateContainerResources, which sends the same request's swap again."""
    ws = workspace(swap_node)
    size = burstable_sizing(swap_node, headroom=32 * Mi)
    requests, limits = size.resources()
    requests["cpu"] = "100m"
    pod = ws.deploy(stress_pod("limited", ws.image, ws.namespace, ws.test, [STRESS, "pause"], requests, limits))
    started = container_identity(ws.running("limited"))
    memory, swap = swap_node.memory_capacity, swap_node.swap_capacity
    share = oracle.readback_swap_max(size.swap_limit)
    claim(ws.record, "memory.swap.max before the resizes", share, cgroup(ws, "limited")["memory.swap.max"], f"{size}",
          explain=lambda: ws.explain("limited"))
    raised = copy.deepcopy(pod)
    raised["spec"]["containers"][0]["resources"]["limits"]["memory"] = str(size.limit + STEP)
    faster = copy.deepcopy(raised)
    faster["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "200m"
    for before, desired, what, kind, resource in ((pod, raised, f"memory limit {size.limit} -> {size.limit + STEP}", "limits", "memory"),
                                                  (raised, faster, "cpu request 100m -> 200m", "requests", "cpu")):
        outcome = oracle.resize_outcome(swap_node.behavior, before, desired, "stress", memory, swap)
        inputs = f"{size}, cpu request 100m; {what}: {outcome}"
        assert outcome.action == oracle.RESIZE_IN_PLACE and oracle.readback_swap_max(outcome.swap.value) == share, inputs
        wanted = desired["spec"]["containers"][0]["resources"][kind][resource]
        generation = resize_to(ws, "limited", before, desired)["metadata"]["generation"]
        observed = wait_for(f"the kubelet to carry out or refuse the resize ({what})",
                            lambda: _decided(ws, "limited", generation, "stress", (kind, resource, wanted)),
                            waits.RESIZE_DECIDED, lambda: ws.explain("limited"))
        context = f"{inputs}\ncondition {resize_condition(observed)}\n" + ws.explain("limited")
        claim(ws.record, f"resize condition ({what})", None, resize_condition(observed), inputs, explain=context)
        claim(ws.record, f"allocated {resource} {kind[:-1]} ({what})", _exact(wanted),
              _exact(allocated(observed, "stress", kind, resource)), inputs, explain=context)
        claim(ws.record, f"cgroup after the resize ({what})",
              {"memory.max": oracle.expected_memory_max(desired, "stress"), "memory.swap.max": share},
              cgroup(ws, "limited"), inputs, explain=context)
        claim(ws.record, f"container kept in place ({what})", started,
              container_identity(ws.observer.pod(ws.namespace, "limited")), inputs, explain=context)
        pod_cgroup = "pod" + observed["metadata"]["uid"]
        claim(ws.record, f"memory.swap.max of the pod cgroup after the resize ({what})", oracle.PARENT_SWAP_MAX,
              ws.node_files().cgroup_file(pod_cgroup, "memory.swap.max")[1],
              f"{oracle.PARENT_SWAP_MAX_RULE}; the resize sets the pod cgroup's memory (SetPodCgroupConfig), never its swap",
              explain=context)


@pytest.mark.needs_behavior("LimitedSwap")
@pytest.mark.min_kubernetes("1.36")  # in-place resize of pod-level resources: beta, on by default
def test_pod_level_memory_resize_is_carried_out_with_swap(swap_node: SwapNode,
                                                          workspace: Callable[[SwapNode], Workspace]) -> None:
    """From 1.36, under LimitedSwap, a resize of the pod-level memory request and limit of a
    Burstable pod whose container has swap is carried out in place: the pod cgroup's memory.max
    the new limit, the container's memory.swap.max its own request's share.

    The swap rule judges containers' requests only (handlers.go disallowResizeForSwappableContainers);
    a pod-level resize passes IsInPlacePodLevelResourcesVerticalScalingAllowed alone, and the
    container's share is of its own request (oracle.decide_swap), which does not change."""
    ws = workspace(swap_node)
    size = burstable_sizing(swap_node, headroom=32 * Mi)
    requests, limits = size.resources()
    manifest = stress_pod("pod-level", ws.image, ws.namespace, ws.test, [STRESS, "pause"], requests, limits)
    manifest["spec"]["resources"] = {"requests": {"memory": str(size.request)}, "limits": {"memory": str(size.limit + STEP)}}
    pod = ws.deploy(manifest)
    running = ws.running("pod-level")
    started = container_identity(running)
    decision = oracle.decide_swap(swap_node.behavior, running, "stress", swap_node.memory_capacity, swap_node.swap_capacity)
    share = oracle.readback_swap_max(decision.value)
    pod_cgroup = "pod" + running["metadata"]["uid"]

    def pod_memory_max() -> str:
        return ws.node_files().cgroup_file(pod_cgroup, "memory.max")[1]

    claim(ws.record, "memory.swap.max before the resize", share, cgroup(ws, "pod-level")["memory.swap.max"], str(decision),
          explain=lambda: ws.explain("pod-level"))
    desired = copy.deepcopy(pod)
    desired["spec"]["resources"] = {"requests": {"memory": str(size.request + STEP)},
                                    "limits": {"memory": str(size.limit + 2 * STEP)}}
    new_limit = oracle.readback_swap_max(size.limit + 2 * STEP)
    inputs = (f"{decision}; pod-level memory request {size.request} -> {size.request + STEP},"
              f" limit {size.limit + STEP} -> {size.limit + 2 * STEP}")
    generation = resize_to(ws, "pod-level", pod, desired)["metadata"]["generation"]

    def decided() -> dict[str, Any] | None:
        acted = _acted_on(ws, "pod-level", generation)
        if acted is None:
            return None
        condition = resize_condition(acted)
        if condition is not None:
            return acted if condition["type"] == "PodResizePending" else None
        return acted if pod_memory_max() == new_limit else None

    observed = wait_for("the kubelet to carry out or refuse the pod-level resize", decided, waits.RESIZE_DECIDED,
                        lambda: f"pod cgroup memory.max {pod_memory_max()}\n" + ws.explain("pod-level"))
    context = f"{inputs}\ncondition {resize_condition(observed)}\n" + ws.explain("pod-level")
    claim(ws.record, "resize condition (pod-level memory)", None, resize_condition(observed), inputs, explain=context)
    claim(ws.record, "memory.max of the pod cgroup after the resize", new_limit, pod_memory_max(),
          f"{inputs}: the pod cgroup's limit is the pod-level limit", explain=context)
    claim(ws.record, "memory.swap.max after the pod-level resize", share, cgroup(ws, "pod-level")["memory.swap.max"],
          inputs, explain=context)
    claim(ws.record, "container kept in place (pod-level resize)", started,
          container_identity(ws.observer.pod(ws.namespace, "pod-level")), inputs, explain=context)


def _exact(quantity: str | None) -> str | None:
    """A quantity in one spelling (the kubelet may report 134217728 as 128Mi)."""
    from kubernetes.utils import parse_quantity

    return None if quantity is None else str(parse_quantity(quantity))


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
    observed = wait_for("the kubelet to decide the resize", lambda: _decided(ws, "resized", generation), waits.RESIZE_DECIDED,
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


# resizePolicy: cpu first, so that a kubelet taking the first policy whatever its resource, or
# looking the memory policy up under cpu (mutant 39), finds NotRequired and refuses the resize.
RESTART_ON_MEMORY_RESIZE = [{"resourceName": "cpu", "restartPolicy": "NotRequired"},
                            {"resourceName": "memory", "restartPolicy": "RestartContainer"}]


@pytest.mark.needs_behavior("LimitedSwap")
def test_memory_resize_with_restart_policy_restarts_the_container(swap_node: SwapNode,
                                                                   workspace: Callable[[SwapNode], Workspace]) -> None:
    """Under LimitedSwap a memory-request resize of a Burstable container with swap whose memory
    resizePolicy is RestartContainer is carried out by restarting the container, which reads its new
    request's share as memory.swap.max.

    The documented way to resize a container with swap (the refusal above exempts it): the
    kubelet's refusal (oracle.resize_outcome: allocation/handlers.go
    disallowResizeForSwappableContainers in 1.36+, allocation_manager.go in 1.34-1.35, the same
    rule) lets it through, computePodResizeAction restarts the container, and the new container
    gets a fresh swap decision on its new request. Checked: no resize condition (not Infeasible),
    the allocated request the new one, a new containerID with restartCount one higher, and
    memory.swap.max the new request's share, a different page count from the old one's."""
    ws = workspace(swap_node)
    size = burstable_sizing(swap_node, headroom=32 * Mi)
    pod = stress_pod("restarted", ws.image, ws.namespace, ws.test, [STRESS, "pause"], *size.resources())
    pod["spec"]["restartPolicy"] = "Always"  # the API server refuses RestartContainer in a restartPolicy Never pod
    pod["spec"]["containers"][0]["resizePolicy"] = RESTART_ON_MEMORY_RESIZE
    ws.deploy(pod)
    started = container_identity(ws.running("restarted"))
    desired = copy.deepcopy(pod)
    new_request = size.request + STEP  # still below the limit (request + 32 MiB): Burstable with a share
    desired["spec"]["containers"][0]["resources"]["requests"]["memory"] = str(new_request)
    memory, swap = swap_node.memory_capacity, swap_node.swap_capacity
    outcome = oracle.resize_outcome(swap_node.behavior, pod, desired, "stress", memory, swap)
    old_share = oracle.readback_swap_max(oracle.expected_swap_max(swap_node.behavior, pod, "stress", memory, swap))
    new_share = oracle.readback_swap_max(outcome.swap.value)
    inputs = f"{size}, memory request -> {new_request}, resizePolicy {RESTART_ON_MEMORY_RESIZE}: {outcome}"
    assert outcome.action == oracle.RESIZE_RESTART, inputs  # the design: the oracle restarts it
    assert old_share != new_share and old_share != "0", inputs  # the design: it has swap, and the share changes
    claim(ws.record, "memory.swap.max before the resize", old_share, cgroup(ws, "restarted")["memory.swap.max"], inputs,
          explain=lambda: ws.explain("restarted"))

    generation = resize_memory(ws, "restarted", new_request, None)["metadata"]["generation"]
    observed = wait_for("the kubelet to restart the container with the new request, or refuse the resize",
                        lambda: _restarted_or_refused(ws, "restarted", generation, started[0]), waits.POD_START,
                        lambda: ws.explain("restarted"))
    context = f"{inputs}\ncondition {resize_condition(observed)}\n" + ws.explain("restarted")
    claim(ws.record, "resize condition (not Infeasible)", None, resize_condition(observed), inputs, explain=context)
    claim(ws.record, "allocated memory request", new_request, allocated_request(observed), inputs, explain=context)
    now = container_identity(observed)
    claim(ws.record, "restartCount after the resize", started[1] + 1, now[1], inputs, explain=context)
    claim(ws.record, "containerID after the resize (a new container)", f"not {started[0]}", now[0], inputs,
          ok=now[0] != started[0], explain=context)
    claim(ws.record, "cgroup of the restarted container",
          {"memory.max": oracle.expected_memory_max(desired, "stress"), "memory.swap.max": new_share},
          cgroup(ws, "restarted"), inputs, explain=context)


def _acted_on(ws: Workspace, name: str, generation: int) -> dict[str, Any] | None:
    """The pod, unless the kubelet has not yet observed this generation of it."""
    pod = ws.observer.pod(ws.namespace, name)
    seen = pod.get("status", {}).get("observedGeneration")  # PodObservedGenerationTracking, on from 1.34
    return None if seen is not None and seen < generation else pod


def _restarted_or_refused(ws: Workspace, name: str, generation: int, old_id: str | None) -> dict[str, Any] | None:
    """The pod once the kubelet has acted on this generation for good: refused as Infeasible, or
    carried out with the container restarted (no resize condition, a new container running)."""
    pod = _acted_on(ws, name, generation)
    if pod is None:
        return None
    condition = resize_condition(pod)
    if condition is not None:
        return pod if (condition["type"], condition.get("reason")) == ("PodResizePending", oracle.RESIZE_SWAP_REASON) else None
    status = pod["status"]["containerStatuses"][0]
    running = "running" in (status.get("state") or {})
    return pod if running and status.get("containerID") not in (None, old_id) else None


def _decided(ws: Workspace, name: str, generation: int, container: str | None = None,
             changed: tuple[str, str, str] | None = None) -> dict[str, Any] | None:
    """The pod once the kubelet has acted on this generation: refused (PodResizePending) or
    carried out (no resize condition, and the container's allocated `changed` (kind, resource,
    value) is the new value; by default its memory request is the spec's)."""
    pod = _acted_on(ws, name, generation)
    if pod is None:
        return None
    condition = resize_condition(pod)
    if condition is not None:
        return pod if condition["type"] == "PodResizePending" else None
    if changed is None:
        spec_request = oracle.quantity_bytes(pod["spec"]["containers"][0]["resources"]["requests"]["memory"])
        return pod if allocated_request(pod) == spec_request else None
    kind, resource, value = changed
    return pod if _exact(allocated(pod, container or "stress", kind, resource)) == _exact(value) else None
