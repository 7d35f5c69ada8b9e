"""The workload builders: each pod shape is what its name and declared QoS say, per the oracle."""

from __future__ import annotations

import pytest

from e2e import oracle
from workloads.pods import (
    MEMORY_VOLUME,
    QOS_SHAPES,
    Mi,
    alloc_command,
    guaranteed_swap_pod,
    labels,
    resident_command,
    stress_pod,
)

NODE_MEMORY, NODE_SWAP = 4 * 1024 * Mi, 2 * 1024 * Mi


@pytest.mark.parametrize("shape", QOS_SHAPES, ids=[s.id for s in QOS_SHAPES])
def test_shape_has_its_declared_qos(shape) -> None:
    assert oracle.qos_class(shape.manifest("img", "ns", "t")) == shape.qos


@pytest.mark.parametrize("shape", QOS_SHAPES, ids=[s.id for s in QOS_SHAPES])
def test_shape_names_only_containers_that_run(shape) -> None:
    pod = shape.manifest("img", "ns", "t")
    running = [c["name"] for c in pod["spec"]["containers"]]
    running += [c["name"] for c in pod["spec"].get("initContainers", []) if c.get("restartPolicy") == "Always"]
    assert shape.container_names() == running
    for init in pod["spec"].get("initContainers", []):
        if init.get("restartPolicy") != "Always":
            assert init["command"] == ["/swapstress", "true"], "a plain init container must finish"


def test_limited_swap_shapes_cover_every_rule() -> None:
    """The shapes exercise the formula and each exclusion; a shape set that lost one would not."""
    rules = set()
    for shape in QOS_SHAPES:
        pod = shape.manifest("img", "ns", "t")
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
