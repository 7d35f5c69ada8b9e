"""Stress sizes derived from the node's real memory and swap, through the oracle."""

from __future__ import annotations

from dataclasses import dataclass

from clusters.provider import SwapNode
from e2e import oracle
from e2e.conftest import Workspace
from workloads.pods import Mi, alloc_command, stress_pod

TARGET_SWAP = 64 * Mi  # the swap limit Burstable stress pods are sized for


@dataclass(frozen=True)
class Sizing:
    request: int
    limit: int
    swap_limit: int  # what the kubelet must write under LimitedSwap (before page rounding)

    def resources(self) -> tuple[dict[str, int], dict[str, int]]:
        return {"memory": self.request}, {"memory": self.limit}


def burstable_sizing(node: SwapNode, headroom: int) -> Sizing:
    """A request whose LimitedSwap share is about TARGET_SWAP on this node; limit = request + headroom."""
    assert node.swap_capacity > 0, f"the node has no swap: {node.describe()}"
    request = -(-TARGET_SWAP * node.memory_capacity // node.swap_capacity) // Mi * Mi
    limit = request + headroom
    pod = stress_pod("sizing", "x", "ns", "t", [], {"memory": request}, {"memory": limit})
    swap = oracle.expected_swap_max("LimitedSwap", pod, "stress", node.memory_capacity, node.swap_capacity)
    return Sizing(request, limit, swap)


def swapping_past_limit(ws: Workspace, name: str) -> tuple[Sizing, int]:
    """A Burstable pod that allocated past its memory limit, within limit + swap limit, holding."""
    size = burstable_sizing(ws.node, headroom=32 * Mi)
    target = size.limit + size.swap_limit // 2
    requests, limits = size.resources()
    ws.deploy_sampled(stress_pod(name, ws.image, ws.namespace, ws.test, alloc_command(target), requests, limits))
    ws.running(name)
    ws.observer.wait_log_line(ws.namespace, name, "stress", f"holding {target}")
    return size, target
