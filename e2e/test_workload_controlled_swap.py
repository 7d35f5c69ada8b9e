"""KEP-5359 `resources.limits.swap`: under WorkloadControlledSwap a container's memory.swap.max
is its own limits.swap, whatever its QoS class; `limits.swap: 0` and no limits.swap both mean
none. On NoSwap and LimitedSwap nodes the field changes nothing: their own rules decide, and a
Pod event says the field has no effect there. Under stress, a Guaranteed pod with limits.swap
swaps past its memory limit up to its swap limit and is OOM-killed only there (the one without
it: test_stress_outcomes.test_guaranteed_pod_never_swaps, also run under WorkloadControlledSwap).

The shape tests expect 0 everywhere under WorkloadControlledSwap and so cannot tell it from
NoSwap; these can. They need an API server that accepts limits.swap (not merged upstream yet):
each test asks the API server first, with a server-side dry run of its pod, and skips saying so
only where the server refuses the field itself (e2e/wcs.py probe_refusal); any other rejection of the probe
fails with the server's message. The node fixture has already read the behavior from /configz."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from clusters import waits
from clusters.behaviors import WORKLOAD_CONTROLLED_SWAP
from clusters.provider import SwapNode
from e2e import oracle
from e2e.claims import claim
from e2e.metrics import find, parse_prometheus
from e2e.observe import wait_for
from e2e.oom import (OOM_KILLED, OVERHEAD_BOUND, START_FILE, STEP, allocated_before_kill, ended_before_holding,
                     killed_by_the_oom_killer, start_once_sampled)
from e2e.wcs import MEMORY, SWAP, needs_limits_swap_api, skip_where_limits_swap_was_refused
from e2e.workspace import Workspace
from workloads.pods import GUARANTEED, STRESS, Mi, alloc_command, guaranteed_swap_pod, stress_pod


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


def _best_effort_with_swap(ws: Workspace, name: str) -> dict[str, Any]:
    """Only limits.swap: no cpu or memory anywhere, so BestEffort (QoS reads cpu and memory only)."""
    return stress_pod(name, ws.image, ws.namespace, ws.test, [STRESS, "pause"], None, {"swap": SWAP})


def _guaranteed_without_swap(ws: Workspace, name: str) -> dict[str, Any]:
    resources = {"memory": MEMORY, "cpu": GUARANTEED["cpu"]}
    return stress_pod(name, ws.image, ws.namespace, ws.test, ["/swapstress", "pause"], resources, resources)


CASES = [
    Case("guaranteed-with-limits-swap", "Guaranteed", lambda ws, n: guaranteed_swap_pod(n, ws.image, ws.namespace,
                                                                                       ws.test, MEMORY, SWAP)),
    Case("burstable-with-limits-swap", "Burstable", _burstable_with_swap),
    Case("best-effort-with-limits-swap", "BestEffort", _best_effort_with_swap),
    Case("limits-swap-zero", "Guaranteed", lambda ws, n: guaranteed_swap_pod(n, ws.image, ws.namespace, ws.test,
                                                                            MEMORY, 0)),
    Case("no-limits-swap", "Guaranteed", _guaranteed_without_swap),
]


# The kubelet sends the event when it creates the container, before the pod runs; the API
# server may take a moment to list it (the recorder batches).


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_limits_swap_decides_the_containers_swap(swap_node: SwapNode, workspace: Callable[[SwapNode], Workspace],
                                                 case: Case, request: pytest.FixtureRequest) -> None:
    """Under WorkloadControlledSwap a container's memory.swap.max is its limits.swap whatever its
    QoS class, 0 without one; on NoSwap and LimitedSwap their own rule decides, and there only a
    pod setting limits.swap gets an event that it has no effect.

    Each case's pod is first checked to be the QoS class it was built as."""
    skip_where_limits_swap_was_refused(swap_node, request)
    ws = workspace(swap_node)
    needs_limits_swap_api(ws, swap_node, request)
    manifest = case.build(ws, case.id)
    ws.deploy(manifest)
    pod = ws.running(case.id)
    assert pod["status"]["qosClass"] == case.qos, f"built as {case.qos}, runs as {pod['status']['qosClass']}"
    decision = oracle.decide_swap(swap_node.behavior, pod, "stress", swap_node.memory_capacity, swap_node.swap_capacity)
    got = ws.observer.cgroup_value(ws.namespace, case.id, "stress", "memory.swap.max")
    inputs = f"{case.id} on {swap_node.behavior}: {decision}"
    claim(ws.record, "memory.swap.max", oracle.readback_swap_max(decision.value), got, inputs,
          explain=lambda: ws.explain(case.id))
    # KEP-5359: on NoSwap and LimitedSwap a pod that sets limits.swap (0 included: it changes
    # nothing there either) runs, and a Pod event says the field has no effect; never elsewhere.
    has_field = oracle.SWAP_RESOURCE in (oracle.find_container(manifest, "stress").get("resources") or {}).get("limits", {})
    wants_event = has_field and swap_node.behavior != WORKLOAD_CONTROLLED_SWAP

    def ignored_events() -> list[str]:
        return [e for e in ws.observer.events(ws.namespace, case.id) if oracle.swap_limit_ignored_event(e, "stress")]

    if wants_event:
        events = wait_for(f"the Pod event that limits.swap has no effect on {swap_node.behavior}",
                          lambda: ignored_events() or None, waits.POD_EVENT,
                          lambda: f"events: {ws.observer.events(ws.namespace, case.id)}")
    else:
        events = ignored_events()
    claim(ws.record, "Pod event: limits.swap has no effect here", wants_event, bool(events), inputs,
          explain=lambda: f"events: {ws.observer.events(ws.namespace, case.id)}\n" + ws.explain(case.id))


@pytest.mark.needs_behavior("WorkloadControlledSwap")
def test_guaranteed_pod_swaps_up_to_its_swap_limit_then_is_oom_killed(
        swap_node: SwapNode, workspace: Callable[[SwapNode], Workspace], request: pytest.FixtureRequest) -> None:
    """Under WorkloadControlledSwap a Guaranteed container with limits.swap allocating past its
    memory limit swaps up to its limits.swap and is OOM-killed only where memory.max +
    memory.swap.max run out.

    KEP-5359 use case 3; the same pod without the field is killed at its limit
    (test_guaranteed_pod_never_swaps)."""
    skip_where_limits_swap_was_refused(swap_node, request)
    ws = workspace(swap_node)
    needs_limits_swap_api(ws, swap_node, request)
    target = MEMORY + SWAP + 32 * Mi
    # A slow interval leaves several samples of each step, the last one included; the
    # allocation starts only once the node agent samples the container, or a pod killed within
    # seconds might never be seen swapping (the OOM tests of test_stress_outcomes do the same).
    command = alloc_command(target, step=STEP, interval="250ms", start_when=START_FILE)
    ws.deploy_sampled(guaranteed_swap_pod("swapping-guaranteed", ws.image, ws.namespace, ws.test, MEMORY, SWAP, command))
    start_once_sampled(ws, "swapping-guaranteed")
    terminated = ended_before_holding(ws, "swapping-guaranteed", target,
                                      f"Guaranteed, memory {MEMORY}, limits.swap {SWAP}, target {target}")
    series = ws.samples("swapping-guaranteed")
    pod = ws.observer.pod(ws.namespace, "swapping-guaranteed")
    allocated = allocated_before_kill(ws.observer.log(ws.namespace, "swapping-guaranteed", "stress"))
    swap_max = oracle.readback_bytes(SWAP)  # memory.swap.max as it reads back
    capacity = MEMORY + swap_max
    swapped = max((s for s in series.swap if s is not None), default=0)
    context = (f"memory {MEMORY}, limits.swap {SWAP}, target {target}, last allocated {allocated}, most swap {swapped},"
               f" {len(series.swap)} samples: {terminated}\n" + ws.explain("swapping-guaranteed"))
    inputs = f"Guaranteed, memory {MEMORY}, limits.swap {SWAP}, target {target}"
    assert pod["status"]["qosClass"] == "Guaranteed", context
    claim(ws.record, "memory.swap.max", swap_max, series.swap_max_as_read, inputs, explain=context)
    killed, how = killed_by_the_oom_killer(terminated, series)
    claim(ws.record, "killed by the OOM killer", OOM_KILLED, how, inputs, ok=killed, explain=context)
    low = capacity - STEP - OVERHEAD_BOUND
    claim(ws.record, "allocated when killed", f"in [{low}, {capacity}) (memory.max + memory.swap.max, less a step"
          " and overhead)", allocated, inputs, ok=low <= allocated < capacity, explain=context)
    # It swapped up to its limit: after its last step it held more than its memory limit, and
    # every page above memory.max was in swap, never more than memory.swap.max.
    floor = swap_max - STEP - OVERHEAD_BOUND
    claim(ws.record, "memory.swap.current, most in any sample", f"in [{floor}, {swap_max}]", swapped,
          f"{inputs}, {len(series.swap)} samples", ok=floor <= swapped <= swap_max, explain=context)


@pytest.mark.needs_behavior("WorkloadControlledSwap")
@pytest.mark.runs_alone("compares a node-wide sum that every other test's pods move")
def test_node_swap_allocated_is_the_sum_of_limits_swap(
        swap_node: SwapNode, workspace: Callable[[SwapNode], Workspace], request: pytest.FixtureRequest) -> None:
    """Under WorkloadControlledSwap the kubelet's kubelet_node_swap_allocated_bytes is the sum of
    limits.swap over the containers and init containers of the node's active pods.

    A pod of the test's own gives the sum an app container's and an init container's share. The
    node's pods are listed before and after each scrape; a scrape counts only where both lists
    are the same (no pod came, went or changed meanwhile), until one equals the sum of the
    non-terminal ones (bounded: a pod the kubelet has not admitted yet is not in its sum)."""
    skip_where_limits_swap_was_refused(swap_node, request)
    ws = workspace(swap_node)
    needs_limits_swap_api(ws, swap_node, request)
    pod = guaranteed_swap_pod("allocating", ws.image, ws.namespace, ws.test, MEMORY, SWAP)
    init = {**pod["spec"]["containers"][0], "name": "init", "command": ["/swapstress", "true"]}
    init["resources"] = {**init["resources"], "limits": {**init["resources"]["limits"], "swap": str(SWAP // 2)}}
    pod["spec"]["initContainers"] = [init]
    ws.deploy(pod)
    ws.running("allocating")
    seen: list[tuple[float | None, int]] = []

    def versions(pods: list[dict[str, Any]]) -> list[tuple[str, str]]:
        return sorted((p["metadata"]["uid"], p["metadata"]["resourceVersion"]) for p in pods)

    def probe() -> bool | None:
        before = ws.observer.pods_on_node()
        sample = find(parse_prometheus(ws.observer.node_proxy("metrics")), oracle.NODE_SWAP_ALLOCATED_METRIC)
        after = ws.observer.pods_on_node()
        if versions(before) != versions(after):  # a pod came, went or changed during the scrape
            return None
        seen.append((sample.value if sample else None, oracle.node_swap_allocated(after)))
        return True if seen[-1][0] == seen[-1][1] else None

    try:
        wait_for(f"{oracle.NODE_SWAP_ALLOCATED_METRIC} to equal the sum of the active pods' limits.swap", probe,
                 waits.METRIC, lambda: f"(metric, sum) in quiet scrapes: {seen[-5:]}")
    finally:
        last = seen[-1] if seen else (None, None)
        ws.record.check(oracle.NODE_SWAP_ALLOCATED_METRIC, last[1], last[0],
                        "the sum of limits.swap over the active pods' containers and init containers (KEP-5359"
                        " prototype, RegisterNodeSwapAllocated)", ok=bool(seen) and last[0] == last[1])
