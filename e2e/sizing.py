"""Stress sizes derived from the node's real memory and swap, through the oracle."""

from __future__ import annotations

from dataclasses import dataclass

from clusters.provider import SwapNode
from e2e import oracle
from e2e.workspace import Workspace
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


OVERCOMMIT_REQUEST_SHARE = (3, 10)  # a request of 30 % of the node's memory, as upstream's swap e2e uses


@dataclass(frozen=True)
class Overcommit:
    request: int
    swap_limit: int  # the oracle's LimitedSwap share for the request (before page rounding)
    available: int  # the host's MemAvailable just before: what the pod could hold without swap
    target: int  # what the pod allocates: available + a quarter of its swap share

    def __str__(self) -> str:
        return (f"request {self.request} (no limit), LimitedSwap share {self.swap_limit}, "
                f"MemAvailable {self.available}, allocating {self.target}")


def overcommit_sizing(node: SwapNode, mem_available: int) -> Overcommit:
    """A Burstable pod without a memory limit that allocates more than the host had available
    in RAM, by a quarter of its swap share: it can only hold that by swapping, and the rest of
    its share covers the RAM it cannot get after all (the kernel keeps a reserve free and
    other processes' memory moves: on the 4 GiB VM it got ~190 MiB less than MemAvailable)."""
    assert node.swap_capacity > 0, f"the node has no swap: {node.describe()}"
    share, whole = OVERCOMMIT_REQUEST_SHARE
    request = node.memory_capacity * share // whole // Mi * Mi
    pod = stress_pod("sizing", "x", "ns", "t", [], {"memory": request}, {})
    swap = oracle.expected_swap_max("LimitedSwap", pod, "stress", node.memory_capacity, node.swap_capacity)
    assert swap > 0, f"the oracle gives no swap to {request} on {node.describe()}"
    return Overcommit(request, swap, mem_available, (mem_available + swap // 4) // Mi * Mi)
