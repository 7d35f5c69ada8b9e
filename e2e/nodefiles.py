"""The node's own files, read through a privileged pod on it: cgroups the tests cannot exec into
(static pods, pod-level cgroups, the node's cgroup root) and /proc/meminfo.

The reader mounts the node's /sys/fs/cgroup. On a kind node that is the node container's
cgroup namespace, the same tree the kubelet and its cAdvisor see as "/"."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from workloads.pods import labels

if TYPE_CHECKING:
    from e2e.conftest import Workspace

HOST_CGROUP = "/host-cgroup"
SCRATCH = "/scratch"  # the reader's own writable directory (the image has no other)


@dataclass
class NodeFiles:
    ws: Workspace
    pod: str

    @classmethod
    def on(cls, ws: Workspace, node: str, name: str = "cgroup-reader", critical: bool = False,
           command: list[str] | None = None) -> "NodeFiles":
        """`critical`: system-node-critical, so the kubelet never evicts it under pressure.
        `command`: the reader's main process (default: it pauses)."""
        ws.deploy({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": ws.namespace, "labels": labels(ws.test)},
            "spec": {
                "nodeName": node,  # taints do not stop a pod bound by name (control-plane nodes)
                "tolerations": [{"operator": "Exists"}],
                "containers": [{
                    "name": "reader", "image": ws.image, "imagePullPolicy": "Never",
                    "command": command or ["/swapstress", "pause"], "securityContext": {"privileged": True},
                    "volumeMounts": [{"name": "cgroup", "mountPath": HOST_CGROUP, "readOnly": True},
                                     {"name": "scratch", "mountPath": SCRATCH}],
                }],
                "volumes": [{"name": "cgroup", "hostPath": {"path": "/sys/fs/cgroup"}},
                            {"name": "scratch", "emptyDir": {}}],
                "restartPolicy": "Never",
                "terminationGracePeriodSeconds": 1,
                **({"priorityClassName": "system-node-critical"} if critical else {}),
            },
        })
        ws.running(name)
        return cls(ws, name)

    def read(self, path: str) -> str:
        """A file inside the reader itself (e.g. under SCRATCH)."""
        return self._exec("cat", path)

    def touch(self, path: str) -> None:
        """Create an empty file inside the reader."""
        self._exec("fill", "--path", path, "--bytes", "0")

    def _exec(self, *argv: str) -> str:
        return self.ws.observer.exec(self.ws.namespace, self.pod, "reader", ["/swapstress", *argv]).stdout

    def cgroup_file(self, name_part: str, file: str) -> tuple[str, str]:
        """(cgroup path, content) of the first cgroup whose directory name contains name_part."""
        out = self._exec("find-cgroup", HOST_CGROUP, name_part, file)
        first, _, content = out.partition("\n")
        return first.removeprefix("cgroup "), content.strip()

    def pod_cgroup_file(self, uid: str, file: str) -> tuple[str, str]:
        """A file of the pod's own cgroup (systemd driver: ...-pod<uid with _>.slice; cgroupfs: pod<uid>)."""
        try:
            return self.cgroup_file("pod" + uid.replace("-", "_"), file)
        except AssertionError:
            return self.cgroup_file("pod" + uid, file)

    def root_file(self, file: str) -> str | None:
        """A file of the node's cgroup root, or None where the root has none (a real host's root
        cgroup has no memory.current or memory.swap.current)."""
        try:
            return self._exec("cat", f"{HOST_CGROUP}/{file}").strip()
        except AssertionError:
            return None

    def meminfo(self) -> dict[str, int]:
        """/proc/meminfo's kB fields in bytes (the node's: the file is not namespaced)."""
        text = self._exec("cat", "/proc/meminfo")
        fields = (line.split() for line in text.splitlines())
        return {f[0].rstrip(":"): int(f[1]) * 1024 for f in fields if len(f) == 3 and f[2] == "kB"}

    def node_swap_usage(self) -> tuple[int, str]:
        """What the kubelet reports as the node's swap usage, read where cAdvisor reads it for its
        "/" cgroup (opencontainers/cgroups fs2 statMemory): the root's memory.swap.current when
        the root has memory.current (a kind node: its own cgroup namespace), else, as cAdvisor
        falls back to /proc/meminfo there, SwapTotal - SwapFree."""
        if self.root_file("memory.current") is not None:
            value = self.root_file("memory.swap.current")
            if value is not None:
                return int(value), "the node cgroup's memory.swap.current"
        meminfo = self.meminfo()
        return meminfo["SwapTotal"] - meminfo["SwapFree"], "SwapTotal - SwapFree (/proc/meminfo)"
