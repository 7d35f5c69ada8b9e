"""What the kubelet must do with swap, as pure functions: the suite's source of expected values.

Nothing here talks to a cluster. Pods are plain manifests (dicts shaped like
`kubectl get pod -o json`); `kubernetes.client.V1Pod` objects are accepted too and converted.
Every rule cites the kubelet code it models, so a reviewer can check it line by line:

- pkg/kubelet/kuberuntime/kuberuntime_container_linux.go: GetContainerSwapBehavior,
  calcSwapForBurstablePods (LimitedSwap);
- pkg/apis/core/helper/qos: ComputePodQOS; pkg/apis/core/v1/defaults.go: requests default to
  limits (the kubelet only ever sees defaulted pods);
- pkg/kubelet/types/pod_update.go: IsCriticalPod, IsStaticPod, IsMirrorPod;
- pkg/kubelet/util/swap/swap_util.go, pkg/volume/emptydir: memory-backed volumes and `noswap`;
- pkg/kubelet/eviction/helpers.go: rankMemoryPressure;
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
    "qos_class",
    "is_critical_pod",
    "defaulted_pod",
    "find_container",
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
]

PAGE_SIZE = 4096
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
    """The API server's defaulting: a resource with a limit and no request gets request = limit."""
    requests, limits = _resources(obj)
    for name, value in limits.items():
        if names is not None and name not in names:
            continue
        requests.setdefault(name, value)
    out = dict(obj)
    res = dict(out.get("resources") or {})
    if requests:
        res["requests"] = requests
    out["resources"] = res
    return out


def defaulted_pod(pod: Any) -> dict[str, Any]:
    """The pod as the kubelet receives it: container requests defaulted from limits.

    SetDefaults_Pod does this for containers and init containers; pod-level resources
    (PodLevelResources) get the same treatment for cpu and memory.
    """
    manifest = as_manifest(pod)
    spec = dict(manifest.get("spec") or {})
    for key in ("containers", "initContainers"):
        spec[key] = [_with_defaulted_requests(c) for c in spec.get(key) or []]
    if spec.get("resources"):
        spec = _with_defaulted_requests(spec, _QOS_RESOURCES)
    out = dict(manifest)
    out["spec"] = spec
    return out


def find_container(pod: Any, name: str) -> dict[str, Any]:
    """A container by name among containers, init containers (sidecars included)."""
    spec = as_manifest(pod).get("spec") or {}
    for key in ("containers", "initContainers"):
        for container in spec.get(key) or []:
            if container.get("name") == name:
                return container
    known = [c.get("name") for k in ("containers", "initContainers") for c in spec.get(k) or []]
    raise KeyError(f"pod has no container or init container named {name!r} (it has {known})")


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
    """ComputePodQOS on the defaulted spec; status.qosClass is deliberately ignored.

    Only cpu and memory count; zero is the same as unset; init containers count, ephemeral
    containers cannot set resources. Pod-level resources, when set, decide alone.
    """
    spec = defaulted_pod(pod)["spec"]
    if spec.get("resources"):
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

@dataclass(frozen=True)
class SwapDecision:
    """The value the kubelet writes to memory.swap.max, and the rule that decided it."""

    value: int
    rule: str
    inputs: Mapping[str, Any]

    def __str__(self) -> str:
        shown = ", ".join(f"{k}={v!r}" for k, v in self.inputs.items())
        return f"{self.value} ({self.rule}; {shown})"


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
    behavior = normalize(behavior)
    manifest = defaulted_pod(pod)
    container = find_container(manifest, container_name)
    requests, limits = _resources(container)
    request, limit = _memory(requests), _memory(limits)
    qos = qos_class(manifest)
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
    if is_critical_pod(manifest):
        return decision(0, "critical pod (static, mirror, or priority >= 2000000000): NoSwap")
    if qos != "Burstable":
        return decision(0, f"{qos} pod: only Burstable pods get swap")
    if request == 0 and limit == 0:
        return decision(0, "container has no memory request and no memory limit: NoSwap")
    if request == limit:
        return decision(0, "container memory request equals its limit: NoSwap")
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
RESIZE_SWAP_METRIC = ("kubelet_pod_infeasible_resizes_total", {"reason_detail": "swap_limitation"})  # 1.34+
RESIZE_SWAP_EVENT = "ResizeInfeasible"  # a Warning event on this path from 1.36 (the check moved to an admit handler)


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
            if any(container_swap_behavior(behavior, pod, old["name"], cgroup_v2) != NO_SWAP for pod in (before, after)):
                refused.append(old["name"])
    return refused


def readback_bytes(value: int, page_size: int = PAGE_SIZE) -> int:
    """The kernel keeps page counts: a written byte value reads back floored to whole pages."""
    if value < 0:
        raise ValueError(f"a memory limit cannot be negative: {value}")
    return value // page_size * page_size


def readback_swap_max(value: int | None, page_size: int = PAGE_SIZE) -> str:
    """What `cat memory.swap.max` prints after the kubelet wrote `value` (None: never limited)."""
    return "max" if value is None else str(readback_bytes(value, page_size))


def expected_memory_max(pod: Any, container_name: str, page_size: int = PAGE_SIZE) -> str:
    """What `cat memory.max` prints in the container: its memory limit in pages, or `max`."""
    _, limits = _resources(find_container(defaulted_pod(pod), container_name))
    limit = _memory(limits)
    return readback_swap_max(limit if limit > 0 else None, page_size)


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


_RELEASE = re.compile(r"^(\d+)\.(\d+)")


def kernel_supports_noswap(kernel_release: str, probe_succeeded: bool | None = None) -> bool:
    """IsTmpfsNoswapOptionSupported: kernel >= 6.4, or else a real `noswap` tmpfs probe mount.

    Distributions backport `noswap`, so below 6.4 the answer is the probe's; passing no probe
    result for an older kernel is an error rather than a guess.
    """
    match = _RELEASE.match(kernel_release)
    if not match:
        raise ValueError(f"cannot read a kernel version from {kernel_release!r}")
    if (int(match.group(1)), int(match.group(2))) >= (6, 4):
        return True
    if probe_succeeded is None:
        raise ValueError(
            f"kernel {kernel_release} is older than 6.4: whether it supports tmpfs noswap"
            " depends on a probe mount; pass its result"
        )
    return probe_succeeded


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

def _eviction_key(pod: Mapping[str, Any], used: int) -> tuple[bool, int, int]:
    request = pod_memory_request(pod)
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
