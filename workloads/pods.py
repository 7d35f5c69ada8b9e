"""Pod manifests the suite deploys: every QoS shape, memory-backed volumes, stress commands.

Builders return plain dicts (what `kubectl apply` would take). Every pod carries labels naming
the suite and the test that made it, so anything left behind is findable and attributable.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

SUITE_LABEL = "kube-swap-conformance"
PART_OF = "app.kubernetes.io/part-of"  # labels(): every pod of the suite carries PART_OF=SUITE_LABEL
TEST_LABEL = "kube-swap-conformance/test"
STRESS = "/swapstress"
# A container's own cgroup, as its cgroup namespace shows it at /sys/fs/cgroup: what a container
# that ends before the node agent could read it (a plain init container) prints of itself, one
# `swapstress read-cgroups` JSON document whose part "." is that directory (a file it cannot
# read is null there, and the command still exits 0: the pod starts whatever it finds).
OWN_CGROUP = "/sys/fs/cgroup"
OWN_CGROUP_FILES = ("memory.swap.max", "memory.max")
PRINT_OWN_CGROUP = (STRESS, "read-cgroups", OWN_CGROUP, ",".join(OWN_CGROUP_FILES), ".")


@dataclass(frozen=True)
class PageEdge:
    """A memory request picked on the node the pod goes to: the smallest one >= `near` whose
    LimitedSwap limit is one byte short of a page with the exact quotient half a byte or more
    above it (e2e.oracle.page_edge_request), so a kubelet that rounds instead of truncating, or
    aligns up to pages, reads back one page higher. Whole MiB requests never show that."""

    near: int


# `near` -> the request picked on the node's memory and swap: the caller's binding of
# e2e.oracle.page_edge_request to that node. The kubelet's formula lives in the oracle only, a
# layer above this one, so the manifests take the pick instead of importing it.
PageEdgePick = Callable[[int], int]


def _resolve(resources: dict[str, str | PageEdge], page_edge: PageEdgePick | None, where: str) -> dict[str, str]:
    out = {}
    for name, value in resources.items():
        if isinstance(value, PageEdge):
            if page_edge is None:
                raise ValueError(f"{where}: its {name} request is picked on the node: pass the node's memory and swap")
            value = str(page_edge(value.near))
        out[name] = value
    return out


@dataclass(frozen=True)
class Box:
    """One container's shape: memory/cpu requests and limits, plus how it runs."""

    name: str
    requests: dict[str, str | PageEdge] = field(default_factory=dict)
    limits: dict[str, str] = field(default_factory=dict)
    restart_policy: str | None = None  # "Always" on an init container makes it a sidecar
    command: tuple[str, ...] = (STRESS, "pause")

    def manifest(self, image: str, page_edge: PageEdgePick | None = None) -> dict[str, Any]:
        resources: dict[str, Any] = {}
        if self.requests:
            resources["requests"] = _resolve(self.requests, page_edge, f"container {self.name}")
        if self.limits:
            resources["limits"] = dict(self.limits)
        container: dict[str, Any] = {
            "name": self.name,
            "image": image,
            "imagePullPolicy": "Never",  # images are loaded into the node, never pulled
            "command": list(self.command),
            "resources": resources,
        }
        if self.restart_policy:
            container["restartPolicy"] = self.restart_policy
        return container


@dataclass(frozen=True)
class PodShape:
    """A named pod shape; `qos` is what the API server must derive from it.

    `pod_requests` / `pod_limits` are pod-level resources (spec.resources, PodLevelResources:
    beta and on by default since 1.34); `min_kubernetes` is the oldest kubelet the shape is
    deployed on (its tests skip, saying so, on older ones). A plain init container runs
    `swapstress true` unless its Box names another command that ends (PRINT_OWN_CGROUP: it
    prints its own cgroup files to its log); `ephemeral` names ephemeral containers added
    through pods/ephemeralcontainers once the pod runs (not part of the manifest: the API server
    refuses them at creation)."""

    id: str
    qos: str
    containers: tuple[Box, ...]
    init: tuple[Box, ...] = ()
    priority_class: str | None = None
    pod_requests: dict[str, str] = field(default_factory=dict)
    pod_limits: dict[str, str] = field(default_factory=dict)
    min_kubernetes: str | None = None
    ephemeral: tuple[str, ...] = ()  # ephemeral (debug) containers added once the pod runs (ephemeral_container)

    def manifest(self, image: str, namespace: str, test: str,
                 page_edge: PageEdgePick | None = None) -> dict[str, Any]:
        """The pod; a shape with a request picked on the node (PageEdge) needs `page_edge`, the
        pick on the node's memory and swap capacity (e.g. ``lambda near:
        oracle.page_edge_request(near, node.memory_capacity, node.swap_capacity)``)."""
        spec: dict[str, Any] = {
            "containers": [c.manifest(image, page_edge) for c in self.containers],
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 1,
            "automountServiceAccountToken": False,
        }
        if self.init:
            spec["initContainers"] = [c.manifest(image, page_edge) for c in self.init]
            for init in spec["initContainers"]:
                if "restartPolicy" not in init and init["command"] == [STRESS, "pause"]:  # a plain init container must finish
                    init["command"] = [STRESS, "true"]
        if self.pod_requests or self.pod_limits:
            spec["resources"] = {k: dict(v) for k, v in (("requests", self.pod_requests), ("limits", self.pod_limits)) if v}
        if self.priority_class:
            spec["priorityClassName"] = self.priority_class
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": self.id, "namespace": namespace, "labels": labels(test)},
            "spec": spec,
        }

    def container_names(self) -> list[str]:
        """Containers whose cgroup can be read while the pod runs (not finished init containers)."""
        return [c.name for c in self.containers] + [c.name for c in self.init if c.restart_policy == "Always"]

    def printing_init_containers(self) -> list[str]:
        """Plain init containers that print their own cgroup files (PRINT_OWN_CGROUP) to their log."""
        return [c.name for c in self.init if c.restart_policy is None and c.command == PRINT_OWN_CGROUP]

    def sized_on_node(self) -> bool:
        """Whether a request is picked on the node (the manifest needs its memory and swap)."""
        return any(isinstance(v, PageEdge) for box in self.containers + self.init for v in box.requests.values())


def ephemeral_container(name: str, image: str) -> dict[str, Any]:
    """An ephemeral (debug) container that pauses, as `kubectl debug` would add one: no resources
    (the API server refuses them on an ephemeral container) and no target container."""
    return {"name": name, "image": image, "imagePullPolicy": "Never", "command": [STRESS, "pause"]}


def of_the_suite(pod: dict[str, Any]) -> bool:
    """Whether a pod (as the API returns it) is one of the suite's (see labels())."""
    return (pod["metadata"].get("labels") or {}).get(PART_OF) == SUITE_LABEL


def labels(test: str) -> dict[str, str]:
    # Label values are at most 63 characters of [A-Za-z0-9._-].
    safe = "".join(ch if ch.isalnum() or ch in "._-" else "-" for ch in test)[-63:].strip("-._") or "test"
    return {PART_OF: SUITE_LABEL, TEST_LABEL: safe}


MEM_REQ = {"memory": "64Mi"}
MEM_LIM = {"memory": "128Mi"}
# A Guaranteed pod's CPU limit is a CFS quota that also throttles every exec into it: at 10m
# one `cat` of a cgroup file took ~30 s on an emulated node.
GUARANTEED = {"memory": "64Mi", "cpu": "250m"}
POD_LEVEL = "1.34"  # PodLevelResources: beta and on by default (alpha, off, in 1.32-1.33)
# Requests that are not whole MiB: LimitedSwap gives them a share that is no whole number of
# pages, and an odd byte count on a node whose swap is half its memory, so the float64 product,
# its truncation and the kernel's floor to pages all count in what memory.swap.max reads.
ODD_REQUEST = "123456789"
ODD_POD_LEVEL_REQUEST = "150000001"

QOS_SHAPES: tuple[PodShape, ...] = (
    PodShape("best-effort", "BestEffort", (Box("app"),)),
    # With an ephemeral (debug) container added once it runs: no resources, so no swap on any
    # behavior, beside an app container that has a share under LimitedSwap.
    PodShape("burstable-request-below-limit", "Burstable", (Box("app", MEM_REQ, MEM_LIM),), ephemeral=("debugger",)),
    PodShape("burstable-request-only", "Burstable", (Box("app", MEM_REQ),)),
    PodShape("burstable-limit-only", "Burstable", (Box("app", {}, MEM_LIM),)),
    PodShape("burstable-request-equals-limit", "Burstable", (Box("app", MEM_REQ, {"memory": "64Mi"}),)),
    PodShape("burstable-cpu-only", "Burstable", (Box("app", {"cpu": "10m"}),)),
    PodShape(
        "burstable-mixed-containers",
        "Burstable",
        (Box("swaps", MEM_REQ, MEM_LIM), Box("equal", MEM_REQ, {"memory": "64Mi"}), Box("bare")),
    ),
    # The init container ends before any reader could see its cgroup: it prints its own
    # memory.swap.max and memory.max (its share of its own 32Mi request, not the app's 96Mi).
    PodShape(
        "burstable-init-container",
        "Burstable",
        (Box("app", {"memory": "96Mi"}, MEM_LIM),),
        init=(Box("init", {"memory": "32Mi"}, MEM_LIM, command=PRINT_OWN_CGROUP),),
    ),
    PodShape(
        "burstable-sidecar",
        "Burstable",
        (Box("app", MEM_REQ, MEM_LIM),),
        init=(Box("sidecar", {"memory": "32Mi"}, {"memory": "64Mi"}, restart_policy="Always"),),
    ),
    PodShape("guaranteed", "Guaranteed", (Box("app", GUARANTEED, GUARANTEED),)),
    PodShape("system-node-critical", "Burstable", (Box("app", MEM_REQ, MEM_LIM),), priority_class="system-node-critical"),
    PodShape(
        "system-cluster-critical", "Burstable", (Box("app", MEM_REQ, MEM_LIM),), priority_class="system-cluster-critical"
    ),
    # Rounding: a request of 123456789 bytes (a MiB-granular formula is off by megabytes), and one
    # picked on the node so that truncation and rounding read back a page apart.
    PodShape(
        "burstable-odd-requests",
        "Burstable",
        (Box("odd", {"memory": ODD_REQUEST}, {"memory": "256Mi"}), Box("page-edge", {"memory": PageEdge(100_000_000)})),
    ),
    # Pod-level resources. Each shape sets pod-level limits for what it requests at pod level (or
    # no pod-level request at all), so the API server defaults it the same way in 1.34-1.36
    # (SetDefaults_Pod defaultPodRequests) as in 1.37 (PrepareForCreate DefaultPodLevelResources).
    # Guaranteed by its pod-level values while its containers are not: the QoS exclusion alone
    # keeps swap from "below-limit" and "request-only" (the only shape where it is decisive: every
    # other Guaranteed container has request == limit, excluded anyway); "request-only" gets the
    # pod-level limit as memory.max.
    PodShape(
        "pod-level-guaranteed",
        "Guaranteed",
        (Box("below-limit", MEM_REQ, MEM_LIM), Box("request-only", MEM_REQ)),
        pod_requests={"cpu": "250m", "memory": "256Mi"},
        pod_limits={"cpu": "250m", "memory": "256Mi"},
        min_kubernetes=POD_LEVEL,
    ),
    # Burstable by pod-level resources alone: no container requests memory, so none gets swap
    # (the pod-level request is no container's), and each gets the whole pod-level limit as
    # memory.max.
    PodShape(
        "pod-level-burstable-only",
        "Burstable",
        (Box("app"), Box("helper")),
        pod_requests={"memory": "64Mi"},
        pod_limits={"memory": "128Mi"},
        min_kubernetes=POD_LEVEL,
    ),
    # Pod-level limit, container requests: the pod-level request defaults to the containers' sum
    # (Burstable); each container's swap comes from its own request, "app" (no limit of its own)
    # gets the pod-level limit as memory.max, "capped" keeps its own.
    PodShape(
        "pod-level-limits-container-requests",
        "Burstable",
        (Box("app", {"memory": ODD_POD_LEVEL_REQUEST}), Box("capped", MEM_REQ, MEM_LIM)),
        pod_limits={"memory": "256Mi"},
        min_kubernetes=POD_LEVEL,
    ),
)


def static_pod(name: str, image: str, namespace: str, test: str) -> dict[str, Any]:
    """A static pod manifest of the suite's own, for a kubelet's staticPodPath: Burstable, memory
    request 64Mi below its 128Mi limit, no priority and no priorityClassName. Were it not
    critical it would get swap under LimitedSwap; the kubelet treats every static pod as critical
    (types.IsCriticalPod -> IsStaticPod). No service account and no API object reference: a
    static pod may not have any (pkg/kubelet/config/common.go tryDecodeSinglePod)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels(test)},
        "spec": {
            "containers": [Box("app", MEM_REQ, MEM_LIM).manifest(image)],
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 1,
            "automountServiceAccountToken": False,
        },
    }


def memory_volumes_pod(image: str, namespace: str, test: str, secret: str, config_map: str) -> dict[str, Any]:
    """One container mounting every memory-backed volume type, plus a configMap (on disk)."""
    volumes = [
        {"name": "mem-sized", "emptyDir": {"medium": "Memory", "sizeLimit": "32Mi"}},
        {"name": "mem-unsized", "emptyDir": {"medium": "Memory"}},
        {"name": "secret", "secret": {"secretName": secret}},
        {"name": "projected", "projected": {"sources": [{"secret": {"name": secret}}]}},
        {"name": "downward", "downwardAPI": {"items": [{"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]}},
        {"name": "config", "configMap": {"name": config_map}},
    ]
    box = Box("app", {"memory": "64Mi"}, {"memory": "128Mi"}).manifest(image)
    box["volumeMounts"] = [{"name": v["name"], "mountPath": f"/volumes/{v['name']}"} for v in volumes]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "memory-volumes", "namespace": namespace, "labels": labels(test)},
        "spec": {
            "containers": [box],
            "volumes": volumes,
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 1,
            "automountServiceAccountToken": False,
        },
    }


Mi = 1024**2


MEMORY_VOLUME = "/volumes/mem"  # where stress_pod mounts its memory-backed emptyDir


def alloc_command(
    target: int, step: int = 4 * Mi, interval: str = "10ms", fills: dict[str, int] | None = None,
    start_when: str | None = None,
) -> list[str]:
    """Allocate and touch `target` bytes gradually, then hold them (prints `holding <bytes>`).
    `fills` ({path: bytes}) are files written first, by the same process (same cgroup). With
    `start_when`, nothing happens until that path exists (prints `waiting path=...` first)."""
    fill_args = [arg for path, size in (fills or {}).items() for arg in ("--fill", f"{path}={size}")]
    start_args = ["--start-when", start_when] if start_when else []
    return [STRESS, "alloc", *start_args, *fill_args, "--target", str(target), "--step", str(step), "--interval", interval,
            "--hold", "forever"]


def resident_command(*paths: str) -> list[str]:
    """Prints `resident <bytes> size=<bytes> path="<path>"` per file (mincore)."""
    return [STRESS, "resident", *paths]


def fork_spike_command(hold: int, child_hold: str = "2s") -> list[str]:
    """Hold `hold` bytes, fork, let the child dirty its whole copy, exec; keep holding after."""
    return [STRESS, "forkspike", "--hold", str(hold), "--child-hold", child_hold, "--hold-after", "forever"]


def stress_pod(
    name: str,
    image: str,
    namespace: str,
    test: str,
    command: list[str],
    requests: dict[str, str | int] | None = None,
    limits: dict[str, str | int] | None = None,
    memory_volume_size: int | None = None,
    priority_class: str | None = None,
) -> dict[str, Any]:
    """A one-container pod running a stress command; quantities may be given as byte counts.
    With `memory_volume_size`, an emptyDir `medium: Memory` of that sizeLimit is mounted at
    MEMORY_VOLUME."""
    box = Box(
        "stress",
        {k: str(v) for k, v in (requests or {}).items()},
        {k: str(v) for k, v in (limits or {}).items()},
        command=tuple(command),
    )
    spec: dict[str, Any] = {
        "containers": [box.manifest(image)],
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 1,
        "automountServiceAccountToken": False,
    }
    if memory_volume_size is not None:
        spec["volumes"] = [{"name": "mem", "emptyDir": {"medium": "Memory", "sizeLimit": str(memory_volume_size)}}]
        spec["containers"][0]["volumeMounts"] = [{"name": "mem", "mountPath": MEMORY_VOLUME}]
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels(test)},
        "spec": spec,
    }


def guaranteed_swap_pod(
    name: str, image: str, namespace: str, test: str, memory: int, swap: int, command: list[str] | None = None
) -> dict[str, Any]:
    """KEP-5359: a Guaranteed pod (requests == limits for cpu and memory) whose container asks
    for `limits.swap`. Only an API server with the WorkloadControlledSwap API accepts it."""
    resources = {"memory": memory, "cpu": GUARANTEED["cpu"]}
    pod = stress_pod(name, image, namespace, test, command or [STRESS, "pause"], resources, resources)
    pod["spec"]["containers"][0]["resources"]["limits"]["swap"] = str(swap)
    return pod
