"""The kind host: a QEMU guest that runs a Docker engine (cgroup v2, real swap, a kernel of
your choosing) for ``kind`` to create its node containers in.

It is the vm machinery's second flavor: the same rootfs, disk, qemu and guest-agent steps as
the kubeadm node, with Docker instead of containerd + kubelet. The host reaches the guest
only through loopback port forwards (``restrict=on``: the guest reaches nothing outside):

* Docker's API: ``DOCKER_HOST=tcp://127.0.0.1:PORT`` -> the guest's dockerd on 10.0.2.15:2375.
  Anyone on this machine who can connect to that loopback port controls the guest's Docker
  (and only that): it is a test VM, not a shared service.
* One API server port per suite cluster: kind publishes a cluster's API server on the Docker
  host's 127.0.0.1:PORT; the guest relays 10.0.2.15:PORT there and QEMU forwards the host's
  127.0.0.1:PORT to it, so the kubeconfig kind writes (``https://127.0.0.1:PORT``, a name
  in the API server's certificate) works on the host unchanged. The ports are fixed when the
  guest boots and handed to the suite as ``KSC_KIND_API_PORTS``
  (``ksc-noswap=PORT,ksc-limitedswap=PORT,...``); the kind provider puts each into its
  cluster's ``networking.apiServerPort``.

``python -m clusters.vm kind-host up`` prints those two variables as ``export`` lines.
"""
from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from clusters import inputs
from clusters.behaviors import ALL_BEHAVIORS
from workloads.cache import cache_root

from . import guestfiles, image, qemu
from clusters.cli import interrupts_raise
from .guest import Guest
from .guestfiles import GUEST_IP
from .progress import stderr_progress

if TYPE_CHECKING:
    from .nodeimage import NodeImage

Progress = Callable[[str], None]

HOSTNAME = "ksc-kind-host"
DOCKER_PORT = 2375
API_PORTS_ENV = "KSC_KIND_API_PORTS"
CONFIG_PATCH_ENV = "KSC_KIND_CONFIG_PATCH"
EMULATED_HOST_PROFILE = Path(__file__).resolve().parents[1] / "kind" / "profiles" / "emulated-host.yaml"
DISK_SIZE = "40G"  # sparse: node images, one /var volume per kind node, pods

RECIPE = image.RootfsRecipe(
    "kind-host",
    ("systemd-sysv", "udev", "kmod", "iproute2", "iptables", "procps", "util-linux", "ca-certificates",
     "qemu-guest-agent", "mount", "e2fsprogs", "dbus", "socat", "docker.io"),
    kernel="6.12",
    version="1",
)

# dockerd listens on the guest's own address as well as its socket; only QEMU's loopback
# forward reaches that address. overlay2 on the ext4 root; json-file logs capped, so a chatty
# kind node cannot fill the disk.
DOCKER_DROPIN = f"""\
[Unit]
After=ksc-network.service ksc-swap.service
Wants=ksc-network.service

[Service]
ExecStart=
ExecStart=/usr/sbin/dockerd -H fd:// -H tcp://{GUEST_IP}:{DOCKER_PORT} --containerd=/run/containerd/containerd.sock
"""

DOCKER_DAEMON_JSON = json.dumps({
    "storage-driver": "overlay2",
    "log-driver": "json-file",
    "log-opts": {"max-size": "20m", "max-file": "2"},
}, indent=2) + "\n"

RELAY_SCRIPT = f"""\
#!/bin/sh
# Relay every port in ksc.relay_ports= (kernel command line) from the guest's address to the
# same port on its loopback, where Docker publishes kind's API servers.
set -eu
ports=$(sed -n 's/.*ksc\\.relay_ports=\\([0-9,]*\\).*/\\1/p' /proc/cmdline | tr ',' ' ')
[ -n "$ports" ] || {{ echo "ksc-relays: no ports requested"; exec sleep infinity; }}
for port in $ports; do
  socat TCP-LISTEN:"$port",bind={GUEST_IP},reuseaddr,fork TCP:127.0.0.1:"$port" &
  echo "ksc-relays: {GUEST_IP}:$port -> 127.0.0.1:$port"
done
wait
"""

RELAY_UNIT = """\
[Unit]
Description=Relay kind's API server ports from the guest address to its loopback
After=ksc-network.service
Wants=ksc-network.service

[Service]
ExecStart=/usr/local/sbin/ksc-relays
Restart=always
RestartSec=2

[Install]
WantedBy=multi-user.target
"""

UNITS = guestfiles.Units(
    enable={**guestfiles.BASE_ENABLE, "multi-user.target.wants": guestfiles.BASE_ENABLE["multi-user.target.wants"]
            + ("docker.service", "containerd.service", "ksc-relays.service")},
    executables=guestfiles.BASE_EXECUTABLES + ("usr/local/sbin/ksc-relays",),
)


def guest_files() -> dict[str, bytes]:
    files = guestfiles.base_files(HOSTNAME)
    files.update({
        "etc/systemd/system/docker.service.d/10-ksc.conf": DOCKER_DROPIN.encode(),
        "etc/docker/daemon.json": DOCKER_DAEMON_JSON.encode(),
        "usr/local/sbin/ksc-relays": RELAY_SCRIPT.encode(),
        "etc/systemd/system/ksc-relays.service": RELAY_UNIT.encode(),
    })
    return files


def cluster_names() -> list[str]:
    """The suite's cluster, then one per behavior (the committed configs, created by hand)."""
    from clusters.kind_config import MIXED_CLUSTER, cluster_name

    return [MIXED_CLUSTER] + [cluster_name(b) for b in ALL_BEHAVIORS]


def format_api_ports(ports: dict[str, int]) -> str:
    return ",".join(f"{name}={port}" for name, port in ports.items())


def parse_api_ports(text: str) -> dict[str, int]:
    """``ksc-noswap=40001,ksc-limitedswap=40002`` -> {name: port}; a malformed entry is a
    ValueError (the variable's one declaration: clusters/inputs.py)."""
    return inputs.api_ports(text)


class KindHostError(RuntimeError):
    pass


@dataclass
class KindHostState:
    pid: int
    docker_port: int
    api_ports: dict[str, int]
    kernel: str
    kernel_release: str
    memory_mb: int
    swap_mb: int
    cpus: int
    accel: str
    image_key: str
    started_at: float
    node_images: list[str] = field(default_factory=list)
    ready_at: float | None = None

    def env(self) -> dict[str, str]:
        env = {"DOCKER_HOST": f"tcp://127.0.0.1:{self.docker_port}", API_PORTS_ENV: format_api_ports(self.api_ports)}
        if self.accel == "tcg":  # emulated CPU: patience
            env[CONFIG_PATCH_ENV] = str(EMULATED_HOST_PROFILE)
        return env


class KindHost(Guest[KindHostState]):
    """Lifecycle of the kind host VM; state in ``state_dir`` so another process can attach."""

    state_type = KindHostState
    error = KindHostError
    what = "kind host"
    stop_command = "`python -m clusters.vm kind-host down`"

    def __init__(self, state_dir: Path | None = None, *, kernel: str = "6.12", memory_mb: int = 8192,
                 swap_mb: int = 4096, cpus: int = 2, cache_dir: Path | None = None,
                 progress: Progress | None = None):
        if kernel not in image.KERNELS:
            raise KindHostError(f"kernel {kernel!r} not supported: choose {' or '.join(image.KERNELS)}")
        self.cache_dir = Path(cache_dir) if cache_dir else cache_root()
        super().__init__(Path(state_dir) if state_dir else self.cache_dir / "vm" / "kind-host")
        self.kernel = kernel
        self.memory_mb = memory_mb
        self.swap_mb = swap_mb
        self.cpus = cpus
        self.progress: Progress = progress or stderr_progress("kind-host")

    def recipe(self) -> image.RootfsRecipe:
        return image.RootfsRecipe(RECIPE.flavor, RECIPE.packages, self.kernel, RECIPE.version)

    def prepare(self) -> image.GuestImage:
        t0 = time.monotonic()
        img = image.build_image(recipe=self.recipe(), files=guest_files(), units=UNITS, root=self.cache_dir,
                                progress=self.progress, disk_size=DISK_SIZE, bake=False)
        self.timings["image"] = time.monotonic() - t0
        return img

    # ------------------------------------------------------------------ up/down
    def up(self, node_images: list["NodeImage"] | None = None, reuse: bool = False) -> KindHostState:
        """Boot the host (or attach to a running one with ``reuse``) and load and bake node images.

        Ctrl-C or SIGTERM during ``up`` stops the VM it started before re-raising.
        """
        with interrupts_raise(), self.starting():
            return self._up(list(node_images or []), reuse)

    def _up(self, node_images: list["NodeImage"], reuse: bool) -> KindHostState:
        st = self.usable()  # a host whose up ended before Docker answered is replaced, not waited on
        if reuse and st:
            self.progress(f"reusing the running kind host (pid {st.pid}, {st.env()['DOCKER_HOST']})")
            self._wait_docker(st, time.monotonic() + 300)
            self._load_images(st, node_images)
            return st
        if self.is_running():
            self.progress("a kind host from an earlier run is still up: stopping it")
            self.down()
        t0 = time.monotonic()
        accel = qemu.choose_accel()  # first: a forced KVM that runs no guest fails here (see VmCluster._up)
        qemu.ensure_alone(self.paths, accel)
        img = self.prepare()
        accel = qemu.choose_accel(img.kernel)  # the kernel that boots decides (qemu.KERNEL_BOOTED)
        docker_port = qemu.free_loopback_port()
        api_ports = {name: qemu.free_loopback_port() for name in cluster_names()}
        forwards = [(docker_port, DOCKER_PORT), *((p, p) for p in api_ports.values())]
        started = False
        try:
            self.progress(f"booting: qemu {accel.name.upper()} ({accel.reason}), {self.cpus} vCPU, {self.memory_mb} MiB,"
                          f" swap {self.swap_mb} MiB, kernel {img.kernel_release}")
            pid = qemu.start_qemu(self.paths, disk=img.disk, kernel=img.kernel, initrd=img.initrd,
                                  memory_mb=self.memory_mb, cpus=self.cpus, swap_mb=self.swap_mb,
                                  forwards=forwards, name=HOSTNAME, accel=accel,
                                  extra_cmdline="ksc.relay_ports=" + ",".join(str(p) for p in api_ports.values()))
            started = True
            st = KindHostState(pid=pid, docker_port=docker_port, api_ports=api_ports, kernel=self.kernel,
                               kernel_release=img.kernel_release, memory_mb=self.memory_mb, swap_mb=self.swap_mb,
                               cpus=self.cpus, accel=accel.name, image_key=img.key, started_at=time.time())
            self.save_state(st)
            self.wait_agent(time.monotonic() + 600)
            self._wait_docker(st, time.monotonic() + 600)
            self.timings["boot_to_docker"] = time.monotonic() - t0
            st.ready_at = time.time()
            self.save_state(st)
            self.progress(f"Docker answers on {st.env()['DOCKER_HOST']} after {self.timings['boot_to_docker']:.0f}s")
            self._load_images(st, node_images)
            return st
        except BaseException:
            if started:
                self.progress(f"up failed: stopping the kind host (console log kept: {self.paths.console})")
                self.down(quiet=True)
            raise

    def down(self, quiet: bool = False) -> bool:
        was = self.stop()
        if not quiet:
            self.progress("down: kind host stopped" if was else "down: no kind host was running")
        return was

    # ------------------------------------------------------------------ docker
    def docker(self, st: KindHostState, *args: str, timeout: float = 60, **kw: Any) -> subprocess.CompletedProcess:
        """The host's docker CLI against the guest's engine."""
        env = dict(os.environ, **st.env())
        return subprocess.run(["docker", *args], env=env, capture_output=True, text=True, timeout=timeout, **kw)

    def _wait_docker(self, st: KindHostState, deadline: float) -> None:
        last = ""
        while time.monotonic() < deadline:
            self.watch()
            try:
                r = self.docker(st, "info", "--format", "{{.ServerVersion}} cgroup v{{.CgroupVersion}}", timeout=30)
                if r.returncode == 0:
                    self.progress(f"docker: {r.stdout.strip()}")
                    return
                last = (r.stderr or r.stdout).strip().splitlines()[-1:] or [""]
                last = last[0]
            except subprocess.TimeoutExpired:
                last = "docker info timed out"
            time.sleep(3)
        raise KindHostError(f"Docker in the kind host did not answer (last: {last}); journal:\n{self.journal('docker')}")

    def _load_images(self, st: KindHostState, images: list["NodeImage"]) -> None:
        from .nodeimage import load_and_bake

        for built in images:
            self.timings.update({f"{k} {built.ref}": v for k, v in
                                 load_and_bake(built, lambda *a, **kw: self.docker(st, *a, **kw), self.progress).items()})
        if images:  # what this host was brought up (or reused) for
            st.node_images = [built.ref for built in images]
        self.save_state(st)

    def status(self) -> dict[str, Any]:
        st = self.state()
        out = self.describe()
        if st:
            out["env"] = st.env()
            if out["running"]:
                r = self.docker(st, "ps", "--format", "{{.Names}}", timeout=30)
                out["containers"] = r.stdout.split() if r.returncode == 0 else f"docker ps failed: {r.stderr.strip()}"
        return out
