"""The kind cluster configs: the static file of each swap behavior (usable by hand), and the one
cluster the suite creates, a control plane and one worker per behavior, rendered from them."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from clusters.behaviors import normalize

CONFIG_DIR = Path(__file__).resolve().parent / "kind"
CLUSTER_PREFIX = "ksc-"
# The suite's one cluster: a mixed node pool, as operators run them (KEP-5359 discusses
# LimitedSwap and WorkloadControlledSwap nodes side by side).
MIXED_CLUSTER = CLUSTER_PREFIX + "mixed"
# On each worker: the swapBehavior its kubelet is to run (the provider confirms it by /configz).
BEHAVIOR_LABEL = "kube-swap-conformance/swap-behavior"

# NodeSwap went GA and was locked in 1.34: setting the gate there stops the kubelet
# ("cannot set feature gate NodeSwap to true, feature is locked to true"). Before 1.34 it must
# be on (beta, default on since 1.30; default off in 1.28-1.29). The suite refuses node images
# older than clusters/versions.py's supported range, which starts at 1.34, so for an image it
# accepts the gate is never added; the rule stays for the day an older minor is supported again.
NODE_SWAP_GATE_LOCKED_SINCE = (1, 34)

_VERSION = re.compile(r"v?(\d+)\.(\d+)(?:\.(\d+))?(?:[-+][0-9A-Za-z.-]+)?")


def cluster_name(behavior: str) -> str:
    """The fixed name of the cluster the suite creates for a behavior, e.g. ksc-limitedswap."""
    return CLUSTER_PREFIX + normalize(behavior).lower()


def config_path(behavior: str) -> Path:
    return CONFIG_DIR / f"{normalize(behavior)}.yaml"


def load(behavior: str) -> dict[str, Any]:
    return yaml.safe_load(config_path(behavior).read_text())


def image_version(node_image: str | None) -> tuple[int, int, int] | None:
    """The Kubernetes version in a kindest/node-style image tag, e.g. kindest/node:v1.33.1@sha256:...
    (a suffix such as the local node image's ``v1.37.1-<content key>`` is allowed)."""
    if not node_image:
        return None
    tag = node_image.split("@", 1)[0].rsplit("/", 1)[-1]
    if ":" not in tag:
        return None
    match = _VERSION.fullmatch(tag.split(":", 1)[1])
    if not match:
        return None
    return int(match.group(1)), int(match.group(2)), int(match.group(3) or 0)


def needs_node_swap_gate(version: tuple[int, ...] | None) -> bool:
    """Unknown versions are taken to be current kind defaults (>= 1.34): no gate."""
    return version is not None and tuple(version[:2]) < NODE_SWAP_GATE_LOCKED_SINCE


PROFILES_DIR = CONFIG_DIR / "profiles"
# What the suite tests: a host profile may set anything else, never these.
_PROTECTED_KINDS = ("KubeletConfiguration",)


class ConfigPatchError(ValueError):
    pass


def load_patch(path: Path, what: str = "kind config patch") -> dict[str, Any]:
    """A host profile (kind config fragment) to append to every cluster's config, checked: a
    readable UTF-8 YAML file (clusters/inputs.py) whose fields are kind's patch lists, each of the
    type kind takes, none touching the kubelet's configuration. ``what`` names where the path
    came from (the option, or the variable that is its default)."""
    from clusters import inputs

    fix = "pass a kind config fragment of kubeadmConfigPatches/containerdConfigPatches, e.g." \
          " clusters/kind/profiles/emulated-host.yaml"
    try:
        patch = inputs.load_yaml(path, what, inputs.KindConfigPatch, fix)
    except inputs.UsageError as error:
        raise ConfigPatchError(str(error)) from None
    texts = list(patch.kubeadmConfigPatches) + [p.kind for p in patch.kubeadmConfigPatchesJSON6902]
    for kind in _PROTECTED_KINDS:
        if any(kind in text for text in texts):
            raise ConfigPatchError(f"{what} {path} touches the {kind}: the swap settings under"
                                   " test come from the committed per-behavior configs only")
    return patch.model_dump(exclude_unset=True)


def render(behavior: str, node_image: str | None = None, api_server_port: int | None = None,
           patch: dict[str, Any] | None = None) -> dict[str, Any]:
    """The config to hand kind: the static file for the behavior, adapted to the node image, to
    the port forwarded for this cluster's API server when the Docker host is another machine,
    and with a host profile's patches (see :func:`load_patch`) appended."""
    config = load(behavior)
    config["name"] = cluster_name(behavior)
    if needs_node_swap_gate(image_version(node_image)):
        config.setdefault("featureGates", {})["NodeSwap"] = True
    if api_server_port is not None:
        config.setdefault("networking", {})["apiServerPort"] = api_server_port
    for key, items in (patch or {}).items():
        config[key] = list(config.get(key) or []) + list(items)
    return config


def kubelet_configuration(behavior: str) -> dict[str, Any]:
    """The KubeletConfiguration patch in the behavior's kind config (also used by the vm provider)."""
    for patch in load(behavior).get("kubeadmConfigPatches") or []:
        document = yaml.safe_load(patch)
        if isinstance(document, dict) and document.get("kind") == "KubeletConfiguration":
            return document
    raise LookupError(f"{config_path(behavior)} has no KubeletConfiguration patch")


def control_plane_behavior(behaviors: list[str]) -> str:
    """The mixed cluster's cluster-wide kubelet behavior, so its control plane's: LimitedSwap
    where selected (the static pods' "no swap for critical pods" then means something), else
    the first behavior. The control plane is that behavior's node under test; workers of the
    others are switched after creation."""
    from clusters.behaviors import LIMITED_SWAP

    return LIMITED_SWAP if LIMITED_SWAP in behaviors else behaviors[0]


# The control plane takes test pods too (a node under test, as the vm provider's single node
# is): kubeadm leaves it untainted. Test pods are bound to their node by name.
UNTAINTED_CONTROL_PLANE = "kind: InitConfiguration\nnodeRegistration:\n  taints: []\n"


def render_mixed(behaviors: list[str], node_image: str | None = None, api_server_port: int | None = None,
                 patch: dict[str, Any] | None = None) -> dict[str, Any]:
    """The suite's one cluster: an untainted control plane running control_plane_behavior and a
    worker for each other behavior, every node labeled with its behavior (BEHAVIOR_LABEL).

    kubeadm gives every node the first node's KubeletConfiguration (kind#3849: a joining node
    downloads the cluster's), so the cluster-wide patch is control_plane_behavior's file's, and
    the provider switches each worker's kubelet to its behavior through the node container,
    confirmed by /configz, before any test. Two nodes for NoSwap and LimitedSwap, as the
    one-behavior clusters had: a control plane and a worker per behavior (three nodes) did not
    get Ready on the emulated kind host. Feature gates are the union of the behaviors' files
    (kind hands them to every component: the API server must accept limits.swap on every node
    once one runs WorkloadControlledSwap)."""
    behaviors = [normalize(b) for b in behaviors]
    first = control_plane_behavior(behaviors)
    config = render(first, node_image, api_server_port, patch)
    config["name"] = MIXED_CLUSTER
    config["nodes"] = [{"role": "control-plane", "labels": {BEHAVIOR_LABEL: first}}] + [
        {"role": "worker", "labels": {BEHAVIOR_LABEL: b}} for b in behaviors if b != first]
    if len(config["nodes"]) > 1:
        # Alone, the control plane is untainted by kind itself, whose `kubectl taint ...-` then
        # fails the creation if the taint is already gone ("taint ... not found", seen).
        config["kubeadmConfigPatches"] = list(config.get("kubeadmConfigPatches") or []) + [UNTAINTED_CONTROL_PLANE]
    gates = dict(config.get("featureGates") or {})
    for behavior in behaviors:
        gates.update(load(behavior).get("featureGates") or {})
    if gates:
        config["featureGates"] = gates
    return config
