"""The kind cluster config for a swap behavior: the static file, plus what a node version needs."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from clusters.behaviors import normalize

CONFIG_DIR = Path(__file__).resolve().parent / "kind"
CLUSTER_PREFIX = "ksc-"

# NodeSwap went GA and was locked in 1.34: setting the gate there stops the kubelet
# ("cannot set feature gate NodeSwap to true, feature is locked to true"). Before 1.34 it must
# be on (beta, default on since 1.30; default off in 1.28-1.29).
NODE_SWAP_GATE_LOCKED_SINCE = (1, 34)

_VERSION = re.compile(r"v?(\d+)\.(\d+)(?:\.(\d+))?")


def cluster_name(behavior: str) -> str:
    """The fixed name of the cluster the suite creates for a behavior, e.g. ksc-limitedswap."""
    return CLUSTER_PREFIX + normalize(behavior).lower()


def config_path(behavior: str) -> Path:
    return CONFIG_DIR / f"{normalize(behavior)}.yaml"


def load(behavior: str) -> dict[str, Any]:
    return yaml.safe_load(config_path(behavior).read_text())


def image_version(node_image: str | None) -> tuple[int, int, int] | None:
    """The Kubernetes version in a kindest/node-style image tag, e.g. kindest/node:v1.33.1@sha256:..."""
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


def render(behavior: str, node_image: str | None = None) -> dict[str, Any]:
    """The config to hand kind: the static file for the behavior, adapted to the node image."""
    config = load(behavior)
    config["name"] = cluster_name(behavior)
    if needs_node_swap_gate(image_version(node_image)):
        config.setdefault("featureGates", {})["NodeSwap"] = True
    return config


def kubelet_configuration(behavior: str) -> dict[str, Any]:
    """The KubeletConfiguration patch in the behavior's kind config (also used by the vm provider)."""
    for patch in load(behavior).get("kubeadmConfigPatches") or []:
        document = yaml.safe_load(patch)
        if isinstance(document, dict) and document.get("kind") == "KubeletConfiguration":
            return document
    raise LookupError(f"{config_path(behavior)} has no KubeletConfiguration patch")
