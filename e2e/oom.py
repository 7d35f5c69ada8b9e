"""How a container under memory stress ends, as the tests read it: a gated allocation started
once the node agent samples the container, the last step it allocated, whether the OOM killer
ended it (the runtime's reason or the kernel's own count), and the bounds an allocation is
killed within (test_stress_outcomes, test_workload_controlled_swap)."""

from __future__ import annotations

from typing import Any

import pytest

from e2e.record import Series
from e2e.workspace import Workspace
from workloads.pods import STRESS, Mi


def memory_events(ws: Workspace, pod: str) -> dict[str, int]:
    """The stress container's memory.events counters (oom, oom_kill, ...), read inside it."""
    text = ws.observer.cgroup_value(ws.namespace, pod, "stress", "memory.events")
    return {key: int(value) for key, value in (line.split() for line in text.splitlines())}


# Charged to the container besides the anonymous memory it touches: the Go runtime's own heap
# and stacks, page tables (about 2 KiB per MiB touched), kernel stacks and slab. Clean file
# pages (the static binary) are reclaimed before anything is OOM-killed. Bounded at 16 MiB,
# several times the 0.5-3 MiB it comes to on the suite's nodes.
OVERHEAD_BOUND = 16 * Mi
STEP = 4 * Mi  # alloc_command's step: the kill lands inside one


def allocated_before_kill(log: str) -> int:
    """The last `allocated N` the program printed: it was killed while touching the next step."""
    amounts = [int(line.split()[1]) for line in log.splitlines() if line.startswith("allocated ")]
    return amounts[-1] if amounts else 0


OOM_KILLED = "OOMKilled, or exit 137 with memory.events oom_kill >= 1 in the container's cgroup"


def killed_by_the_oom_killer(terminated: dict[str, Any], series: Series) -> tuple[bool, str]:
    """Whether the OOM killer ended the container, and what said so: the runtime's reason, or the
    kernel's own count in the container's cgroup, which the node agent's samples read until the
    cgroup goes away. containerd can miss the OOM event and report "Error", exit 137, for a
    container the OOM killer killed."""
    reason, code = terminated.get("reason"), terminated.get("exitCode")
    kills = "not read" if series.oom_kills is None else series.oom_kills
    return (reason == "OOMKilled" or (code == 137 and (series.oom_kills or 0) >= 1),
            f"{reason} (exit {code}), memory.events oom_kill {kills}")


START_FILE = "/start-now"  # in the container's writable layer: alloc_command(start_when=...) waits for it


def start_once_sampled(ws: Workspace, pod: str) -> None:
    """Let a gated allocation start once the node agent samples its container: killed within
    seconds, it must still have been seen filling (Workspace.wait_sampled)."""
    ws.running(pod)
    ws.observer.wait_log_line(ws.namespace, pod, "stress", "waiting path=")
    ws.wait_sampled(pod)
    start(ws, pod)


def start(ws: Workspace, pod: str) -> None:
    """Write the start file a gated allocation (alloc_command start_when) waits for."""
    ws.observer.exec(ws.namespace, pod, "stress", [STRESS, "fill", "--path", START_FILE, "--bytes", "1"])


def ended_before_holding(ws: Workspace, pod: str, target: int, inputs: str) -> dict[str, Any]:
    """The terminated state of a sampled container whose allocation of `target` its limits make
    impossible. One that prints `holding <target>` allocated all of it and was not killed: the
    test fails then, with what its cgroup showed, rather than at the end of the wait (a kubelet
    that gave a Guaranteed pod swap kept it running until the 600 s bound, mutant 05)."""
    terminated = ws.observer.wait_terminated_or_printed(ws.namespace, pod, "stress", f"holding {target}")
    if terminated is not None:
        return terminated
    series = ws.samples(pod)
    swapped = max((s for s in series.swap if s is not None), default=None)
    observed = (f"still running, holding all {target} bytes (memory.max {series.memory_max_as_read},"
                f" memory.swap.max {series.swap_max_as_read},"
                f" memory.swap.current up to {swapped})")
    ws.record.check("killed by the OOM killer", OOM_KILLED, observed, inputs, ok=False)
    pytest.fail(f"{pod}: {OOM_KILLED} expected; {observed}\n" + ws.explain(pod), pytrace=False)
