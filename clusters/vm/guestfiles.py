"""Text of the files placed in the guest: systemd units, containerd and CNI config, scripts.

Nothing here depends on the swap size or the swap behavior: the swap size comes from the
kernel command line (``ksc.swap_mb=``) and the behavior from the kubeadm config the host
writes at ``up``, so one cached disk serves every configuration.
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

GUEST_IP = "10.0.2.15"
GUEST_GW = "10.0.2.2"
GUEST_DNS = "10.0.2.3"
NODE_NAME = "ksc-node"
POD_SUBNET = "10.244.0.0/16"
POD_RANGE = "10.244.0.0/24"
SERVICE_SUBNET = "10.96.0.0/16"
IMAGES_DIR = "/var/lib/ksc/images"

CONTAINERD_CONFIG = """\
version = 3

[plugins.'io.containerd.cri.v1.images']
  snapshotter = 'overlayfs'

  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = '{pause_ref}'

[plugins.'io.containerd.cri.v1.runtime']
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = 'runc'

    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = 'io.containerd.runc.v2'

      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = '/usr/local/sbin/runc'
        SystemdCgroup = true

  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ['/opt/cni/bin']
    conf_dir = '/etc/cni/net.d'
"""

# Under TCG only (decision 0023): containerd's CRI CPU stats collector every 10 s instead of
# every 1 s; an idle shim spent 17-23 ms of CPU per second on it. It feeds only the CPU usage
# that CRI stats report; memory and swap are read live on every request.
EMULATED_STATS_COLLECT_PERIOD = "10s"


def containerd_config(pause_ref: str, stats_collect_period: str | None = None) -> str:
    text = CONTAINERD_CONFIG.format(pause_ref=pause_ref)
    if stats_collect_period:
        header = "[plugins.'io.containerd.cri.v1.runtime']\n"
        text = text.replace(header, f"{header}  stats_collect_period = '{stats_collect_period}'\n", 1)
    return text

def containerd_unit(after: tuple[str, ...] = ("ksc-network.service", "ksc-swap.service")) -> str:
    """containerd's unit; ``after`` are the flavor's own units it must start after."""
    order = " ".join(("network.target", "local-fs.target", *after))
    wants = "".join(f"Wants={u}\n" for u in after if u == "ksc-network.service")
    return f"""\
[Unit]
Description=containerd container runtime
After={order}
{wants}
[Service]
ExecStartPre=-/sbin/modprobe overlay
ExecStart=/usr/local/bin/containerd
Type=notify
Delegate=yes
KillMode=process
Restart=always
RestartSec=2
LimitNPROC=infinity
LimitCORE=infinity
LimitNOFILE=infinity
TasksMax=infinity
OOMScoreAdjust=-999

[Install]
WantedBy=multi-user.target
"""


CONTAINERD_UNIT = containerd_unit()

KUBELET_UNIT = """\
[Unit]
Description=kubelet: The Kubernetes Node Agent
Wants=network-online.target containerd.service ksc-swap.service
After=network-online.target containerd.service ksc-swap.service ksc-images.service
# kubeadm writes the config (and restarts the kubelet); no crash loop before that
ConditionPathExists=/var/lib/kubelet/config.yaml

[Service]
ExecStart=/usr/local/bin/kubelet
Restart=always
StartLimitInterval=0
RestartSec=3

[Install]
WantedBy=multi-user.target
"""

KUBELET_KUBEADM_DROPIN = """\
[Service]
Environment="KUBELET_KUBECONFIG_ARGS=--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf --kubeconfig=/etc/kubernetes/kubelet.conf"
Environment="KUBELET_CONFIG_ARGS=--config=/var/lib/kubelet/config.yaml"
EnvironmentFile=-/var/lib/kubelet/kubeadm-flags.env
EnvironmentFile=-/etc/default/kubelet
ExecStart=
ExecStart=/usr/local/bin/kubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS
"""

NETWORK_UNIT = f"""\
[Unit]
Description=Static network for the QEMU user-mode NIC
Wants=network.target
Before=network.target network-online.target containerd.service kubelet.service
BindsTo=sys-subsystem-net-devices-eth0.device
After=sys-subsystem-net-devices-eth0.device

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/sbin/ip link set lo up
ExecStart=/sbin/ip link set eth0 up
ExecStart=/sbin/ip addr replace {GUEST_IP}/24 dev eth0
ExecStart=/sbin/ip route replace default via {GUEST_GW}

[Install]
WantedBy=multi-user.target network-online.target
"""

SWAP_SCRIPT = """\
#!/bin/sh
# Create and activate /swapfile, sized by ksc.swap_mb= on the kernel command line.
set -eu
mb=$(sed -n 's/.*ksc\\.swap_mb=\\([0-9][0-9]*\\).*/\\1/p' /proc/cmdline)
[ -n "$mb" ] || mb=2048
if [ "$mb" -eq 0 ]; then echo "ksc-swap: no swap requested"; exit 0; fi
if swapon --show=NAME --noheadings | grep -qx /swapfile; then exit 0; fi
want=$((mb * 1024 * 1024))
if [ ! -f /swapfile ] || [ "$(stat -c %s /swapfile)" -ne "$want" ]; then
  rm -f /swapfile
  fallocate -l "${mb}M" /swapfile
  chmod 600 /swapfile
  mkswap /swapfile
fi
swapon /swapfile
echo "ksc-swap: $(swapon --show --noheadings)"
"""

SWAP_UNIT = """\
[Unit]
Description=Swap file for the node (before containerd and the kubelet)
DefaultDependencies=no
After=local-fs.target
Before=containerd.service kubelet.service swap.target
Wants=swap.target

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/local/sbin/ksc-swap-setup

[Install]
WantedBy=multi-user.target
"""

def images_script(images_dir: str) -> str:
    return f"""\
#!/bin/sh
# Import the image archives shipped in {images_dir} into containerd's k8s.io namespace, once.
set -eu
for tar in {images_dir}/*.tar; do
  [ -e "$tar" ] || continue
  mark="$tar.imported"
  [ -e "$mark" ] && continue
  for i in 1 2 3 4 5 6 7 8 9 10; do
    if ctr -n k8s.io images import "$tar"; then touch "$mark"; break; fi
    sleep 3
  done
  [ -e "$mark" ] || {{ echo "ksc-images: import of $tar failed"; exit 1; }}
done
ctr -n k8s.io images ls -q
"""


IMAGES_SCRIPT = images_script(IMAGES_DIR)

IMAGES_UNIT = """\
[Unit]
Description=Import the node's container images into containerd
After=containerd.service
Requires=containerd.service
Before=kubelet.service

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/local/sbin/ksc-images-import

[Install]
WantedBy=multi-user.target
"""

CNI_CONFLIST = json.dumps({
    "cniVersion": "1.0.0",
    "name": "ksc",
    "plugins": [
        {
            "type": "bridge",
            "bridge": "cni0",
            "isGateway": True,
            "ipMasq": False,
            "hairpinMode": True,
            "ipam": {
                "type": "host-local",
                "ranges": [[{"subnet": POD_RANGE}]],
                "routes": [{"dst": "0.0.0.0/0"}],
            },
        },
        {"type": "portmap", "capabilities": {"portMappings": True}},
    ],
}, indent=2) + "\n"

# QEMU multi-threaded TCG + live kernel text patching do not mix: toggling a static key
# while another vCPU runs the patched code crashed the guest twice ("Oops: int3" in
# dequeue_entity()/pick_task_fair(), then panic) -- once when the first pod with a CPU limit
# flipped the scheduler's cfs-bandwidth key, once when a unit with CPUQuota= flipped it at
# boot. So the guest boots with one CPU online (maxcpus=1 on the kernel command line), a
# long-running unit switches the scheduler keys on for good (CPU quota -> cfs bandwidth,
# AllowedCPUs -> cpuset), and only then are the other CPUs brought online. Keys that stay on
# are never patched again, whatever pods do later. (KSC_VM_TCG_THREAD=single avoids the race
# altogether at about half the speed.)
KEYS_PIN_UNIT = """\
[Unit]
Description=Hold scheduler static keys on (cfs bandwidth, cpuset) before other CPUs come online
DefaultDependencies=no
After=local-fs.target systemd-journald.service
Before=sysinit.target containerd.service kubelet.service

[Service]
CPUQuota=1000%
AllowedCPUs=0
ExecStart=/bin/sleep infinity

[Install]
WantedBy=sysinit.target
"""

CPUS_ONLINE_SCRIPT = """\
#!/bin/sh
# Bring the other CPUs online once the static keys are pinned (see ksc-keys-pin.service).
set -u
cg=/sys/fs/cgroup/system.slice/ksc-keys-pin.service
i=0
while [ $i -lt 100 ]; do
  q=$(cat $cg/cpu.max 2>/dev/null || true)
  if [ -n "$q" ] && [ "${q%% *}" != "max" ] && [ -e $cg/cpuset.cpus ]; then break; fi
  sleep 0.1; i=$((i + 1))
done
echo "ksc-cpus-online: pin cgroup cpu.max=$(cat $cg/cpu.max 2>/dev/null) cpuset=$(cat $cg/cpuset.cpus 2>/dev/null)"
for c in /sys/devices/system/cpu/cpu[0-9]*; do
  [ -w "$c/online" ] || continue
  [ "$(cat "$c/online")" = 1 ] || echo 1 > "$c/online"
done
echo "ksc-cpus-online: online=$(cat /sys/devices/system/cpu/online)"
"""

CPUS_ONLINE_UNIT = """\
[Unit]
Description=Bring the remaining CPUs online after the static keys are pinned
DefaultDependencies=no
After=ksc-keys-pin.service
Wants=ksc-keys-pin.service
Before=sysinit.target containerd.service kubelet.service

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/local/sbin/ksc-cpus-online

[Install]
WantedBy=sysinit.target
"""

MODULES = "overlay\nbr_netfilter\n"
SYSCTLS = (
    "net.ipv4.ip_forward = 1\n"
    "net.bridge.bridge-nf-call-iptables = 1\n"
    "net.bridge.bridge-nf-call-ip6tables = 1\n"
    "kernel.panic = 10\n"
)


def base_files(hostname: str) -> dict[str, bytes]:
    """What every guest flavor needs: static network, swap file, the TCG static-key guard."""
    t = {
        "etc/systemd/system/ksc-network.service": NETWORK_UNIT,
        "etc/systemd/system/ksc-swap.service": SWAP_UNIT,
        "etc/systemd/system/ksc-keys-pin.service": KEYS_PIN_UNIT,
        "etc/systemd/system/ksc-cpus-online.service": CPUS_ONLINE_UNIT,
        "usr/local/sbin/ksc-cpus-online": CPUS_ONLINE_SCRIPT,
        "usr/local/sbin/ksc-swap-setup": SWAP_SCRIPT,
        "etc/modules-load.d/ksc.conf": MODULES,
        "etc/sysctl.d/90-ksc.conf": SYSCTLS,
        "etc/hostname": hostname + "\n",
        "etc/hosts": f"127.0.0.1 localhost\n{GUEST_IP} {hostname}\n",
        "etc/resolv.conf": f"nameserver {GUEST_DNS}\n",
        "etc/fstab": "/dev/vda / ext4 rw,relatime 0 1\n",
    }
    return {k: v.encode() for k, v in t.items()}


def guest_files(pause_ref: str) -> dict[str, bytes]:
    """Guest path (relative to /) -> content, for every config file the kubeadm node needs."""
    t = {
        "etc/containerd/config.toml": containerd_config(pause_ref),
        "etc/systemd/system/containerd.service": CONTAINERD_UNIT,
        "etc/systemd/system/kubelet.service": KUBELET_UNIT,
        "etc/systemd/system/kubelet.service.d/10-kubeadm.conf": KUBELET_KUBEADM_DROPIN,
        "etc/systemd/system/ksc-images.service": IMAGES_UNIT,
        "usr/local/sbin/ksc-images-import": IMAGES_SCRIPT,
        "etc/cni/net.d/10-ksc.conflist": CNI_CONFLIST,
    }
    return base_files(NODE_NAME) | {k: v.encode() for k, v in t.items()}


@dataclass(frozen=True)
class Units:
    """How a flavor's rootfs is finished: units to enable (``systemctl enable`` as symlinks),
    scripts to make executable, directories to create."""

    enable: dict[str, tuple[str, ...]]
    executables: tuple[str, ...]
    dirs: tuple[str, ...] = ()
    mask: tuple[str, ...] = field(default=(
        "apt-daily.timer", "apt-daily-upgrade.timer", "e2scrub_all.timer", "e2scrub_reap.service",
        "fstrim.timer", "systemd-networkd-wait-online.service", "getty@tty1.service"))

    def key(self) -> str:
        return hashlib.sha256(json.dumps([self.enable, self.executables, self.dirs, self.mask],
                                         sort_keys=True).encode()).hexdigest()[:16]


BASE_ENABLE = {
    "sysinit.target.wants": ("ksc-keys-pin.service", "ksc-cpus-online.service"),
    "multi-user.target.wants": ("ksc-network.service", "ksc-swap.service"),
}
BASE_EXECUTABLES = ("usr/local/sbin/ksc-swap-setup", "usr/local/sbin/ksc-cpus-online")

NODE_UNITS = Units(
    enable={**BASE_ENABLE, "multi-user.target.wants": BASE_ENABLE["multi-user.target.wants"]
            + ("containerd.service", "kubelet.service", "ksc-images.service")},
    executables=BASE_EXECUTABLES + ("usr/local/sbin/ksc-images-import",),
    dirs=("var/lib/kubelet", "etc/kubernetes/manifests", "var/lib/etcd", "opt/cni/bin"),
)
QGA_WANTS = "dev-virtio\\x2dports-org.qemu.guest_agent.0.device.wants"


def finalize_rootfs(stage: Path, units: Units = NODE_UNITS, guest_agent: bool = True) -> None:
    """Fix modes, enable units (symlinks, like ``systemctl enable``), mask slow units."""
    for rel in units.executables:
        (stage / rel).chmod(0o755)
    sysd = stage / "etc/systemd/system"
    for wants, names in units.enable.items():
        d = sysd / wants
        d.mkdir(parents=True, exist_ok=True)
        for u in names:
            link = d / u
            if not link.exists() and not link.is_symlink():
                target = f"/etc/systemd/system/{u}"
                if not (stage / target.lstrip("/")).exists():  # a unit the distribution ships
                    target = f"/lib/systemd/system/{u}"
                os.symlink(target, link)
    qd = sysd / QGA_WANTS
    if guest_agent and not (qd / "qemu-guest-agent.service").is_symlink():
        qd.mkdir(parents=True, exist_ok=True)
        os.symlink("/lib/systemd/system/qemu-guest-agent.service", qd / "qemu-guest-agent.service")
    for u in units.mask:
        m = sysd / u
        if not m.exists() and not m.is_symlink():
            os.symlink("/dev/null", m)
    for d in (*units.dirs, "root"):
        (stage / d).mkdir(parents=True, exist_ok=True)
    if (stage / "var/lib/etcd").exists():
        (stage / "var/lib/etcd").chmod(0o700)
    # empty machine-id: systemd generates one on first boot of each overlay
    (stage / "etc/machine-id").write_text("")
