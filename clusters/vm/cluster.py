"""``VmCluster``: a single-node kubeadm cluster in a QEMU guest, driven from the host.

    with VmCluster() as vm:
        kubeconfig = vm.up("LimitedSwap")
        vm.set_swap_behavior("NoSwap")
        rc, out, err = vm.guest_exec(["cat", "/proc/meminfo"])

State (pid, port, sockets, overlay, kubeconfig) lives in ``state_dir`` so another process
(``python -m clusters.vm down``, ``up(reuse=True)``) can attach to or stop a running VM.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import yaml

from clusters import waits
from clusters.cli import interrupts_raise
from clusters.kubelet_config import KUBELET_CONFIG, KubeletConfigError, NodeKubelet
from workloads.cache import cache_root

from . import build as _build
from . import guestfiles, image, node, qemu
from .guest import Guest
from .k8s_source import KubernetesSource
from .paths import default_state_dir
from .progress import stderr_progress

Progress = Callable[[str], None]

KUBEADM_LOG = "/var/log/ksc-kubeadm-init.log"
_PROGRESS_MARKERS = ("[wait-control-plane]", "[api-check]", "[control-plane-check]", "[kubelet-check]",
                     "[mark-control-plane]", "[bootstrap-token]", "[upload-config]", "[preflight] Running",
                     "has initialized successfully", "[kubelet-start] Starting")


class VmClusterError(RuntimeError):
    pass


def _normalize_behavior(b: str) -> str:
    try:
        from clusters.behaviors import normalize
    except ImportError:  # pragma: no cover - the lead's module is missing
        return b or "NoSwap"
    return normalize(b)


@dataclass
class VmState:
    pid: int
    port: int
    k8s_version: str
    kernel: str
    kernel_release: str
    memory_mb: int
    swap_mb: int
    cpus: int
    behavior: str
    image_key: str
    started_at: float
    stress_image: str = ""
    pause_image: str = ""
    ready_at: float | None = None


class VmCluster(Guest[VmState]):
    """Lifecycle of the vm provider's node; see the module docstring."""

    state_type = VmState
    error = VmClusterError
    what = "vm node"
    stop_command = "`python -m clusters.vm down`"

    node_name = guestfiles.NODE_NAME

    def __init__(
        self,
        state_dir: Path | None = None,
        *,
        k8s_version: str = _build.DEFAULT_K8S_VERSION,
        kubernetes: KubernetesSource | None = None,
        kernel: str = "6.12",
        memory_mb: int = 4096,
        swap_mb: int = 2048,
        cpus: int = 2,
        cache_dir: Path | None = None,
        progress: Progress | None = None,
    ):
        super().__init__(Path(state_dir) if state_dir else default_state_dir())
        self.cache_dir = Path(cache_dir) if cache_dir else cache_root()
        # What the node runs: a release, or a patched release / local checkout whose build id
        # (v1.37.1+patch.…) every Kubernetes binary reports; k8s_version is that id.
        self.kubernetes = kubernetes or KubernetesSource(k8s_version)
        self.k8s_version = self.kubernetes.build_id
        self.kernel = kernel
        self.memory_mb = memory_mb
        self.swap_mb = swap_mb
        self.cpus = cpus
        self.progress: Progress = progress or stderr_progress()
        self._api: Any = None
        self.reused = False
        self.stress_ref = ""
        self.pause_ref = ""

    # ------------------------------------------------------------------ state
    @property
    def kubeconfig(self) -> Path:
        return self.state_dir / "kubeconfig"

    @property
    def kubectl(self) -> Path:
        """The kubectl built with the node's version (host binary)."""
        return self.cache_dir / "bin" / f"kubernetes-{self.k8s_version}" / "kubectl"

    @property
    def stress_image(self) -> str:
        """Ref of the stress image preloaded in the guest (use imagePullPolicy: Never)."""
        return self.stress_ref

    # ------------------------------------------------------------------ prepare
    def prepare(self) -> image.GuestImage:
        """Build (or find cached) binaries, container images and the guest disk."""
        t0 = time.monotonic()
        bins = _build.build_all(self.kubernetes, root=self.cache_dir, progress=self.progress)
        self.timings["build"] = time.monotonic() - t0
        t1 = time.monotonic()
        refs = node.kubeadm_images(bins.kubernetes / "kubeadm", self.k8s_version)
        oci_dir = self.cache_dir / "vm" / "oci" / self.k8s_version
        cp = node.write_control_plane_images(oci_dir, refs, {
            "kube-apiserver": bins.kubernetes / "kube-apiserver",
            "kube-controller-manager": bins.kubernetes / "kube-controller-manager",
            "kube-scheduler": bins.kubernetes / "kube-scheduler",
            "etcd": bins.etcd / "etcd",
        })
        from workloads.image import build as wbuild

        stress_archive, self.stress_ref = wbuild.build_stress_image(oci_dir)
        pause = wbuild.build_pause_image(oci_dir, refs["pause"])
        pause_archive = pause[0] if isinstance(pause, tuple) else pause
        self.pause_ref = refs["pause"]
        files: dict[str, Path | bytes] = dict(bins.all_files())
        files.update(guestfiles.guest_files(self.pause_ref))
        files.update(node.probe_patches())
        for name, arch in cp.items():
            files[f"{guestfiles.IMAGES_DIR}/{name}.tar"] = arch
        files[f"{guestfiles.IMAGES_DIR}/pause.tar"] = Path(pause_archive)
        files[f"{guestfiles.IMAGES_DIR}/stress.tar"] = Path(stress_archive)
        files["etc/ksc/stress-image"] = (self.stress_ref + "\n").encode()
        img = image.build_image(kernel=self.kernel, files=files, root=self.cache_dir, progress=self.progress)
        self.timings["image"] = time.monotonic() - t1
        return img

    def _check_workload_image_current(self) -> None:
        """The guest imported the workload image at boot; tests written against this checkout's
        workload program must not run an older one."""
        from workloads.image import build as wbuild

        tag = wbuild.source_hash()[:12]
        if not self.stress_ref.endswith(f":{tag}"):
            raise VmClusterError(f"the running VM has the workload image {self.stress_ref}, but this checkout's"
                                 f" workloads/stress builds tag {tag} (it changed since the VM booted): run without"
                                 " --reuse-clusters (or `python -m clusters.vm down` first) to boot a VM with it")

    # ------------------------------------------------------------------ up/down
    def up(self, behavior: str = "LimitedSwap", reuse: bool = False,
           booting: Callable[[], None] = lambda: None) -> Path:
        """Bring the node up (or attach to a running one with ``reuse``); returns the kubeconfig.
        ``booting`` is called once it is decided that this call boots a VM (and owns it), before
        anything is built.

        Ctrl-C (SIGINT) or SIGTERM during ``up`` stops the VM it started before re-raising.
        """
        with interrupts_raise(), self.starting():
            return self._up(behavior, reuse, booting)

    def _up(self, behavior: str, reuse: bool, booting: Callable[[], None] = lambda: None) -> Path:
        behavior = _normalize_behavior(behavior)
        st = self.usable()  # a VM whose up never got to node Ready is stopped below, not waited on
        if reuse and st and self.kubeconfig.exists():
            self.progress(f"reusing running VM (pid {st.pid}, port {st.port})")
            self.reused = True
            self.stress_ref, self.pause_ref = st.stress_image, st.pause_image
            if st.k8s_version != self.k8s_version:
                raise VmClusterError(f"the running VM runs Kubernetes {st.k8s_version}, not the {self.k8s_version} asked"
                                     " for: run without --reuse-clusters (or `python -m clusters.vm down` first)")
            self._check_workload_image_current()
            self._wait_node_ready(time.monotonic() + 600)
            if _normalize_behavior(st.behavior) != behavior:
                self.set_swap_behavior(behavior)
            return self.kubeconfig
        self.reused = False
        booting()
        if self.is_running():
            self.progress("a VM from an earlier run is still up: stopping it")
            self.down()
        t_start = time.monotonic()
        # Before the build: KSC_VM_ACCEL=kvm on a host whose KVM runs no guest stops here, within
        # a minute (KvmUnavailable, exit 3), not after the build and a silent boot; so does a
        # second emulated guest (HostBusy).
        accel = qemu.choose_accel()
        qemu.ensure_alone(self.paths, accel)
        img = self.prepare()
        accel = qemu.choose_accel(img.kernel)  # the kernel that boots decides (qemu.KERNEL_BOOTED)
        port = qemu.free_loopback_port()
        started = False
        try:
            self.progress(f"booting: qemu {accel.name.upper()} ({accel.reason}), {self.cpus} vCPU, {self.memory_mb} MiB,"
                          f" swap {self.swap_mb} MiB, kernel {img.kernel_release}, API on 127.0.0.1:{port}")
            t_boot = time.monotonic()
            pid = qemu.start_qemu(self.paths, disk=img.disk, kernel=img.kernel, initrd=img.initrd,
                                  memory_mb=self.memory_mb, cpus=self.cpus, swap_mb=self.swap_mb,
                                  forwards=[(port, 6443)], accel=accel)
            started = True
            st = VmState(pid=pid, port=port, k8s_version=self.k8s_version, kernel=self.kernel,
                         kernel_release=img.kernel_release, memory_mb=self.memory_mb, swap_mb=self.swap_mb,
                         cpus=self.cpus, behavior=behavior, image_key=img.key, started_at=time.time(),
                         stress_image=self.stress_ref, pause_image=self.pause_ref)
            self.save_state(st)
            self.wait_agent(time.monotonic() + 600)
            self.timings["boot"] = time.monotonic() - t_boot
            self.progress(f"booting: guest agent answers after {self.timings['boot']:.0f}s")
            self._wait_unit("ksc-images.service", time.monotonic() + 900)
            self.progress("booting: container images imported")
            t_init = time.monotonic()
            if accel.name == "tcg":
                self._emulated_containerd()
            self._kubeadm_init(behavior, emulated=accel.name == "tcg")
            self.timings["kubeadm_init"] = time.monotonic() - t_init
            self._fetch_kubeconfig(port)
            self._wait_node_ready(time.monotonic() + 900)
            self._wait_default_service_account(time.monotonic() + 600)
            self.timings["up_total"] = time.monotonic() - t_start
            self.timings["boot_to_ready"] = time.monotonic() - t_boot
            st.ready_at = time.time()
            self.save_state(st)
            self.progress(f"node Ready: {self.node_name} ({self.k8s_version}) after {self.timings['boot_to_ready']:.0f}s "
                          f"from boot; kubeconfig {self.kubeconfig}")
            return self.kubeconfig
        except BaseException:
            if started:
                self.progress(f"up failed: stopping the VM (console log kept: {self.paths.console})")
                self.down(quiet=True)
            raise

    def down(self, quiet: bool = False) -> bool:
        """Stop the VM (by pidfile), drop the overlay; True if a VM was running."""
        was = self.stop()
        self.kubeconfig.unlink(missing_ok=True)
        self._api = None
        if not quiet:
            self.progress("down: VM stopped" if was else "down: no VM was running")
        return was

    def __enter__(self) -> "VmCluster":
        return self

    def __exit__(self, *exc: object) -> None:
        self.down(quiet=True)

    # ------------------------------------------------------------------ guest
    def _check(self, argv: Sequence[str], **kw: Any) -> str:
        rc, out, err = self.guest_exec(argv, **kw)
        if rc != 0:
            raise VmClusterError(f"guest command {' '.join(argv)} failed ({rc}): {err.strip() or out.strip()}")
        return out

    def _wait_unit(self, unit: str, deadline: float) -> None:
        last = ""
        while time.monotonic() < deadline:
            self.watch()
            answer = self.guest_look(["systemctl", "is-active", unit])
            last = answer if isinstance(answer, str) else answer[1].strip()
            if last == "active":
                return
            if last == "failed":
                raise VmClusterError(f"{unit} failed in the guest:\n{self.journal_or_why(unit)}")
            time.sleep(2)
        raise VmClusterError(f"timed out waiting for {unit} to become active (last state: {last!r})")

    # ------------------------------------------------------------------ kubeadm
    def _emulated_containerd(self) -> None:
        """Under TCG, before kubeadm: containerd's CPU stats collected every 10 s (decision 0023),
        set at boot so that one cached disk serves KVM and TCG."""
        period = guestfiles.EMULATED_STATS_COLLECT_PERIOD
        self.put_file("/etc/containerd/config.toml", guestfiles.containerd_config(self.pause_ref, period).encode())
        self._check(["systemctl", "restart", "containerd"])
        self._wait_unit("containerd.service", time.monotonic() + 300)
        self.progress(f"emulated CPU: containerd's CPU stats collected every {period}")

    def _kubeadm_init(self, behavior: str, emulated: bool = False) -> None:
        cfg, source = node.kubeadm_config(self.k8s_version, behavior, self.kubernetes.feature_gates, emulated)
        gates = node.feature_gates_for(behavior, self.kubernetes.feature_gates)
        self.progress(f"kubeadm init: swapBehavior {behavior} (kubelet config from {source})"
                      + (f", feature gates {', '.join(gates)} on the API server and the kubelet" if gates else "")
                      + ("; emulated CPU: ECDSA keys, the control plane on one Go thread each, no priority and"
                         " fairness" if emulated else ""))
        self.put_file(node.KUBEADM_CONFIG_PATH, cfg.encode())
        argv = ["sh", "-c", 'kubeadm init --config "$1" -v=1 > "$2" 2>&1', "sh", node.KUBEADM_CONFIG_PATH, KUBEADM_LOG]
        pid = self.agent.spawn(argv)
        seen = 0
        deadline = time.monotonic() + waits.bound(waits.VM_KUBEADM_INIT)
        lines: list[str] = []
        while True:
            self.watch()
            try:  # a lost answer is a look lost (decision 0037); the agent's error reply (no such pid) ends it
                st = self.agent.exec_status(pid)
            except qemu.NO_ANSWER:
                st = None
            answer = self.guest_look(["cat", KUBEADM_LOG])
            if not isinstance(answer, str):
                lines = answer[1].splitlines()
            for line in lines[seen:]:
                if any(m in line for m in _PROGRESS_MARKERS) and not re.match(r"[IWE]\d{4} ", line):
                    self.progress(f"kubeadm: {line.strip()[:160]}")
            seen = len(lines)
            if st is not None:
                rc = st
                break
            if time.monotonic() > deadline:
                raise VmClusterError(f"kubeadm init did not finish within {waits.bound(waits.VM_KUBEADM_INIT) / 60:.0f}"
                                     " minutes; log tail:\n" + "\n".join(lines[-30:]))
            time.sleep(5)
        if rc != 0:
            raise VmClusterError(f"kubeadm init failed (exit {rc}); log tail:\n" + "\n".join(lines[-40:])
                                 + "\n--- kubelet journal ---\n" + self.journal_or_why("kubelet", 80))
        self.progress("API server up: kubeadm init finished")

    def _fetch_kubeconfig(self, port: int) -> None:
        text = self._check(["cat", "/etc/kubernetes/admin.conf"])
        cfg = yaml.safe_load(text)
        for c in cfg.get("clusters", []):
            c["cluster"]["server"] = f"https://127.0.0.1:{port}"
        self.state_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.kubeconfig.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            yaml.safe_dump(cfg, f)
        tmp.replace(self.kubeconfig)
        self._api = None

    # ------------------------------------------------------------------ kubernetes API
    def api(self) -> Any:
        """A kubernetes.client.ApiClient for the host-facing kubeconfig."""
        if self._api is None:
            from kubernetes import config as kconfig

            self._api = kconfig.new_client_from_config(config_file=str(self.kubeconfig))
        return self._api

    def core(self) -> Any:
        from kubernetes import client

        return client.CoreV1Api(self.api())

    def get_node(self) -> Any:
        return self.core().read_node(self.node_name, _request_timeout=30)

    def node_status(self) -> dict[str, Any]:
        """The node's status as JSON (the client's models rename its fields)."""
        raw = self.core().read_node(self.node_name, _request_timeout=30, _preload_content=False)
        return json.loads(raw.data).get("status") or {}

    def configz(self) -> dict[str, Any]:
        raw = self.core().connect_get_node_proxy_with_path(self.node_name, "configz", _request_timeout=30,
                                                           _preload_content=False)
        return json.loads(raw.data)["kubeletconfig"]

    def _wait_node_ready(self, deadline: float) -> None:
        try:
            self.kubelet().wait_ready(deadline)
        except KubeletConfigError as error:
            raise VmClusterError(f"node {self.node_name}: {error}") from None

    def _wait_default_service_account(self, deadline: float) -> None:
        last = ""
        while time.monotonic() < deadline:
            self.watch()
            try:
                self.core().read_namespaced_service_account("default", "default", _request_timeout=30)
                return
            except Exception as e:  # noqa: BLE001
                last = f"{type(e).__name__}: {str(e)[:160]}"
            time.sleep(3)
        raise VmClusterError(f"timed out waiting for serviceaccount default/default; last: {last}")

    # ------------------------------------------------------------------ the kubelet
    def kubelet(self) -> GuestKubelet:
        """The guest's kubelet, to reconfigure and restart (clusters/kubelet_config.py)."""
        return GuestKubelet(self)

    def swap_behavior(self) -> str:
        """The live kubelet's swapBehavior (from /configz), normalized ("" -> NoSwap)."""
        return self.kubelet().swap_behavior()

    def set_swap_behavior(self, behavior: str, timeout: float = 600) -> None:
        """Rewrite the guest kubelet config's swapBehavior, restart the kubelet, wait for it."""
        self.kubelet().set_swap_behavior(behavior, timeout)

    def swap_kubelet(self, kubernetes: KubernetesSource, timeout: float = 600) -> str:
        """Run another build's kubelet on this node (the control plane stays as it is): build it
        (cached), copy it into the guest, restart the kubelet, and wait until the node is Ready
        and reports that build as its kubeletVersion. Returns the build id; the VM's state then
        names it, so ``--reuse-clusters`` with the same build attaches and any other refuses."""
        st = self.state()
        if not (st and self.is_running()):
            raise VmClusterError("no VM is running (python -m clusters.vm up)")
        bins = _build.build_all(kubernetes, root=self.cache_dir, progress=self.progress)
        data = (bins.kubernetes / "kubelet").read_bytes()
        rc, out, _ = self.guest_exec(["sha256sum", "/usr/local/bin/kubelet"])
        if rc == 0 and out.split()[0] == hashlib.sha256(data).hexdigest() and st.k8s_version == bins.k8s_version:
            self.progress(f"kubelet {bins.k8s_version} already runs on {self.node_name}")
            return bins.k8s_version
        t0 = time.monotonic()
        new = "/usr/local/bin/kubelet.ksc-new"
        self.put_file(new, data, "0755")
        since = time.monotonic()
        kubelet = self.kubelet()
        restarted = kubelet.node_clock()
        self._check(["sh", "-c", 'systemctl stop kubelet && mv "$1" /usr/local/bin/kubelet'
                                 " && systemctl start kubelet", "sh", new])
        try:
            kubelet.wait_ready(time.monotonic() + timeout, restarted, kubelet_version=bins.k8s_version)
        except KubeletConfigError as error:
            raise VmClusterError(f"the node did not come back Ready reporting kubelet {bins.k8s_version} within"
                                 f" {timeout:.0f}s: {error}") from None
        st.k8s_version = bins.k8s_version
        self.save_state(st)
        self.k8s_version = bins.k8s_version
        self.kubernetes = kubernetes
        self.progress(f"kubelet {bins.k8s_version} running on {self.node_name}: copied in {since - t0:.0f}s,"
                      f" Ready {time.monotonic() - since:.0f}s after the restart")
        return bins.k8s_version

    # ------------------------------------------------------------------ status
    def status(self) -> dict[str, Any]:
        out = self.describe()
        out["kubeconfig"] = str(self.kubeconfig) if self.kubeconfig.exists() else None
        if out["running"] and out["kubeconfig"]:
            try:
                n = self.get_node()
                out["node_ready"] = any(c.type == "Ready" and c.status == "True" for c in n.status.conditions or [])
                out["kubelet_version"] = n.status.node_info.kubelet_version
                swap = getattr(n.status.node_info, "swap", None)
                out["swap_capacity"] = getattr(swap, "capacity", None) if swap else None
            except Exception as e:  # noqa: BLE001
                out["api_error"] = f"{type(e).__name__}: {str(e)[:200]}"
        return out


class GuestKubelet(NodeKubelet):
    """The vm node's kubelet, reached through the guest agent."""

    def __init__(self, vm: VmCluster):
        self.vm = vm
        self.progress = vm.progress

    def read_config(self) -> str:
        return self.vm._check(["cat", KUBELET_CONFIG])

    def write_config(self, text: str) -> None:
        self.vm.put_file(KUBELET_CONFIG, text.encode())

    def restart(self) -> None:
        self.vm._check(["systemctl", "restart", "kubelet"], timeout=120)

    def configz(self) -> dict[str, Any]:
        return self.vm.configz()

    def node_status(self) -> dict[str, Any]:
        return self.vm.node_status()

    def node_command(self, argv: Sequence[str]) -> str:
        return self.vm._check(list(argv), timeout=120)

    def check(self) -> None:
        self.vm.watch()

    def no_answer(self, error: BaseException) -> bool:
        return super().no_answer(error) or isinstance(error, qemu.AgentNoAnswer)

    def set_swap_behavior(self, behavior: str, timeout: float = 600) -> None:
        super().set_swap_behavior(behavior, timeout)
        st = self.vm.state()  # the VM's state says which behavior it runs, however it was switched
        if st:
            st.behavior = _normalize_behavior(behavior)
            self.vm.save_state(st)
