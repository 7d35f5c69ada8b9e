"""Static pods are critical: their containers get memory.swap.max 0 whatever the behavior.
They cannot be exec'd into, so a privileged probe pod reads their cgroups from the node."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from clusters.discovery import kubelet_config
from clusters.behaviors import normalize
from clusters.provider import SwapNode
from e2e import oracle
from e2e.conftest import Workspace
from workloads.pods import labels

HOST_CGROUP = "/host-cgroup"


def cgroup_reader(ws: Workspace, node: str) -> str:
    name = "cgroup-reader"
    ws.deploy({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ws.namespace, "labels": labels(ws.test)},
        "spec": {
            "nodeName": node,  # taints do not stop a pod bound by name (control-plane nodes)
            "tolerations": [{"operator": "Exists"}],
            "containers": [{
                "name": "reader", "image": ws.image, "imagePullPolicy": "Never",
                "command": ["/swapstress", "pause"], "securityContext": {"privileged": True},
                "volumeMounts": [{"name": "cgroup", "mountPath": HOST_CGROUP, "readOnly": True}],
            }],
            "volumes": [{"name": "cgroup", "hostPath": {"path": "/sys/fs/cgroup"}}],
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 1,
        },
    })
    ws.running(name)
    return name


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
    reader = cgroup_reader(ws, node)
    problems, checked = [], 0
    for pod in mirrors:
        for status in pod["status"].get("containerStatuses") or []:
            container_id = (status.get("containerID") or "").split("://")[-1]
            if not container_id or "running" not in (status.get("state") or {}):
                continue
            out = ws.observer.exec(ws.namespace, reader, "reader",
                                   ["/swapstress", "find-cgroup", HOST_CGROUP, container_id, "memory.swap.max"]).stdout
            got = out.splitlines()[-1].strip()
            decision = oracle.decide_swap(behavior, pod, status["name"], swap_node.memory_capacity, swap_node.swap_capacity)
            checked += 1
            if decision.value != 0 or got != oracle.readback_swap_max(decision.value):
                problems.append(f"{pod['metadata']['name']}/{status['name']}: reads {got}, expected "
                                f"{oracle.readback_swap_max(decision.value)} ({decision}); {out.splitlines()[0]}")
    assert checked, f"no running static pod container on {node}: {[p['metadata']['name'] for p in mirrors]}"
    assert not problems, "\n".join(problems)
