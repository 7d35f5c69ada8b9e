"""What the node runs: control-plane images, the kubeadm config, the kubelet configuration.

* Control-plane images are built locally: each is the static binary at
  ``/usr/local/bin/<name>`` under exactly the name ``kubeadm config images list`` prints, so
  kubeadm's static pods start without a registry.
* The kubeadm config (v1beta4) merges the KubeletConfiguration document from the kind config
  ``clusters/kind/<Behavior>.yaml`` when it exists, so the same patch is proven on a real
  kubelet here.
"""
from __future__ import annotations

import copy
import subprocess
from pathlib import Path
from collections.abc import Sequence
from typing import Any, Callable

import yaml

from clusters.behaviors import WORKLOAD_CONTROLLED_SWAP

from .guestfiles import GUEST_IP, NODE_NAME, POD_SUBNET, SERVICE_SUBNET

Progress = Callable[[str], None]

REPO_ROOT = Path(__file__).resolve().parents[2]
KIND_CONFIG_DIR = REPO_ROOT / "clusters" / "kind"
PATCHES_DIR = "/etc/kubernetes/ksc-patches"
KUBEADM_CONFIG_PATH = "/etc/kubernetes/ksc-kubeadm.yaml"

# Everything that emulation or an offline node trips over; images are preloaded so pulls
# never happen (ImagePull: kubeadm still lists CoreDNS, whose addon phase is skipped).
IGNORE_PREFLIGHT = ["NumCPU", "Mem", "Swap", "ImagePull", "SystemVerification", "FileExisting-crictl",
                    "Port-10250", "KubeletVersion"]

# TCG emulation is ~10x slower: give static pods room before the kubelet kills them. And probe
# readiness every 10 s, not kubeadm's every 1 s: each probe of the API server and the scheduler
# is a new TLS handshake, and on an idle emulated kind cluster the three readiness probes took
# about 0.13 of its 2 vCPUs (an idle node: 1.035 vCPU, 0.905 with these periods). Readiness of a static
# pod gates nothing here (no Service selects them; kubeadm waits on the health endpoints).
PROBE_PATCH = {
    "kube-apiserver": {"startupProbe": {"failureThreshold": 180, "timeoutSeconds": 60},
                       "livenessProbe": {"failureThreshold": 30, "timeoutSeconds": 60},
                       "readinessProbe": {"timeoutSeconds": 60, "periodSeconds": 10}},
    "etcd": {"startupProbe": {"failureThreshold": 180, "timeoutSeconds": 60},
             "livenessProbe": {"failureThreshold": 30, "timeoutSeconds": 60},
             "readinessProbe": {"periodSeconds": 10}},
    "kube-controller-manager": {"startupProbe": {"failureThreshold": 180, "timeoutSeconds": 60},
                                "livenessProbe": {"failureThreshold": 30, "timeoutSeconds": 60}},
    "kube-scheduler": {"startupProbe": {"failureThreshold": 180, "timeoutSeconds": 60},
                       "livenessProbe": {"failureThreshold": 30, "timeoutSeconds": 60},
                       "readinessProbe": {"periodSeconds": 10}},
}


# Under emulation the control plane's Go runtimes run on one thread (decision 0023): on 2 emulated
# vCPUs their schedulers' spinning was much of what an idle API server did.
ONE_GO_THREAD = {"GOMAXPROCS": "1"}

# kubeadm's waits (v1beta4 timeouts) on a node whose control plane may be emulated; the kind
# node image's kubeadm shim gives kind's v1beta3 configs the same (clusters/vm/nodeimage.py).
KUBEADM_TIMEOUTS = {
    "controlPlaneComponentHealthCheck": "40m0s",
    "kubeletHealthCheck": "20m0s",
    # an emulated node's API server on a slow host first answered after 9-10 minutes
    "kubernetesAPICall": "30m0s",
    "etcdAPICall": "10m0s",
    "tlsBootstrap": "20m0s",
    "discovery": "20m0s",
}


def kubeadm_images(kubeadm: Path, k8s_version: str) -> dict[str, str]:
    """Component name (kube-apiserver, etcd, pause, ...) -> image ref kubeadm expects."""
    out = subprocess.run([str(kubeadm), "config", "images", "list", "--kubernetes-version", k8s_version],
                         capture_output=True, text=True, check=True).stdout.split()
    refs: dict[str, str] = {}
    for ref in out:
        name = ref.rsplit("/", 1)[-1].split(":", 1)[0]
        refs[name] = ref
    return refs


def write_control_plane_images(out_dir: Path, refs: dict[str, str], binaries: dict[str, Path]) -> dict[str, Path]:
    """One image archive per control-plane component (binary at /usr/local/bin/<name>)."""
    from workloads.image.oci import write_image_archive

    out_dir.mkdir(parents=True, exist_ok=True)
    archives: dict[str, Path] = {}
    for name in ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "etcd"):
        ref = refs[name]
        archive = out_dir / (ref.replace("/", "_").replace(":", "_") + ".tar")
        if not archive.exists():
            write_image_archive(archive, ref, {f"/usr/local/bin/{name}": binaries[name]},
                                entrypoint=[f"/usr/local/bin/{name}"])
        archives[name] = archive
    return archives


def kind_kubelet_patch(behavior: str) -> dict[str, Any] | None:
    """The KubeletConfiguration document from clusters/kind/<behavior>.yaml, if any."""
    path = KIND_CONFIG_DIR / f"{behavior}.yaml"
    if not path.exists():
        return None
    cfg = yaml.safe_load(path.read_text()) or {}
    for patch in cfg.get("kubeadmConfigPatches", []) or []:
        for doc in yaml.safe_load_all(patch):
            if isinstance(doc, dict) and doc.get("kind") == "KubeletConfiguration":
                return doc
    return None


def _merge(base: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for k, v in patch.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def kubelet_configuration(behavior: str, k8s_version: str) -> tuple[dict[str, Any], str]:
    """KubeletConfiguration for the behavior; second value says where the swap settings came from."""
    base: dict[str, Any] = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "cgroupDriver": "systemd",
        "failSwapOn": False,
        "memorySwap": {"swapBehavior": behavior},
        # emulated node: be patient with the runtime
        "runtimeRequestTimeout": "10m",
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
    }
    minor = int(k8s_version.split(".")[1])
    patch = kind_kubelet_patch(behavior)
    source = "built-in"
    if patch is not None:
        patch = {k: v for k, v in patch.items() if k not in ("apiVersion",)}
        patch.setdefault("apiVersion", "kubelet.config.k8s.io/v1beta1")
        base = _merge(base, patch)
        source = f"clusters/kind/{behavior}.yaml"
    if minor < 34:  # unreachable while SUPPORTED starts at 1.34 (older releases are refused); kept for a build
        base.setdefault("featureGates", {})["NodeSwap"] = True  # of an older minor, where the gate must be on
    base["cgroupDriver"] = "systemd"  # must match containerd's SystemdCgroup=true
    return base, source


def feature_gates_for(behavior: str, build_gates: Sequence[str] = ()) -> dict[str, bool]:
    """The gates a node turns on: the build's own (a prototype patch's ``# feature-gates:``, or
    what a checkout defines) on every behavior, so that its API server accepts the new fields
    whatever the kubelet runs (the vm node switches behavior in place); and the behavior's own
    gate (WorkloadControlledSwap) whatever the build says."""
    gates = dict.fromkeys(build_gates, True)
    if behavior == WORKLOAD_CONTROLLED_SWAP:
        gates[WORKLOAD_CONTROLLED_SWAP] = True
    return gates


def kubeadm_config(k8s_version: str, behavior: str, build_gates: Sequence[str] = (),
                   emulated: bool = False) -> tuple[str, str]:
    """``emulated`` (QEMU under TCG, decision 0023): the control plane lightened as the kind
    emulated-host profile has it (ECDSA P-256 keys; the API server, controller manager, scheduler
    and etcd on one Go thread each) and the API server without priority and fairness. The
    kubelet, the node under test, is the same document either way."""
    kubelet, source = kubelet_configuration(behavior, k8s_version)
    gates = feature_gates_for(behavior, build_gates)
    if gates:
        kubelet.setdefault("featureGates", {}).update(gates)
    init = {
        "apiVersion": "kubeadm.k8s.io/v1beta4",
        "kind": "InitConfiguration",
        "localAPIEndpoint": {"advertiseAddress": GUEST_IP, "bindPort": 6443},
        "nodeRegistration": {
            "name": NODE_NAME,
            "criSocket": "unix:///run/containerd/containerd.sock",
            "taints": [],  # single node: test pods must schedule on the control plane
            "ignorePreflightErrors": IGNORE_PREFLIGHT,
            "imagePullPolicy": "Never",
            "kubeletExtraArgs": [{"name": "node-ip", "value": GUEST_IP}],
        },
        "skipPhases": ["addon/coredns", "addon/kube-proxy"],
        "patches": {"directory": PATCHES_DIR},
        "timeouts": dict(KUBEADM_TIMEOUTS),
    }
    cluster = {
        "apiVersion": "kubeadm.k8s.io/v1beta4",
        "kind": "ClusterConfiguration",
        "kubernetesVersion": k8s_version,
        "clusterName": "ksc",
        "networking": {"podSubnet": POD_SUBNET, "serviceSubnet": SERVICE_SUBNET},
        "apiServer": {"certSANs": ["127.0.0.1", "localhost", GUEST_IP, NODE_NAME]},
        # one node: no leader election, whose lease renewals time out under emulation and
        # restart the components
        "controllerManager": {"extraArgs": [{"name": "leader-elect", "value": "false"}]},
        "scheduler": {"extraArgs": [{"name": "leader-elect", "value": "false"}]},
    }
    if emulated:
        cluster["encryptionAlgorithm"] = "ECDSA-P256"
        one_thread = [{"name": k, "value": v} for k, v in ONE_GO_THREAD.items()]
        for component in ("apiServer", "controllerManager", "scheduler"):
            cluster[component]["extraEnvs"] = list(one_thread)
        cluster["etcd"] = {"local": {"extraEnvs": list(one_thread)}}
        # priority and fairness shares the API server among tenants; one node's components and
        # one suite have none to share it with, and its bootstrap objects are start-up work
        cluster["apiServer"].setdefault("extraArgs", []).append({"name": "enable-priority-and-fairness", "value": "false"})
    if gates:  # as kind's featureGates: every control-plane component (the API server validates the field)
        flag = {"name": "feature-gates", "value": ",".join(f"{g}={str(on).lower()}" for g, on in gates.items())}
        for component in ("apiServer", "controllerManager", "scheduler"):
            cluster[component].setdefault("extraArgs", []).append(dict(flag))
    text = yaml.safe_dump_all([init, cluster, kubelet], sort_keys=False)
    return text, source


def probe_patches(env: dict[str, str] | None = None) -> dict[str, bytes]:
    """kubeadm patch files (strategic merge) for the static pods' probes; with ``env``, each
    control-plane container's environment too (the kind node image's, for kubeadm configs older
    than v1beta4, which have no extraEnvs)."""
    files = {}
    for name, probes in PROBE_PATCH.items():
        container: dict = {"name": name, **probes}
        if env:
            container["env"] = [{"name": k, "value": v} for k, v in env.items()]
        files[f"{PATCHES_DIR}/{name}+strategic.yaml"] = yaml.safe_dump({"spec": {"containers": [container]}}).encode()
    return files
