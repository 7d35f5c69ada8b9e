"""A kind node image built offline, from what the vm provider builds from the Go module proxy.

``kind build node-image`` pulls base and component images from registries; here there are
none. So the image is assembled the way the vm node's disk is: a Debian rootfs (debootstrap,
no kernel: kind nodes share the Docker host's) plus the binaries of ``build.py`` and this
project's own entrypoint, units and manifests, written as one-layer image archive by
:func:`workloads.image.oci.write_tree_image_archive` and cached by content.

What kind relies on in a node image (read from kind's source, v0.33), and where it is here:

* PID 1 is systemd, reached through an entrypoint; kind waits up to 30 s for "Reached target
  Multi-User System" in ``docker logs``. -> ``ENTRYPOINT``, :data:`ENTRYPOINT`; nothing slow
  is ordered before multi-user.target (the image import is not).
* ``/kind/version`` (one line), ``/kind/manifests/default-cni.yaml`` (``kubectl create -f``),
  ``/kind/manifests/default-storage.yaml`` (``kubectl apply -f``).
* ``kubeadm``, ``kubectl``, ``ctr``, ``crictl``, ``containerd config dump`` (kind reads the
  snapshotter from it for ``kind load``), ``cat``, ``cp``, ``mkdir``, ``bash``/``pgrep``.
* containerd on ``/run/containerd/containerd.sock`` with the systemd cgroup driver (kind
  configures the kubelet with ``cgroupDriver: systemd``, ``cgroupRoot: /kubelet``), and
  every image kubeadm uses already in containerd's ``k8s.io`` namespace (kind skips
  kubeadm's preflight, nothing is pulled). Here the archives ship in ``/kind/images`` and
  ``ksc-images.service`` imports them when the node starts, before the kubelet may start.

Pod networking (kind's kindnetd does not build from the proxy): ``ksc-bridge-cni``, a
DaemonSet that the default CNI manifest installs; on every node it writes a bridge CNI config
for the node's podCIDR and routes other nodes' podCIDRs through their InternalIPs. CoreDNS
is built from the proxy when the version kubeadm wants is there; kube-proxy's image carries
Debian's iptables (nft) binaries.

``python -m clusters.vm node-image`` builds it and prints the archive and the image ref.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import yaml

from clusters import diskspace, versions
from workloads.cache import cache_root

from .k8s_source import KubernetesSource
from . import build as _build
from . import guestfiles, image, node
from .build import cache_lock

Progress = Callable[[str], None]

REPOSITORY = "localhost/kube-swap-conformance/kind-node"
BRIDGE_CNI_REPOSITORY = "localhost/kube-swap-conformance/bridge-cni"
RECIPE_VERSION = "1"  # bump when anything below changes what goes into the image
IMAGES_DIR = "/kind/images"

RECIPE = image.RootfsRecipe(
    "kind-node",
    ("systemd-sysv", "dbus", "kmod", "iproute2", "iptables", "procps", "util-linux", "mount",
     "ca-certificates", "libseccomp2", "conntrack", "ethtool", "socat", "ebtables", "busybox-static",
     "libc-bin", "findutils"),
    kernel=None,
    version="1",
)

# Our own entrypoint: only what kind's node contract and systemd-in-a-container need.
ENTRYPOINT = r"""#!/bin/sh
# Entrypoint of the kube-swap-conformance kind node image: prepare the container for systemd,
# then exec it. kind runs the node privileged, in a private cgroup namespace, with /var as a
# volume and /tmp and /run as tmpfs.
set -eu
log() { echo "ksc-node: $*" >&2; }

if [ ! -f /sys/fs/cgroup/cgroup.controllers ]; then
  log "this node image needs a cgroup v2 Docker host (found cgroup v1)"
  exit 1
fi
# systemd in a container expects a read-only /sys (systemd.io/CONTAINER_INTERFACE); the
# cgroup2 mount below it stays writable for systemd and the kubelet.
mount -o remount,ro /sys
# volume mount propagation (the kubelet's) needs shared mounts
mount --make-rshared /
# every node of a cluster needs its own machine-id and product_uuid: the kubelet reports them
rm -f /etc/machine-id
systemd-machine-id-setup >/dev/null
cat /proc/sys/kernel/random/uuid > /kind/product_uuid
for f in /sys/class/dmi/id/product_uuid /sys/devices/virtual/dmi/id/product_uuid; do
  if [ -f "$f" ]; then mount -o ro,bind /kind/product_uuid "$f"; fi
done
# Docker's embedded DNS answers on 127.0.0.11 only inside this container's network namespace;
# from a pod that address is the pod's own loopback (CoreDNS forwarding there finds itself and
# exits). So the node's resolv.conf names its gateway instead, and port 53 on the gateway is
# sent to Docker's resolver, from the node itself (OUTPUT) and from its pods (PREROUTING).
gw=$(ip -4 route show default | awk '{print $3; exit}')
if [ -n "$gw" ] && grep -q '^nameserver 127\.0\.0\.11' /etc/resolv.conf; then
  sysctl -qw net.ipv4.conf.all.route_localnet=1
  rules=$(iptables-save -t nat)
  for proto in udp tcp; do
    port=$(echo "$rules" | sed -n "s/.*-d 127\.0\.0\.11\/32 -p $proto .*--to-destination 127\.0\.0\.11:\([0-9]*\).*/\1/p" | head -n1)
    [ -n "$port" ] || continue
    for chain in OUTPUT PREROUTING; do
      iptables -t nat -I "$chain" -d "$gw" -p "$proto" --dport 53 -j DNAT --to-destination "127.0.0.11:$port"
    done
  done
  sed "s/^nameserver 127\.0\.0\.11/nameserver $gw/" /etc/resolv.conf > /kind/resolv.conf
  cat /kind/resolv.conf > /etc/resolv.conf  # a bind mount from Docker: rewrite it in place
  log "DNS: $gw:53 -> Docker's resolver"
fi
log "starting $*"
exec "$@"
"""

# No ordering dependencies: multi-user.target waits for the kubelet's start job, and with
# After=containerd/ksc-images the job would wait for them before even checking
# ConditionPathExists (an import held a node past kind's 30 s). Instead the kubelet's first
# step starts the image import, which requires containerd: when it returns, containerd runs
# and every image is there (a baked image has nothing left to import: it returns at once).
KUBELET_UNIT = """\
[Unit]
Description=kubelet: The Kubernetes Node Agent
# kubeadm writes the config and (re)starts the kubelet
ConditionPathExists=/var/lib/kubelet/config.yaml

[Service]
ExecStartPre=/bin/systemctl start ksc-images.service
ExecStartPre=/usr/local/sbin/ksc-kubelet-cgroups
ExecStart=/usr/local/bin/kubelet
TimeoutStartSec=30min
Restart=always
StartLimitInterval=0
RestartSec=1s
CPUAccounting=true
MemoryAccounting=true
Slice=kubelet.slice
KillMode=process

[Install]
WantedBy=multi-user.target
"""

KUBELET_SLICE = """\
[Unit]
Description=The kubelet and its pods (kind's cgroupRoot /kubelet is kubelet.slice)
Before=slices.target

[Slice]
MemoryAccounting=true
CPUAccounting=true
"""

# The kubelet needs the cgroup controllers enabled on the way down to its cgroupRoot.
KUBELET_CGROUPS_SCRIPT = """\
#!/bin/sh
# Enable every controller the node's cgroup namespace offers at its root and in kubelet.slice
# (the kubelet's cgroupRoot), before the kubelet starts. systemd runs in /init.scope, so the
# root holds no process and its subtree_control may be written.
set -eu
enable() {
  for c in $(cat "$1/cgroup.controllers"); do
    grep -qw "$c" "$1/cgroup.subtree_control" || echo "+$c" > "$1/cgroup.subtree_control"
  done
}
enable /sys/fs/cgroup
mkdir -p /sys/fs/cgroup/kubelet.slice
enable /sys/fs/cgroup/kubelet.slice
"""

# Not ordered before multi-user.target (DefaultDependencies=no keeps the target from waiting):
# kind gives a node 30 s to reach it. Archives already imported (a baked image) are skipped.
IMAGES_UNIT = """\
[Unit]
Description=Import the node image's container images into containerd, once per node
DefaultDependencies=no
Requires=containerd.service
After=containerd.service

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/local/sbin/ksc-images-import

[Install]
WantedBy=multi-user.target
"""

# Baking: run once per Docker host in a throwaway container of the image (no systemd, no
# kind), then committed. containerd's overlayfs snapshotter cannot work on the container's own
# overlay root, so it imports into a volume first and the result is copied into the layer.
BAKE_SCRIPT = """\
#!/bin/sh
# Bake the node image: import /kind/images into containerd's store inside the image, so kind's
# nodes start with every image present (as kind's own node images do).
set -eu
containerd --root /ksc-bake/containerd >/ksc-bake/containerd.log 2>&1 &
pid=$!
i=0
until ctr version >/dev/null 2>&1; do
  i=$((i + 1)); [ $i -lt 300 ] || { cat /ksc-bake/containerd.log; exit 1; }; sleep 1
done
/usr/local/sbin/ksc-images-import
kill "$pid"; wait "$pid" || true
rm -rf /var/lib/containerd
cp -a /ksc-bake/containerd /var/lib/containerd
echo "ksc-bake: done"
"""

SYSCTLS = "net.ipv4.ip_forward = 1\nnet.bridge.bridge-nf-call-iptables = 1\nnet.bridge.bridge-nf-call-ip6tables = 1\n"

BRIDGE_CNI_SCRIPT = """\
#!/bin/sh
# ksc-bridge-cni: the pod network of the kube-swap-conformance kind node image. On every node
# the pods sit on a Linux bridge (ksc0) with addresses from the node's podCIDR; traffic to
# another node's pods is routed through that node's InternalIP (kind's nodes share one Docker
# network). Runs in a DaemonSet pod on every node (hostNetwork, privileged). No masquerading
# (as on the vm node): no pod of the suite reaches outside the cluster, and the bridge plugin's
# iptables chain per pod is added and removed with it, execs that are slow under emulation.
set -u
# The API server at the control plane's own address (kind adds CONTROL_PLANE_ENDPOINT to this
# DaemonSet, see cni_manifest), not through the kubernetes Service: that address works only
# once kube-proxy has programmed it, minutes under emulation, every one of them a NotReady node.
if [ -n "${CONTROL_PLANE_ENDPOINT:-}" ]; then
  export KUBERNETES_SERVICE_HOST="${CONTROL_PLANE_ENDPOINT%:*}" KUBERNETES_SERVICE_PORT="${CONTROL_PLANE_ENDPOINT##*:}"
fi
conf=/host/etc/cni/net.d/10-ksc-bridge.conflist
until cidr=$(kubectl get node "$NODE_NAME" -o jsonpath='{.spec.podCIDR}') && [ -n "$cidr" ]; do
  echo "ksc-bridge-cni: waiting for $NODE_NAME's podCIDR"
  sleep 3
done
cat > "$conf.tmp" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "ksc-bridge",
  "plugins": [
    {"type": "bridge", "bridge": "ksc0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "$cidr"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
mv "$conf.tmp" "$conf"
echo "ksc-bridge-cni: $NODE_NAME's pods on ksc0, $cidr"
while :; do
  kubectl get nodes --watch -o jsonpath='{.metadata.name} {.spec.podCIDR} {.status.addresses[?(@.type=="InternalIP")].address}{"\\n"}' |
  while read -r name cidr ip; do
    if [ "$name" != "$NODE_NAME" ] && [ -n "$cidr" ] && [ -n "$ip" ]; then
      ip route replace "$cidr" via "$ip" && echo "ksc-bridge-cni: $cidr via $ip ($name)"
    fi
  done
  sleep 5
done
"""

BUSYBOX_APPLETS = ("sh", "cat", "mv", "sleep", "ip", "echo")
IPTABLES_COMMANDS = ("iptables", "iptables-save", "iptables-restore", "ip6tables", "ip6tables-save",
                     "ip6tables-restore", "iptables-nft", "iptables-nft-save", "iptables-nft-restore",
                     "ip6tables-nft", "ip6tables-nft-save", "ip6tables-nft-restore")


def cni_manifest(image_ref: str) -> str:
    labels = {"app": "ksc-bridge-cni"}
    docs = [
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": {"name": "ksc-bridge-cni", "namespace": "kube-system"}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "ksc-bridge-cni"},
         "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "ksc-bridge-cni"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "ksc-bridge-cni"},
         "subjects": [{"kind": "ServiceAccount", "name": "ksc-bridge-cni", "namespace": "kube-system"}]},
        {"apiVersion": "apps/v1", "kind": "DaemonSet",
         "metadata": {"name": "ksc-bridge-cni", "namespace": "kube-system", "labels": labels},
         "spec": {"selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels}, "spec": {
             "hostNetwork": True,
             "priorityClassName": "system-node-critical",
             "serviceAccountName": "ksc-bridge-cni",
             "tolerations": [{"operator": "Exists"}],
             "containers": [{
                 "name": "ksc-bridge-cni",
                 "image": image_ref,
                 "imagePullPolicy": "Never",
                 "env": [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}],
                 "securityContext": {"privileged": True},
                 "resources": {"requests": {"cpu": "10m", "memory": "20Mi"}},
                 "volumeMounts": [{"name": "cni-conf", "mountPath": "/host/etc/cni/net.d"}],
             }],
             "volumes": [{"name": "cni-conf", "hostPath": {"path": "/etc/cni/net.d", "type": "DirectoryOrCreate"}}],
         }}}},
    ]
    # kind's marker for adding the control plane's address to the DaemonSet's first container
    # (installcni: env CONTROL_PLANE_ENDPOINT, as for kindnetd), which BRIDGE_CNI_SCRIPT uses.
    return "# would you kindly patch this file\n" + yaml.safe_dump_all(docs, sort_keys=False)


# The controller manager runs with enable-hostpath-provisioner (kind's kubeadm config).
STORAGE_MANIFEST = """\
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: standard
  annotations:
    storageclass.kubernetes.io/is-default-class: "true"
provisioner: kubernetes.io/host-path
"""

KUBEADM = "/usr/local/bin/kubeadm"
KUBEADM_SHIM = "/usr/local/sbin/kubeadm"  # before /usr/local/bin on the PATH kind's `docker exec` gets
KIND_KUBEADM_CONFIG = "/kind/kubeadm.conf"


def kubeadm_shim(real: str = KUBEADM, config: str = KIND_KUBEADM_CONFIG) -> str:
    """The kubeadm kind runs in this node image: for `kubeadm init|join` on a config kind wrote in
    v1beta3 (node images before 1.36) that points kubeadm at this image's patches (the
    emulated-host profile does, nothing else), the config is first migrated to v1beta4 by that
    kubeadm itself and given the profile's waits. Decision 0032: v1beta3 cannot set kubeadm's
    API-call budget, whose built-in 1 min starts with the kubelet, and an emulated control plane
    answers later than that. Anything else is the real kubeadm, untouched. The kubeadm documents
    are replaced; every other document (the KubeletConfiguration under test among them) is kept
    byte for byte."""
    waits = node.KUBEADM_TIMEOUTS
    edits = " ".join(f"-e 's/^  {key}: .*/  {key}: {value}/'" for key, value in waits.items())
    checks = "\n".join(f"  grep -q '^  {key}: {value}$' \"$new\" || fail 'no timeouts.{key} in the migrated config'"
                       for key, value in waits.items())
    return f"""#!/bin/sh
set -eu
real={real}
config={config}
fail() {{ echo "kubeadm shim: $*" >&2; exit 1; }}
case "${{1:-}}" in init|join) ;; *) exec "$real" "$@" ;; esac
if [ -f "$config" ] && grep -q '^apiVersion: kubeadm.k8s.io/v1beta3$' "$config" \\
    && grep -q '^  directory: {node.PATCHES_DIR}$' "$config"; then
  old="$config.v1beta3" new="$config.v1beta4"
  cp "$config" "$old"
  "$real" config migrate --old-config "$old" --new-config "$new" >&2
  sed -i {edits} "$new"
{checks}
  # the documents that are not kubeadm's, as kind wrote them
  awk 'function flush() {{ if (doc != "" && !kubeadm) printf "---\\n%s", doc; doc = ""; kubeadm = 0 }}
       /^---$/ {{ flush(); next }}
       /^apiVersion: kubeadm[.]k8s[.]io\\// {{ kubeadm = 1 }}
       {{ doc = doc $0 "\\n" }}
       END {{ flush() }}' "$old" >> "$new"
  mv "$new" "$config"
  echo "kubeadm shim: $config migrated to kubeadm.k8s.io/v1beta4 with the emulated profile's waits (was $old)" >&2
fi
exec "$real" "$@"
"""


# kind gives systemd 30 s to reach multi-user.target, measured from `docker run`; on a loaded
# host (tests running in another cluster) every unit on the way counts. So containerd is not
# wanted by the target (the kubelet wants it; the image import starts it early, off the
# critical path), and units a container has no use for are masked.
UNITS = guestfiles.Units(
    enable={"multi-user.target.wants": ("kubelet.service", "ksc-images.service")},
    executables=("usr/local/bin/entrypoint", "usr/local/sbin/ksc-kubelet-cgroups", "usr/local/sbin/ksc-images-import",
                 "usr/local/sbin/ksc-bake", KUBEADM_SHIM.lstrip("/")),
    dirs=("var/lib/kubelet", "etc/kubernetes/manifests", "etc/cni/net.d", "opt/cni/bin", "kind"),
    mask=("apt-daily.timer", "apt-daily-upgrade.timer", "systemd-binfmt.service", "getty@tty1.service",
          "console-getty.service", "systemd-networkd-wait-online.service",
          # the host's kernel: nothing to load, mount or check from a node container
          "systemd-modules-load.service", "kmod-static-nodes.service", "modprobe@.service", "systemd-remount-fs.service",
          "dev-hugepages.mount", "sys-kernel-debug.mount", "sys-kernel-tracing.mount", "sys-kernel-config.mount",
          "sys-fs-fuse-connections.mount", "e2scrub_reap.service", "e2scrub_all.timer",
          # no logins on a node container
          "systemd-logind.service", "systemd-user-sessions.service", "systemd-update-utmp.service",
          "systemd-update-utmp-runlevel.service"),
)


class NodeImageError(RuntimeError):
    pass


@dataclass(frozen=True)
class NodeImage:
    """``archive`` holds ``archive_ref`` (images not yet in containerd); ``ref`` is the baked
    image :func:`load_and_bake` makes of it on a Docker host: the one to give kind."""

    archive: Path
    ref: str
    k8s_version: str
    key: str

    @property
    def archive_ref(self) -> str:
        return self.ref + "-unbaked"


Docker = Callable[..., "subprocess.CompletedProcess[str]"]


def load_and_bake(image: NodeImage, docker: Docker, progress: Progress = print) -> dict[str, float]:
    """Make ``image.ref`` exist on the Docker host ``docker`` talks to; returns the timings.

    ``docker(*args, timeout=...)`` runs the docker CLI against that host."""
    timings: dict[str, float] = {}
    if docker("image", "inspect", image.ref, timeout=60).returncode == 0:
        progress(f"node image {image.ref} already on the Docker host")
        return timings
    if docker("image", "inspect", image.archive_ref, timeout=60).returncode != 0:
        t0 = time.monotonic()
        progress(f"loading {image.archive.name} ({image.archive.stat().st_size >> 20} MiB)")
        _check(docker("load", "-i", str(image.archive), timeout=3600), "docker load")
        timings["load"] = time.monotonic() - t0
        progress(f"loaded {image.archive_ref} in {timings['load']:.0f}s")
    t0 = time.monotonic()
    name = f"ksc-bake-{image.key[:12]}"
    docker("rm", "-f", "-v", name, timeout=120)
    progress("baking: importing the node's container images into its containerd store")
    try:
        # /tmp: a tmpfs of the bake container, as kind gives its nodes
        _check(docker("run", "--name", name, "--privileged", "--tmpfs", "/run", "--tmpfs", "/tmp",  # noqa: S108
                      "-v", "/ksc-bake",
                      "--entrypoint", "/usr/local/sbin/ksc-bake", image.archive_ref, timeout=3600), "baking")
        _check(docker("commit", "--change", 'ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]',
                      name, image.ref, timeout=3600), "docker commit")
    finally:
        docker("rm", "-f", "-v", name, timeout=300)
    docker("rmi", image.archive_ref, timeout=300)  # the baked image keeps its layers
    timings["bake"] = time.monotonic() - t0
    progress(f"baked {image.ref} in {timings['bake']:.0f}s")
    return timings


def _check(result: "subprocess.CompletedProcess[str]", what: str) -> None:
    if result.returncode != 0:
        tail = "\n".join((result.stderr or result.stdout).strip().splitlines()[-15:])
        raise NodeImageError(f"{what} failed (exit {result.returncode}):\n{tail}")


def node_files(pause_ref: str) -> dict[str, bytes]:
    """The node image's own text files (paths relative to /)."""
    t = {
        "usr/local/bin/entrypoint": ENTRYPOINT,
        "etc/containerd/config.toml": guestfiles.containerd_config(pause_ref),
        "etc/crictl.yaml": "runtime-endpoint: unix:///run/containerd/containerd.sock\n",
        "etc/systemd/system/containerd.service": guestfiles.containerd_unit(after=()),
        "etc/systemd/system/kubelet.service": KUBELET_UNIT,
        "etc/systemd/system/kubelet.service.d/10-kubeadm.conf": guestfiles.KUBELET_KUBEADM_DROPIN,
        "etc/systemd/system/kubelet.slice": KUBELET_SLICE,
        "etc/default/kubelet": "KUBELET_EXTRA_ARGS=--runtime-cgroups=/system.slice/containerd.service\n",
        "usr/local/sbin/ksc-kubelet-cgroups": KUBELET_CGROUPS_SCRIPT,
        "etc/systemd/system/ksc-images.service": IMAGES_UNIT,
        "usr/local/sbin/ksc-images-import": guestfiles.images_script(IMAGES_DIR),
        "usr/local/sbin/ksc-bake": BAKE_SCRIPT,
        KUBEADM_SHIM.lstrip("/"): kubeadm_shim(),
        "etc/sysctl.d/90-ksc.conf": SYSCTLS,
        "kind/manifests/default-storage.yaml": STORAGE_MANIFEST,
    }
    files = {k: v.encode() for k, v in t.items()}
    # The control plane's probe patches (kubeadm patches, as the vm node's), each on one Go thread,
    # and the scheduler's flag: only the emulated-host profile points kubeadm at them
    # (clusters/kind/profiles/emulated-host.yaml). The thread count is here as well as in the
    # profile's extraEnvs because kind writes kubeadm's v1beta3 for releases before 1.36, which has none.
    files.update({path.lstrip("/"): text for path, text in node.probe_patches(node.ONE_GO_THREAD).items()})
    files[SCHEDULER_PATCH.lstrip("/")] = json.dumps(NO_SCHEDULER_ELECTION).encode()
    return files


# Under emulation the scheduler's lease renewals miss their 5 s deadline and it exits
# ("Leaderelection lost"; seen on the kind host every few minutes, each restart relisting the
# cluster on an already saturated CPU). One control plane needs no election: the vm node turns
# it off in kubeadm's config, but a kind config cannot add one scheduler flag that survives
# feature gates (kind leaves scheduler.extraArgs empty without them, so a JSON 6902 append
# fails, and replacing the list drops them), so kubeadm gets it as a patch of the manifest.
SCHEDULER_PATCH = f"{node.PATCHES_DIR}/kube-scheduler+json.json"
NO_SCHEDULER_ELECTION = [{"op": "add", "path": "/spec/containers/0/command/-", "value": "--leader-elect=false"}]


def _sha(path: Path) -> str:
    return image._file_sha(path)  # noqa: SLF001 - the same remembered hashing as the vm disks


# Image labels a kind provider reads (docker image inspect) to know what a node image's build
# offers beyond its version: opt-in feature gates it turns on (KEP-5359 before 1.38) and a
# prototype's mark, which every report line then carries.
FEATURE_GATES_LABEL = "io.kube-swap-conformance.feature-gates"
BUILD_NOTE_LABEL = "io.kube-swap-conformance.build-note"


def build_labels(source: "str | KubernetesSource") -> dict[str, str]:
    if isinstance(source, str):
        return {}
    labels = {FEATURE_GATES_LABEL: ",".join(source.feature_gates), BUILD_NOTE_LABEL: source.prototype_note}
    return {k: v for k, v in labels.items() if v}


def build_node_image(k8s_version: "str | KubernetesSource" = versions.KUBERNETES, *, root: Path | None = None,
                     progress: Progress = print) -> NodeImage:
    """Build (or find cached) the node image archive for ``k8s_version`` (a release, or a
    KubernetesSource: patched release or local checkout, whose build id the image carries)."""
    root = root or cache_root()
    labels = build_labels(k8s_version)
    bins = _build.build_all(k8s_version, root=root, progress=progress)
    k8s_version = bins.k8s_version
    crictl = _build.crictl_component().build(root, progress)
    rootfs = image.build_rootfs(RECIPE, root=root, progress=progress)
    refs = node.kubeadm_images(bins.kubernetes / "kubeadm", k8s_version)
    coredns = _coredns_binary(refs.get("coredns"), root, progress)

    oci_dir = root / "vm" / "oci" / k8s_version
    control_plane = node.write_control_plane_images(oci_dir, refs, {
        "kube-apiserver": bins.kubernetes / "kube-apiserver",
        "kube-controller-manager": bins.kubernetes / "kube-controller-manager",
        "kube-scheduler": bins.kubernetes / "kube-scheduler",
        "etcd": bins.etcd / "etcd",
    })
    from workloads.image import build as wbuild

    pause = wbuild.build_pause_image(oci_dir, refs["pause"])
    pause_archive = Path(pause[0] if isinstance(pause, tuple) else pause)

    files: dict[str, Path | bytes] = {}
    for guest, host in bins.all_files().items():
        if guest != "usr/local/bin/etcd":  # etcd runs from its image, not the node
            files[guest] = host
    files["usr/local/bin/crictl"] = crictl / "crictl"
    files.update(node_files(refs["pause"]))
    files["kind/version"] = (k8s_version + "\n").encode()
    for name, archive in control_plane.items():
        files[f"kind/images/{name}.tar"] = archive
    files["kind/images/pause.tar"] = pause_archive

    # Parts derived from the rootfs and our scripts: the key covers their inputs.
    inputs: dict[str, str] = {dest: (hashlib.sha256(src).hexdigest() if isinstance(src, bytes) else _sha(src))
                              for dest, src in sorted(files.items())}
    inputs["rootfs"] = rootfs.name
    inputs["units"] = UNITS.key()
    inputs["bridge-cni"] = hashlib.sha256(BRIDGE_CNI_SCRIPT.encode()).hexdigest()
    inputs["kube-proxy"] = _sha(bins.kubernetes / "kube-proxy")
    inputs["kubectl"] = _sha(bins.kubernetes / "kubectl")
    inputs["coredns"] = _sha(coredns) if coredns else "none"
    inputs["labels"] = json.dumps(labels, sort_keys=True)
    key = image._digest({"v": RECIPE_VERSION, "inputs": inputs})  # noqa: SLF001
    ref = f"{REPOSITORY}:{k8s_version.replace('+', '_')}-{key[:12]}"  # no '+' in a tag: v1.37.1_patch.…
    out = root / "vm" / "kind-node" / key
    result = NodeImage(out / "node-image.tar", ref, k8s_version, key)
    if (out / ".complete").exists():
        progress(f"node image: {ref} cached ({result.archive})")
        return result
    with cache_lock(root, f"kind-node-{key}", progress):
        if (out / ".complete").exists():
            return result
        lack = diskspace.problem(root, diskspace.MIN_FREE_FOR_BUILD_BYTES)
        if lack:
            raise NodeImageError(f"not assembling the node image {ref}: {'; '.join(lack)}")
        t0 = time.monotonic()
        progress(f"node image: assembling {ref}")
        tmp = out.with_name(key + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        parts = tmp / "parts"
        bridge_ref = f"{BRIDGE_CNI_REPOSITORY}:{key[:12]}"
        extra = {
            "kind/images/kube-proxy.tar": _kube_proxy_image(parts, refs["kube-proxy"], bins.kubernetes / "kube-proxy",
                                                            rootfs),
            "kind/images/bridge-cni.tar": _bridge_cni_image(parts, bridge_ref, bins.kubernetes / "kubectl", rootfs),
        }
        if coredns:
            extra["kind/images/coredns.tar"] = _coredns_image(parts, refs["coredns"], coredns)
        files.update(extra)
        files["kind/manifests/default-cni.yaml"] = cni_manifest(bridge_ref).encode()
        stage = tmp / "rootfs"
        _assemble_tree(rootfs, stage, files, tmp / "assemble.log")
        from workloads.image.oci import write_tree_image_archive

        progress("node image: writing the archive")
        write_tree_image_archive(tmp / "node-image.tar", result.archive_ref, stage,
                                 entrypoint=["/usr/local/bin/entrypoint", "/sbin/init"], env={"container": "docker"},
                                 stop_signal="SIGRTMIN+3", labels=labels)
        shutil.rmtree(stage)
        shutil.rmtree(parts)
        size = (tmp / "node-image.tar").stat().st_size
        (tmp / ".complete").write_text(json.dumps({"ref": ref, "seconds": round(time.monotonic() - t0),
                                                   "bytes": size}) + "\n")
        shutil.rmtree(out, ignore_errors=True)
        tmp.rename(out)
        image._prune(out.parent, keep=2)  # noqa: SLF001 - each archive is 1.4 GiB
        progress(f"node image: {ref} built in {time.monotonic() - t0:.0f}s ({size >> 20} MiB)")
    return result


def _assemble_tree(rootfs: Path, stage: Path, files: dict[str, Path | bytes], log: Path) -> None:
    image._run(["cp", "-a", "--reflink=auto", f"{rootfs}/.", str(stage)], log, "copy rootfs")  # noqa: SLF001
    (stage / ".complete").unlink(missing_ok=True)
    for dest, src in files.items():
        p = stage / dest
        p.parent.mkdir(parents=True, exist_ok=True)
        if p.exists() or p.is_symlink():
            p.unlink()
        if isinstance(src, bytes):
            p.write_bytes(src)
            p.chmod(0o755 if "/bin/" in "/" + dest or "/sbin/" in "/" + dest else 0o644)
        else:
            shutil.copy2(src, p)
    guestfiles.finalize_rootfs(stage, UNITS, guest_agent=False)


def _tree_image(parts: Path, name: str, ref: str, tree: Path, **config: object) -> Path:
    from workloads.image.oci import write_tree_image_archive

    archive = parts / f"{name}.tar"
    write_tree_image_archive(archive, ref, tree, **config)  # type: ignore[arg-type]
    shutil.rmtree(tree)
    return archive


def _bridge_cni_image(parts: Path, ref: str, kubectl: Path, rootfs: Path) -> Path:
    tree = parts / "bridge-cni"
    (tree / "bin").mkdir(parents=True)
    shutil.copy2(rootfs / "bin" / "busybox", tree / "bin" / "busybox")
    for applet in BUSYBOX_APPLETS:
        os.symlink("busybox", tree / "bin" / applet)
    (tree / "usr/local/bin").mkdir(parents=True)
    shutil.copy2(kubectl, tree / "usr/local/bin" / "kubectl")
    (tree / "ksc-bridge-cni").write_text(BRIDGE_CNI_SCRIPT)
    (tree / "tmp").mkdir(mode=0o1777)
    return _tree_image(parts, "bridge-cni", ref, tree, entrypoint=["/bin/sh", "/ksc-bridge-cni"])


def _elf_closure(rootfs: Path, paths: list[str]) -> set[str]:
    """Every shared library the rootfs programs at ``paths`` load, as paths inside the rootfs."""
    libs: set[str] = set()
    for path in paths:
        out = subprocess.run(["chroot", str(rootfs), "ldd", path], capture_output=True, text=True)
        if out.returncode != 0:
            raise NodeImageError(f"ldd {path} in {rootfs} failed: {out.stderr.strip()}")
        for line in out.stdout.splitlines():
            fields = line.split()
            if "=>" in fields and len(fields) > fields.index("=>") + 1 and fields[fields.index("=>") + 1].startswith("/"):
                libs.add(fields[fields.index("=>") + 1])
            elif fields and fields[0].startswith("/"):
                libs.add(fields[0])  # the program interpreter
    return libs


def _kube_proxy_image(parts: Path, ref: str, kube_proxy: Path, rootfs: Path) -> Path:
    """kube-proxy plus Debian's iptables (nft backend) and exactly the libraries it loads."""
    tree = parts / "kube-proxy"
    (tree / "usr/local/bin").mkdir(parents=True)
    shutil.copy2(kube_proxy, tree / "usr/local/bin" / "kube-proxy")
    multi = "/usr/sbin/xtables-nft-multi"
    xt_dir = "/usr/lib/x86_64-linux-gnu/xtables"
    extensions = sorted(str(Path(xt_dir) / p.name) for p in (rootfs / xt_dir.lstrip("/")).glob("*.so"))
    for path in [multi, *extensions, *_elf_closure(rootfs, [multi, *extensions])]:
        real = (rootfs / path.lstrip("/")).resolve()
        # merged /usr: keep every file under usr/, reached through the lib -> usr/lib links
        rel = path.lstrip("/")
        if rel.startswith(("lib/", "lib64/")):
            rel = "usr/" + rel
        dest = tree / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(real, dest)
    for top in ("lib", "lib64"):
        if (tree / "usr" / top).exists():
            os.symlink(f"usr/{top}", tree / top)
    for command in IPTABLES_COMMANDS:
        os.symlink("xtables-nft-multi", tree / "usr/sbin" / command)
    for d in ("tmp", "run", "var/lib/kube-proxy"):
        (tree / d).mkdir(parents=True, exist_ok=True)
    (tree / "tmp").chmod(0o1777)
    return _tree_image(parts, "kube-proxy", ref, tree, entrypoint=["/usr/local/bin/kube-proxy"])


def coredns_component(version: str) -> _build.Component:
    mod = "github.com/coredns/coredns"
    return _build.Component(
        name="coredns",
        version=version,
        binaries=("coredns",),
        files={"go.mod": f"module ksc.local/coredns-build\n\ngo 1.26\n\nrequire {mod} {version}\n"},
        targets=(("coredns", mod),),
    )


def _coredns_binary(ref: str | None, root: Path, progress: Progress) -> Path | None:
    """CoreDNS at the version kubeadm deploys, if the proxy serves it; None (and why) if not."""
    if not ref:
        return None
    version = ref.rsplit(":", 1)[-1]
    if not versions.module_zip_served("github.com/coredns/coredns", version):
        progress(f"node image: CoreDNS {version} is not on the Go proxy: the image has no CoreDNS"
                 " (its pods stay in ImagePullBackOff; nothing in the suite needs cluster DNS)")
        return None
    return coredns_component(version).build(root, progress) / "coredns"


def _coredns_image(parts: Path, ref: str, binary: Path) -> Path:
    tree = parts / "coredns"
    tree.mkdir(parents=True)
    shutil.copy2(binary, tree / "coredns")
    (tree / "tmp").mkdir(mode=0o1777)
    return _tree_image(parts, "coredns", ref, tree, entrypoint=["/coredns"])
