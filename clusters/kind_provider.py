"""The `kind` provider: one kind cluster for the run, a control plane and one worker per swapBehavior
(each worker's kubelet switched to its behavior, confirmed by /configz), created before the
first test and shared by every xdist worker."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import yaml

from clusters import waits
from clusters import checks, commands, hostpackages, kind_autohost, kind_config, kind_install, preflight
from clusters.behaviors import ALL_BEHAVIORS, WORKLOAD_CONTROLLED_SWAP
from clusters.checks import Check
from clusters.discovery import NotReadyAfterRestart, api_client, discover, kubelet_config, ready_after_restart, summary
from clusters.kubelet_config import KUBELET_CONFIG, KubeletChange, KubeletConfigError, NodeKubelet, Restarted
from clusters.kubelet_refusal import StartAttempt
from clusters.progress import Progress
from clusters.provider import NotCoveredError, Provider, SharedSwapError, SwapNode
from clusters.vm.nodeimage import BUILD_NOTE_LABEL, FEATURE_GATES_LABEL
from clusters.shared import get_or_create, record_created
from workloads.cache import cache_root

CREATE_WAIT = "5m"
NODES_POLL = 3.0  # seconds between looks for the new cluster's nodes
# KEP-5359 targets alpha in 1.38; no released node image implements it before that.
WORKLOAD_CONTROLLED_SWAP_SINCE = (1, 38)


class KindError(RuntimeError):
    pass


def _die_with_parent() -> None:
    """In the child: SIGKILL when the process that started it dies (an xdist worker killed at
    the end of an interrupted run must not leave `kind create` running on its own)."""
    import ctypes
    import signal

    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def run_command(argv: Sequence[str], timeout: float, on_line: Progress | None = None) -> subprocess.CompletedProcess:
    """Run a command, handing each line it writes to stderr (kind's status lines) to ``on_line``
    as it comes; on failure raise with the command, exit code and the end of its output."""
    try:
        proc = commands.start(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace",
                              preexec_fn=_die_with_parent)
    except OSError as error:  # not there, not executable, a directory
        problem = preflight.kind_binary_problem(argv[0]) or str(error)
        raise KindError(f"{problem}: {preflight.kind_remedy(argv[0])}") from error
    out: list[str] = []
    err: list[str] = []

    def pump_stderr() -> None:
        for line in proc.stderr:  # type: ignore[union-attr]
            err.append(line)
            if on_line and line.strip():
                on_line(line.strip())

    pumps = [threading.Thread(target=lambda: out.append(proc.stdout.read()), daemon=True),  # type: ignore[union-attr]
             threading.Thread(target=pump_stderr, daemon=True)]
    for pump in pumps:
        pump.start()
    try:
        returncode = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired as error:
        commands.kill_group(proc)  # kind's children (docker run) too
        raise KindError(f"`{' '.join(argv)}` did not finish in {timeout:.0f}s") from error
    except BaseException:  # Ctrl-C, SIGTERM: the command goes with us
        commands.kill_group(proc)
        raise
    for pump in pumps:
        pump.join()
    stdout, stderr = "".join(out), "".join(err)
    if returncode != 0:
        tail = "\n".join((stderr or stdout).strip().splitlines()[-15:])
        raise KindError(f"`{' '.join(argv)}` exited {returncode}:\n{tail}")
    return subprocess.CompletedProcess(list(argv), returncode, stdout, stderr)


# Set when the Docker host is another machine (the kind host VM prints it): the port on this
# machine's 127.0.0.1 that reaches each cluster's API server there.
API_PORTS_ENV = "KSC_KIND_API_PORTS"


def api_ports_from_env(environ: dict[str, str] | os._Environ = os.environ) -> dict[str, int]:
    from clusters.vm.kindhost import parse_api_ports

    return parse_api_ports(environ.get(API_PORTS_ENV, ""))


class KindProvider(Provider):
    name = "kind"
    # A test that reconfigures a node's kubelet runs alone (e2e/alone.py): no other worker's
    # test meanwhile on the node it restarts.
    reconfigures_kubelets = True
    restarts_kubelets = True

    def __init__(self, kind_bin: str, node_image: str | None, shared_root: Path, reuse: bool,
                 api_ports: dict[str, int] | None = None, config_patch: Path | None = None,
                 progress: Progress | None = None, behaviors: Sequence[str] = ALL_BEHAVIORS,
                 install_packages: bool = False, kind_host: kind_autohost.KindHostControl | None = None,
                 logs_dir: Path | None = None):
        self.progress: Progress = progress or (lambda message: None)
        self.behaviors = [b for b in ALL_BEHAVIORS if b in behaviors]
        self.kind_bin = kind_bin
        self.node_image = node_image
        self.node_image_given = node_image is not None
        self.install_packages = install_packages  # --install-host-packages
        # the kind host VM the preflight may start (clusters/kind_autohost.py); a stand-in in self-tests
        self.kind_host: kind_autohost.KindHostControl = kind_host or kind_autohost.KindHostVm()
        self.shared_root = shared_root
        self.workdir = shared_root / "kind"
        self.reuse = reuse
        self.api_ports = api_ports if api_ports is not None else api_ports_from_env()
        self.config_patch = config_patch
        self.patch = kind_config.load_patch(config_patch) if config_patch else None
        self.logs_dir = logs_dir  # where a failed `kind create` leaves kind's logs of its nodes
        self._labels: dict[str, str] | None = None

    # --- what can be offered -------------------------------------------------------------------

    def coverage(self, behaviors: Sequence[str]) -> dict[str, str | None]:
        return {b: self._why_not(b) for b in behaviors}

    def _why_not(self, behavior: str) -> str | None:
        if behavior != WORKLOAD_CONTROLLED_SWAP:
            return None
        if not self.node_image:
            return (
                "needs a node image built from a Kubernetes tree that implements KEP-5359"
                " (pass --node-image); released kubelets reject this swapBehavior"
            )
        if WORKLOAD_CONTROLLED_SWAP in self._image_labels().get(FEATURE_GATES_LABEL, "").split(","):
            return None  # a build that implements it before 1.38 (the KEP-5359 prototype, a branch)
        version = kind_config.image_version(self.node_image)
        if version is None:  # nothing says it implements KEP-5359: offering it would fail the cluster
            return (f"node image {self.node_image} names no release in its tag and has no {FEATURE_GATES_LABEL}"
                    f" label naming {WORKLOAD_CONTROLLED_SWAP}: nothing says it implements KEP-5359")
        if version[:2] < WORKLOAD_CONTROLLED_SWAP_SINCE:
            return f"node image {self.node_image} is Kubernetes {version[0]}.{version[1]}, before KEP-5359 (1.38)"
        return None

    def _image_labels(self) -> dict[str, str]:
        """The node image's labels where the Docker host has it ({} otherwise: kind pulls it)."""
        if self._labels is None:
            self._labels = {}
            if self.node_image:
                try:
                    done = subprocess.run(["docker", "image", "inspect", "-f", "{{json .Config.Labels}}",
                                           self.node_image], capture_output=True, text=True, timeout=60)
                except (OSError, subprocess.TimeoutExpired):
                    return self._labels  # no docker CLI or engine: the preflight says so, once
                if done.returncode == 0:
                    self._labels = json.loads(done.stdout or "null") or {}
        return self._labels

    def _covered(self) -> list[str]:
        return [b for b in self.behaviors if self._why_not(b) is None]

    def preflight(self, behaviors: Sequence[str]) -> dict[str, Any] | None:
        """The host's checks, in the process that owns the run. First, unless KSC_KIND_AUTO=off:
        kind installed with Go where the default --kind-bin finds none good enough, and the kind
        host VM started where the local Docker cannot run swap-enabled nodes. What that decided
        (the kind binary, the kind host's variables) is returned for every process (adopt)."""
        decided: dict[str, Any] = {}
        extra: list[Check] = []
        kind_check: Check | None = None
        if kind_autohost.auto_enabled():
            kind_bin, kind_check = kind_install.resolve(self.kind_bin, kind_config.image_version(self.node_image),
                                                        self.progress, cache_root())
            if kind_check is None and kind_bin != self.kind_bin:
                self.kind_bin = decided["kind_bin"] = kind_bin
            # Not before kind is there: a run that fails on kind anyway boots nothing.
            if kind_check is None and not os.environ.get("DOCKER_HOST"):
                extra = self._kind_host_for_the_run(decided)
        covered = [b for b in behaviors if self._why_not(b) is None]
        found = preflight.kind_host_checks(
            self.kind_bin, kind_config.image_version(self.node_image), [kind_config.MIXED_CLUSTER], self.node_image,
            self.api_ports, nodes=1 + len(covered))
        if kind_check is not None:  # says why kind could not be installed either
            found = [kind_check if c.name == "kind" else c for c in found]
        checks.require([*found, *extra])
        return {"kind": decided} if decided else None

    def adopt(self, decided: dict[str, Any]) -> None:
        """What the preflight decided, taken up by every process of the run: an xdist worker
        started before the kind host, so its environment has none of its variables."""
        kind = decided.get("kind") or {}
        if kind.get("kind_bin"):
            self.kind_bin = kind["kind_bin"]
        if kind.get("env"):
            self._use_kind_host(kind["env"])

    def _kind_host_for_the_run(self, decided: dict[str, Any]) -> list[Check]:
        """The kind host VM where the local Docker cannot run swap-enabled kind nodes: one
        already up is used, else one is started (and recorded, so the run's teardown stops it);
        failing checks when this machine cannot start it."""
        local = kind_autohost.local_docker()
        if local.capable:
            return []
        why = f"the local Docker cannot run swap-enabled kind nodes ({', '.join(local.reasons)})"
        up = self.kind_host.running()
        if up is not None:
            self.progress(f"{why}: using the kind host VM that is already up ({up.what}); the run leaves it running")
        else:
            image = self.node_image if self.node_image_given else None
            lacking = hostpackages.checked(lambda: self.kind_host.missing(image), self.install_packages, self.progress)
            if lacking:
                names = ", ".join(c.name for c in lacking)
                return [Check("kind host VM", False, f"{why}, and this machine cannot start the kind host VM that"
                              f" would: {names} (below)", "fix those; the run then starts the kind host VM itself"
                              " (or bring up a Docker host with cgroup v2 and swap, and set DOCKER_HOST)"), *lacking]
            self.progress(f"{why}: starting the kind host VM ({kind_autohost.HOW_LONG})")
            try:
                up = self.kind_host.start(image, lambda message: self.progress(f"kind host: {message}"),
                                          self._record_kind_host)
            except Exception as error:  # noqa: BLE001 - a build or a boot that failed: one preflight line
                return [Check("kind host VM", False, f"{why}, and starting the kind host VM failed:"
                              f" {type(error).__name__}: {error}",
                              "python -m clusters.vm kind-host up (the same steps, with their full output)")]
            self.progress(f"kind host VM up ({up.what})" + ("" if up.started else "; the run leaves it running"))
        self._use_kind_host(up.env)
        decided["env"] = up.env
        return []

    def _record_kind_host(self) -> None:
        # before it boots: a run interrupted while it boots stops it in its teardown
        record_created(self.shared_root, {"provider": self.name, "cluster": "kind host VM", "kind_host": True,
                                          "kept": "kept the kind host VM this run started (--keep-clusters):"
                                                  f" {self.kind_host.hint()}"})

    def _use_kind_host(self, env: dict[str, str]) -> None:
        """The kind host's variables, as `eval "$(python -m clusters.vm kind-host up)"` would have
        set them: the Docker host, its API server ports, its node image unless --node-image, its
        host profile (under emulation) unless --kind-config-patch."""
        from clusters.vm.kindhost import CONFIG_PATCH_ENV

        env = dict(env)
        patch = env.pop(CONFIG_PATCH_ENV, None)
        if patch and self.config_patch is None:
            self.config_patch = Path(patch)
            self.patch = kind_config.load_patch(self.config_patch)
            env[CONFIG_PATCH_ENV] = patch
        os.environ.update(env)
        self.api_ports = api_ports_from_env()
        if not self.node_image_given and env.get(kind_autohost.NODE_IMAGE_ENV):
            self.node_image = env[kind_autohost.NODE_IMAGE_ENV]
        self._labels = None  # asked of the local Docker before, if at all

    # --- the cluster ----------------------------------------------------------------------------

    def _kind(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
        return run_command([self.kind_bin, *args], timeout)

    def clusters(self) -> set[str]:
        output = self._kind("get", "clusters").stdout
        # Exact names only: a cluster called "ksc-limited" must never match "ksc-limitedswap".
        return {line.strip() for line in output.splitlines() if line.strip() and " " not in line.strip()}

    def leaked(self) -> list[str]:
        # The per-behavior names too: earlier versions of the suite made one cluster per behavior.
        ours = {kind_config.MIXED_CLUSTER} | {kind_config.cluster_name(b) for b in ALL_BEHAVIORS}
        return sorted(self.clusters() & ours)

    def delete(self, cluster: str) -> str:
        return delete_cluster(self.kind_bin, cluster)

    def prepare(self, behaviors: Sequence[str]) -> None:
        """Create the cluster and load the workload image now, before any test runs: creation
        never competes with tests for the CPU. (On a slow host that is the difference between a
        node's systemd reaching multi-user.target within kind's fixed 30 s and not.)"""
        covered = [b for b in behaviors if self._why_not(b) is None]
        if not covered:
            return
        try:
            self.stress_image(self.node_for(covered[0]))
        except Exception as error:  # noqa: BLE001 - recorded under the cluster's key: its tests report it
            self.progress(f"{kind_config.MIXED_CLUSTER}: FAILED: {error}")

    def node_for(self, behavior: str) -> SwapNode:
        reason = self._why_not(behavior)
        if reason:
            raise NotCoveredError(behavior, reason)
        nodes = get_or_create(self.shared_root, kind_config.MIXED_CLUSTER, self._bring_up)
        if behavior not in nodes:  # not selected when the cluster was made
            raise NotCoveredError(behavior, f"{kind_config.MIXED_CLUSTER} has no {behavior} worker (behaviors of"
                                            f" this run: {', '.join(nodes)})")
        # Nodes of a local Docker engine run on this machine's hardware; behind DOCKER_HOST (the kind
        # host VM, a remote engine) their speed is not known here
        return dataclasses.replace(SwapNode(**nodes[behavior]), emulated=False if not os.environ.get("DOCKER_HOST") else None)

    def _bring_up(self) -> dict[str, Any]:
        cluster = kind_config.MIXED_CLUSTER
        behaviors = self._covered()
        self.workdir.mkdir(parents=True, exist_ok=True)
        kubeconfig = self.workdir / f"{cluster}.kubeconfig"
        if cluster in self.clusters():
            if not self.reuse:
                raise KindError(
                    f"kind cluster {cluster} already exists (left by an earlier run?): pass"
                    " --reuse-clusters to test it as it is, or --cleanup-leaked to delete it"
                )
            kubeconfig.write_text(self._kind("get", "kubeconfig", "--name", cluster).stdout)
        else:
            config_file = self.workdir / f"{cluster}.yaml"
            config = kind_config.render_mixed(behaviors, self.node_image, self.api_ports.get(cluster), self.patch)
            config_file.write_text(yaml.safe_dump(config, sort_keys=False))
            # Recorded before creating: a half-created cluster is still ours to delete.
            record_created(self.shared_root, {"provider": self.name, "cluster": cluster, "kind_bin": self.kind_bin})
            # --retain: a failed creation keeps its nodes for `kind export logs`; the run's
            # teardown deletes the cluster whatever happened (it was recorded above).
            argv = ["create", "cluster", "--name", cluster, "--config", str(config_file),
                    "--kubeconfig", str(kubeconfig), "--wait", CREATE_WAIT, "--retain"]
            if self.node_image:
                argv += ["--image", self.node_image]
            self.progress(f"creating {cluster}: a control plane and a worker for each of {', '.join(behaviors)}"
                          f" (image {self.node_image or 'kind default'})")
            try:
                run_command([self.kind_bin, *argv], waits.bound(waits.KIND_CREATE),
                            on_line=lambda line: self.progress(f"{cluster}: {line}"))
            except KindError as error:
                logs = self._export_logs(cluster)
                self.progress(f"{cluster}: {logs}")
                raise KindError(f"{error}\n{logs}") from error
        nodes = {}
        for behavior, node in self._wait_for_nodes(cluster, str(kubeconfig), behaviors).items():
            if node.behavior != behavior:
                self.progress(f"{cluster}: switching {node.name}'s kubelet from {node.behavior} to {behavior}")
                KindNodeKubelet(node, self.progress).set_swap_behavior(behavior)
                node = self._discovered(node)
            if node.behavior != behavior:
                raise KindError(f"{node.name} of {cluster} runs {node.behavior} after its kubelet was switched to {behavior}")
            node = dataclasses.replace(node, build_note=self._image_labels().get(BUILD_NOTE_LABEL, ""))
            self.progress(f"{cluster}: {node.describe()}")
            nodes[behavior] = dataclasses.asdict(node)
        return nodes

    def _export_logs(self, cluster: str) -> str:
        """kind's logs of a cluster whose creation failed (its nodes' journals, the kubelet's and
        containerd's, the control plane's containers): where they are, or why there are none."""
        if self.logs_dir is None:
            return "kind's logs of its nodes were not kept (no results directory)"
        where = self.logs_dir / cluster
        try:
            self._kind("export", "logs", str(where), "--name", cluster, timeout=waits.bound(waits.KIND_EXPORT_LOGS))
        except KindError as error:
            return f"kind's logs of its nodes could not be exported: {str(error)[:300]}"
        return f"kind's logs of its nodes (journals of the kubelet and containerd, the control plane's containers): {where}"

    def _discovered(self, node: SwapNode) -> SwapNode:
        """`node` again, once Ready and schedulable after its kubelet restarted."""
        try:
            return ready_after_restart(node.kubeconfig, self.name, node.cluster, lambda n: n.name == node.name,
                                       f"node {node.name} of {node.cluster}", name=node.name)
        except NotReadyAfterRestart as error:
            raise KindError(str(error)) from None

    def _wait_for_nodes(self, cluster: str, kubeconfig: str, behaviors: Sequence[str]) -> dict[str, SwapNode]:
        """Each behavior's node (by its label), Ready and schedulable: kind --wait covers the
        control plane only, workers may still be joining, and an emulated API server or a new
        kubelet may not answer for a while: each look within what is left of one bound, a look
        that gives up waiting is "not yet" (discovery.look_until; a permanent error, such as
        refused credentials, still fails at once)."""
        from clusters.discovery import api_client, get_json, look_until

        self.progress(f"{cluster}: waiting for a Ready schedulable node for each of {', '.join(behaviors)}")
        seen: list[SwapNode] = []
        labeled: dict[str, str] = {}

        def every_node(left: float) -> dict[str, SwapNode] | None:
            until = time.monotonic() + left
            seen.clear()  # the give-up names this look's nodes, not an earlier one's
            items = get_json(api_client(kubeconfig, retries=False), "/api/v1/nodes", f"the node list of {cluster}",
                             left)["items"]
            labeled.clear()
            labeled.update({(i["metadata"].get("labels") or {}).get(kind_config.BEHAVIOR_LABEL, ""):
                            i["metadata"]["name"] for i in items})
            # only the labeled nodes' kubelets are asked, and the list is not read again
            wanted = frozenset(labeled[b] for b in behaviors if b in labeled)
            seen[:] = discover(kubeconfig, self.name, cluster, cgroup_v2=True, seconds=max(1.0, until - time.monotonic()),
                               names=wanted, listed=items)
            ready = {n.name: n for n in seen}
            found = {b: ready[labeled[b]] for b in behaviors if labeled.get(b) in ready}
            return found if len(found) == len(behaviors) else None

        bound = waits.bound(waits.KIND_NODES_READY)
        nodes, unanswered = look_until(every_node, bound, NODES_POLL)
        if nodes is None:
            raise KindError(
                f"gave up after {bound:.0f}s waiting for a Ready schedulable node labeled"
                f" {kind_config.BEHAVIOR_LABEL} for each of {', '.join(behaviors)} in {cluster}; labeled:"
                f" {labeled}; Ready and schedulable: {summary(seen)}"
                + (f"; the last look: {unanswered}" if unanswered else "")
            )
        for node in nodes.values():
            if node.swap_capacity <= 0:
                # kind nodes share the Docker host's swap: none there means every swap
                # expectation would be 0, proving nothing.
                raise KindError(f"node {node.name} of {cluster} reports no swap capacity: the Docker host has no"
                                f" active swap ({preflight.SWAPFILE_COMMANDS})")
        return nodes

    def stress_image(self, node: SwapNode) -> str:
        """Build the image archive (cached) and `kind load` it into the cluster, once per run."""

        def load() -> dict[str, Any]:
            from workloads.image.build import build_stress_image

            archive, ref = build_stress_image(self.workdir / "images")
            self.progress(f"{node.cluster}: loading the workload image {ref}")
            self._kind("load", "image-archive", str(archive), "--name", node.cluster, timeout=600)
            return {"ref": ref}

        return get_or_create(self.shared_root, f"image-{node.cluster}", load)["ref"]

    def restart_kubelet(self, node: SwapNode, behavior: str | None = None) -> SwapNode:
        KindNodeKubelet(node, self.progress).restart_as(behavior)
        return self._discovered(node)

    def reconfigured_kubelet(self, node: SwapNode, change: KubeletChange) -> AbstractContextManager[Restarted]:
        return KindNodeKubelet(node, self.progress).reconfigured(change)

    def attempt_kubelet_start(self, node: SwapNode, change: KubeletChange) -> StartAttempt:
        return KindNodeKubelet(node, self.progress).attempt_start(change)

    def node_view(self, node: SwapNode | None) -> str:
        """The test's node, and the control plane's (kind names its container <cluster>-control-plane),
        where the API server and etcd run."""
        if node is None:
            return ""
        views = [(node, "the test's node")]
        control_plane = f"{node.cluster}-control-plane"
        if node.name != control_plane:
            views.append((dataclasses.replace(node, name=control_plane), "the API server's node"))
        parts = []
        for each, role in views:
            try:
                parts.append(f"# {each.name} ({role})\n" + KindNodeKubelet(each, self.progress).inside_view())
            except Exception as error:  # noqa: BLE001 - the other node's view still helps
                parts.append(f"# {each.name} ({role}): could not read it: {error}")
        return "\n".join(parts)

    def kubelet_without_swap(self, node: SwapNode) -> AbstractContextManager[None]:
        raise SharedSwapError(node.behavior, f"{node.name} is a container on the kind host, whose kernel's swap every"
                                             " node there shares: turning it off for this node turns it off for all")

    def removal_hint(self, entry: Mapping[str, Any]) -> str:
        return f", delete it with `kind delete cluster --name {entry['cluster']}`"

    def teardown(self, created: Sequence[dict[str, Any]]) -> list[str]:
        messages = []
        for entry in created:
            if entry.get("provider") != self.name or entry.get("kind_host"):
                continue
            kind = entry.get("kind_bin") or self.kind_bin
            self.progress(f"deleting {entry['cluster']}")
            try:
                messages.append(delete_cluster(kind, entry["cluster"]))
            except KindError as error:
                messages.append(f"FAILED to delete kind cluster {entry['cluster']}: {error}")
        # Last: the clusters above live in it (stopping it takes whatever could not be deleted too).
        if any(entry.get("provider") == self.name and entry.get("kind_host") for entry in created):
            self.progress("stopping the kind host VM this run started")
            try:
                was = self.kind_host.stop()
            except Exception as error:  # noqa: BLE001 - said, with how to stop it by hand
                messages.append(f"FAILED to stop the kind host VM this run started: {type(error).__name__}: {error};"
                                f" {self.kind_host.hint()}")
            else:
                messages.append("stopped the kind host VM this run started" if was else
                                "the kind host VM this run started was not running any more")
        return messages


def node_containers(kind_bin: str, cluster: str) -> list[str]:
    # kind finds a cluster's containers by their cluster label: exact names, no substrings
    return run_command([kind_bin, "get", "nodes", "--name", cluster], 60).stdout.split()


def delete_cluster(kind_bin: str, cluster: str, attempts: int = 3) -> str:
    """Delete a cluster and make sure no node container of it is left.

    A `kind create` that was interrupted may have a `docker run` of its still completing after
    the first delete; the check after a short pause catches such a straggler."""
    import time

    for attempt in range(1, attempts + 1):
        run_command([kind_bin, "delete", "cluster", "--name", cluster], 300)
        time.sleep(2)
        left = node_containers(kind_bin, cluster)
        if not left:
            return f"deleted kind cluster {cluster}" + (f" (after {attempt} attempts)" if attempt > 1 else "")
    raise KindError(f"node containers of {cluster} remain after {attempts} deletes: {', '.join(left)}")



class KindNodeKubelet(NodeKubelet):
    """A kind node's kubelet, reached with `docker exec` into its node container (kind names
    the container after the node)."""

    def __init__(self, node: SwapNode, progress: Progress):
        self.node = node
        self.progress = progress
        self.api = api_client(node.kubeconfig)

    def _docker_exec(self, argv: Sequence[str], data: bytes | None = None, timeout: float = 120) -> str:
        command = ["docker", "exec", *(["-i"] if data is not None else []), self.node.name, *argv]
        done = subprocess.run(command, input=data, capture_output=True, timeout=timeout)
        if done.returncode != 0:
            raise KubeletConfigError(f"{' '.join(command)} failed ({done.returncode}): {done.stderr.decode().strip()[-300:]}")
        return done.stdout.decode()

    def read_config(self) -> str:
        return self._docker_exec(["cat", KUBELET_CONFIG])

    def write_config(self, text: str) -> None:
        self._docker_exec(["sh", "-c", 'cat > "$1.tmp" && mv "$1.tmp" "$1"', "sh", KUBELET_CONFIG], text.encode())

    def restart(self) -> None:
        self._docker_exec(["systemctl", "restart", "kubelet"])

    def configz(self) -> dict[str, Any]:
        return kubelet_config(self.api, self.node.name, seconds=10)

    def node_command(self, argv: Sequence[str]) -> str:
        return self._docker_exec(argv)

    def node_status(self) -> dict[str, Any]:
        from kubernetes import client

        raw = client.CoreV1Api(self.api).read_node(self.node.name, _request_timeout=30, _preload_content=False)
        return json.loads(raw.data).get("status") or {}
