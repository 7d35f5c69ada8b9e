"""The shapes' deployment beyond their running containers (e2e/shapes.py add_extras): the log of
the init container that prints its own cgroup is kept and read back, the ephemeral container is
added once its pod runs and read in the one batch by its id; and what goes wrong with either
fails only the tests that read that container, never the other shape checks."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from clusters.provider import SwapNode
from e2e import shapes
from e2e.nodefiles import CgroupRead, kubelet_cgroups_above, part_of
from workloads.pods import QOS_SHAPES

NODE = SwapNode("LimitedSwap", "kind", "c", "kc", "node-1", "v1.37.1", "6.12.0", 8 << 30, 8 << 30, 4 << 30, True)
SHAPE = {s.id: s for s in QOS_SHAPES}
PRINTED = json.dumps({"unix_ms": 1, "cgroups": {".": {"path": "/sys/fs/cgroup", "files": {
    "memory.swap.max": "16777216\n", "memory.max": "134217728\n"}}}})


class FakeApi:
    """An API server and node that run every shape; `fail` names a step that raises."""

    def __init__(self, fail: str = "") -> None:
        self.fail = fail
        self.pods: dict[str, dict[str, Any]] = {}
        self.calls: list[str] = []

    def create_namespace(self, name: str, labels: dict[str, str]) -> str:
        return name

    def create(self, manifest: dict[str, Any]) -> None:
        name = manifest["metadata"]["name"]
        spec = manifest["spec"]
        status = {"qosClass": "Burstable",
                  "containerStatuses": [{"name": c["name"], "containerID": f"containerd://{name}-{c['name']}-0123456789ab",
                                         "state": {"running": {}}} for c in spec["containers"]],
                  "initContainerStatuses": [{"name": c["name"], "containerID": f"containerd://{name}-{c['name']}-0123456789ab",
                                             "state": {"running": {}} if c.get("restartPolicy") else {"terminated": {}}}
                                            for c in spec.get("initContainers") or []]}
        self.pods[name] = {**manifest, "status": status}

    def wait_running(self, namespace: str, name: str) -> dict[str, Any]:
        return json.loads(json.dumps(self.pods[name]))

    def add_ephemeral_container(self, namespace: str, pod: str, container: dict[str, Any]) -> None:
        self.calls.append(f"add {pod}/{container['name']}")
        if self.fail == "add":
            raise RuntimeError("422 Unprocessable Entity")
        self.pods[pod]["spec"].setdefault("ephemeralContainers", []).append(container)
        self.pods[pod]["status"]["ephemeralContainerStatuses"] = [{
            "name": container["name"], "containerID": f"containerd://{pod}-{container['name']}-0123456789ab",
            "state": {"running": {}}}]

    def wait_ephemeral_running(self, namespace: str, pod: str, name: str) -> dict[str, Any]:
        self.calls.append(f"wait {pod}/{name}")
        if self.fail == "wait":
            raise AssertionError("gave up after 600s waiting for ephemeral container to run")
        return json.loads(json.dumps(self.pods[pod]))

    def log(self, namespace: str, pod: str, container: str) -> str:
        self.calls.append(f"log {pod}/{container}")
        if self.fail == "log":
            raise RuntimeError("400 Bad Request")
        return PRINTED + "\n"

    def events_by_object(self, namespace: str) -> dict[str, list[str]]:
        return {}

    def delete_namespace(self, name: str) -> None:
        self.calls.append("delete namespace")


POD_CGROUP = "/host-cgroup/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0.slice"
ABOVE = {part_of(path): path for path in kubelet_cgroups_above(POD_CGROUP + "/c")}


class FakeReader:
    """The node agent: every container in one pod cgroup; the cgroups above it read `max`."""

    def __init__(self) -> None:
        self.reads: list[list[str]] = []

    @property
    def parts(self) -> list[str]:
        return self.reads[0]  # the containers' one batch

    def read_cgroups(self, parts: list[str], files: tuple[str, ...]) -> CgroupRead:
        self.reads.append(list(parts))
        found = {p: {"path": ABOVE.get(p, f"{POD_CGROUP}/{p}"), "files": {f: "max\n" if p in ABOVE else "0\n" for f in files}}
                 for p in parts}
        return CgroupRead.parse(json.dumps({"unix_ms": 2, "cgroups": found}))


@pytest.fixture
def deploy(monkeypatch: pytest.MonkeyPatch):
    reader = FakeReader()

    class FakeWorkspace:
        def __init__(self, *args: Any) -> None:
            pass

        def node_files(self) -> FakeReader:
            return reader

    monkeypatch.setattr(shapes, "Workspace", FakeWorkspace)

    def run(fail: str = "") -> tuple[shapes.ShapePods, FakeApi, FakeReader]:
        api = FakeApi(fail)
        monkeypatch.setattr(shapes, "observer_of", lambda node: api)
        deployed = shapes.deploy_and_read(NODE, "image")
        return shapes.ShapePods.from_json(NODE, json.loads(json.dumps(deployed.to_json()))), api, reader

    return run


def test_the_init_containers_log_and_the_ephemeral_container_are_read(deploy) -> None:
    deployed, api, reader = deploy()
    init_shape, debug_shape = SHAPE["burstable-init-container"], SHAPE["burstable-request-below-limit"]
    assert api.calls[:2] == ["add burstable-request-below-limit/debugger", "wait burstable-request-below-limit/debugger"]
    assert "log burstable-init-container/init" in api.calls and api.calls[-1] == "delete namespace"
    assert deployed.printed_value(init_shape, "init", "memory.swap.max") == "16777216"
    assert deployed.printed_value(init_shape, "init", "memory.max") == "134217728"
    debugger_id = "burstable-request-below-limit-debugger-0123456789ab"
    assert debugger_id in reader.parts  # read in the one batch, by its id
    assert shapes.container_id(deployed.pod(debug_shape), "debugger") == debugger_id
    assert deployed.read(debug_shape, "debugger", "memory.swap.max") == "0"
    assert deployed.pod(debug_shape)["spec"]["ephemeralContainers"][0]["name"] == "debugger"
    assert deployed.problems == {}


@pytest.mark.parametrize("fail, container, said", [
    ("add", "debugger", "adding the ephemeral container (pods/ephemeralcontainers) failed: RuntimeError: 422"),
    ("wait", "debugger", "waiting for the ephemeral container to run failed: AssertionError: gave up"),
    ("log", "init", "reading the init container's log failed: RuntimeError: 400 Bad Request"),
])
def test_a_failure_fails_only_the_tests_of_that_container(deploy, fail: str, container: str, said: str) -> None:
    deployed, _, reader = deploy(fail)
    shape = SHAPE["burstable-init-container" if container == "init" else "burstable-request-below-limit"]
    read = deployed.printed_value if container == "init" else deployed.read
    with pytest.raises(AssertionError, match=re.escape(f"{shape.id}/{container}: {said}")):
        read(shape, container, "memory.swap.max")
    # every other container of every shape was read as always
    assert deployed.read(shape, "app", "memory.swap.max") == "0"
    assert deployed.read(SHAPE["burstable-sidecar"], "sidecar", "memory.max") == "0"
    assert len([p for p in reader.parts if "debugger" not in p]) == sum(
        len(s.container_names()) for s in QOS_SHAPES)


def test_a_log_that_is_not_one_document_says_so() -> None:
    deployed = shapes.ShapePods(NODE, "ns", {}, printed={"burstable-init-container": {"init": "swapstress: oops\n"}})
    with pytest.raises(AssertionError, match="expected one JSON document in its log, got 'swapstress: oops"):
        deployed.printed_value(SHAPE["burstable-init-container"], "init", "memory.swap.max")


def test_the_cgroups_above_the_containers_are_read_in_one_more_read(deploy) -> None:
    deployed, _, reader = deploy()
    assert len(reader.reads) == 2 and sorted(reader.reads[1]) == sorted(ABOVE)
    above = deployed.swap_max_above(SHAPE["burstable-request-below-limit"])
    assert list(above) == [POD_CGROUP, POD_CGROUP.rpartition("/")[0], "/host-cgroup/kubepods.slice"]
    assert set(above.values()) == {"max"}


def test_a_container_outside_kubepods_fails_its_own_tests_not_the_deployment() -> None:
    read = CgroupRead(1, {"a": POD_CGROUP + "/a", "b": "/host-cgroup/system.slice/b.scope", "c": None}, {}, {})
    assert shapes.above_containers(read) == sorted(part_of(p) for p in ABOVE.values())


@pytest.mark.parametrize("container, expected", [
    ("/host-cgroup/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1.slice/cri-containerd-c.scope",
     ["kubepods-besteffort-pod1.slice", "kubepods-besteffort.slice", "kubepods.slice"]),
    ("/host-cgroup/kubepods.slice/kubepods-pod1.slice/cri-containerd-c.scope", ["kubepods-pod1.slice", "kubepods.slice"]),
    ("/host-cgroup/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-pod1.slice/cri-containerd-c.scope",
     ["kubelet-kubepods-pod1.slice", "kubelet-kubepods.slice"]),  # kind: cgroupRoot /kubelet
    ("/host-cgroup/kubepods/burstable/pod1/c", ["pod1", "burstable", "kubepods"]),  # cgroupfs
])
def test_the_cgroups_above_a_container_end_at_kubepods(container: str, expected: list[str]) -> None:
    assert [p.rpartition("/")[2] for p in kubelet_cgroups_above(container)] == expected


def test_a_path_without_kubepods_is_not_a_kubelet_container() -> None:
    with pytest.raises(AssertionError, match="no kubepods cgroup above /host-cgroup/system.slice/x.scope"):
        kubelet_cgroups_above("/host-cgroup/system.slice/x.scope")


def test_a_part_names_a_cgroup_by_its_path_below_the_root() -> None:
    assert part_of("/host-cgroup/kubepods/burstable") == "/kubepods/burstable"  # cgroupfs: names too short alone
    assert part_of("/host-cgroup") == "."
    with pytest.raises(ValueError, match="not below /host-cgroup"):
        part_of("/host-cgroupx/kubepods")
