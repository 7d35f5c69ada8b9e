"""The workload builders: each pod shape is what its name and declared QoS say, per the oracle."""

from __future__ import annotations

import pytest

from e2e import oracle
from workloads.pods import (
    MEMORY_VOLUME,
    PRINT_OWN_CGROUP,
    QOS_SHAPES,
    Box,
    Mi,
    PodShape,
    ephemeral_container,
    alloc_command,
    guaranteed_swap_pod,
    labels,
    resident_command,
    static_pod,
    stress_pod,
)

NODE_MEMORY, NODE_SWAP = 4 * 1024 * Mi, 2 * 1024 * Mi


def built(shape: PodShape) -> dict:
    return shape.manifest("img", "ns", "t", lambda near: oracle.page_edge_request(near, NODE_MEMORY, NODE_SWAP))


@pytest.mark.parametrize("shape", QOS_SHAPES, ids=[s.id for s in QOS_SHAPES])
def test_shape_has_its_declared_qos(shape) -> None:
    assert oracle.qos_class(built(shape)) == shape.qos


@pytest.mark.parametrize("shape", QOS_SHAPES, ids=[s.id for s in QOS_SHAPES])
def test_shape_names_only_containers_that_run(shape) -> None:
    pod = built(shape)
    running = [c["name"] for c in pod["spec"]["containers"]]
    running += [c["name"] for c in pod["spec"].get("initContainers", []) if c.get("restartPolicy") == "Always"]
    assert shape.container_names() == running
    for init in pod["spec"].get("initContainers", []):
        if init.get("restartPolicy") != "Always":
            assert init["command"] in (["/swapstress", "true"], list(PRINT_OWN_CGROUP)), "a plain init container must finish"


def test_the_init_container_shape_prints_its_own_cgroup_and_others_finish_at_once() -> None:
    """G2: the one plain init container the shapes have prints its own memory.swap.max and
    memory.max (one read-cgroups document of its cgroup namespace's root), and ends."""
    printing = {s.id: s.printing_init_containers() for s in QOS_SHAPES if s.printing_init_containers()}
    assert printing == {"burstable-init-container": ["init"]}
    (init,) = built(next(s for s in QOS_SHAPES if s.id == "burstable-init-container"))["spec"]["initContainers"]
    assert init["command"] == ["/swapstress", "read-cgroups", "/sys/fs/cgroup", "memory.swap.max,memory.max", "."]
    # a plain init container given no command still finishes at once; a sidecar keeps pausing
    plain = PodShape("p", "Burstable", (Box("app", {"memory": "1Mi"}),), init=(Box("i"), Box("s", restart_policy="Always")))
    assert [c["command"] for c in built(plain)["spec"]["initContainers"]] == [["/swapstress", "true"],
                                                                                ["/swapstress", "pause"]]


def test_the_ephemeral_container_has_no_resources_and_is_added_to_one_burstable_shape() -> None:
    """G3: the API server refuses resources on an ephemeral container; the shape that gets one
    is Burstable with a container that has a LimitedSwap share."""
    assert {s.id: s.ephemeral for s in QOS_SHAPES if s.ephemeral} == {"burstable-request-below-limit": ("debugger",)}
    debugger = ephemeral_container("debugger", "img")
    assert debugger == {"name": "debugger", "image": "img", "imagePullPolicy": "Never", "command": ["/swapstress", "pause"]}
    shape = next(s for s in QOS_SHAPES if s.ephemeral)
    assert "ephemeralContainers" not in built(shape)["spec"]  # added once the pod runs, never at creation
    assert oracle.expected_swap_max("LimitedSwap", built(shape), "app", NODE_MEMORY, NODE_SWAP) > 0


def test_limited_swap_shapes_cover_every_rule() -> None:
    """The shapes exercise the formula and each exclusion; a shape set that lost one would not."""
    rules = set()
    for shape in QOS_SHAPES:
        pod = built(shape)
        pod["spec"]["priority"] = {"system-node-critical": 2000001000, "system-cluster-critical": 2000000000}.get(
            shape.priority_class or "", 0)
        for name in shape.container_names():
            rules.add(oracle.decide_swap("LimitedSwap", pod, name, NODE_MEMORY, NODE_SWAP).rule.split(":")[0])
    assert rules == {"critical pod (static, mirror, or priority >= 2000000000)", "BestEffort pod", "Guaranteed pod",
                     "container has no memory request and no memory limit", "container memory request equals its limit",
                     "LimitedSwap"}


def test_labels_are_valid_label_values() -> None:
    value = labels("e2e/test_x.py::test_y[LimitedSwap-burstable-request-below-limit]" + "x" * 80)
    test_value = value["kube-swap-conformance/test"]
    assert len(test_value) <= 63 and test_value[0].isalnum() and test_value[-1].isalnum()
    assert all(ch.isalnum() or ch in "._-" for ch in test_value)


def test_alloc_command_writes_files_first() -> None:
    assert alloc_command(64 * Mi, fills={"/volumes/mem/a": 32 * Mi, "/dev/shm/b": 4096}) == [
        "/swapstress", "alloc", "--fill", f"/volumes/mem/a={32 * Mi}", "--fill", "/dev/shm/b=4096",
        "--target", str(64 * Mi), "--step", str(4 * Mi), "--interval", "10ms", "--hold", "forever"]
    assert "--fill" not in alloc_command(Mi)
    assert resident_command("/a", "/b") == ["/swapstress", "resident", "/a", "/b"]


def test_stress_pod_memory_volume_is_memory_backed_with_its_size_limit() -> None:
    pod = stress_pod("p", "img", "ns", "t", ["/swapstress", "pause"], {"memory": 128 * Mi}, {"memory": 192 * Mi},
                     memory_volume_size=64 * Mi)
    (volume,) = oracle.memory_backed_volumes(pod)
    assert volume.size_limit == 64 * Mi
    assert pod["spec"]["containers"][0]["volumeMounts"] == [{"name": volume.name, "mountPath": MEMORY_VOLUME}]
    assert oracle.expected_tmpfs_size(volume, pod, NODE_MEMORY) == 64 * Mi
    assert "volumes" not in stress_pod("p", "img", "ns", "t", [])["spec"]


def test_guaranteed_swap_pod() -> None:
    pod = guaranteed_swap_pod("g", "img", "ns", "t", memory=256 * Mi, swap=128 * Mi)
    assert oracle.qos_class(pod) == "Guaranteed"  # limits.swap does not change the QoS class
    assert oracle.expected_swap_max("WorkloadControlledSwap", pod, "stress", NODE_MEMORY, NODE_SWAP) == 128 * Mi
    assert oracle.expected_swap_max("LimitedSwap", pod, "stress", NODE_MEMORY, NODE_SWAP) == 0


# --- what every shape must read on a LimitedSwap node of 4 GiB memory and 2 GiB swap --------------

PRIORITY = {"system-node-critical": 2000001000, "system-cluster-critical": 2000000000}

# shape -> container -> (memory.swap.max, memory.max), as read back (whole pages)
EXPECTED_4G_2G = {
    "burstable-odd-requests": {"odd": ("61726720", "268435456"), "page-edge": ("49999872", "max")},
    "pod-level-guaranteed": {"below-limit": ("0", "134217728"), "request-only": ("0", "268435456")},
    "pod-level-burstable-only": {"app": ("0", "134217728"), "helper": ("0", "134217728")},
    "pod-level-limits-container-requests": {"app": ("74997760", "268435456"), "capped": ("33554432", "134217728")},
}


@pytest.mark.parametrize("shape_id", sorted(EXPECTED_4G_2G))
def test_new_shapes_read_back_exact_figures(shape_id: str) -> None:
    shape = next(s for s in QOS_SHAPES if s.id == shape_id)
    pod = built(shape)
    got = {c: (oracle.readback_swap_max(oracle.expected_swap_max("LimitedSwap", pod, c, NODE_MEMORY, NODE_SWAP)),
               oracle.expected_memory_max(pod, c)) for c in shape.container_names()}
    assert got == EXPECTED_4G_2G[shape_id]
    for c in shape.container_names():  # NoSwap: none, whatever the shape
        assert oracle.expected_swap_max("NoSwap", pod, c, NODE_MEMORY, NODE_SWAP) == 0


def test_a_request_is_picked_on_the_node() -> None:
    shape = next(s for s in QOS_SHAPES if s.id == "burstable-odd-requests")
    assert shape.sized_on_node() and not any(s.sized_on_node() for s in QOS_SHAPES if s is not shape)
    with pytest.raises(ValueError, match="picked on the node"):
        shape.manifest("img", "ns", "t")
    requests = {c["name"]: c["resources"]["requests"]["memory"] for c in built(shape)["spec"]["containers"]}
    assert requests == {"odd": "123456789", "page-edge": "100007935"}
    # on a vm-like node (MemTotal 4010000 KiB, a 2 GiB swap file less its header page)
    vm_memory, vm_swap = 4010000 * 1024, 2 * 1024 * Mi - 4096
    vm = shape.manifest("img", "ns", "t", lambda near: oracle.page_edge_request(near, vm_memory, vm_swap))
    assert vm["spec"]["containers"][1]["resources"]["requests"]["memory"] == "100007397"


def test_pod_level_shapes_need_1_34_and_default_alike_on_1_34_to_1_37() -> None:
    """The API server defaults pod-level resources one way in 1.34-1.36 and another in 1.37; the
    shapes are built so both give the same pod (and so the same QoS), on every kubelet they run on."""
    pod_level = [s for s in QOS_SHAPES if s.pod_requests or s.pod_limits]
    assert [s.id for s in pod_level] == ["pod-level-guaranteed", "pod-level-burstable-only",
                                         "pod-level-limits-container-requests"]
    assert all(s.min_kubernetes == "1.34" for s in pod_level)
    assert all(s.min_kubernetes is None for s in QOS_SHAPES if s not in pod_level)
    for shape in pod_level:
        pod = built(shape)
        assert pod["spec"]["resources"]
        assert (oracle.defaulted_pod(pod)["spec"]["resources"]
                == oracle.defaulted_pod(pod, legacy_pod_level_defaulting=True)["spec"]["resources"]), shape.id


def test_each_pod_level_shape_catches_what_it_is_for() -> None:
    """Each pod-level shape gives a different figure from a kubelet that got its rule wrong."""
    by_id = {s.id: built(s) for s in QOS_SHAPES}

    def swap(pod: dict, container: str) -> int:
        return oracle.expected_swap_max("LimitedSwap", pod, container, NODE_MEMORY, NODE_SWAP)

    # Guaranteed by the pod level: without its pod-level resources the same containers swap (a
    # kubelet that ignores the pod's QoS class, or computes it from the containers alone).
    guaranteed = by_id["pod-level-guaranteed"]
    del guaranteed["spec"]["resources"]
    assert swap(guaranteed, "below-limit") == swap(guaranteed, "request-only") == 32 * Mi
    # Pod-level only: the pod-level request 64Mi would give each container 32Mi.
    assert oracle.readback_swap_max(int(64 * Mi / NODE_MEMORY * NODE_SWAP)) == str(32 * Mi)
    # Mixed: the pod-level request (the containers' sum) would give app 108552192, not 74997760.
    mixed = oracle.defaulted_pod(by_id["pod-level-limits-container-requests"])
    pod_request = oracle.quantity_bytes(mixed["spec"]["resources"]["requests"]["memory"])
    assert pod_request == 150000001 + 64 * Mi
    assert oracle.readback_swap_max(int(pod_request / NODE_MEMORY * NODE_SWAP)) == "108552192"


def test_static_pod_manifest() -> None:
    pod = static_pod("ksc-static", "img", "ns", "t")
    assert pod["metadata"]["namespace"] == "ns" and "serviceAccountName" not in pod["spec"]
    (app,) = pod["spec"]["containers"]
    assert app["image"] == "img" and app["imagePullPolicy"] == "Never"
    assert app["resources"] == {"requests": {"memory": "64Mi"}, "limits": {"memory": "128Mi"}}
    assert oracle.qos_class(pod) == "Burstable"
