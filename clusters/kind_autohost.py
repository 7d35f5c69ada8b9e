"""The kind host VM, started by the kind provider itself where nothing else can run kind's nodes.

On a machine whose Docker cannot run swap-enabled kind nodes (no engine, cgroup v1, no swap:
this project's own machines) the kind path needs the kind host VM (clusters/vm/kindhost.py).
Rather than a preflight failure telling the user to run ``eval "$(python -m clusters.vm kind-host
up)"`` first, the kind provider's preflight (clusters/kind_provider.py), in the process that owns
the run and before any cluster exists, starts it when

1. no ``DOCKER_HOST`` is set (a Docker the user chose is used as it is),
2. the local Docker fails the engine, cgroup v2 or swap check (:func:`local_docker`), and
3. this machine can run the kind host (:meth:`KindHostVm.missing`: root, QEMU, debootstrap, the
   tools that build the node image; the same checks as ``kind-host up``).

A kind host already up is used and left running. One the run started is stopped at the end,
after the clusters in it are deleted, unless --keep-clusters. Everything the run does with the
VM goes through :class:`KindHostControl`, so that self-tests can stand in for it without booting
anything."""

from __future__ import annotations

import json
import os
import shlex
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from clusters import inputs, preflight, versions
from clusters.checks import Check
from clusters.progress import Progress
from workloads.cache import cache_root

if TYPE_CHECKING:
    from clusters.vm.k8s_source import KubernetesSource
    from clusters.vm.nodeimage import NodeImage

# KSC_KIND_AUTO=off: the kind provider neither installs kind nor starts the kind host VM; the
# preflight says what is missing instead. The self-tests set it: on a machine like this
# project's, any of them that reached the kind preflight would otherwise boot a VM.
AUTO_VARIABLE = "KSC_KIND_AUTO"
NODE_IMAGE_ENV = "KSC_KIND_NODE_IMAGE"  # as `kind-host up` prints it
HOW_LONG = "about 20 min cold, 5 min cached"  # node image build or cache, boot, load and bake


def auto_enabled(environ: Mapping[str, str] = os.environ) -> bool:
    return bool(inputs.variable(AUTO_VARIABLE, "on", environ))


# --- 2. can the local Docker run swap-enabled kind nodes? ---------------------------------------

@dataclass(frozen=True)
class LocalDocker:
    """Why the Docker of this machine cannot run swap-enabled kind nodes (nothing: it can)."""

    reasons: tuple[str, ...] = ()

    @property
    def capable(self) -> bool:
        return not self.reasons


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text()
    except OSError:
        return None


def _docker_reason(check: Check) -> str:
    if "not on PATH" in check.detail:
        return "no docker CLI"
    if "cgroup v1" in check.detail:
        return "cgroup v1"
    return "no Docker engine"


def local_docker(docker: Callable[[], Check] = preflight.check_docker,
                 host: Callable[[], preflight.DockerHost | None] = preflight.docker_host,
                 read: Callable[[str], str | None] = _read) -> LocalDocker:
    """The engine check, and this machine's cgroup v2 and swap checks: kind's nodes would share
    its kernel, cgroups and swap. A Docker engine that runs on another machine (Docker Desktop's
    VM, a context) is not judged here: the preflight checks it as the Docker host it is."""
    engine = docker()
    reasons = []
    if engine.ok:
        found = host()
        if found is None or not found.is_this_machine():
            return LocalDocker()
    else:
        reasons.append(_docker_reason(engine))
    cgroup = preflight.check_cgroup_v2(read("/proc/self/mounts") or "", read("/sys/fs/cgroup/cgroup.controllers"))
    if not cgroup.ok:
        reasons.append("cgroup v1" if "cgroup2 mount" in cgroup.detail else "no cgroup v2 memory controller")
    if not preflight.check_swap(read("/proc/swaps") or "").ok:
        reasons.append("no swap")
    return LocalDocker(tuple(dict.fromkeys(reasons)))


# --- the seam: the kind host VM as the provider uses it -----------------------------------------

@dataclass(frozen=True)
class KindHostUp:
    env: dict[str, str]  # what `kind-host up` prints: DOCKER_HOST, KSC_KIND_API_PORTS, [KSC_KIND_NODE_IMAGE, ...]
    started: bool  # by this call; False: it was up already (someone else's, never stopped by the run)
    what: str  # e.g. "pid 1234, DOCKER_HOST=tcp://127.0.0.1:40111, tcg"


class KindHostControl(Protocol):
    def running(self) -> KindHostUp | None:
        """The kind host that is up (its state directory has a live VM), or None."""

    def missing(self, node_image: str | None) -> list[Check]:
        """The failing checks of what this machine lacks to start it with ``node_image``."""

    def start(self, node_image: str | None, progress: Progress, booting: Callable[[], None]) -> KindHostUp:
        """Bring it up with ``node_image`` loaded (None: the pinned release's local image, built
        or cached); ``booting()`` is called once nothing can stop the VM from being ours, right
        before it boots. Ctrl-C or SIGTERM meanwhile stops what it started and propagates."""

    def stop(self) -> bool:
        """Stop it; True if it was running."""

    def hint(self) -> str:
        """How a person reaches and stops it, for a run that leaves it running."""


class KindHostError(RuntimeError):
    pass


def cached_node_image(ref: str, root: Path) -> NodeImage | None:
    """The node image archive built earlier whose baked ref is ``ref`` (nodeimage.py keeps each
    under vm/kind-node/<key>/ with its ref in .complete)."""
    from clusters.vm.nodeimage import NodeImage

    for done in sorted((root / "vm" / "kind-node").glob("*/.complete")):
        try:
            if json.loads(done.read_text()).get("ref") != ref:
                continue
        except (OSError, ValueError):
            continue
        version = ref.rsplit(":", 1)[1].rsplit("-", 1)[0].replace("_", "+")
        return NodeImage(done.parent / "node-image.tar", ref, version, done.parent.name)
    return None


class KindHostVm:
    """The real kind host (clusters/vm/kindhost.py), as ``kind-host up`` runs it."""

    def __init__(self, state_dir: Path | None = None, cache_dir: Path | None = None,
                 which: Callable[[str], str | None] = shutil.which):
        self.state_dir = state_dir
        self.cache_dir = cache_dir
        self.which = which

    def _root(self) -> Path:
        return self.cache_dir or cache_root()

    def _host(self, progress: Progress | None = None) -> Any:
        from clusters.vm.kindhost import KindHost

        return KindHost(self.state_dir, cache_dir=self.cache_dir, progress=progress or (lambda message: None))

    def running(self) -> KindHostUp | None:
        """The kind host that is up and done starting (Guest.usable: its Docker answered, and no
        `up` is still loading node images into it). One another command is still bringing up is
        that command's (start() then stops at its lock, naming it); one whose `up` ended before
        Docker answered has nothing to use (start() replaces it)."""
        st = self._host().usable()
        if st is None:
            return None
        env = st.env()
        if st.node_images:
            env[NODE_IMAGE_ENV] = st.node_images[-1]
        return KindHostUp(env, False, f"pid {st.pid}, DOCKER_HOST={env['DOCKER_HOST']}, {st.accel}")

    def wanted(self, node_image: str | None) -> NodeImage | KubernetesSource | None:
        """What to load: the pinned release's local image (to build, or cached) without
        --node-image; a local --node-image from the cache, or built again when it is a release's;
        nothing for any other image (kind pulls it)."""
        from clusters.vm import k8s_source
        from clusters.vm.nodeimage import REPOSITORY

        if node_image is None:
            return k8s_source.release(versions.KUBERNETES)
        if not node_image.startswith(REPOSITORY + ":"):
            return None
        cached = cached_node_image(node_image, self._root())
        if cached is not None:
            return cached
        version = node_image.rsplit(":", 1)[1].rsplit("-", 1)[0]
        if k8s_source.RELEASE.fullmatch(version):
            return k8s_source.release(version)
        raise KindHostError(f"--node-image {node_image} is a local node image of a patched release or a checkout, and"
                            " it is not in the cache to load")

    def missing(self, node_image: str | None) -> list[Check]:
        from clusters.vm import hostcheck
        from clusters.vm.k8s_source import KubernetesSource

        try:
            wanted = self.wanted(node_image)
        except KindHostError as error:
            return [Check("node image", False, str(error), "build it and bring the kind host up with it:"
                          " eval \"$(python -m clusters.vm kind-host up --k8s-version V --k8s-patch FILE)\"")]
        kubernetes = wanted if isinstance(wanted, KubernetesSource) else None
        found = hostcheck.checks(kubernetes, root=self._root(), guest_image=True, boot=True,
                                 binaries=kubernetes is not None, which=self.which)
        found.append(hostcheck.tool(self.which, "docker", "docker.io", "talks to the kind host's Docker engine"))
        if all(c.ok for c in found):  # QEMU is there: another emulated guest stops it before the build
            from clusters.vm import qemu

            crowded = qemu.sharing_problem(self._host().paths)
            if crowded:
                found.append(Check("one emulated guest", False, crowded))
        return [c for c in found if not c.ok]

    def start(self, node_image: str | None, progress: Progress, booting: Callable[[], None]) -> KindHostUp:
        from clusters.vm.nodeimage import NodeImage, build_node_image

        host = self._host(progress)
        with host.starting():  # a second run starting one meanwhile stops here, at once
            if host.is_running():  # brought up since running() was asked: used, not ours
                up = self.running()
                if up is not None:
                    return up
            from clusters.vm import qemu

            qemu.ensure_alone(host.paths)  # a guest started since the preflight: before the build
            wanted = self.wanted(node_image)
            images: list[NodeImage] = []
            if isinstance(wanted, NodeImage):
                images = [wanted]
            elif wanted is not None:
                built = build_node_image(wanted, root=self._root(), progress=progress)
                if node_image is not None and built.ref != node_image:
                    raise KindHostError(f"--node-image {node_image} is not in the cache, and Kubernetes"
                                        f" {wanted.release} builds {built.ref} now: pass that, or build yours and"
                                        " bring the kind host up with it (python -m clusters.vm kind-host up)")
                images = [built]
            booting()
            st = host.up(images)
        env = st.env()
        if images:
            env[NODE_IMAGE_ENV] = images[0].ref
        return KindHostUp(env, True, f"pid {st.pid}, DOCKER_HOST={env['DOCKER_HOST']}, {st.accel}")

    def stop(self) -> bool:
        return bool(self._host().down(quiet=True))

    def hint(self) -> str:
        where = f" --state-dir {shlex.quote(str(self.state_dir))}" if self.state_dir else ""
        return (f"reach it with `eval \"$(python -m clusters.vm kind-host env{where})\"` (its DOCKER_HOST, API server"
                f" ports and node image), stop it with `python -m clusters.vm kind-host down{where}`")
