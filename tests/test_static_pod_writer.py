"""The static-pod writer (e2e/nodefiles.py StaticPodDir) against a fake node: which loader and
tools it picks, what it runs to place and remove a manifest, and what it says when it cannot."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from e2e.nodefiles import NodeToolsUnavailable, StaticPodDir
from e2e.observe import ExecResult


@dataclass
class FakeObserver:
    present: set[str]  # paths `resident` finds in the writer
    broken_loaders: set[str] = field(default_factory=set)  # loaders whose `cp --version` fails
    created: list[dict] = field(default_factory=list)
    ran: list[list[str]] = field(default_factory=list)

    def create(self, manifest: dict) -> None:
        self.created.append(manifest)

    def wait_running(self, namespace: str, name: str) -> dict:
        return {"status": {"containerStatuses": []}}

    def exec(self, namespace: str, pod: str, container: str, argv: list[str], allowed: tuple[int, ...] = (0,),
             seconds: float = 120) -> ExecResult:
        self.ran.append(argv)
        if argv[:2] == ["/swapstress", "resident"]:
            found = [p for p in argv[2:] if p in self.present]
            code = 0 if len(found) == len(argv) - 2 else 1
            assert code in allowed
            return ExecResult("".join(f'resident 0 size=1 path="{p}"\n' for p in found), "")
        if argv[0] in self.broken_loaders:
            raise AssertionError(f"`{' '.join(argv)}` exited 127: error while loading shared libraries")
        return ExecResult("", "")


@dataclass
class FakeNode:
    name: str = "node-1"


@dataclass
class FakeWorkspace:
    observer: FakeObserver
    namespace: str = "ksc-abc"
    image: str = "stress:1"
    test: str = "t"
    node: FakeNode = field(default_factory=FakeNode)
    deployed: list[str] = field(default_factory=list)

    def deploy(self, manifest: dict) -> dict:
        self.observer.create(manifest)
        return manifest

    def running(self, name: str) -> dict:
        return self.observer.wait_running(self.namespace, name)


DEBIAN = {"/host/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", "/host/usr/bin/cp", "/host/usr/bin/mv", "/host/usr/bin/rm",
          "/host/bin/cp", "/host/bin/mv", "/host/bin/rm"}


def test_places_through_a_dot_file_with_the_nodes_own_tools() -> None:
    observer = FakeObserver(DEBIAN)
    writer = StaticPodDir.on(FakeWorkspace(observer), "node-1", "/etc/kubernetes/manifests", {"ksc-abc.yaml": "kind: Pod\n"})
    configmap, pod = observer.created
    assert configmap["kind"] == "ConfigMap" and configmap["data"] == {"ksc-abc.yaml": "kind: Pod\n"}
    spec = pod["spec"]
    assert spec["nodeName"] == "node-1" and spec["containers"][0]["securityContext"] == {"privileged": True}
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["host"]["hostPath"] == {"path": "/"}
    assert volumes["static"]["hostPath"] == {"path": "/etc/kubernetes/manifests", "type": "DirectoryOrCreate"}
    mounts = {m["name"]: m for m in spec["containers"][0]["volumeMounts"]}
    assert mounts["host"]["readOnly"] and not mounts["static"].get("readOnly")
    loader = ["/host/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", "--library-path",
              "/host/lib/x86_64-linux-gnu:/host/usr/lib/x86_64-linux-gnu"]
    assert writer.loader == loader and observer.ran[-1] == [*loader, "/host/usr/bin/cp", "--version"]
    observer.ran.clear()
    assert writer.place("ksc-abc.yaml") == "/etc/kubernetes/manifests/ksc-abc.yaml"
    writer.remove("ksc-abc.yaml")
    assert observer.ran == [
        [*loader, "/host/usr/bin/cp", "/manifests/ksc-abc.yaml", "/static-pods/.ksc-abc.yaml.tmp"],
        [*loader, "/host/usr/bin/mv", "-f", "/static-pods/.ksc-abc.yaml.tmp", "/static-pods/ksc-abc.yaml"],
        [*loader, "/host/usr/bin/rm", "-f", "/static-pods/ksc-abc.yaml", "/static-pods/.ksc-abc.yaml.tmp"],
    ]


def test_a_loader_that_cannot_run_cp_is_passed_over() -> None:
    lib64 = {"/host/usr/lib64/ld-linux-x86-64.so.2", "/host/bin/cp", "/host/bin/mv", "/host/bin/rm"}
    observer = FakeObserver(lib64 | {"/host/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"},
                            broken_loaders={"/host/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"})
    writer = StaticPodDir.on(FakeWorkspace(observer), "node-1", "/etc/kubernetes/manifests", {"m.yaml": ""})
    assert writer.loader[0] == "/host/usr/lib64/ld-linux-x86-64.so.2" and writer.tools["cp"] == "/host/bin/cp"


@pytest.mark.parametrize(("present", "message"), [
    ({"/host/usr/bin/cp", "/host/usr/bin/mv", "/host/usr/bin/rm"}, "no loader that runs them (none of"),
    ({"/host/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", "/host/usr/bin/cp"}, "no mv, rm under /usr/bin or /bin"),
])
def test_says_why_when_the_node_has_no_usable_tools(present: set[str], message: str) -> None:
    with pytest.raises(NodeToolsUnavailable, match="cannot run the node's own cp/mv/rm from a privileged pod on node-1"
                       ) as raised:
        StaticPodDir.on(FakeWorkspace(FakeObserver(present)), "node-1", "/etc/kubernetes/manifests", {"m.yaml": ""})
    assert message in str(raised.value)
