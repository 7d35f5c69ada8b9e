"""KEP-5359 `resources.limits.swap`: under WorkloadControlledSwap a container's memory.swap.max
is its own limits.swap, whatever its QoS class; `limits.swap: 0` and no limits.swap both mean
none. On NoSwap and LimitedSwap nodes the field changes nothing: their own rules decide.

The shape tests expect 0 everywhere under WorkloadControlledSwap and so cannot tell it from
NoSwap; these can. They need an API server that accepts limits.swap (not merged upstream yet):
each test asks the API server first, with a server-side dry run of its pod, and skips saying so
where the field is refused. The node fixture has already read the behavior from /configz."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from clusters.provider import SwapNode
from e2e import oracle
from e2e.conftest import Workspace
from workloads.pods import GUARANTEED, Mi, guaranteed_swap_pod, stress_pod

SWAP = 48 * Mi
MEMORY = 64 * Mi


@dataclass(frozen=True)
class Case:
    id: str
    qos: str
    build: Callable[[Workspace, str], dict[str, Any]]


def _burstable_with_swap(ws: Workspace, name: str) -> dict[str, Any]:
    pod = stress_pod(name, ws.image, ws.namespace, ws.test, ["/swapstress", "pause"],
                     {"memory": MEMORY // 2}, {"memory": MEMORY})
    pod["spec"]["containers"][0]["resources"]["limits"]["swap"] = str(SWAP)
    return pod


def _guaranteed_without_swap(ws: Workspace, name: str) -> dict[str, Any]:
    resources = {"memory": MEMORY, "cpu": GUARANTEED["cpu"]}
    return stress_pod(name, ws.image, ws.namespace, ws.test, ["/swapstress", "pause"], resources, resources)


CASES = [
    Case("guaranteed-with-limits-swap", "Guaranteed", lambda ws, n: guaranteed_swap_pod(n, ws.image, ws.namespace,
                                                                                       ws.test, MEMORY, SWAP)),
    Case("burstable-with-limits-swap", "Burstable", _burstable_with_swap),
    Case("limits-swap-zero", "Guaranteed", lambda ws, n: guaranteed_swap_pod(n, ws.image, ws.namespace, ws.test,
                                                                            MEMORY, 0)),
    Case("no-limits-swap", "Guaranteed", _guaranteed_without_swap),
]


def refusal(ws: Workspace, manifest: dict[str, Any]) -> str | None:
    """Why the API server refuses the pod (server-side dry run: nothing is created), or None."""
    from kubernetes.client.exceptions import ApiException

    try:
        ws.observer.core.create_namespaced_pod(ws.namespace, manifest, dry_run="All", _request_timeout=30)
        return None
    except ApiException as error:
        if error.status not in (400, 422):
            raise
        try:
            message = json.loads(error.body)["message"]
        except (TypeError, ValueError, KeyError):
            message = error.body or error.reason or str(error.status)
        return str(message).strip()[:240]


def swap_probe(ws: Workspace) -> dict[str, Any]:
    """A pod with limits.swap, to learn whether the API server has the KEP-5359 field at all."""
    return guaranteed_swap_pod("limits-swap-probe", ws.image, ws.namespace, ws.test, MEMORY, SWAP)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_limits_swap_decides_the_containers_swap(swap_node: SwapNode, workspace: Callable[[SwapNode], Workspace],
                                                 case: Case) -> None:
    ws = workspace(swap_node)
    refused = refusal(ws, swap_probe(ws))
    if refused:
        pytest.skip(f"the API server refuses resources.limits.swap (no KEP-5359): {refused}")
    manifest = case.build(ws, case.id)
    ws.deploy(manifest)
    pod = ws.running(case.id)
    assert pod["status"]["qosClass"] == case.qos, f"built as {case.qos}, runs as {pod['status']['qosClass']}"
    decision = oracle.decide_swap(swap_node.behavior, pod, "stress", swap_node.memory_capacity, swap_node.swap_capacity)
    got = ws.observer.cgroup_value(ws.namespace, case.id, "stress", "memory.swap.max")
    assert got == oracle.readback_swap_max(decision.value), f"memory.swap.max {got}; expected {decision}\n" + ws.explain(case.id)
