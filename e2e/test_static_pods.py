"""Static pods are critical: their containers get memory.swap.max 0 whatever the behavior.

The cluster's own static pods (a kubeadm control plane) cannot be exec'd into, so a privileged
probe pod reads their cgroups from the node. etcd (a memory request, no limit) gets a share
from a kubelet that forgets static pods are critical; but kubeadm gives them all a critical
priority, so a kubelet that decides criticality by priority alone still gives them none: the
suite's own static pod (Burstable, request below its limit, no priority) is the one that shows
it. It is placed in the node's staticPodPath (from /configz) by a privileged pod
and removed when the test ends, whatever happens."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
import yaml

from clusters import waits
from clusters.discovery import kubelet_config
from clusters.behaviors import normalize
from clusters.provider import SwapNode
from e2e import oracle
from e2e.claims import Claims
from e2e.workspace import Workspace
from e2e.nodefiles import NodeFiles, NodeToolsUnavailable, StaticPodDir
from e2e.observe import wait_for
from e2e.podfields import (annotations, first_container, is_mirror, pod_name, pod_namespace, priority,
                           running_container_id, status_containers)
from workloads.pods import of_the_suite, static_pod



def swap_max_of_running(ws: Workspace, reader: NodeFiles, namespace: str, pod: str, container: str,
                        tries: int = 5) -> tuple[str, str] | None:
    """(cgroup path, memory.swap.max) of the container the mirror pod's status names as running,
    or None if none runs. A control-plane container that restarts (the scheduler does, under
    load) leaves a status naming the exited one for a moment: read the status again then."""
    for _ in range(tries):
        container_id = running_container_id(ws.observer.pod(namespace, pod), container)
        if container_id is None:
            return None
        try:
            return reader.cgroup_file(container_id, "memory.swap.max")
        except AssertionError as error:
            if "no cgroup below" not in str(error):
                raise
            time.sleep(3)
    raise AssertionError(f"{pod}/{container}: the status kept naming a container that has no cgroup ({tries} tries)")


# LimitedSwap only: it is the one behavior that gives swap without asking (a Burstable pod's
# share), so the only one where forgetting that static pods are critical shows (kubeadm's etcd
# requests memory and has no limit: mutant 08). Under NoSwap nothing gets swap, and under
# WorkloadControlledSwap only an explicit limits.swap does; the suite's own static pod below is
# checked on every behavior, on the node under test. (kind's cluster keeps its static pods on
# the control plane, which runs LimitedSwap: clusters/kind_config.py control_plane_behavior.)
@pytest.mark.needs_behavior("LimitedSwap")
def test_static_pod_containers_get_no_swap(swap_node: SwapNode, workspace: Callable[[SwapNode], Workspace]) -> None:
    """Under LimitedSwap every running container of the cluster's own static (mirror) pods reads
    memory.swap.max 0."""
    ws = workspace(swap_node)
    # The cluster's own: not a static pod of the suite's, which another test may be removing.
    by_node = {n: [p for p in ws.observer.pods_on_node(n) if is_mirror(p) and not of_the_suite(p)]
               for n in [swap_node.name, *ws.observer.node_names()]}
    node, mirrors = next(((n, ps) for n, ps in by_node.items() if ps), (None, []))
    if not mirrors:
        pytest.skip("no node of this cluster runs static pods (a cluster without a self-hosted control plane)")
    behavior = normalize((kubelet_config(ws.observer.api, node).get("memorySwap") or {}).get("swapBehavior") or "")
    assert behavior == swap_node.behavior, f"static pods run on {node}, whose kubelet runs {behavior}"
    reader = ws.node_files() if node == swap_node.name else NodeFiles.on(ws, node)
    problems, checked = [], 0
    for pod in mirrors:
        for container in status_containers(pod):
            found = swap_max_of_running(ws, reader, pod_namespace(pod), pod_name(pod), container)
            if found is None:
                continue
            path, got = found
            decision = oracle.decide_swap(behavior, pod, container, swap_node.memory_capacity, swap_node.swap_capacity)
            checked += 1
            if decision.value != 0 or got != oracle.readback_swap_max(decision.value):
                problems.append(f"{pod_name(pod)}/{container}: reads {got}, expected "
                                f"{oracle.readback_swap_max(decision.value)} ({decision}); {path}")
    assert checked, f"no running static pod container on {node}: {[pod_name(p) for p in mirrors]}"
    assert not problems, "\n".join(problems)


def _mirror(ws: Workspace, name: str) -> dict | None:
    from kubernetes.client.exceptions import ApiException

    try:
        return ws.observer.pod(ws.namespace, name)
    except ApiException as error:
        if error.status == 404:
            return None
        raise


def test_own_static_pod_without_priority_gets_no_swap(swap_node: SwapNode,
                                                      workspace: Callable[[SwapNode], Workspace]) -> None:
    """Under every behavior a Burstable static pod without a priority, placed in the node's
    staticPodPath, reads memory.swap.max 0 (every static pod is critical) and memory.max its limit.

    A Burstable static pod of the suite's own (memory request 64Mi < limit 128Mi, no priority,
    no priorityClassName), placed in the swap node's staticPodPath: its container reads
    memory.swap.max 0 under every behavior (types.IsCriticalPod -> IsStaticPod, checked first by
    GetContainerSwapBehavior) and memory.max its limit. Under LimitedSwap the same pod from the
    API server would get swap (asserted, so the check can fail)."""
    ws = workspace(swap_node)
    config = kubelet_config(ws.observer.api, swap_node.name)
    behavior = normalize((config.get("memorySwap") or {}).get("swapBehavior") or "")
    assert behavior == swap_node.behavior, f"{swap_node.name}'s kubelet runs {behavior}"
    static_pod_path = config.get("staticPodPath") or ""
    if not static_pod_path:
        pytest.skip(f"the kubelet of {swap_node.name} reads no static pods (no staticPodPath in its /configz)")
    name = "ksc-static"
    manifest = static_pod(name, ws.image, ws.namespace, ws.test)
    container = first_container(manifest)
    # Were the kubelet to forget that a static pod is critical, it would give this one swap.
    not_critical = oracle.decide_swap(oracle.LIMITED_SWAP, manifest, container, swap_node.memory_capacity,
                                      swap_node.swap_capacity)
    assert not_critical.value > 0 or swap_node.swap_capacity == 0, not_critical
    file = f"{ws.namespace}.yaml"  # the namespace is unique: a leftover file names its test run
    try:
        static_dir = StaticPodDir.on(ws, swap_node.name, static_pod_path, {file: yaml.safe_dump(manifest)})
    except NodeToolsUnavailable as error:
        pytest.skip(str(error))
    mirror_name = f"{name}-{swap_node.name.lower()}"  # pkg/kubelet/config/common.go generatePodName
    placed = ""
    try:
        placed = static_dir.place(file)
        wait_for(f"the mirror pod {ws.namespace}/{mirror_name} of {placed}", lambda: _mirror(ws, mirror_name),
                 waits.MIRROR_POD)
        mirror = ws.running(mirror_name)
        assert is_mirror(mirror), annotations(mirror)
        assert annotations(mirror).get(oracle.CONFIG_SOURCE_ANNOTATION) == "file", annotations(mirror)
        assert priority(mirror) < oracle.SYSTEM_CRITICAL_PRIORITY, \
            f"the mirror pod has priority {priority(mirror)}: critical by it"
        decision = oracle.decide_swap(behavior, mirror, container, swap_node.memory_capacity, swap_node.swap_capacity)
        checks = [("memory.swap.max", oracle.readback_swap_max(decision.value), str(decision)),
                  ("memory.max", oracle.expected_memory_max(mirror, container), "limits.memory 128Mi")]
        each = Claims(ws.record)
        for file_name, want, inputs in checks:
            each.claim(f"{file_name} of static pod {mirror_name}/{container}", want,
                       ws.observer.cgroup_value(ws.namespace, mirror_name, container, file_name), inputs)
        assert decision.value == 0, decision
        each.hold(explain=lambda: f"manifest {placed} on {swap_node.name}\n" + ws.explain(mirror_name))
    finally:
        try:
            static_dir.remove(file)  # also when placing failed half-way
        except Exception as error:
            raise AssertionError(f"could not remove {file} from {static_pod_path} on {swap_node.name}: remove it by"
                                 f" hand, or the kubelet keeps running its static pod: {error}") from error
        if placed:
            wait_for(f"the mirror pod {ws.namespace}/{mirror_name} to go once {placed} was removed",
                     lambda: True if _mirror(ws, mirror_name) is None else None, waits.MIRROR_POD)
