"""Static pods are critical: their containers get memory.swap.max 0 whatever the behavior.
They cannot be exec'd into, so a privileged probe pod reads their cgroups from the node."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from clusters.discovery import kubelet_config
from clusters.behaviors import normalize
from clusters.provider import SwapNode
from e2e import oracle
from e2e.conftest import Workspace
from e2e.nodefiles import NodeFiles

def swap_max_of_running(ws: Workspace, reader: NodeFiles, namespace: str, pod: str, container: str,
                        tries: int = 5) -> tuple[str, str] | None:
    """(cgroup path, memory.swap.max) of the container the mirror pod's status names as running,
    or None if none runs. A control-plane container that restarts (the scheduler does, under
    load) leaves a status naming the exited one for a moment: read the status again then."""
    for _ in range(tries):
        status = next((s for s in ws.observer.pod(namespace, pod)["status"].get("containerStatuses") or []
                       if s["name"] == container), {})
        container_id = (status.get("containerID") or "").split("://")[-1]
        if not container_id or "running" not in (status.get("state") or {}):
            return None
        try:
            return reader.cgroup_file(container_id, "memory.swap.max")
        except AssertionError as error:
            if "no cgroup below" not in str(error):
                raise
            time.sleep(3)
    raise AssertionError(f"{pod}/{container}: the status kept naming a container that has no cgroup ({tries} tries)")


def test_static_pod_containers_get_no_swap(swap_node: SwapNode, workspace: Callable[[SwapNode], Workspace]) -> None:
    ws = workspace(swap_node)
    # kind keeps static pods on its control-plane node, which runs the same kubelet config.
    by_node = {n: [p for p in ws.observer.pods_on_node(n) if oracle.CONFIG_MIRROR_ANNOTATION in
                   ((p["metadata"].get("annotations")) or {})] for n in [swap_node.name, *ws.observer.node_names()]}
    node, mirrors = next(((n, ps) for n, ps in by_node.items() if ps), (None, []))
    if not mirrors:
        pytest.skip("no node of this cluster runs static pods (a cluster without a self-hosted control plane)")
    behavior = normalize((kubelet_config(ws.observer.api, node).get("memorySwap") or {}).get("swapBehavior") or "")
    assert behavior == swap_node.behavior, f"static pods run on {node}, whose kubelet runs {behavior}"
    reader = NodeFiles.on(ws, node)
    problems, checked = [], 0
    for pod in mirrors:
        for status in pod["status"].get("containerStatuses") or []:
            found = swap_max_of_running(ws, reader, pod["metadata"]["namespace"], pod["metadata"]["name"], status["name"])
            if found is None:
                continue
            path, got = found
            decision = oracle.decide_swap(behavior, pod, status["name"], swap_node.memory_capacity, swap_node.swap_capacity)
            checked += 1
            if decision.value != 0 or got != oracle.readback_swap_max(decision.value):
                problems.append(f"{pod['metadata']['name']}/{status['name']}: reads {got}, expected "
                                f"{oracle.readback_swap_max(decision.value)} ({decision}); {path}")
    assert checked, f"no running static pod container on {node}: {[p['metadata']['name'] for p in mirrors]}"
    assert not problems, "\n".join(problems)
