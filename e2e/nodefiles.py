"""The node's own files, read through a privileged pod on it: cgroups the tests cannot exec into
(static pods, pod-level cgroups, the node's cgroup root) and /proc/meminfo.

The reader mounts the node's /sys/fs/cgroup. On a kind node that is the node container's
cgroup namespace, the same tree the kubelet and its cAdvisor see as "/"."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any, Protocol

from clusters import waits
from workloads.pods import labels

if TYPE_CHECKING:
    from clusters.provider import SwapNode
    from e2e.observe import NodeObserver

HOST_CGROUP = "/host-cgroup"
SCRATCH = "/scratch"  # the reader's own writable directory (the image has no other)


class Space(Protocol):
    """Where a reader or writer pod is deployed: what it uses of a test's Workspace
    (e2e/workspace.py). The workspace starts readers (the node agent, e2e/agent.py) and so
    imports this module; naming only what is used here keeps the dependency one way."""

    node: SwapNode
    observer: NodeObserver
    namespace: str
    image: str
    test: str

    def deploy(self, manifest: dict[str, Any]) -> dict[str, Any]: ...

    def running(self, name: str) -> dict[str, Any]: ...


@dataclass
class NodeFiles:
    ws: Space
    pod: str

    @classmethod
    def on(cls, ws: Space, node: str, name: str = "cgroup-reader", critical: bool = False,
           command: list[str] | None = None, extra_labels: dict[str, str] | None = None) -> "NodeFiles":
        """`critical`: system-node-critical, so the kubelet never evicts it under pressure.
        `command`: the reader's main process (default: it pauses)."""
        ws.deploy({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": ws.namespace, "labels": {**labels(ws.test), **(extra_labels or {})}},
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

    def meminfo(self) -> dict[str, int]:
        """/proc/meminfo's kB fields in bytes (the node's: the file is not namespaced)."""
        fields = (line.split() for line in self.read("/proc/meminfo").splitlines())
        return {f[0].rstrip(":"): int(f[1]) * 1024 for f in fields if len(f) == 3 and f[2] == "kB"}

    def read_optional(self, path: str) -> str:
        """As read, "" where the file does not exist (yet): `cat` prints what it could read."""
        return self._exec("cat", path, allowed=(0, 1))

    def touch(self, *paths: str) -> None:
        """Create empty files inside the reader, in one exec."""
        self._exec("touch", *paths)

    def _exec(self, *argv: str, allowed: tuple[int, ...] = (0,), observer: NodeObserver | None = None,
              seconds: float = 120) -> str:
        """Right after a kubelet restart its exec handler may not know the pod yet ("pod does
        not exist"): a long-lived reader retries that, bounded."""
        from e2e.observe import exec_once_served

        through = observer or self.ws.observer
        return exec_once_served(
            f"`swapstress {' '.join(argv)[:80]}` in {self.ws.namespace}/{self.pod}",
            lambda: through.exec(self.ws.namespace, self.pod, "reader", ["/swapstress", *argv], allowed, seconds).stdout,
            waits.EXEC_RETRY)

    def read_cgroups(self, parts: Sequence[str], files: Sequence[str], meminfo: bool = False) -> CgroupRead:
        """FILES of every cgroup named by PARTS (a container id, "pod<uid>", or "." for the
        node's cgroup root), and optionally /proc/meminfo, in one exec: figures read together,
        and one round trip instead of one per file (seconds each on an emulated node)."""
        argv = ["read-cgroups", *(["--meminfo"] if meminfo else []), HOST_CGROUP, ",".join(files), *parts]
        return CgroupRead.parse(self._exec(*argv))

    def read_cgroups_over(self, parts: Sequence[str], files: Sequence[str], every_ms: int, seconds: float,
                          meminfo: bool = False, observer: NodeObserver | None = None) -> list[CgroupRead]:
        """The same read every `every_ms` for `seconds`, in one exec: the figures over time on the
        node's clock. `observer`: another API client's, to run this in a thread beside calls on
        this one (an exec stream borrows its client while it connects)."""
        argv = ["read-cgroups", "--every", f"{every_ms}ms", "--for", f"{seconds:g}s", *(["--meminfo"] if meminfo else []),
                HOST_CGROUP, ",".join(files), *parts]
        text = self._exec(*argv, observer=observer, seconds=seconds + 60)
        return [CgroupRead.parse(line) for line in text.splitlines() if line.strip()]

    def cgroup_file(self, name_part: str, file: str) -> tuple[str, str]:
        """(cgroup path, content) of the first cgroup whose directory name contains name_part."""
        read = self.read_cgroups([name_part], [file])
        return read.path(name_part), read.value(name_part, file)


def kubelet_cgroups_above(container_path: str) -> list[str]:
    """The cgroups the kubelet made above a container (paths as the node agent reads them),
    innermost first: its pod's, its QoS class's (none for a Guaranteed pod) and the node
    allocatable cgroup, which is the outermost whose name says kubepods (systemd: kubepods.slice,
    or kind's kubelet-kubepods.slice below its cgroupRoot; cgroupfs: kubepods, above burstable/
    and pod<uid>/)."""
    found = []
    for path in PurePosixPath(container_path).parents:
        if str(path) in (HOST_CGROUP, "/"):
            break
        found.append(str(path))
        if "kubepods" in path.name and "kubepods" not in path.parent.name:
            return found
    raise AssertionError(f"no kubepods cgroup above {container_path}: not a container the kubelet made?")


def part_of(path: str) -> str:
    """The `read-cgroups` part that names this very cgroup (a path as the agent read it): its
    path below the node's cgroup root, which is also cAdvisor's name for it ("." for the root)."""
    if path != HOST_CGROUP and not path.startswith(HOST_CGROUP + "/"):
        raise ValueError(f"{path} is not below {HOST_CGROUP}")
    return path[len(HOST_CGROUP):] or "."


NODE_SWAP_FILES = ("memory.current", "memory.swap.current")  # of the root: what node_swap_usage needs


@dataclass(frozen=True)
class CgroupRead:
    """One `swapstress read-cgroups` on the node: files of several cgroups, read in one walk."""

    unix_ms: int  # the node's clock when the read started
    paths: dict[str, str | None]  # part -> its cgroup directory (None: no cgroup names it)
    files: dict[str, dict[str, str | None]]  # part -> file -> content (None: unreadable)
    meminfo: dict[str, int]  # /proc/meminfo's kB fields in bytes; empty unless asked for

    @classmethod
    def parse(cls, text: str) -> "CgroupRead":
        document = json.loads(text)
        cgroups = document["cgroups"]
        meminfo = {}
        for fields in (line.split() for line in (document.get("meminfo") or "").splitlines()):
            if len(fields) == 3 and fields[2] == "kB":
                meminfo[fields[0].rstrip(":")] = int(fields[1]) * 1024
        return cls(document["unix_ms"], {part: (c or {}).get("path") for part, c in cgroups.items()},
                   {part: dict((c or {}).get("files") or {}) for part, c in cgroups.items()}, meminfo)

    def path(self, part: str) -> str:
        if not self.paths.get(part):
            raise AssertionError(f"no cgroup below {HOST_CGROUP} names {part}")
        return str(self.paths[part])

    def value(self, part: str, file: str) -> str:
        """A file's content, stripped; an AssertionError naming what is missing."""
        content = self.files.get(part, {}).get(file)
        if content is None:
            raise AssertionError(f"{file} of {self.path(part)} could not be read")
        return content.strip()

    def node_swap_usage(self) -> tuple[int, str]:
        """What the kubelet reports as the node's swap usage, as cAdvisor reads it for its "/"
        cgroup (opencontainers/cgroups fs2 statMemory): the root's memory.swap.current when the
        root has memory.current (a kind node: its own cgroup namespace), else, as cAdvisor falls
        back to /proc/meminfo there, SwapTotal - SwapFree. Needs "." read with NODE_SWAP_FILES
        and meminfo."""
        root = self.files.get(".", {})
        if root.get("memory.current") is not None and root.get("memory.swap.current") is not None:
            return int(str(root["memory.swap.current"]).strip()), "the node cgroup's memory.swap.current"
        return self.meminfo["SwapTotal"] - self.meminfo["SwapFree"], "SwapTotal - SwapFree (/proc/meminfo)"


# --- a kubelet's staticPodPath, written from a privileged pod ---------------------------------

HOST_ROOT = "/host"  # the node's root filesystem, read-only, in the writer
STATIC_DIR = "/static-pods"  # the node's staticPodPath, read-write, in the writer
MANIFESTS = "/manifests"  # the ConfigMap with the manifests to place

# The node's dynamic loader and its library directories, relative to the node's root (Debian
# and Ubuntu multiarch, as on kind and vm nodes, then lib64 layouts). Only paths that resolve
# inside the writer count: Debian's /lib64/ld-linux-x86-64.so.2 is an absolute symlink, which
# resolves against the writer's own root and is missing there.
_LOADERS = (
    ("lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", ("lib/x86_64-linux-gnu", "usr/lib/x86_64-linux-gnu")),
    ("usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", ("usr/lib/x86_64-linux-gnu", "lib/x86_64-linux-gnu")),
    ("usr/lib64/ld-linux-x86-64.so.2", ("usr/lib64", "lib64")),
    ("lib/aarch64-linux-gnu/ld-linux-aarch64.so.1", ("lib/aarch64-linux-gnu", "usr/lib/aarch64-linux-gnu")),
    ("usr/lib/aarch64-linux-gnu/ld-linux-aarch64.so.1", ("usr/lib/aarch64-linux-gnu", "lib/aarch64-linux-gnu")),
    ("usr/lib64/ld-linux-aarch64.so.1", ("usr/lib64", "lib64")),
)
_TOOL_DIRS = ("usr/bin", "bin")


class NodeToolsUnavailable(RuntimeError):
    """The node's own cp/mv/rm cannot be run from the writer pod (no loader or tool where looked)."""


@dataclass
class StaticPodDir:
    """The node's staticPodPath, written through a privileged pod on the node.

    The workload image has no shell and no copy tool, so the writer runs the node's own cp, mv
    and rm through the node's dynamic loader (`ld.so --library-path LIBS /host/usr/bin/cp ...`):
    a dynamically linked host binary cannot be exec'd directly, its interpreter path names the
    writer's root, which has no /lib. Manifests come in through a ConfigMap volume. A manifest is
    copied to a dot-file first (the kubelet reads only names not starting with a dot,
    pkg/kubelet/config/file.go extractFromDir) and renamed into place in the same directory, so
    the kubelet never reads half of one."""

    ws: Space
    pod: str
    node_path: str  # staticPodPath as the kubelet's /configz gives it
    loader: list[str]  # [loader, --library-path, LIBS]
    tools: dict[str, str]  # cp, mv, rm -> path in the writer

    @classmethod
    def on(cls, ws: Space, node: str, static_pod_path: str, manifests: dict[str, str],
           name: str = "static-pod-writer") -> "StaticPodDir":
        """Deploy the writer on `node` with `manifests` ({file name: text}) ready to place.
        Raises NodeToolsUnavailable when the node's loader or coreutils are not where looked."""
        ws.deploy({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": name, "namespace": ws.namespace, "labels": labels(ws.test)},
                   "data": dict(manifests)})
        ws.deploy({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": ws.namespace, "labels": labels(ws.test)},
            "spec": {
                "nodeName": node,
                "tolerations": [{"operator": "Exists"}],
                "containers": [{
                    "name": "writer", "image": ws.image, "imagePullPolicy": "Never",
                    "command": ["/swapstress", "pause"], "securityContext": {"privileged": True},
                    "volumeMounts": [{"name": "host", "mountPath": HOST_ROOT, "readOnly": True},
                                     {"name": "static", "mountPath": STATIC_DIR},
                                     {"name": "manifests", "mountPath": MANIFESTS, "readOnly": True}],
                }],
                # DirectoryOrCreate: a kubeadm worker may have no manifests directory yet; the
                # kubelet watches a missing staticPodPath until it appears (file_linux.go doWatch).
                "volumes": [{"name": "host", "hostPath": {"path": "/"}},
                            {"name": "static", "hostPath": {"path": static_pod_path, "type": "DirectoryOrCreate"}},
                            {"name": "manifests", "configMap": {"name": name}}],
                "restartPolicy": "Never",
                "terminationGracePeriodSeconds": 1,
                "automountServiceAccountToken": False,
            },
        })
        ws.running(name)
        loader, tools = cls._find_tools(ws, name)
        return cls(ws, name, static_pod_path, loader, tools)

    @staticmethod
    def _find_tools(ws: Space, pod: str) -> tuple[list[str], dict[str, str]]:
        candidates = [f"{HOST_ROOT}/{path}" for path, _ in _LOADERS]
        candidates += [f"{HOST_ROOT}/{d}/{tool}" for d in _TOOL_DIRS for tool in ("cp", "mv", "rm")]
        # `resident` opens each path (following symlinks as exec would) and prints the ones it
        # could; exit 1 only says some were missing.
        out = ws.observer.exec(ws.namespace, pod, "writer", ["/swapstress", "resident", *candidates], allowed=(0, 1)).stdout
        found = {line.split('path="', 1)[1].rstrip('"') for line in out.splitlines() if 'path="' in line}
        tools = {}
        for tool in ("cp", "mv", "rm"):
            tools[tool] = next((f"{HOST_ROOT}/{d}/{tool}" for d in _TOOL_DIRS if f"{HOST_ROOT}/{d}/{tool}" in found), "")
        missing = [tool for tool, path in tools.items() if not path]
        tried = []
        for path, libs in _LOADERS:
            if missing or f"{HOST_ROOT}/{path}" not in found:
                continue
            loader = [f"{HOST_ROOT}/{path}", "--library-path", ":".join(f"{HOST_ROOT}/{lib}" for lib in libs)]
            try:
                ws.observer.exec(ws.namespace, pod, "writer", [*loader, tools["cp"], "--version"])
                return loader, tools
            except AssertionError as error:
                tried.append(f"{path}: {str(error)[:200]}")
        raise NodeToolsUnavailable(
            f"cannot run the node's own cp/mv/rm from a privileged pod on {ws.node.name}: "
            + (f"no {', '.join(missing)} under /usr/bin or /bin" if missing else
               f"no loader that runs them ({'; '.join(tried) or 'none of ' + ', '.join(p for p, _ in _LOADERS) + ' found'})"))

    def _run(self, tool: str, *args: str) -> None:
        self.ws.observer.exec(self.ws.namespace, self.pod, "writer", [*self.loader, self.tools[tool], *args])

    def place(self, file: str) -> str:
        """Put the ConfigMap's `file` into staticPodPath under the same name; returns its node path."""
        temporary = f"{STATIC_DIR}/.{file}.tmp"
        self._run("cp", f"{MANIFESTS}/{file}", temporary)
        self._run("mv", "-f", temporary, f"{STATIC_DIR}/{file}")
        return f"{self.node_path.rstrip('/')}/{file}"

    def remove(self, file: str) -> None:
        """Remove `file` (and its dot-file, should a copy have stopped half-way) from staticPodPath."""
        self._run("rm", "-f", f"{STATIC_DIR}/{file}", f"{STATIC_DIR}/.{file}.tmp")
