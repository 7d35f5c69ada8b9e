"""Memory-backed volumes: tmpfs, `noswap` when the kernel has it (whatever the swapBehavior),
`size=` from sizeLimit / the pod's memory limit / node allocatable; configMap stays on disk.
On a kernel without `noswap`, the node carries the PossibleMemoryBackedVolumesOnDisk warning.
And the behaviour behind the flag: under memory pressure, tmpfs pages stay in RAM while
anonymous memory swaps."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from clusters import waits
from clusters.provider import SwapNode
from e2e import oracle
from e2e.claims import Claims, claim
from e2e.workspace import Workspace
from e2e.gate import could_not_test
from e2e.sizing import burstable_sizing
from workloads.pods import MEMORY_VOLUME, Mi, alloc_command, labels, memory_volumes_pod, resident_command, stress_pod

EXIT_FILE = "/exit-now"  # in the container's writable layer: a restarted container has none

EVENT_REASON = "PossibleMemoryBackedVolumesOnDisk"


def kernel_has_noswap(ws: Workspace) -> bool:
    """The kubelet's own rule: kernel >= 6.4, else whatever a real `noswap` probe mount says,
    which we run on the node in a privileged container."""
    try:
        return oracle.kernel_supports_noswap(ws.node.kernel)
    except ValueError:
        pass
    probe = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "noswap-probe", "namespace": ws.namespace, "labels": labels(ws.test)},
        "spec": {
            "containers": [{
                "name": "probe", "image": ws.image, "imagePullPolicy": "Never",
                "command": ["/swapstress", "pause"], "securityContext": {"privileged": True},
            }],
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 1,
        },
    }
    ws.deploy(probe)
    ws.running("noswap-probe")
    answer = ws.observer.exec(ws.namespace, "noswap-probe", "probe", ["/swapstress", "probe-noswap"]).stdout
    assert answer.startswith("noswap-supported "), answer
    return answer.split()[1] == "true"


def secret_and_config_map(ws: Workspace) -> tuple[str, str]:
    meta = {"namespace": ws.namespace, "labels": labels(ws.test)}
    ws.deploy({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "sensitive", **meta},
               "stringData": {"password": "not-a-real-secret"}})
    ws.deploy({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings", **meta},
               "data": {"key": "value"}})
    return "sensitive", "settings"


def test_memory_backed_volume_mounts(swap_node: SwapNode, workspace: Callable[[SwapNode], Workspace]) -> None:
    """Memory-backed volumes (emptyDir Memory with and without sizeLimit, Secret, projected,
    downwardAPI) are tmpfs with the size= the kubelet computes and noswap exactly when the kernel
    has it; a configMap volume is on disk.

    The kernel has noswap from 6.4, or else where a real probe mount says so (kernel_has_noswap)."""
    ws = workspace(swap_node)
    has_noswap = kernel_has_noswap(ws)
    secret, config_map = secret_and_config_map(ws)
    ws.deploy(memory_volumes_pod(ws.image, ws.namespace, ws.test, secret, config_map))
    pod = ws.running("memory-volumes")
    mounts = ws.observer.mounts(ws.namespace, "memory-volumes", "app")

    volumes = oracle.memory_backed_volumes(pod)
    assert {v.name for v in volumes} == {"mem-sized", "mem-unsized", "secret", "projected", "downward"}
    each = Claims(ws.record)
    for volume in volumes:
        mount = mounts.get(f"/volumes/{volume.name}")
        if mount is None:
            each.problem(f"{volume.name}: not mounted at /volumes/{volume.name}")
            continue
        if mount.fstype != "tmpfs":
            each.problem(f"{volume.name}: fstype {mount.fstype}, expected tmpfs")
        want_noswap = oracle.expects_noswap(volume, has_noswap)
        each.claim(f"{volume.name}: noswap mount option", "present" if want_noswap else "absent",
                   "present" if "noswap" in mount.options else "absent",
                   f"{volume.kind}, kernel {swap_node.kernel}, noswap supported {has_noswap}",
                   explain=f"  mount options {sorted(mount.options)}")
        size = oracle.expected_tmpfs_size(volume, pod, swap_node.memory_allocatable)
        want_size = f"{oracle.readback_tmpfs_size_kib(size)}k"
        each.claim(f"{volume.name}: tmpfs size", want_size, mount.option("size"),
                   f"sizeLimit {volume.size_limit}, pod limit {oracle.pod_memory_limit(pod)},"
                   f" allocatable {swap_node.memory_allocatable}", explain=f"  expected {size} bytes, read back in KiB")
    config = mounts.get("/volumes/config")
    if config is None or config.fstype == "tmpfs":
        each.problem(f"configMap volume: {config}, expected a disk-backed mount")
    each.hold(explain=lambda: ws.explain("memory-volumes"))


# The API server keeps events for --event-ttl (default 1 h). The kubelet sends this warning once,
# when it starts: its absence means something only if the kubelet started less than that ago.
EVENT_TTL_SECONDS = 3600


def kubelet_started_ago(ws: Workspace) -> float:
    """Seconds since the node's kubelet process started (its own process_start_time_seconds)."""
    import time

    from e2e.metrics import find, parse_prometheus

    started = find(parse_prometheus(ws.observer.node_proxy("metrics")), "process_start_time_seconds")
    assert started is not None, "the kubelet's /metrics has no process_start_time_seconds"
    return time.time() - started.value


def test_on_disk_warning_only_without_noswap(swap_node: SwapNode, workspace: Callable[[SwapNode], Workspace],
                                            request: pytest.FixtureRequest) -> None:
    """The kubelet warns (PossibleMemoryBackedVolumesOnDisk) exactly when swap is on and the
    kernel cannot mount tmpfs with noswap: memory-backed volumes could then reach the disk."""
    ws = workspace(swap_node)
    has_noswap = kernel_has_noswap(ws)
    due = swap_node.swap_capacity > 0 and not has_noswap
    warnings = [e for e in ws.observer.node_events() if e.get("reason") == EVENT_REASON]
    age = kubelet_started_ago(ws)
    context = (f"kernel {swap_node.kernel}, noswap supported: {has_noswap}, swap capacity {swap_node.swap_capacity},"
               f" kubelet started {age:.0f}s ago; {EVENT_REASON} events: {warnings}")
    if due:
        assert warnings and warnings[-1].get("type") == "Warning", "expected the warning: " + context
        return
    assert not warnings, "a warning that is not due: " + context
    if age >= EVENT_TTL_SECONDS:  # no event proves nothing: it may have been sent and expired
        could_not_test(request.config, f"the kubelet started {age:.0f}s ago, past the API server's default"
                       f" event TTL ({EVENT_TTL_SECONDS}s): the absence of its start-up warning proves nothing",
                       swap_node.behavior)


def resident_bytes(ws: Workspace, pod: str, *paths: str) -> dict[str, tuple[int, int]]:
    """{path: (resident bytes, file size)} as mincore(2) sees them inside the container."""
    out = ws.observer.exec(ws.namespace, pod, "stress", resident_command(*paths)).stdout
    result = {}
    for line in out.splitlines():
        _, resident, size, path = line.split(" ", 3)  # resident B size=S path="P"
        result[path.removeprefix('path="').removesuffix('"')] = (int(resident), int(size.removeprefix("size=")))
    assert set(result) == set(paths), out
    return result


@pytest.mark.needs_behavior("LimitedSwap")
def test_tmpfs_pages_stay_resident_while_anonymous_memory_swaps(swap_node: SwapNode, workspace: Callable[[SwapNode], Workspace]) -> None:
    """Under LimitedSwap, while a container's anonymous memory swaps past its limit, a file on its
    noswap memory-backed emptyDir keeps every page resident and a control file on /dev/shm loses
    pages to swap.

    One process in a Burstable container writes a file on its memory-backed emptyDir and a
    control file on /dev/shm (the runtime's tmpfs, mounted without noswap), then allocates
    anonymous memory past the container's limit. Both files are the oldest pages in the cgroup,
    so reclaim reaches them first: the control file loses pages to swap, which shows the pressure
    reached tmpfs; the emptyDir file, mounted noswap by the kubelet, must keep every page."""
    ws = workspace(swap_node)
    if not kernel_has_noswap(ws):
        pytest.skip(f"kernel {swap_node.kernel} has no tmpfs noswap: memory-backed volumes may swap there"
                    " (test_on_disk_warning_only_without_noswap checks the kubelet warns)")
    size = burstable_sizing(swap_node, headroom=64 * Mi)
    volume_file, control_file = f"{MEMORY_VOLUME}/data", "/dev/shm/control"
    volume_bytes, control_bytes = 32 * Mi, 16 * Mi
    # Everything charged: limit + half the swap limit, so at least that half must go to swap.
    anonymous = size.limit + size.swap_limit // 2 - volume_bytes - control_bytes
    requests, limits = size.resources()
    command = alloc_command(anonymous, fills={volume_file: volume_bytes, control_file: control_bytes})
    ws.deploy(stress_pod("tmpfs-pressure", ws.image, ws.namespace, ws.test, command, requests, limits,
                         memory_volume_size=64 * Mi))
    ws.running("tmpfs-pressure")
    ws.observer.wait_log_line(ws.namespace, "tmpfs-pressure", "stress", f"holding {anonymous}")

    resident = resident_bytes(ws, "tmpfs-pressure", volume_file, control_file)
    swap_current = int(ws.observer.cgroup_value(ws.namespace, "tmpfs-pressure", "stress", "memory.swap.current"))
    events = ws.observer.cgroup_value(ws.namespace, "tmpfs-pressure", "stress", "memory.events")
    mounts = ws.observer.mounts(ws.namespace, "tmpfs-pressure", "stress")
    context = (f"{size}, anonymous {anonymous}, resident (bytes, size) {resident}, memory.swap.current {swap_current},"
               f" emptyDir options {sorted(mounts[MEMORY_VOLUME].options)}, /dev/shm options"
               f" {sorted(mounts['/dev/shm'].options)}\nmemory.events:\n{events}\n" + ws.explain("tmpfs-pressure"))
    assert "noswap" not in mounts["/dev/shm"].options, "the control is not swappable: " + context
    assert swap_current > 0, "nothing was swapped: " + context
    assert resident[control_file][0] < control_bytes, "the pressure never reached tmpfs pages: " + context
    assert resident[volume_file] == (volume_bytes, volume_bytes), "the emptyDir's pages went to swap: " + context


def test_tmpfs_data_survives_a_container_restart(swap_node: SwapNode, workspace: Callable[[SwapNode], Workspace]) -> None:
    """Data written to a memory-backed emptyDir outlives the container that wrote it: the restarted
    container finds every byte resident, on a mount still tmpfs and still `noswap` exactly when the
    kernel has it.

    The file's pages move to the pod's cgroup when the container's is removed."""
    ws = workspace(swap_node)
    has_noswap = kernel_has_noswap(ws)
    # The container exits when the test creates EXIT_FILE in its writable layer; restartPolicy
    # Always brings a new container, with a new writable layer, which waits for the file again:
    # it runs for as long as the test reads it (a container that exits on a timer can take an
    # exec down with it, 137, on a loaded node). It holds 5 s after it sees the file, so the exec
    # that made the file has ended by then.
    pod = stress_pod("restarts", ws.image, ws.namespace, ws.test,
                     ["/swapstress", "alloc", "--target", "4Mi", "--start-when", EXIT_FILE, "--hold", "5s"],
                     memory_volume_size=64 * Mi)
    pod["spec"]["restartPolicy"] = "Always"
    ws.deploy(pod)
    first = ws.running("restarts")
    first_id = first["status"]["containerStatuses"][0]["containerID"]
    data, size = f"{MEMORY_VOLUME}/data", 32 * Mi
    out = ws.observer.exec(ws.namespace, "restarts", "stress", ["/swapstress", "fill", "--path", data, "--bytes", str(size)]).stdout
    assert out.strip() == f"filled {size}", out
    ws.observer.exec(ws.namespace, "restarts", "stress", ["/swapstress", "fill", "--path", EXIT_FILE, "--bytes", "0"])

    def restarted() -> dict | None:
        current = ws.observer.pod(ws.namespace, "restarts")
        status = (current.get("status", {}).get("containerStatuses") or [{}])[0]
        if status.get("containerID") not in (None, first_id) and "running" in (status.get("state") or {}):
            return current
        return None

    from e2e.observe import wait_for

    again = wait_for("the container to exit and run again", restarted, waits.CONTAINER_RESTART, lambda: ws.explain("restarts"))
    context = f"first container {first_id}\n" + ws.explain("restarts")
    restarts = again["status"]["containerStatuses"][0]["restartCount"]
    claim(ws.record, "restartCount", ">= 1", restarts, "the container exits when told to, restartPolicy Always",
          ok=restarts >= 1, explain=context)
    resident = resident_bytes(ws, "restarts", data)[data]
    claim(ws.record, "bytes of the file resident after the restart", (size, size), resident,
          "32 MiB written by the previous container", explain=context)
    mount = ws.observer.mounts(ws.namespace, "restarts", "stress")[MEMORY_VOLUME]
    want_noswap = oracle.expects_noswap({"name": "mem", "emptyDir": {"medium": "Memory"}}, has_noswap)
    assert mount.fstype == "tmpfs", context
    claim(ws.record, "noswap on the restarted container's mount", want_noswap, "noswap" in mount.options,
          f"kernel {swap_node.kernel}, noswap supported {has_noswap}", explain=context)
