"""What the kubelet must do with swap, as pure functions: the suite's source of expected values.

Nothing here talks to a cluster. Pods are plain manifests (dicts shaped like
`kubectl get pod -o json`); `kubernetes.client.V1Pod` objects are accepted too and converted.
Every rule cites the kubelet code it models, so a reviewer can check it line by line:

- pkg/kubelet/kuberuntime/kuberuntime_container_linux.go: GetContainerSwapBehavior,
  ConfigureLimitedSwap, calcSwapForBurstablePods (LimitedSwap); getMemoryLimit (memory.max,
  pod-level limit for a container without its own);
- pkg/apis/core/v1/helper/qos: GetPodQOS (status.qosClass first), ComputePodQOS (pod-level
  resources decide when set); pkg/apis/core/v1/defaults.go: requests default to limits (the
  kubelet only ever sees defaulted pods); pkg/api/pod/util.go DefaultPodLevelResources (1.37) and
  defaults.go defaultPodRequests (1.34-1.36): pod-level requests and limits;
- pkg/kubelet/types/pod_update.go: IsCriticalPod, IsStaticPod, IsMirrorPod;
- pkg/kubelet/util/swap/swap_util.go, pkg/volume/emptydir: memory-backed volumes and `noswap`;
- pkg/kubelet/eviction/helpers.go: rankMemoryPressure;
- pkg/kubelet/kuberuntime/kuberuntime_manager.go: SyncPod (every kind of container, init and
  ephemeral ones too, is created through startContainer: container_kind), computePodResizeAction
  (a resize carried out in place or by a restart: resize_outcome); pkg/kubelet/allocation/
  handlers.go disallowResizeForSwappableContainers (the swap refusal: resize_refused_for_swap);
- cmd/kubelet/app/server.go, pkg/kubelet/apis/config/validation/validation.go,
  pkg/kubelet/cm/container_manager_linux.go NewContainerManager: the configurations a kubelet
  refuses to start with (kubelet_start_refusal);
- KEP-5359 for WorkloadControlledSwap (not merged upstream yet; semantics from the KEP).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from clusters.behaviors import (
    ALL_BEHAVIORS,
    LIMITED_SWAP,
    NO_SWAP,
    WORKLOAD_CONTROLLED_SWAP,
    UnknownBehaviorError,
    normalize,
)
from clusters.kernel import kernel_supports_noswap  # the preflight needs it too: it lives below both

__all__ = [
    "ALL_BEHAVIORS",
    "LIMITED_SWAP",
    "NO_SWAP",
    "WORKLOAD_CONTROLLED_SWAP",
    "UnknownBehaviorError",
    "PAGE_SIZE",
    "SYSTEM_CRITICAL_PRIORITY",
    "SwapDecision",
    "decide_swap",
    "expected_swap_max",
    "readback_bytes",
    "readback_swap_max",
    "expected_memory_max",
    "container_memory_limit",
    "page_edge_request",
    "qos_class",
    "pod_qos",
    "pod_level_resources_set",
    "is_critical_pod",
    "defaulted_pod",
    "find_container",
    "container_kind",
    "resize_outcome",
    "ResizeOutcome",
    "quantity_bytes",
    "MemoryBackedVolume",
    "memory_backed_volumes",
    "is_memory_backed",
    "kernel_supports_noswap",
    "pod_memory_limit",
    "expected_tmpfs_size",
    "readback_tmpfs_size_kib",
    "expects_noswap",
    "pod_memory_request",
    "eviction_ranking",
    "eviction_memory_request",
    "expected_evictions",
    "critical_pods_passed_over",
    "node_memory_usage",
    "node_working_set",
    "hugepage_aware_eviction",
    "node_memory_available",
    "StartRefusal",
    "kubelet_start_refusal",
    "swap_on_according_to_proc_swaps",
    "logged",
]

PAGE_SIZE = 4096
SWAP_RESOURCE = "swap"  # KEP-5359: resources.limits.swap
# KEP-5359: on a NoSwap or LimitedSwap node "a Pod event will be generated to indicate that the
# node does not support the requested swap configuration". The KEP names no reason; the
# prototype's is this one, and the suite asks only for a Pod event that speaks of limits.swap.
SWAP_LIMIT_IGNORED_REASON = "SwapLimitIgnored"


# KEP-5359 prototype (clusters/prototypes/kep-5359.patch, pkg/kubelet/metrics/metrics.go
# RegisterNodeSwapAllocated): on a WorkloadControlledSwap node, kubelet_node_swap_allocated_bytes is
# the sum of resources.limits.swap over every container and init container of the kubelet's active
# pods (GetActivePods: not in a terminal phase), read at each scrape.
NODE_SWAP_ALLOCATED_METRIC = "kubelet_node_swap_allocated_bytes"


def node_swap_allocated(pods: Iterable[Any]) -> int:
    """kubelet_node_swap_allocated_bytes for the node's pods as the API server lists them."""
    total = 0
    for pod in map(as_manifest, pods):
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        for container in (pod["spec"].get("initContainers") or []) + pod["spec"].get("containers", []):
            swap = ((container.get("resources") or {}).get("limits") or {}).get(SWAP_RESOURCE)
            total += quantity_bytes(swap) if swap is not None else 0
    return total


def node_swap_status(swap_capacity: int) -> dict[str, int] | None:
    """status.nodeInfo.swap as the kubelet sets it (nodestatus/setters.go MachineInfo, v1.33 to
    v1.37): the machine's swap capacity as cAdvisor read it at the kubelet's start (SwapTotal)
    where it is not 0; where it is 0 the setter leaves the field as it finds it, so a Node that
    never had it, or had it removed, has none. (It never clears the field: a kubelet restarted
    after swapoff keeps a Node's old capacity.)"""
    return {"capacity": swap_capacity} if swap_capacity else None


def swap_limit_ignored_event(event: str, container: str) -> bool:
    """Whether one of the pod's events ("TYPE REASON: message", as the observer lists them) is
    KEP-5359's "the node does not support the requested swap configuration" for `container`."""
    return "limits.swap" in event and container in event
# scheduling.SystemCriticalPriority: system-cluster-critical is exactly this value,
# system-node-critical is this + 1000.
SYSTEM_CRITICAL_PRIORITY = 2_000_000_000
CONFIG_SOURCE_ANNOTATION = "kubernetes.io/config.source"
CONFIG_MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
APISERVER_SOURCE = "api"

# ComputePodQOS only looks at these; hugepages, ephemeral-storage and swap do not change QoS.
_QOS_RESOURCES = ("cpu", "memory")

Pod = Mapping[str, Any]


# ---------------------------------------------------------------------------------------------
# Input normalisation
# ---------------------------------------------------------------------------------------------

def as_manifest(pod: Any) -> dict[str, Any]:
    """Return the pod as a camelCase dict, whether given a dict or a kubernetes.client.V1Pod."""
    if isinstance(pod, Mapping):
        return dict(pod)
    if hasattr(pod, "to_dict") and hasattr(pod, "openapi_types"):
        from kubernetes.client import ApiClient  # only needed for client objects

        return ApiClient().sanitize_for_serialization(pod)
    raise TypeError(f"expected a pod manifest (dict) or kubernetes.client.V1Pod, got {type(pod)!r}")


def quantity_bytes(value: Any) -> int:
    """A resource quantity as resource.Quantity.Value() gives it: an int, rounded up."""
    if isinstance(value, bool):
        raise TypeError("a quantity cannot be a bool")
    if isinstance(value, int):
        return value
    from kubernetes.utils import parse_quantity

    parsed: Decimal = parse_quantity(value)
    return int(math.ceil(parsed))


def _resources(obj: Mapping[str, Any] | None) -> tuple[dict[str, Any], dict[str, Any]]:
    res = (obj or {}).get("resources") or {}
    return dict(res.get("requests") or {}), dict(res.get("limits") or {})


def _with_defaulted_requests(obj: Mapping[str, Any], names: Iterable[str] | None = None) -> dict:
    """The API server's defaulting: a resource with a limit and no request gets request = limit,
    but for KEP-5359's limits.swap (a limit only: a defaulted non-zero requests.swap would be
    refused; the prototype, clusters/prototypes/kep-5359.patch, skips it in SetDefaults_Pod)."""
    requests, limits = _resources(obj)
    for name, value in limits.items():
        if (names is not None and name not in names) or name == SWAP_RESOURCE:
            continue
        requests.setdefault(name, value)
    out = dict(obj)
    res = dict(out.get("resources") or {})
    if requests:
        res["requests"] = requests
    out["resources"] = res
    return out


def is_pod_level_resource(name: str) -> bool:
    """resourcehelper.IsSupportedPodLevelResource (k8s.io/component-helpers/resource/helpers.go):
    cpu, memory and hugepages-*."""
    return name in _QOS_RESOURCES or name.startswith("hugepages-")


def pod_level_resources_set(pod: Any) -> bool:
    """resourcehelper.IsPodLevelResourcesSet: spec.resources names a supported pod-level
    resource in its requests or limits. Accepts a pod or its spec."""
    manifest = as_manifest(pod)
    requests, limits = _resources(manifest["spec"] if "spec" in manifest else manifest)
    return any(is_pod_level_resource(name) for name in [*requests, *limits])


def _quantity_text(value: Decimal) -> str:
    return str(int(value)) if value == value.to_integral_value() else format(value.normalize(), "f")


def _aggregate_containers(spec: Mapping[str, Any], name: str, limits: bool = False) -> Decimal | None:
    """resourcehelper.AggregateContainerRequests / AggregateContainerLimits for one resource,
    without overhead: max(app containers + sidecars, peak of the init sequence, each init
    container counted with the sidecars started before it). None when no container names
    the resource (the Go map then has no key for it)."""
    index = 1 if limits else 0
    named = False

    def amount(container: Mapping[str, Any]) -> Decimal:
        nonlocal named
        value = _resources(container)[index].get(name)
        named = named or value is not None
        return _exact(value)

    total = sum((amount(c) for c in spec.get("containers") or []), Decimal(0))
    sidecars, init_peak = Decimal(0), Decimal(0)
    for init in spec.get("initContainers") or []:
        if init.get("restartPolicy") == "Always":  # a sidecar runs beside the app containers
            value = amount(init)
            total += value
            sidecars += value
            step = sidecars
        else:
            step = amount(init) + sidecars
        init_peak = max(init_peak, step)
    return max(total, init_peak) if named else None


def _defaulted_pod_level(spec: Mapping[str, Any], legacy: bool) -> dict[str, Any]:
    """Pod-level requests and limits as the API server stores them.

    v1.37 (PodLevelResourcesFixDefaulting, beta and on by default): pkg/registry/core/pod/
    strategy.go PrepareForCreate -> pkg/api/pod/util.go DefaultPodLevelResources, once spec.resources
    has any request or limit:
      1. defaultPodLevelRequests: cpu and memory (supported and overcommittable) missing from the
         pod-level requests get the aggregated container requests, where a container requests
         them; then every pod-level limit still without a request gives its value as request;
      2. defaultPodLevelLimits: a supported resource with a pod-level request and no pod-level
         limit, that *every* container (init containers included) limits, gets
         max(pod-level request, aggregated container limits).
    1.34-1.36 (`legacy`): pkg/apis/core/v1/defaults.go SetDefaults_Pod -> defaultPodRequests, only
    when spec.resources has limits: step 1 alone. Not modelled there: defaultHugePagePodLimits runs
    first and copies the containers' hugepage limits to pod-level limits, which can start step 1 on
    a pod that set only pod-level requests; no shape of the suite limits hugepages.
    Container requests are defaulted from their limits first (SetDefaults_Pod), so they count.
    defaultHugePagePodLevelLimits is not modelled: hugepages play no part in QoS, swap or memory.max.
    """
    res = dict(spec.get("resources") or {})
    requests, limits = _resources(spec)
    if (not limits) if legacy else (not requests and not limits):
        return res
    for name in _QOS_RESOURCES:
        if name not in requests:
            aggregated = _aggregate_containers(spec, name)
            if aggregated is not None:
                requests[name] = _quantity_text(aggregated)
    for name, value in limits.items():
        if name not in requests and is_pod_level_resource(name):
            requests[name] = value
    if not legacy:
        everything = (spec.get("containers") or []) + (spec.get("initContainers") or [])
        for name in list(requests):
            if not is_pod_level_resource(name) or name in limits:
                continue
            if not all(name in _resources(c)[1] for c in everything):
                continue
            aggregated = _aggregate_containers(spec, name, limits=True)
            if aggregated is not None:
                limits[name] = _quantity_text(max(_exact(requests[name]), aggregated))
    if requests:
        res["requests"] = requests
    if limits:
        res["limits"] = limits
    return res


def defaulted_pod(pod: Any, legacy_pod_level_defaulting: bool = False) -> dict[str, Any]:
    """The pod as the API server stores it, and so as the kubelet receives it.

    SetDefaults_Pod (pkg/apis/core/v1/defaults.go) defaults every container's and init
    container's requests from its limits; pod-level resources are then defaulted as
    _defaulted_pod_level says (v1.37, or 1.34-1.36 with `legacy_pod_level_defaulting`).
    Idempotent: a pod read back from the API server comes out unchanged.
    """
    manifest = as_manifest(pod)
    spec = dict(manifest.get("spec") or {})
    for key in ("containers", "initContainers"):
        spec[key] = [_with_defaulted_requests(c) for c in spec.get(key) or []]
    if spec.get("resources"):
        spec["resources"] = _defaulted_pod_level(spec, legacy_pod_level_defaulting)
    out = dict(manifest)
    out["spec"] = spec
    return out


_CONTAINER_LISTS = ("containers", "initContainers", "ephemeralContainers")


def find_container(pod: Any, name: str) -> dict[str, Any]:
    """A container by name among containers, init containers (sidecars included) and ephemeral
    containers. An ephemeral container is what the kubelet starts: ephemeralContainerStartSpec
    (klr/kuberuntime_container.go) casts its EphemeralContainerCommon to a v1.Container, which
    every later step (generateLinuxContainerResources, GetContainerSwapBehavior) reads as it
    reads any container; the API server refuses resources on one (validation.go
    validateEphemeralContainers), so it has none."""
    spec = as_manifest(pod).get("spec") or {}
    for key in _CONTAINER_LISTS:
        for container in spec.get(key) or []:
            if container.get("name") == name:
                return container
    known = [c.get("name") for k in _CONTAINER_LISTS for c in spec.get(k) or []]
    raise KeyError(f"pod has no container, init container or ephemeral container named {name!r} (it has {known})")


APP_CONTAINER, INIT_CONTAINER, SIDECAR, EPHEMERAL_CONTAINER = "container", "init container", "sidecar", "ephemeral container"


def container_kind(pod: Any, name: str) -> str:
    """Which of SyncPod's starts creates the container (klr/kuberuntime_manager.go SyncPod, v1.37.1,
    the same in v1.34.12): `start(ctx, "ephemeral container", ..., ephemeralContainerStartSpec(..))`,
    `start(ctx, "init container", ..., containerStartSpec(..))` for plain init containers and
    sidecars (an init container with restartPolicy Always) alike, `start(ctx, "container", ...)`.
    Every one goes on through startContainer -> generateContainerConfig ->
    generateLinuxContainerResources -> configureContainerSwapResources: one swap decision
    (decide_swap) for every kind, on the container's own resources."""
    spec = as_manifest(pod).get("spec") or {}
    if any(c.get("name") == name for c in spec.get("ephemeralContainers") or []):
        return EPHEMERAL_CONTAINER
    for init in spec.get("initContainers") or []:
        if init.get("name") == name:
            return SIDECAR if init.get("restartPolicy") == "Always" else INIT_CONTAINER
    find_container(pod, name)  # a KeyError naming the pod's containers, for a name it lacks
    return APP_CONTAINER


def _memory(resources: Mapping[str, Any]) -> int:
    value = resources.get("memory")
    return 0 if value is None else quantity_bytes(value)


# ---------------------------------------------------------------------------------------------
# QoS and criticality
# ---------------------------------------------------------------------------------------------

def _resource_qos(resources: Mapping[str, Any] | None) -> str:
    """resourceQOS: one resource block (a container's, or the pod-level one) on its own."""
    requests, limits = _resources({"resources": resources or {}})
    if not requests and not limits:
        return "BestEffort"
    classes = set()
    for name in _QOS_RESOURCES:
        request, limit = _exact(requests.get(name)), _exact(limits.get(name))
        if request != limit:
            return "Burstable"
        classes.add("BestEffort" if request == 0 else "Guaranteed")
    # cpu pinned but memory unset (or the reverse) is neither class: Burstable.
    return classes.pop() if len(classes) == 1 else "Burstable"


def _exact(value: Any) -> Decimal:
    """A quantity's exact value, as Quantity.Equal compares them (no rounding)."""
    from kubernetes.utils import parse_quantity

    return Decimal(0) if value is None else parse_quantity(value)


def qos_class(pod: Any) -> str:
    """ComputePodQOS (pkg/apis/core/v1/helper/qos/qos.go, the same in pkg/apis/core/helper/qos)
    on the defaulted spec: what the API server writes to status.qosClass at creation
    (pkg/registry/core/pod/strategy.go PrepareForCreate). status.qosClass itself is not read
    here (pod_qos reads it, as the kubelet does), so comparing the two checks the API server.

    Pod-level resources decide alone when spec.resources names cpu, memory or hugepages
    (PodLevelResources, on by default since 1.34, with PodLevelResourcesFixKubeletQOSClass, on by
    default in 1.37: IsPodLevelResourcesSet): requirementsQOS on spec.resources. Otherwise only
    cpu and memory of every container count; zero is the same as unset; init containers count,
    ephemeral containers cannot set resources.
    """
    spec = defaulted_pod(pod)["spec"]
    if pod_level_resources_set(spec):
        return _resource_qos(spec["resources"])
    pod_qos = None
    for container in (spec.get("initContainers") or []) + (spec.get("containers") or []):
        qos = _resource_qos(container.get("resources"))
        if qos == "Burstable":
            return qos
        if pod_qos is None:
            pod_qos = qos
        elif pod_qos != qos:
            return "Burstable"
    return pod_qos or "BestEffort"


def pod_qos(pod: Any) -> str:
    """v1qos.GetPodQOS, what the kubelet's swap decision calls (GetContainerSwapBehavior):
    status.qosClass when the pod has one (every pod the API server created), else ComputePodQOS
    (a static pod as the kubelet read it from its file)."""
    status = as_manifest(pod).get("status") or {}
    return status.get("qosClass") or qos_class(pod)


def is_critical_pod(pod: Any) -> bool:
    """kubelettypes.IsCriticalPod: a static pod, a mirror pod, or priority >= 2000000000."""
    manifest = as_manifest(pod)
    annotations = (manifest.get("metadata") or {}).get("annotations") or {}
    source = annotations.get(CONFIG_SOURCE_ANNOTATION)
    if source is not None and source != APISERVER_SOURCE:
        return True  # static pod (file or http source)
    if CONFIG_MIRROR_ANNOTATION in annotations:
        return True
    priority = (manifest.get("spec") or {}).get("priority")
    return priority is not None and int(priority) >= SYSTEM_CRITICAL_PRIORITY


# ---------------------------------------------------------------------------------------------
# memory.swap.max
# ---------------------------------------------------------------------------------------------

def shown_inputs(inputs: Mapping[str, Any]) -> str:
    """A decision's inputs as a report line shows them: name=value, ..."""
    return ", ".join(f"{k}={v!r}" for k, v in inputs.items())


@dataclass(frozen=True)
class SwapDecision:
    """The value the kubelet writes to memory.swap.max, and the rule that decided it."""

    value: int
    rule: str
    inputs: Mapping[str, Any]

    def __str__(self) -> str:
        return f"{self.value} ({self.rule}; {shown_inputs(self.inputs)})"


def _limited_swap_bytes(request: int, node_memory: int, node_swap: int) -> tuple[int, str]:
    # calcSwapForBurstablePods: float64 proportion, float64 product, int64() truncation.
    # Python floats are IEEE-754 doubles and int() truncates toward zero, as Go's int64() does.
    if node_memory <= 0:
        return 0, "node memory capacity <= 0: the kubelet logs an error and falls back to NoSwap"
    if request > node_memory:
        return 0, "memory request exceeds node memory: the kubelet falls back to NoSwap"
    proportion = float(request) / float(node_memory)
    return int(proportion * float(node_swap)), "LimitedSwap: int(float64(request)/float64(nodeMemory)*float64(nodeSwap))"


def decide_swap(
    behavior: str,
    pod: Any,
    container_name: str,
    node_memory_bytes: int,
    node_swap_bytes: int,
    cgroup_v2: bool = True,
) -> SwapDecision:
    """memory.swap.max for one container, as kuberuntime_container_linux.go (v1.37.1) decides it:
    configureContainerSwapResources -> GetContainerSwapBehavior -> ConfigureLimitedSwap /
    ConfigureNoSwap.

    Only the container's *own* memory request and limit count (container.Resources, defaulted):
    pod-level resources (spec.resources) change the QoS class (GetPodQOS) and memory.max
    (getMemoryLimit), never the swap rule: the "no memory" and "request equals limit" tests and
    the share itself read container.Resources, not the effective limit the container gets from
    the pod level.
    """
    behavior = normalize(behavior)
    manifest = defaulted_pod(pod)
    container = find_container(manifest, container_name)
    requests, limits = _resources(container)
    request, limit = _memory(requests), _memory(limits)
    qos = pod_qos(manifest)
    inputs = {
        "behavior": behavior,
        "container": container_name,
        "qos": qos,
        "memory_request": request,
        "memory_limit": limit,
        "priority": (manifest.get("spec") or {}).get("priority"),
        "node_memory": node_memory_bytes,
        "node_swap": node_swap_bytes,
        "cgroup_v2": cgroup_v2,
    }
    if pod_level_resources_set(manifest):
        pod_requests, pod_limits = _resources(manifest["spec"])
        inputs["pod_level"] = {"requests": pod_requests, "limits": pod_limits}

    def decision(value: int, rule: str) -> SwapDecision:
        return SwapDecision(value, rule, inputs)

    if behavior == NO_SWAP:
        return decision(0, "NoSwap: every container gets memory.swap.max=0")
    if not cgroup_v2:
        return decision(0, "not cgroup v2: no swap control, NoSwap")
    if behavior == WORKLOAD_CONTROLLED_SWAP:
        # KEP-5359: the container's own limits.swap, whatever its QoS class; none means no swap.
        if "swap" not in limits:
            return decision(0, "WorkloadControlledSwap: no limits.swap, so no swap")
        value = quantity_bytes(limits["swap"])
        inputs = {**inputs, "swap_limit": value}
        return SwapDecision(value, "WorkloadControlledSwap: limits.swap", inputs)
    # LimitedSwap: GetContainerSwapBehavior's exclusions, in the kubelet's order.
    # types.IsCriticalPod (pkg/kubelet/types/pod_update.go): IsStaticPod (config.source not
    # "api"), then IsMirrorPod, then spec.priority >= SystemCriticalPriority. A static pod is
    # critical whatever its priority: the kubelet decides on the pod it read from the file.
    if is_critical_pod(manifest):
        return decision(0, "critical pod (static, mirror, or priority >= 2000000000): NoSwap")
    # kubeapiqos.GetPodQOS(pod) != Burstable: status.qosClass, which pod-level resources decide.
    if qos != "Burstable":
        return decision(0, f"{qos} pod: only Burstable pods get swap")
    # container.Resources.Requests.Memory().IsZero() && ...Limits.Memory().IsZero(); then
    # Requests.Memory().Cmp(*Limits.Memory()) == 0: exact comparisons of the container's own.
    exact_request, exact_limit = _exact(requests.get("memory")), _exact(limits.get("memory"))
    if exact_request == 0 and exact_limit == 0:
        return decision(0, "container has no memory request and no memory limit: NoSwap")
    if exact_request == exact_limit:
        return decision(0, "container memory request equals its limit: NoSwap")
    # ConfigureLimitedSwap: calcSwapForBurstablePods(container.Resources.Requests.Memory().Value(), ...)
    value, rule = _limited_swap_bytes(request, node_memory_bytes, node_swap_bytes)
    return decision(value, rule)


def expected_swap_max(
    behavior: str,
    pod: Any,
    container_name: str,
    node_memory_bytes: int,
    node_swap_bytes: int,
    cgroup_v2: bool = True,
) -> int:
    """Bytes the kubelet writes to the container's memory.swap.max (before page flooring)."""
    return decide_swap(
        behavior, pod, container_name, node_memory_bytes, node_swap_bytes, cgroup_v2
    ).value


def page_edge_request(near: int, node_memory_bytes: int, node_swap_bytes: int, page_size: int = PAGE_SIZE) -> int:
    """A memory request at which the formula's rounding shows in what memory.swap.max reads.

    The smallest request >= `near` (and <= node memory) whose LimitedSwap value, float64 product
    truncated as calcSwapForBurstablePods does, is one byte short of a whole page, while the
    exact quotient request * swap / memory lies at least half a byte above that value. The
    kernel floors the written value to pages, so the truncated value reads back one page lower
    than the same product rounded to nearest, rounded up, or aligned up to a page: a rounding
    change in the kubelet reads back differently instead of vanishing in the page floor.
    `near` itself where no request does within 65536 pages: the node has no swap (every value is
    0), swap is a whole multiple of memory (every exact quotient is a whole number), or the ratio
    never lets a quotient land there (2/3: every quotient is k/3, and value + 2/3 needs an even value).
    """
    from fractions import Fraction

    if node_swap_bytes <= 0 or node_memory_bytes <= 0:
        return near
    ratio = Fraction(node_swap_bytes, node_memory_bytes)
    if ratio.denominator == 1:
        return near
    first = int(Fraction(near) * ratio) // page_size
    for page in range(first, first + 65536):
        value = page * page_size + page_size - 1  # one byte short of the next page
        request = math.ceil((value + Fraction(1, 2)) / ratio)  # the smallest with exact quotient >= value + 1/2
        if request > node_memory_bytes:
            break
        if (request >= near and request * ratio < value + 1
                and _limited_swap_bytes(request, node_memory_bytes, node_swap_bytes)[0] == value):
            return request
    return near


# When memory.swap.max is written (kubelet v1.37.1; the same rule in 1.33-1.36): only when the
# kubelet creates a container (kuberuntime_container.go startContainer -> generateContainerConfig
# -> generateLinuxContainerResources -> configureContainerSwapResources) or updates one for an
# in-place resize (updateContainerResources). The behavior is read from the configuration once,
# at startup (kubelet.go, MemorySwap.SwapBehavior). A restart re-creates no running container:
# its hash covers name and image only (container/helpers.go HashContainer), and with resources
# unchanged no UpdateContainerResources is sent (kuberuntime_manager.go, actuated resources are
# checkpointed). Pod and QoS cgroups never get a swap value (cm/cgroup_manager_linux.go
# toResources). So a container keeps the rule of the kubelet that created it; a container the
# kubelet creates after a switch, in a new pod or to restart one in an old pod, gets the new one.
def behavior_applied(created_under: str, running_now: str) -> str:
    """The swapBehavior whose rule a container's memory.swap.max follows: the one the kubelet
    ran when it created the container, whatever it runs now."""
    del running_now  # not consulted: no code path rewrites a running container's swap limit
    return created_under


def container_swap_behavior(behavior: str, pod: Any, container_name: str, cgroup_v2: bool = True) -> str:
    """GetContainerSwapBehavior: LimitedSwap for a container the LimitedSwap rule applies to
    (whatever share its request gives), NoSwap for every exclusion; WorkloadControlledSwap as is."""
    # Capacities only decide the share, not which rule applies: huge memory keeps any request below it.
    rule = decide_swap(behavior, pod, container_name, 2**62, 1, cgroup_v2).rule
    if rule.startswith("LimitedSwap:"):
        return LIMITED_SWAP
    return WORKLOAD_CONTROLLED_SWAP if rule.startswith("WorkloadControlledSwap") else NO_SWAP


# In-place resize of a container with swap (kubelet v1.37.1 allocation/handlers.go
# disallowResizeForSwappableContainers, run by the resize admit handler; the same rule inline in
# kubelet.go 1.33, allocation_manager.go 1.34-1.35): the API server accepts the resize, and the
# kubelet marks it infeasible when a container's memory *request* changes, its memory resize
# policy is not RestartContainer, and GetContainerSwapBehavior is not NoSwap for the allocated
# pod or the desired one. CPU and memory-limit changes are never refused for swap.
RESIZE_SWAP_REASON = "Infeasible"  # condition PodResizePending, status True
RESIZE_SWAP_MESSAGE = "In-place resize of containers with swap is not supported."
RESIZE_SWAP_METRIC = ("kubelet_pod_infeasible_resizes_total", {"reason_detail": "swap_limitation"})
# The counter exists from 1.34 (pkg/kubelet/metrics PodInfeasibleResizes, with allocation_manager.go).
RESIZE_SWAP_METRIC_SINCE = "1.34"
RESIZE_SWAP_EVENT = "ResizeInfeasible"
# The Warning event on this path from 1.36, where the check moved to an admit handler
# (pkg/kubelet/allocation/handlers.go), whose refusals are recorded as the event.
RESIZE_SWAP_EVENT_SINCE = "1.36"


def _memory_policy(container: Mapping[str, Any]) -> str:
    policies = {p.get("resourceName"): p.get("restartPolicy") for p in container.get("resizePolicy") or []}
    return policies.get("memory") or "NotRequired"


def resize_refused_for_swap(behavior: str, allocated: Any, desired: Any, cgroup_v2: bool = True) -> list[str]:
    """The containers whose memory resize the kubelet refuses because of swap (none: allowed)."""
    before, after = defaulted_pod(allocated), defaulted_pod(desired)
    refused = []
    for key in ("initContainers", "containers"):
        for old in (before.get("spec") or {}).get(key) or []:
            new = next((c for c in (after.get("spec") or {}).get(key) or [] if c["name"] == old["name"]), None)
            if new is None or _memory(_resources(old)[0]) == _memory(_resources(new)[0]):
                continue
            if _memory_policy(old) == "RestartContainer":
                continue
            # != NoSwap in v1.37.1, where a container's behavior is NoSwap or LimitedSwap. KEP-5359
            # ("resize on memory limits no longer has any side-effects on swap") lifts the refusal
            # for WorkloadControlledSwap, whose swap is the container's own limits.swap: only a
            # swap derived from the memory request (LimitedSwap) refuses.
            if any(container_swap_behavior(behavior, pod, old["name"], cgroup_v2) == LIMITED_SWAP for pod in (before, after)):
                refused.append(old["name"])
    return refused


# What a resize the swap rule lets through does to the container (kubelet v1.37.1
# klr/kuberuntime_manager.go computePodResizeAction, the same in v1.34.12): the kubelet compares the
# desired resources with the ones it last applied (memory limit and request in bytes, cpu limit and
# request in millicores); a changed resource whose resizePolicy is RestartContainer kills the
# container ("Container <name> resize requires restart") and starts it again, a new container
# created through startContainer with the new resources, so with a fresh swap decision on them
# (klc configureContainerSwapResources); otherwise UpdateContainerResources, in place, which sends
# the swap setting again with the new resources (updateContainerResources -> generateContainerResources).
# The API server allows RestartContainer only in a pod whose restartPolicy is not Never
# (validation.go validateResizePolicy).
RESIZE_INFEASIBLE, RESIZE_RESTART, RESIZE_IN_PLACE, RESIZE_NOTHING = "Infeasible", "restart", "in place", "nothing to do"


@dataclass(frozen=True)
class ResizeOutcome:
    """What the kubelet does with one container of a pod resize, and the memory.swap.max it then has."""

    action: str  # RESIZE_INFEASIBLE, RESIZE_RESTART, RESIZE_IN_PLACE or RESIZE_NOTHING
    rule: str
    swap: SwapDecision  # the container's swap afterwards: the desired pod's, unless the resize is refused

    def __str__(self) -> str:
        return f"{self.action} ({self.rule}); memory.swap.max afterwards {self.swap}"


def _millicores(value: Any) -> int:
    """Quantity.MilliValue(): thousandths, rounded up."""
    return 0 if value is None else int(math.ceil(_exact(value) * 1000))


def _compared_resources(container: Mapping[str, Any]) -> dict[tuple[str, str], int]:
    """containerResourcesFromRequirements (container-level only: pod-level resources and their
    resize, InPlacePodLevelResourcesVerticalScaling, are not modelled here)."""
    requests, limits = _resources(container)
    return {("memory", "limit"): _memory(limits), ("memory", "request"): _memory(requests),
            ("cpu", "limit"): _millicores(limits.get("cpu")), ("cpu", "request"): _millicores(requests.get("cpu"))}


def resize_outcome(behavior: str, allocated: Any, desired: Any, container_name: str, node_memory_bytes: int,
                   node_swap_bytes: int, cgroup_v2: bool = True) -> ResizeOutcome:
    """One container's fate in a pod resize from `allocated` to `desired` (kubelet v1.37.1 and v1.34.12).

    1. pkg/kubelet/allocation/handlers.go disallowResizeForSwappableContainers (1.36+; in
       allocation_manager.go in 1.34-1.35, the same body): a memory-request change of a container
       with swap whose memory resizePolicy is not RestartContainer refuses the pod's whole resize,
       Infeasible (resize_refused_for_swap); the container keeps its swap.
    2. klr/kuberuntime_manager.go computePodResizeAction: a changed resource whose resizePolicy is
       RestartContainer restarts the container; another change is applied in place; none, nothing.
       Either way the container's swap is then decided on the desired pod: the restarted container
       is created anew (startContainer, a fresh decision under the kubelet's behavior: C6 of
       docs/coverage.md), the updated one gets its swap setting sent again (R9).
    """
    before, after = defaulted_pod(allocated), defaulted_pod(desired)
    refused = resize_refused_for_swap(behavior, before, after, cgroup_v2)
    old, new = find_container(before, container_name), find_container(after, container_name)
    if refused:
        return ResizeOutcome(RESIZE_INFEASIBLE, f"disallowResizeForSwappableContainers: a memory-request change of {refused}"
                             f" with swap and no memory resizePolicy RestartContainer ({RESIZE_SWAP_MESSAGE})",
                             decide_swap(behavior, before, container_name, node_memory_bytes, node_swap_bytes, cgroup_v2))
    current, wanted = _compared_resources(old), _compared_resources(new)
    changed = [key for key in current if current[key] != wanted[key]]
    swap = decide_swap(behavior, after, container_name, node_memory_bytes, node_swap_bytes, cgroup_v2)
    if not changed:
        return ResizeOutcome(RESIZE_NOTHING, "computePodResizeAction: the container's resources are unchanged",
                             decide_swap(behavior, before, container_name, node_memory_bytes, node_swap_bytes, cgroup_v2))
    policies = {p.get("resourceName"): p.get("restartPolicy") for p in new.get("resizePolicy") or []}
    described = ", ".join(f"{name} {kind} {current[(name, kind)]} -> {wanted[(name, kind)]}" for name, kind in changed)
    restarting = sorted({name for name, _ in changed if policies.get(name) == "RestartContainer"})
    if restarting:
        return ResizeOutcome(RESIZE_RESTART, f"computePodResizeAction: {described}; resizePolicy RestartContainer for"
                             f" {', '.join(restarting)}: the container is restarted and created anew", swap)
    return ResizeOutcome(RESIZE_IN_PLACE, f"computePodResizeAction: {described}; resizePolicy NotRequired: updated in"
                         " place, swap sent again with the new resources", swap)


def readback_bytes(value: int, page_size: int = PAGE_SIZE) -> int:
    """The kernel keeps page counts: a written byte value reads back floored to whole pages."""
    if value < 0:
        raise ValueError(f"a memory limit cannot be negative: {value}")
    return value // page_size * page_size


def readback_swap_max(value: int | None, page_size: int = PAGE_SIZE) -> str:
    """What `cat memory.swap.max` prints after the kubelet wrote `value` (None: never limited)."""
    return "max" if value is None else str(readback_bytes(value, page_size))


def container_memory_limit(pod: Any, container_name: str) -> int:
    """The memory limit the kubelet gives the container's cgroup (0: none), v1.37.1
    kuberuntime_container_linux.go generateLinuxContainerResources -> getMemoryLimit: the
    container's own limit; when it has none and pod-level resources are set (PodLevelResources,
    on by default since 1.34; resourcehelper.IsPodLevelResourcesSet), the pod-level memory limit
    (itself 0 when the pod level sets none). calculateLinuxResources writes it only when non-zero.
    (DRA node-allocatable claims, which can raise an explicit container limit, are not modelled.)"""
    manifest = defaulted_pod(pod)
    limit = _memory(_resources(find_container(manifest, container_name))[1])
    if limit == 0 and pod_level_resources_set(manifest):
        limit = _memory(_resources(manifest["spec"])[1])
    return limit


def expected_memory_max(pod: Any, container_name: str, page_size: int = PAGE_SIZE) -> str:
    """What `cat memory.max` prints in the container: container_memory_limit in whole pages
    (the kernel floors a byte value), or `max`."""
    limit = container_memory_limit(pod, container_name)
    return readback_swap_max(limit if limit > 0 else None, page_size)


# The cgroups the kubelet makes above a container (its pod's, the QoS class's, the node
# allocatable "kubepods") carry memory settings and never a swap limit: cm/cgroup_manager_linux.go
# toResources (v1.34-v1.37) fills Memory and no MemorySwap, and its Unified map only from a
# ResourceConfig's own, which ResourceConfigForPod (helpers_linux.go), qos_container_manager_linux.go
# and node_container_manager_linux.go never set; runc's fs2 writes memory.swap.max only for a
# MemorySwap set. So the kernel's default stands: `max`, and a container's swap is bounded by its
# own memory.swap.max alone.
PARENT_SWAP_MAX = "max"
PARENT_SWAP_MAX_RULE = ("the kubelet sets no swap limit on the pod, QoS or node allocatable cgroups"
                        " (cm/cgroup_manager_linux.go toResources: memory only)")


# ---------------------------------------------------------------------------------------------
# Memory-backed volumes
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class MemoryBackedVolume:
    name: str
    kind: str  # emptyDir | secret | projected | downwardAPI
    size_limit: int | None  # emptyDir sizeLimit in bytes, when set


def is_memory_backed(volume: Mapping[str, Any]) -> bool:
    """tmpfs volumes: emptyDir medium Memory, secret, projected, downwardAPI. Not configMap."""
    if "emptyDir" in volume:
        return ((volume.get("emptyDir") or {}).get("medium") or "") == "Memory"
    return any(kind in volume for kind in ("secret", "projected", "downwardAPI"))


def memory_backed_volumes(pod: Any) -> list[MemoryBackedVolume]:
    result = []
    for volume in (as_manifest(pod).get("spec") or {}).get("volumes") or []:
        if not is_memory_backed(volume):
            continue
        kind = next(k for k in ("emptyDir", "secret", "projected", "downwardAPI") if k in volume)
        size = (volume.get("emptyDir") or {}).get("sizeLimit") if kind == "emptyDir" else None
        result.append(
            MemoryBackedVolume(volume["name"], kind, None if size is None else quantity_bytes(size))
        )
    return result


def pod_memory_limit(pod: Any) -> int | None:
    """The pod cgroup's memory limit (cm.ResourceConfigForPod): None unless every container,
    init containers included, declares a memory limit; then the same max(app + sidecars,
    init peak) + overhead arithmetic as requests."""
    spec = defaulted_pod(pod).get("spec") or {}
    containers = (spec.get("containers") or []) + (spec.get("initContainers") or [])
    if any(_memory(_resources(c)[1]) == 0 for c in containers):
        return None
    return _aggregate(spec, limits=True)


def expected_tmpfs_size(
    volume: MemoryBackedVolume, pod: Any, node_allocatable_memory: int
) -> int:
    """The `size=` the kubelet mounts a memory-backed volume with (SizeMemoryBackedVolumes):
    node allocatable memory, lowered to the pod's memory limit, lowered to the emptyDir's
    sizeLimit; secret/projected/downwardAPI volumes have no sizeLimit of their own."""
    size = node_allocatable_memory
    limit = pod_memory_limit(pod)
    if limit is not None and 0 < limit < size:
        size = limit
    if volume.size_limit is not None and 0 < volume.size_limit < size:
        size = volume.size_limit
    return size


def readback_tmpfs_size_kib(size_bytes: int, page_size: int = PAGE_SIZE) -> int:
    """tmpfs keeps its size in pages, rounded up, and mountinfo prints it as `size=<N>k`."""
    pages = -(-size_bytes // page_size)
    return pages * page_size // 1024


def expects_noswap(volume: MemoryBackedVolume | Mapping[str, Any], kernel_has_noswap: bool) -> bool:
    """`noswap` must be in the mount options of every memory-backed volume when the kernel
    supports it. swapBehavior plays no part: NoSwap nodes get it too."""
    if isinstance(volume, Mapping) and not is_memory_backed(volume):
        return False
    return kernel_has_noswap


# ---------------------------------------------------------------------------------------------
# Eviction ranking under memory pressure
# ---------------------------------------------------------------------------------------------

def _aggregate(spec: Mapping[str, Any], limits: bool = False) -> int:
    """max(app containers + sidecars, peak of the init sequence) + pod overhead, for memory."""
    index = 1 if limits else 0

    def amount(container: Mapping[str, Any]) -> int:
        return _memory(_resources(container)[index])

    total = sum(amount(c) for c in spec.get("containers") or [])
    sidecars = 0
    init_peak = 0
    for init in spec.get("initContainers") or []:
        if init.get("restartPolicy") == "Always":  # a sidecar runs beside the app containers
            total += amount(init)
            sidecars += amount(init)
            step = sidecars
        else:
            step = amount(init) + sidecars
        init_peak = max(init_peak, step)
    return max(total, init_peak) + _memory(spec.get("overhead") or {})


def pod_memory_request(pod: Any) -> int:
    """resourcehelper.PodRequests for memory; pod-level requests win when set."""
    spec = defaulted_pod(pod).get("spec") or {}
    pod_level_requests, _ = _resources(spec)
    if "memory" in pod_level_requests:
        return _memory(pod_level_requests) + _memory(spec.get("overhead") or {})
    return _aggregate(spec)


def _pod_key(pod: Mapping[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace', 'default')}/{meta.get('name')}"


# Eviction under memory pressure, as pkg/kubelet/eviction does it (read in v1.37.1):
# * The signal memory.available is the summary's node memory.availableBytes, capacity minus
#   the node's working set (makeSignalObservations, helpers.go); a hard memory.available
#   threshold is also applied to allocatableMemory.available, the pods cgroup's (helpers.go
#   addAllocatableThresholds). Working set is memory.current minus inactive file pages: a
#   swapped-out page is in neither, so swap usage counts in no signal and in no ranking.
# * rankMemoryPressure (helpers.go) sorts every active pod by exceedMemoryRequests (working
#   set > the pod's memory request, resourcehelper.PodRequests), then priority (lower first),
#   then memory (working set - request, larger first). A pod without stats goes first.
# * synchronize (eviction_manager.go) evicts at most one pod per monitoring interval: the first
#   in that order that evictPod accepts; evictPod refuses critical pods (static, mirror, or
#   priority >= 2000000000) and the loop moves on to the next pod. The evicted pod's status is
#   phase Failed, reason "Evicted", message "The node was low on resource: memory. ...".
#   (v1.37.1: eviction_manager.go synchronize, "we kill at most a single pod during each
#   eviction interval": `for i := range activePods { ... if m.evictPod(...) { return } }`, and
#   evictPod returns false, "cannot evict a critical pod", when kubelettypes.IsCriticalPod.)
#   Pressure lasts while the observed available memory is below the threshold (thresholdsMet:
#   threshold.Cmp(available) > 0): expected_evictions follows that until it ends.

def eviction_memory_request(pod: Any) -> int:
    """The request rankMemoryPressure compares a pod's working set with:
    v1resource.GetResourceRequestQuantity(pod, memory) (pkg/api/v1/resource/helpers.go), that is
    resourcehelper.PodRequests without overhead (pod-level requests when set), plus the pod's
    overhead only where that total is not zero. (pod_memory_request, what admission sums, always
    adds the overhead: the two differ only for a pod with overhead and no memory request.)"""
    spec = defaulted_pod(pod).get("spec") or {}
    pod_level_requests, _ = _resources(spec)
    if "memory" in pod_level_requests:
        base = _memory(pod_level_requests)
    else:
        base = _aggregate({k: v for k, v in spec.items() if k != "overhead"})
    return base + _memory(spec.get("overhead") or {}) if base else 0


def _eviction_key(pod: Mapping[str, Any], used: int) -> tuple[bool, int, int]:
    request = eviction_memory_request(pod)
    priority = int((pod.get("spec") or {}).get("priority") or 0)
    return (not used > request, priority, -(used - request))


def eviction_ranking(pods: Iterable[Any], usage: Mapping[str, int]) -> list[list[str]]:
    """rankMemoryPressure: the order in which the kubelet picks pods to evict for memory.

    `usage` maps "namespace/name" to the pod's memory working set in bytes. Returns tiers:
    pods in one tier compare equal (Go's sort.Sort is not stable, so their order is not
    defined). Orders: usage above request first; then lower priority first; then larger
    (usage - request) first.
    """
    keyed = []
    for pod in pods:
        manifest = as_manifest(pod)
        key = _pod_key(manifest)
        if key not in usage:
            raise KeyError(f"no memory usage given for pod {key}")
        keyed.append((_eviction_key(manifest, int(usage[key])), key))
    keyed.sort()
    tiers: list[list[str]] = []
    previous = None
    for sort_key, key in keyed:
        if sort_key != previous:
            tiers.append([])
            previous = sort_key
        tiers[-1].append(key)
    return tiers


def eviction_candidates(pods: Iterable[Any]) -> list[dict[str, Any]]:
    """The pods evictPod accepts: every active pod but the critical ones."""
    return [as_manifest(p) for p in pods if not is_critical_pod(p)]


def eviction_order_problems(pods: Iterable[Any], usage: Mapping[str, int], evicted: Sequence[str],
                            judged: Iterable[str]) -> list[str]:
    """Why an observed eviction sequence is not one the kubelet may produce (empty: it may).

    `pods` were active when pressure began, with their working sets in `usage`; `evicted` lists
    "namespace/name" in eviction order. Every pod: no critical pod is evicted, and none is
    evicted while a candidate of a strictly earlier class (above its request before within it,
    then lower priority) still ran. The `judged` pods (the test's own, sized far apart) also
    keep the full order among themselves: larger usage above request first; equal keys tie.
    """
    manifests = {_pod_key(m): m for m in (as_manifest(p) for p in pods)}
    problems = [f"{key} is critical and was evicted" for key in evicted if key in manifests
                and is_critical_pod(manifests[key])]
    keys = {key: _eviction_key(m, int(usage[key])) for key, m in manifests.items()
            if not is_critical_pod(m) and key in usage}
    judged = set(judged)
    running = set(keys)
    for key in evicted:
        if key not in keys:
            continue
        running.discard(key)
        earlier = sorted(k for k in running if keys[k][:2] < keys[key][:2])
        if earlier:
            problems.append(f"{key} {_describe(keys[key])} evicted while {earlier[0]} {_describe(keys[earlier[0]])}"
                            f" still ran" + (f" (and {len(earlier) - 1} more)" if len(earlier) > 1 else ""))
        if key in judged:
            before = sorted(k for k in running & judged if keys[k] < keys[key])
            if before:
                problems.append(f"{key} {_describe(keys[key])} evicted before {before[0]} {_describe(keys[before[0]])}")
    return problems


def _describe(key: tuple[bool, int, int]) -> str:
    within, priority, negative_excess = key
    return f"({'within' if within else 'above'} request, priority {priority}, usage - request {-negative_excess})"


def expected_evictions(pods: Iterable[Any], usage: Mapping[str, int], available: int, threshold: int) -> list[str]:
    """The pods the kubelet evicts for a hard memory.available `threshold`, in order.

    `pods` are the active pods (critical ones included), `usage` their working sets, `available`
    the signal before any eviction. One eviction per synchronize: the first pod in
    rankMemoryPressure order that evictPod accepts (critical pods are passed over, never
    evicted), while available < threshold; an evicted pod gives back its working set (what the
    signal counted for it). Raises ValueError where pressure would end part way through pods
    that tie in the ranking: which of them the kubelet takes is not defined (sort.Sort is not
    stable)."""
    manifests = {_pod_key(m): m for m in (as_manifest(p) for p in pods)}
    evicted: list[str] = []
    signal = available
    for tier in eviction_ranking(manifests.values(), usage):
        takeable = [key for key in tier if not is_critical_pod(manifests[key])]
        for i, key in enumerate(takeable):
            if signal >= threshold:
                if i:
                    raise ValueError(f"pressure ends after {i} of the tied pods {takeable}: which ones the kubelet"
                                     " evicts is not defined")
                return evicted
            evicted.append(key)
            signal += int(usage[key])
    return evicted


def critical_pods_passed_over(pods: Iterable[Any], usage: Mapping[str, int], evicted: Sequence[str]) -> list[str]:
    """The critical pods rankMemoryPressure puts before the last of `evicted`: the kubelet's loop
    reaches each of them and evictPod refuses it (a kubelet that evicts critical pods takes one)."""
    manifests = {_pod_key(m): m for m in (as_manifest(p) for p in pods)}
    order = [key for tier in eviction_ranking(manifests.values(), usage) for key in tier]
    if not evicted or evicted[-1] not in order:
        return []
    return [key for key in order[:order.index(evicted[-1])] if is_critical_pod(manifests[key])]


# The signal itself: the summary's node memory (pkg/kubelet/server/stats/summary.go Get: the "/"
# cgroup's stats from cAdvisor; pkg/kubelet/eviction/helpers_others.go
# makeMemoryAvailableSignalObservation reads node.memory.availableBytes). pkg/kubelet/stats/
# helper.go cadvisorInfoToCPUandMemoryStats: workingSetBytes = cAdvisor's WorkingSet, usageBytes
# its Usage, availableBytes = info.Spec.Memory.Limit - WorkingSet, where the "/" container's limit
# is the machine's MemTotal (cadvisor container/raw/handler.go GetSpec, GetMachineMemoryCapacity).
# cAdvisor (container/libcontainer/handler.go setMemoryStats): WorkingSet = Usage - inactive_file
# (0 when inactive_file is larger). Usage (opencontainers/cgroups fs2/memory.go statMemory): the
# cgroup's memory.current; where "/" has none (a host's root cgroup), rootStatsFromMeminfo gives
# anon + file of the root's memory.stat. On a kind node "/" is the node container's cgroup
# namespace, which has memory.current. v1.37 HugepageAwareEviction (beta, on by default) then
# takes the node's hugepages capacity off availableBytes, down to 0 (summary.go adjustForHugePages).

def node_memory_usage(memory_current: int | None, memory_stat: Mapping[str, int]) -> int:
    """cAdvisor's Usage of "/": memory.current where the root has one, else anon + file."""
    if memory_current is not None:
        return int(memory_current)
    return int(memory_stat["anon"]) + int(memory_stat["file"])


def node_working_set(usage: int, memory_stat: Mapping[str, int]) -> int:
    """cAdvisor's WorkingSet: usage minus inactive_file, never below 0."""
    inactive = int(memory_stat.get("inactive_file", 0))
    return 0 if usage < inactive else usage - inactive


def hugepage_aware_eviction(kubelet_version: str, feature_gates: Mapping[str, Any] | None = None) -> bool:
    """Whether the kubelet takes hugepages off node memory.availableBytes: HugepageAwareEviction,
    beta and on by default from 1.37 (pkg/features/kube_features.go), absent before."""
    minor = _minor(kubelet_version)
    if minor is None or minor < (1, 37):
        return False
    return bool((feature_gates or {}).get("HugepageAwareEviction", True))


def _minor(kubelet_version: str) -> tuple[int, int] | None:
    match = re.match(r"v?(\d+)\.(\d+)", kubelet_version)
    return (int(match.group(1)), int(match.group(2))) if match else None


# The CRI stats provider's swap in /metrics/resource, by release. Every container_swap_* series
# there comes from the container's stats (pkg/kubelet/metrics/collectors/resource_metrics.go
# collectContainerSwapMetrics: usage = Swap.SwapUsageBytes, limit = SwapAvailableBytes + usage),
# which ListPodCPUAndMemoryStats (pkg/kubelet/stats/cri_stats_provider.go) builds with
# makeContainerCPUAndMemoryStats(..., zeroMissingValues=true): zeros for the swap the CRI does not
# carry (containerd 2.4's carries none), then addCadvisorContainerCPUAndMemoryStats copies cAdvisor's figures over them. In
# v1.34.12 and v1.35.8 that function copies CPU and memory only, so both series read 0 for a
# container in swap (kubernetes/kubernetes#137093); v1.36.0 copies cAdvisor's swap too (#137098,
# not backported). /stats/summary is not affected (addCadvisorContainerStats copies swap in 1.34
# already). CRI-O without PodAndContainerStatsFromCRI takes the cAdvisor stats provider instead
# (pkg/kubelet/cadvisor UsingLegacyCadvisorStats), whose cadvisorInfoToContainerCPUAndMemoryStats
# fills swap on every release.
RESOURCE_METRICS_CONTAINER_SWAP_FIXED = (1, 36)
RESOURCE_METRICS_CONTAINER_SWAP_DEFECT = ("kubernetes/kubernetes#137093: before 1.36 the CRI stats provider reports"
                                          " 0 for container_swap_usage_bytes and container_swap_limit_bytes"
                                          " (fixed in v1.36.0 by #137098, not backported)")


def resource_metrics_carry_container_swap(kubelet_version: str, container_runtime: str = "",
                                          feature_gates: Mapping[str, Any] | None = None) -> bool:
    """Whether /metrics/resource's container_swap_usage_bytes and container_swap_limit_bytes are
    the container's swap figures (True) or the CRI stats provider's zeros of #137093 (False)."""
    minor = _minor(kubelet_version)
    if minor is not None and minor >= RESOURCE_METRICS_CONTAINER_SWAP_FIXED:
        return True
    cadvisor_stats = (container_runtime.startswith("cri-o://")
                      and not (feature_gates or {}).get("PodAndContainerStatsFromCRI", False))
    return cadvisor_stats


# /stats/summary's swap of one cgroup, v1.34-v1.37 pkg/kubelet/stats/helper.go
# cadvisorInfoToSwapStats: swapUsageBytes is cAdvisor's swap usage; swapAvailableBytes is the
# cgroup's swap limit minus that usage, and left out where the limit is unlimited
# (isMemoryUnlimited: above 1<<62, which "max" is). cAdvisor gives its root container the
# machine's swap (SwapTotal) as limit (container/raw/handler.go GetSpec), so the node's is
# SwapTotal - usage; a pod's cgroup and kubepods, never limited (PARENT_SWAP_MAX), get none; a
# container whose memory.swap.max is 0 gets 0. /metrics/resource's container_swap_limit_bytes is
# available + usage wherever available is reported (metrics/collectors/resource_metrics.go
# collectContainerSwapMetrics): 0, present, for a container without swap.
SUMMARY_SWAP_AVAILABLE_RULE = ("swapAvailableBytes = the cgroup's swap limit - its usage, left out where the limit"
                               " is max (pkg/kubelet/stats/helper.go cadvisorInfoToSwapStats); the node's limit is"
                               " SwapTotal (cAdvisor's root)")


def summary_swap_available(swap_limit: str, usage: int) -> int | None:
    """A cgroup's swapAvailableBytes for its swap limit as read (`memory.swap.max`, or the node's
    SwapTotal as text) and its usage; None where the kubelet leaves it out."""
    if swap_limit == "max":
        return None
    return (int(swap_limit) - usage) % 2**64  # uint64, as in Go


def node_memory_available(capacity: int, working_set: int, hugepage_bytes: int = 0) -> int:
    """The summary's node availableBytes for a working set: capacity (MemTotal) - working set,
    then minus the hugepages capacity where HugepageAwareEviction applies (pass 0 otherwise).
    uint64 arithmetic, as in Go: a working set above capacity wraps around."""
    available = (capacity - working_set) % 2**64
    if hugepage_bytes:
        available = available - hugepage_bytes if available > hugepage_bytes else 0
    return available


# ---------------------------------------------------------------------------------------------
# The kubelet's start: the configurations it refuses on a node with swap
# ---------------------------------------------------------------------------------------------
# Read in v1.34.12, v1.35.8, v1.36.5 and v1.37.2: the order and every message below are the same
# in all four. cmd/kubelet/app/server.go NewKubeletCommand's RunE, in this order:
# 1. once the config file is loaded, utilfeature.DefaultMutableFeatureGate.SetFromMap of its
#    featureGates, an error wrapped "failed to set feature gates from initial flags-based config: %w";
# 2. ValidateKubeletConfiguration (pkg/kubelet/apis/config/validation/validation.go), wrapped
#    "failed to validate kubelet configuration, error: %w, path: %s";
# 3. Run -> run -> cm.NewContainerManager (pkg/kubelet/cm/container_manager_linux.go), wrapped
#    "failed to run Kubelet: %w".
# The first error ends the process: component-base cli.Run logs it (klog.ErrorS(err, "command
# failed")) and the kubelet exits 1. Only the swap rules are modelled: a config the suite writes
# has no other error. The messages are the inner errors, which the wrappings contain whole.
NODE_SWAP_GATE = "NodeSwap"
# pkg/features/kube_features.go: NodeSwap Beta and on by default from 1.30; GA, default true and
# LockToDefault from 1.34 (still there in 1.37.2).
NODE_SWAP_ON_SINCE = (1, 30)
NODE_SWAP_LOCKED_SINCE = (1, 34)
FAIL_SWAP_ON_MESSAGE = "running with swap on is not supported, please disable swap or set --fail-swap-on flag to false"
# pkg/kubelet/util/swap/swap_util.go isSwapOnAccordingToProcSwaps logs this (Info, with /proc/swaps)
# whenever it finds swap on: once per process, from NewContainerManager's IsSwapOn.
SWAP_ON_LOGGED = "Swap is on"
# cmd/kubelet/app/server.go run (v1.34-v1.37), NodeSwap on: failSwapOn false and no swapBehavior
# in the file logs this (Info) once at start; the behavior it announces is NoSwap (the default).
NO_BEHAVIOR_LOGGED = "NoSwap is set due to memorySwapBehavior not specified"
_GO_ESCAPES = {"\\": "\\\\", '"': '\\"', "\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r",
               "\t": "\\t", "\v": "\\v"}


def go_quoted(text: str) -> str:
    """Go's strconv.Quote (and %q) of a string: backslash, double quote and control characters
    escaped, the rest as it is (Go also escapes unprintable non-ASCII runes, which no message
    here carries)."""
    return '"' + "".join(_GO_ESCAPES.get(c) or (f"\\x{ord(c):02x}" if ord(c) < 0x20 or ord(c) == 0x7f else c)
                         for c in text) + '"'


def swap_on_according_to_proc_swaps(proc_swaps: str) -> bool:
    """swap_util.go isSwapOnAccordingToProcSwaps (v1.34.12, v1.37.1): swap is on when /proc/swaps,
    trimmed, has more than its header line. (No /proc/swaps at all: off.)"""
    return len(proc_swaps.strip().split("\n")) > 1


@dataclass(frozen=True)
class StartRefusal:
    """Why the kubelet refuses to start: the error it logs, and the rule that raised it."""

    message: str
    rule: str
    inputs: Mapping[str, Any]

    def __str__(self) -> str:
        return f"{self.message!r} ({self.rule}; {shown_inputs(self.inputs)})"


def _go_bool(value: bool) -> str:
    return "true" if value else "false"


def kubelet_start_refusal(config: Mapping[str, Any], swap_on: bool, kubelet_version: str,
                          workload_controlled_swap: bool = False, flags: Sequence[str] = ()) -> StartRefusal | None:
    """The refusal a released kubelet (1.30+; read in 1.34.12 and 1.37.1) meets starting with this
    config file (a KubeletConfiguration document) on a node with or without swap, or None where
    the swap rules let it start.

    1. The NodeSwap gate set to anything but true from 1.34: component-base featuregate
       unsafeSetFromMap refuses a LockToDefault gate set away from its default.
    2. ValidateKubeletConfiguration, NodeSwap on (always from 1.34): swapBehavior must be "",
       NoSwap or LimitedSwap (UnlimitedSwap was removed in 1.30); NodeSwap off (before 1.34):
       no swapBehavior at all.
    3. NewContainerManager: swap on (swap_on_according_to_proc_swaps) and failSwapOn, which
       pkg/kubelet/apis/config/v1beta1/defaults.go SetDefaults_KubeletConfiguration makes true
       when the file leaves it out, and which a `--fail-swap-on` in `flags` (the kubelet's
       command line) overrides: server.go kubeletConfigFlagPrecedence parses the flags again over
       the file's configuration (options.go AddKubeletConfigFlags binds the flag to FailSwapOn).
    `workload_controlled_swap`: the kubelet carries the KEP-5359 prototype
    (clusters/prototypes/kep-5359.patch), whose validation.go also accepts WorkloadControlledSwap,
    and only with its feature gate (alpha, off by default) on.
    """
    minor = _minor(kubelet_version)
    if minor is None or minor < NODE_SWAP_ON_SINCE:
        raise ValueError(f"kubelet {kubelet_version!r}: the start-up swap rules are modelled from"
                         " 1.30 on (NodeSwap on by default)")
    gates = config.get("featureGates") or {}
    behavior = (config.get("memorySwap") or {}).get("swapBehavior") or ""
    fail_swap_on = config.get("failSwapOn")
    inputs = {"featureGates": dict(gates), "swapBehavior": behavior, "failSwapOn": fail_swap_on, "swap_on": swap_on,
              "kubelet": kubelet_version, **({"flags": list(flags)} if flags else {})}
    by_flag = False
    for flag in flags:  # the last one given wins, as pflag parses them
        name, _, value = flag.partition("=")
        if name == "--fail-swap-on":
            fail_swap_on, by_flag = _GO_BOOLS[value or "true"], True  # strconv.ParseBool
    locked = minor >= NODE_SWAP_LOCKED_SINCE
    if locked and NODE_SWAP_GATE in gates and gates[NODE_SWAP_GATE] is not True:
        return StartRefusal(f"cannot set feature gate {NODE_SWAP_GATE} to {_go_bool(bool(gates[NODE_SWAP_GATE]))},"
                            " feature is locked to true",
                            "cmd/kubelet/app/server.go RunE: DefaultMutableFeatureGate.SetFromMap(featureGates) ->"
                            " component-base featuregate unsafeSetFromMap: NodeSwap is GA and LockToDefault (true) from"
                            " 1.34 (pkg/features/kube_features.go)", inputs)
    node_swap = True if locked else bool(gates.get(NODE_SWAP_GATE, True))
    validation = "pkg/kubelet/apis/config/validation/validation.go ValidateKubeletConfiguration"
    if workload_controlled_swap and node_swap and behavior == WORKLOAD_CONTROLLED_SWAP:
        if gates.get(WORKLOAD_CONTROLLED_SWAP) is not True:
            return StartRefusal(f"invalid configuration: memorySwap.swapBehavior {go_quoted(behavior)} requires the"
                                f" {WORKLOAD_CONTROLLED_SWAP} feature gate",
                                f"{validation} (KEP-5359 prototype): WorkloadControlledSwap without its feature gate",
                                {**inputs, "prototype": True})
    elif node_swap and behavior not in ("", NO_SWAP, LIMITED_SWAP):
        return StartRefusal(f"invalid configuration: memorySwap.swapBehavior {go_quoted(behavior)} must be one of:"
                            f" \"\", {go_quoted(LIMITED_SWAP)} or {go_quoted(NO_SWAP)}",
                            f"{validation}: NodeSwap on, swapBehavior not \"\", NoSwap or LimitedSwap", inputs)
    if not node_swap and behavior:
        return StartRefusal("invalid configuration: memorySwap.swapBehavior cannot be set when NodeSwap feature flag is"
                            " disabled", f"{validation}: NodeSwap off and memorySwap set", inputs)
    if swap_on and (fail_swap_on is None or fail_swap_on):
        return StartRefusal(FAIL_SWAP_ON_MESSAGE,
                            "pkg/kubelet/cm/container_manager_linux.go NewContainerManager: swap.IsSwapOn() and failSwapOn"
                            + (" (the --fail-swap-on flag over the file: server.go kubeletConfigFlagPrecedence)" if by_flag
                               else " (left out of the file: SetDefaults_KubeletConfiguration defaults it to true)"
                               if fail_swap_on is None else ""), inputs)
    return None


_GO_BOOLS = {**dict.fromkeys(("1", "t", "T", "TRUE", "true", "True"), True),
             **dict.fromkeys(("0", "f", "F", "FALSE", "false", "False"), False)}


def logged(message: str, lines: Iterable[str]) -> str | None:
    """The first of the kubelet's log lines that carries `message`, as the kubelet logs it: klog's
    text format quotes an error value (k8s.io/klog/v2 internal/serialize writeStringValue:
    strconv.Quote of a one-line string, so `"` reads `\\"`); before logging is set up,
    component-base cli.Run prints "Error: <err>" as it is. None: no line does."""
    forms = (message, go_quoted(message)[1:-1])
    return next((line for line in lines if any(form in line for form in forms)), None)
