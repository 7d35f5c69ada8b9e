"""A kubelet restart, and a switch of swapBehavior with it, leave running containers' swap
limits as they were; containers the kubelet creates afterwards follow the new behavior, both in
new pods and when it restarts a container of an old pod (oracle.behavior_applied cites the
kubelet code). Needs a provider that can restart a kubelet for one test (vm, kind). A kubelet
started without swap reports none in the Node's status (vm: kind nodes share their host's swap)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest

from clusters import waits
from clusters.provider import NotCoveredError, Provider, SharedSwapError, SwapNode
from e2e import oracle
from e2e.claims import claim
from e2e.gate import could_not_test
from e2e.workspace import Workspace
from e2e.metrics import find, parse_prometheus
from e2e.observe import exec_once_served, wait_for
from e2e.sizing import burstable_sizing
from e2e.verdict import SWAP_SHARED_BY_NODES
from workloads.pods import Mi, STRESS, stress_pod

EXIT_FILE = "/exit-now"  # in the container's own writable layer: a restarted container starts without it


@dataclass(frozen=True)
class Container:
    id: str
    restarts: int
    swap_max: str

    def __str__(self) -> str:
        return f"{self.id.rpartition('://')[2][:12]} restarts={self.restarts} memory.swap.max={self.swap_max}"


def burstable_pod(ws: Workspace, name: str) -> dict:
    """request < limit: under LimitedSwap the kubelet gives it a share, under NoSwap 0. It exits
    0 when EXIT_FILE appears, and restartPolicy Always brings a new container."""
    requests, limits = burstable_sizing(ws.node, headroom=32 * Mi).resources()
    pod = stress_pod(name, ws.image, ws.namespace, ws.test, [STRESS, "pause", "--exit-when", EXIT_FILE], requests, limits)
    pod["spec"]["restartPolicy"] = "Always"
    return pod


def container(ws: Workspace, name: str) -> Container:
    status = ws.running(name)["status"]["containerStatuses"][0]
    value = exec_once_served(f"the kubelet to serve exec in {name}",
                             lambda: ws.observer.cgroup_value(ws.namespace, name, "stress", "memory.swap.max"),
                             waits.KUBELET_EXEC_AFTER_RESTART)
    return Container(status["containerID"], status["restartCount"], value)


def kubelet_started(ws: Workspace) -> float:
    sample = find(parse_prometheus(ws.observer.node_proxy("metrics")), "process_start_time_seconds")
    assert sample is not None, "the kubelet's /metrics has no process_start_time_seconds"
    return sample.value


def expected(ws: Workspace, pod: dict, created_under: str, running_now: str) -> str:
    behavior = oracle.behavior_applied(created_under, running_now)
    node = ws.node
    return oracle.readback_swap_max(oracle.expected_swap_max(behavior, pod, "stress", node.memory_capacity, node.swap_capacity))


@pytest.mark.needs_behavior("NoSwap", "LimitedSwap")
@pytest.mark.runs_alone("restarts the node's kubelet and switches its swapBehavior")
def test_swap_limits_across_a_kubelet_restart_and_a_behavior_switch(
        swap_node: SwapNode, swap_provider: Provider, workspace: Callable[[SwapNode], Workspace]) -> None:
    """A running container keeps its identity and memory.swap.max across a kubelet restart and a
    swapBehavior switch; containers created after it, new or recreated, follow the new behavior;
    a config without swapBehavior runs NoSwap, the kubelet saying why.

    On the LimitedSwap node the switch is to NoSwap by leaving memorySwap.swapBehavior out of
    the kubelet's config file (failSwapOn: false): KEP-2400 makes NoSwap the default (v1.37.1
    leaves the field empty, defaults.go, and treats "" as NoSwap, kuberuntime_container_linux.go
    GetContainerSwapBehavior). The suite otherwise always writes the field, so a kubelet that
    defaulted an unset value to LimitedSwap would pass everything else; asked here, on the node
    where the two differ, it costs no kubelet restarts of its own; the kubelet's journal since
    that restart must carry server.go's "NoSwap is set due to memorySwapBehavior not specified".
    On the NoSwap node the switch is explicit."""
    from clusters.behaviors import normalize
    from clusters.kubelet_config import swap_behavior_unset

    if not swap_provider.restarts_kubelets or not swap_provider.reconfigures_kubelets:
        # Not among the gate's core checks: a skip with the reason, before anything is deployed.
        pytest.skip(f"the {swap_provider.name} provider cannot restart or reconfigure a kubelet for one test")
    first = swap_node.behavior
    other = "NoSwap" if first == "LimitedSwap" else "LimitedSwap"
    ws = workspace(swap_node)
    old_pod = ws.deploy(burstable_pod(ws, "old"))
    old = container(ws, "old")
    inputs = f"created under {first}, request < limit, node memory {swap_node.memory_capacity}, swap {swap_node.swap_capacity}"
    claim(ws.record, "memory.swap.max before any restart", expected(ws, old_pod, first, first), old.swap_max, inputs,
          explain=str(old))

    def switched(how: str) -> None:
        """The running container keeps its limit; new containers follow the new rule."""
        after_switch = container(ws, "old")
        context = f"before {old}; after the switch ({how}) {after_switch}\n" + ws.explain("old")
        claim(ws.record, "container after the switch", (old.id, 0), (after_switch.id, after_switch.restarts),
              "the same container, not restarted", explain=context)
        claim(ws.record, f"memory.swap.max of a running container after {first} -> {other}",
              expected(ws, old_pod, first, other), after_switch.swap_max,
              f"created under {first}, kubelet now {other} ({how})", explain=context)

        new_pod = ws.deploy(burstable_pod(ws, "new"))
        new = container(ws, "new")
        claim(ws.record, f"memory.swap.max of a new pod after {first} -> {other}", expected(ws, new_pod, other, other),
              new.swap_max, f"created under {other} ({how})", explain=lambda: f"{new}\n" + ws.explain("new"))

        # The container's main process exits as soon as the file exists, and the exec'd writer may
        # be killed with the container before it returns (137, seen once): the restart awaited
        # next is what proves the container ended.
        ws.observer.exec(ws.namespace, "old", "stress", [STRESS, "fill", "--path", EXIT_FILE, "--bytes", "1"], allowed=(0, 137))
        recreated = wait_for("the old pod's container to exit and run again",
                             lambda: _recreated(ws, "old", old.id), 300, lambda: ws.explain("old"))
        context = f"before {old}; recreated {recreated}\n" + ws.explain("old")
        claim(ws.record, "old pod's container restarts", 1, recreated.restarts, "it exited 0, restartPolicy Always",
              explain=context)
        claim(ws.record, f"memory.swap.max of a container recreated in an old pod after {first} -> {other}",
              expected(ws, old_pod, other, other), recreated.swap_max, f"recreated under {other} ({how})",
              explain=context)

    try:
        # 1. The same behavior: the running container is left alone.
        started = kubelet_started(ws)
        swap_provider.restart_kubelet(swap_node)
        restarted_at = kubelet_started(ws)
        assert restarted_at > started, f"the kubelet did not restart: process_start_time_seconds {started} -> {restarted_at}"
        after_restart = container(ws, "old")
        context = f"before {old}; after the restart {after_restart}\n" + ws.explain("old")
        claim(ws.record, "container after a kubelet restart", (old.id, 0), (after_restart.id, after_restart.restarts),
              "the same container, not restarted", explain=context)
        claim(ws.record, "memory.swap.max after a kubelet restart", old.swap_max, after_restart.swap_max,
              f"{inputs}, kubelet restarted ({first})", explain=context)

        # 2. Switched, and switched back afterwards.
        if first == "LimitedSwap":
            with swap_provider.reconfigured_kubelet(swap_node, swap_behavior_unset()) as restarted:
                live = (ws.observer.configz().get("memorySwap") or {}).get("swapBehavior")
                claim(ws.record, "/configz swapBehavior with none in the file", "NoSwap", normalize(live or ""),
                      "failSwapOn: false, memorySwap.swapBehavior absent",
                      explain=lambda: f"/configz swapBehavior {live!r}: NoSwap is KEP-2400's default\n" + ws.explain("old"))
                lines = restarted.kubelet_lines()
                said = oracle.logged(oracle.NO_BEHAVIOR_LOGGED, lines)
                claim(ws.record, "the kubelet said why it runs NoSwap", f"logged {oracle.NO_BEHAVIOR_LOGGED!r}",
                      f"logged {oracle.NO_BEHAVIOR_LOGGED!r}" if said else "no such line",
                      "cmd/kubelet/app/server.go run: failSwapOn false and no swapBehavior",
                      explain=lambda: f"the restarted kubelet's first lines: {lines[:20]}")
                switched("swapBehavior left out of the file")
        else:
            try:
                ws.node = swap_provider.restart_kubelet(swap_node, other)
                switched(f"swapBehavior: {other}")
            finally:
                ws.node = swap_provider.restart_kubelet(swap_node, first)
    except NotCoveredError as error:  # the provider said it could, then could not
        pytest.fail(str(error))


@pytest.mark.needs_behavior("LimitedSwap")
@pytest.mark.runs_alone("turns the node's swap off and restarts its kubelet twice")
def test_a_kubelet_started_without_swap_reports_no_node_swap(swap_node: SwapNode, swap_provider: Provider,
                                                             workspace: Callable[[SwapNode], Workspace],
                                                             request: pytest.FixtureRequest) -> None:
    """A kubelet started on a machine without swap leaves status.nodeInfo.swap out, where it
    reports a machine's swap capacity once swap is back.

    The MachineInfo setter (nodestatus/setters.go) sets the field only when cAdvisor's swap
    capacity is not 0, and never clears it: a kubelet restarted after swapoff keeps the Node's
    old capacity. So with swap off and the kubelet restarted, the test removes nodeInfo.swap from
    the Node's status and empties nodeInfo.bootID: the same setter writes bootID back at its next status
    sync, so once bootID is back the setter has run on the cleared status, and nodeInfo.swap must
    still be out. A kubelet that sets the field anyway, with a capacity of 0, fails at the wait:
    the API server refuses a status whose nodeInfo.swap.capacity is not positive
    (validateNodeSwapStatus), so that kubelet's status writes stop and bootID never comes back.
    Swap on again and the kubelet restarted, nodeInfo.swap.capacity must be /proc/meminfo's
    SwapTotal again. One behavior: the setter does not read it."""
    try:
        without_swap = swap_provider.kubelet_without_swap(swap_node)
    except SharedSwapError as error:
        pytest.skip(f"{SWAP_SHARED_BY_NODES}: {error.reason}")
    except NotCoveredError as error:
        could_not_test(request.config, str(error), swap_node.behavior)
    ws = workspace(swap_node)
    observer = ws.observer

    def node_info() -> dict:
        return observer.node_status()["status"]["nodeInfo"]

    def synced_info() -> dict | None:
        info = node_info()
        return info if info.get("bootID") else None

    try:
        with without_swap:
            stale = node_info()
            swap_total = ws.node_files().meminfo()["SwapTotal"]
            assert swap_total == 0, f"swap is still on after swapoff: SwapTotal {swap_total}"
            # bootID has no omitempty: "removed", it reads "" until the kubelet writes it again
            observer.remove_node_info(["bootID"] + (["swap"] if "swap" in stale else []))
            synced = wait_for("the kubelet's status sync to write nodeInfo.bootID back", synced_info,
                              waits.NODE_STATUS, lambda: f"nodeInfo {node_info()}")
            claim(ws.record, "nodeInfo.swap on a machine without swap", oracle.node_swap_status(0), synced.get("swap"),
                  "SwapTotal 0 at the kubelet's start; nodeInfo.swap removed and bootID emptied, bootID back",
                  explain=f"nodeInfo before the removal (the restarted kubelet leaves the old field) {stale};"
                          f" after the kubelet's sync {synced}")
    finally:
        # However the block ended, the Node reports its swap again before the next test reads it.
        back = wait_for("nodeInfo.swap after swap is back on", lambda: node_info().get("swap"), waits.NODE_STATUS,
                        lambda: f"nodeInfo {node_info()}")
    swap_total = ws.node_files().meminfo()["SwapTotal"]
    claim(ws.record, "nodeInfo.swap with swap back on", oracle.node_swap_status(swap_total), back,
          f"SwapTotal {swap_total} (/proc/meminfo) at the kubelet's restart", explain=f"nodeInfo {node_info()}")


def _recreated(ws: Workspace, name: str, old_id: str) -> Container | None:
    status = (ws.observer.pod(ws.namespace, name).get("status", {}).get("containerStatuses") or [{}])[0]
    if status.get("containerID") in (None, old_id) or "running" not in (status.get("state") or {}):
        return None
    return container(ws, name)
