"""What the node does under memory stress: swap instead of OOM within limit + swap limit, OOM
beyond it, the fork-exec spike (survives with LimitedSwap, OOM-killed with NoSwap), and a
Guaranteed pod that never swaps. Sizes come from the node's real memory and swap, through the
oracle, so the same test is meaningful on a 4 GiB VM and on a 64 GiB kind host."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from clusters import waits
from clusters.provider import SwapNode
from e2e import oracle
from e2e.claims import claim
from e2e.workspace import Workspace
from e2e.observe import wait_for
from e2e.sizing import burstable_sizing, overcommit_sizing, swapping_past_limit
from e2e.oom import (OOM_KILLED, OVERHEAD_BOUND, START_FILE, STEP, allocated_before_kill, ended_before_holding,
                     killed_by_the_oom_killer, memory_events, start, start_once_sampled)
from workloads.pods import GUARANTEED, Mi, alloc_command, fork_spike_command, stress_pod


@pytest.mark.needs_behavior("LimitedSwap")
def test_burstable_pod_swaps_past_its_limit_instead_of_oom(swap_node: SwapNode, workspace: Callable[[SwapNode], Workspace]) -> None:
    """Under LimitedSwap a Burstable container allocating past its memory limit, within limit plus
    swap share, is not OOM-killed: its memory.swap.max is its share and at least the part above its
    limit is in swap."""
    ws = workspace(swap_node)
    size, target = swapping_past_limit(ws, "over-limit")  # past the limit, within limit + swap
    swap_max = ws.observer.cgroup_value(ws.namespace, "over-limit", "stress", "memory.swap.max")
    swap_current = int(ws.observer.cgroup_value(ws.namespace, "over-limit", "stress", "memory.swap.current"))
    events = memory_events(ws, "over-limit")
    context = f"{size}, target {target}, swap.current {swap_current}, events {events}\n" + ws.explain("over-limit")
    inputs = f"{size}, allocated {target}"
    claim(ws.record, "memory.swap.max", oracle.readback_swap_max(size.swap_limit), swap_max, inputs, explain=context)
    # Every touched page is in RAM or in swap, and RAM holds at most memory.max: so at least the
    # part above the limit is in swap, exactly, whatever else is charged.
    low = target - size.limit
    claim(ws.record, "memory.swap.current", f">= {low} (allocated - limit), <= {swap_max}", swap_current, inputs,
          ok=low <= swap_current <= int(swap_max), explain=context)
    claim(ws.record, "oom_kill events", 0, events["oom_kill"], inputs, explain=context)


@pytest.mark.needs_behavior("LimitedSwap")
def test_burstable_pod_beyond_limit_plus_swap_is_oom_killed(swap_node: SwapNode, workspace: Callable[[SwapNode], Workspace]) -> None:
    """Under LimitedSwap a Burstable container allocating past its memory limit plus its swap share
    is OOM-killed where memory and swap run out: within one step and 16 MiB of memory.max +
    memory.swap.max."""
    ws = workspace(swap_node)
    size = burstable_sizing(swap_node, headroom=32 * Mi)
    target = size.limit + size.swap_limit + 32 * Mi
    requests, limits = size.resources()
    command = alloc_command(target, step=STEP, start_when=START_FILE)
    ws.deploy_sampled(stress_pod("beyond", ws.image, ws.namespace, ws.test, command, requests, limits))
    start_once_sampled(ws, "beyond")
    terminated = ended_before_holding(ws, "beyond", target, f"{size}, target {target}")
    allocated = allocated_before_kill(ws.observer.log(ws.namespace, "beyond", "stress"))
    capacity = size.limit + oracle.readback_bytes(size.swap_limit)  # memory.max + memory.swap.max
    context = (f"{size}, target {target}, last allocated {allocated}, limit + swap.max {capacity}"
               f" (short by {capacity - allocated}): {terminated}\n" + ws.explain("beyond"))
    inputs = f"{size}, target {target}"
    killed, how = killed_by_the_oom_killer(terminated, ws.samples("beyond"))
    claim(ws.record, "killed by the OOM killer", OOM_KILLED, how, inputs, ok=killed, explain=context)
    # Killed where memory and swap ran out together, not earlier (swap refused) nor later.
    low = capacity - STEP - OVERHEAD_BOUND
    claim(ws.record, "allocated when killed", f"in [{low}, {capacity}) (memory.max + memory.swap.max {capacity},"
          f" less a step and overhead)", allocated, inputs, ok=low <= allocated < capacity, explain=context)


@pytest.mark.needs_behavior("LimitedSwap", "WorkloadControlledSwap")
def test_guaranteed_pod_never_swaps(swap_node: SwapNode, workspace: Callable[[SwapNode], Workspace]) -> None:
    """Under LimitedSwap and WorkloadControlledSwap a Guaranteed container without limits.swap
    allocating past its memory limit is OOM-killed, with memory.swap.max 0 and memory.swap.current
    0 in every sample until then.

    The allocation that a Burstable pod survives by swapping (test above) kills a
    Guaranteed pod with the same memory limit: it has no swap to spill into, and uses none
    on the way. Under WorkloadControlledSwap the same (KEP-5359: no limits.swap, no swap); the
    same pod with limits.swap is test_workload_controlled_swap's."""
    ws = workspace(swap_node)
    size = burstable_sizing(swap_node, headroom=32 * Mi)
    target = size.limit + size.swap_limit // 2
    # Guaranteed needs a CPU limit too; GUARANTEED's is large enough not to throttle the
    # allocation (at 10m it took minutes on an emulated node). A slow interval leaves time to
    # sample the cgroup while it fills.
    resources = {"memory": size.limit, "cpu": GUARANTEED["cpu"]}
    command = alloc_command(target, step=STEP, interval="250ms", start_when=START_FILE)
    ws.deploy_sampled(stress_pod("guaranteed", ws.image, ws.namespace, ws.test, command, resources, resources))
    start_once_sampled(ws, "guaranteed")
    terminated = ended_before_holding(ws, "guaranteed", target, f"limit {size.limit}, target {target}")
    series = ws.samples("guaranteed")  # memory.current / memory.swap.current every 100 ms until the kill
    pod = ws.observer.pod(ws.namespace, "guaranteed")
    samples = list(zip(series.current, series.swap))
    context = (f"limit {size.limit}, target {target}, {len(samples)} samples, last {samples[-5:]}: {terminated}\n"
               + ws.explain("guaranteed"))
    inputs = f"limit {size.limit}, target {target}"
    assert pod["status"]["qosClass"] == "Guaranteed", context
    killed, how = killed_by_the_oom_killer(terminated, series)
    claim(ws.record, "killed by the OOM killer", OOM_KILLED, how, inputs, ok=killed, explain=context)
    assert any(current > size.limit // 2 for current, _ in samples), "no sample while it filled: " + context
    claim(ws.record, "memory.swap.max", 0, series.swap_max_as_read, inputs, explain=context)
    # A sample whose memory.swap.current could not be read was taken as the killed container's
    # cgroup went away (seen on kind: the last one, memory.current still read): it holds no
    # figure, neither 0 nor another. Every sample with one must read 0, and there must be some.
    swapped = [s for _, s in samples if s is not None]
    claim(ws.record, "memory.swap.current, every sample", 0, max(swapped, default=None),
          f"{inputs}, {len(swapped)} of {len(samples)} samples read it",
          ok=bool(swapped) and all(s == 0 for s in swapped), explain=context)


def spike_finished(ws: Workspace, pod: str) -> tuple[str, dict | None]:
    """(log, None) once the spike printed its `done` line, or (log, terminated state) if the
    container ended first: under NoSwap the OOM killer may take the parent, not the child."""
    seen = {"log": ""}

    def probe() -> tuple[str, dict | None] | None:
        manifest = ws.observer.pod(ws.namespace, pod)
        statuses = manifest.get("status", {}).get("containerStatuses") or []
        if not any("running" in (cs.get("state") or {}) or "terminated" in (cs.get("state") or {}) for cs in statuses):
            return None  # not started yet: no log to read
        terminated = ws.observer.terminated(manifest, "stress")
        seen["log"] = ws.observer.log(ws.namespace, pod, "stress")
        if terminated:
            return seen["log"], terminated
        if any(line.startswith("done ") for line in seen["log"].splitlines()):
            return seen["log"], None
        return None

    return wait_for(f"{ws.namespace}/{pod} to finish its fork-exec round or end", probe, waits.FORK_EXEC_ROUND,
                    lambda: f"log: {seen['log'][-300:]!r}")


@pytest.mark.needs_behavior("NoSwap", "LimitedSwap")
def test_fork_exec_spike(swap_node: SwapNode, workspace: Callable[[SwapNode], Workspace]) -> None:
    """A Burstable container holding N whose forked child dirties its whole copy (2N for a moment,
    with limit < 2N <= limit + swap limit) rides it out under LimitedSwap and is OOM-killed under
    NoSwap.

    The pre-forking server pattern: holding N and forking needs up to 2N for a moment."""
    ws = workspace(swap_node)
    size = burstable_sizing(swap_node, headroom=16 * Mi)
    hold = size.limit * 5 // 8 // Mi * Mi
    assert size.limit < 2 * hold < size.limit + size.swap_limit - 16 * Mi, size  # the spec is meaningful
    requests, limits = size.resources()
    ws.deploy_sampled(stress_pod("spike", ws.image, ws.namespace, ws.test, fork_spike_command(hold), requests, limits))
    # No wait for Running: under NoSwap the container may be OOM-killed before it is seen running.
    log, terminated = spike_finished(ws, "spike")
    context = f"{size}, hold {hold}\n{log}\n" + ws.explain("spike")
    inputs = f"{size}, hold {hold}, behavior {swap_node.behavior}"
    if swap_node.behavior == "LimitedSwap":
        claim(ws.record, "spike outcome", "survived", "survived" if terminated is None else terminated.get("reason"),
              inputs, explain=context)
        assert "child-exited 0 iteration=1" in log and "done failures=0" in log, context
        assert memory_events(ws, "spike")["oom_kill"] == 0, context
    else:
        killed = "child-killed 9" in log or (terminated or {}).get("reason") == "OOMKilled"
        claim(ws.record, "spike outcome", "OOM kill (child-killed 9 or container OOMKilled)",
              "OOM kill" if killed else "survived", inputs, ok=killed, explain=context)
        if terminated is None:
            assert memory_events(ws, "spike")["oom_kill"] >= 1, context


HOLD_SECONDS = 40  # held this long after reaching its target: four of the kubelet's 10 s eviction rounds


def host_mem_available(ws: Workspace) -> int:
    """MemAvailable of the kernel the node runs on (/proc/meminfo is not namespaced: on kind it
    is the shared host's, which is what the allocation competes for), read by the node agent."""
    text = ws.node_files().read("/proc/meminfo")
    fields = {line.split(":")[0]: line.split()[1:] for line in text.splitlines() if ":" in line}
    value, unit = fields["MemAvailable"]
    assert unit == "kB", text
    return int(value) * 1024


@pytest.mark.needs_behavior("LimitedSwap")
@pytest.mark.runs_alone("allocates more than the host has available in RAM", host=True)
def test_burstable_pod_without_limit_overcommits_node_memory(swap_node: SwapNode, workspace: Callable[[SwapNode], Workspace]) -> None:
    """Under LimitedSwap a Burstable pod without a memory limit holds the host's available memory
    plus a quarter of its swap share for 40 s and keeps running, not OOM-killed, with the part RAM
    cannot take in swap, within its share.

    Swap as node overcommit: without swap the pod could not hold that; with it, it keeps running
    (not OOM-killed, not evicted: swap does not count in memory.available), memory.max `max`,
    memory.swap.max the oracle's share, memory.swap.current rising from 0."""
    ws = workspace(swap_node)
    size = overcommit_sizing(swap_node, host_mem_available(ws))
    command = alloc_command(size.target, step=16 * Mi, start_when=START_FILE)
    ws.deploy_sampled(stress_pod("overcommit", ws.image, ws.namespace, ws.test, command, {"memory": size.request}, {}))
    ws.running("overcommit")
    ws.observer.wait_log_line(ws.namespace, "overcommit", "stress", "waiting path=")
    # Only a container that has its swap share may start: without it the kernel cannot swap
    # this allocation and thrashes the node's own page cache instead (seen: a NoSwap node
    # with load 20 and an unanswering API server for many minutes, no OOM kill, no eviction).
    swap_max = ws.observer.cgroup_value(ws.namespace, "overcommit", "stress", "memory.swap.max")
    claim(ws.record, "memory.swap.max", oracle.readback_swap_max(size.swap_limit), swap_max, str(size),
          explain=lambda: f"not starting the allocation of {size.target}: " + ws.explain("overcommit"))
    start(ws, "overcommit")
    ws.observer.wait_log_line(ws.namespace, "overcommit", "stress", f"holding {size.target}")
    time.sleep(HOLD_SECONDS)
    cgroup = {name: ws.observer.cgroup_value(ws.namespace, "overcommit", "stress", name)
              for name in ("memory.max", "memory.swap.max", "memory.current", "memory.swap.current")}
    events = memory_events(ws, "overcommit")
    pod = ws.observer.pod(ws.namespace, "overcommit")
    series = ws.samples("overcommit")
    status = pod["status"]["containerStatuses"][0]
    swap_current, current = int(cgroup["memory.swap.current"]), int(cgroup["memory.current"])
    swapped = [s for s in series.swap if s is not None]
    context = f"{size}\ncgroup {cgroup}, events {events}, samples {len(swapped)}\n" + ws.explain("overcommit")
    inputs = str(size)
    assert size.target > size.available, context  # the design: more than RAM had to give
    claim(ws.record, "phase, restarts, state", ("Running", 0, "running"),
          (pod["status"]["phase"], status["restartCount"], next(iter(status.get("state") or {}), None)),
          f"{inputs}, after holding {HOLD_SECONDS}s", explain=context)
    claim(ws.record, "oom_kill events", 0, events["oom_kill"], inputs, explain=context)
    claim(ws.record, "memory.max", "max", cgroup["memory.max"], "no memory limit", explain=context)
    claim(ws.record, "memory.swap.max while holding", swap_max, cgroup["memory.swap.max"], inputs, explain=context)
    claim(ws.record, "memory.swap.current", f"> 0, <= memory.swap.max {cgroup['memory.swap.max']}", swap_current,
          inputs, ok=0 < swap_current <= int(cgroup["memory.swap.max"]), explain=context)
    # Every page it touched is in RAM or in swap.
    claim(ws.record, "memory.current + memory.swap.current", f">= {size.target} (allocated)",
          current + swap_current, inputs, ok=current + swap_current >= size.target, explain=context)
    claim(ws.record, "memory.swap.current, sampled", "rises from 0",
          f"first {swapped[0] if swapped else None}, max {max(swapped, default=None)}", inputs,
          ok=bool(swapped) and swapped[0] == 0 and max(swapped) > 0, explain=context)
