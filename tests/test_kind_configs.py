"""The kind configs: the fields each behavior needs, the NodeSwap gate rule, and kind's own
validation with the real binary (strict decoding, roles, feature gates)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from clusters import kind_config
from clusters.behaviors import ALL_BEHAVIORS, LIMITED_SWAP, NO_SWAP, WORKLOAD_CONTROLLED_SWAP


@pytest.mark.parametrize("behavior", ALL_BEHAVIORS)
def test_static_config_fields(behavior: str) -> None:
    config = yaml.safe_load(kind_config.config_path(behavior).read_text())
    assert config["kind"] == "Cluster" and config["apiVersion"] == "kind.x-k8s.io/v1alpha4"
    roles = [n["role"] for n in config["nodes"]]
    assert roles.count("control-plane") == 1 and roles.count("worker") >= 1
    kubelet = kind_config.kubelet_configuration(behavior)
    assert kubelet["failSwapOn"] is False  # explicit, not left to kind's default
    assert kubelet["memorySwap"]["swapBehavior"] == behavior
    gates = config.get("featureGates") or {}
    assert "NodeSwap" not in gates  # locked since 1.34: the static files are for current images
    if behavior == WORKLOAD_CONTROLLED_SWAP:
        assert gates == {"WorkloadControlledSwap": True}
        assert "KEP-5359" in kind_config.config_path(behavior).read_text()
    else:
        assert gates == {}


def test_cluster_names_are_exact_and_distinct() -> None:
    names = [kind_config.cluster_name(b) for b in ALL_BEHAVIORS]
    assert names == ["ksc-noswap", "ksc-limitedswap", "ksc-workloadcontrolledswap"]
    assert kind_config.cluster_name("") == "ksc-noswap"


@pytest.mark.parametrize(
    ("image", "version"),
    [
        ("kindest/node:v1.33.1", (1, 33, 1)),
        ("kindest/node:v1.36.1@sha256:0123abcd", (1, 36, 1)),
        ("registry.local:5000/kindest/node:v1.29.0", (1, 29, 0)),
        ("my/node:latest", None),
        (None, None),
    ],
)
def test_image_version(image: str | None, version: tuple | None) -> None:
    assert kind_config.image_version(image) == version


@pytest.mark.parametrize(
    ("image", "gate"),
    [("kindest/node:v1.28.0", True), ("kindest/node:v1.33.9", True), ("kindest/node:v1.34.0", False),
     ("kindest/node:v1.36.1", False), (None, False), ("custom:latest", False)],
)
def test_node_swap_gate_only_before_1_34(image: str | None, gate: bool) -> None:
    rendered = kind_config.render(LIMITED_SWAP, image)
    assert ("NodeSwap" in (rendered.get("featureGates") or {})) is gate
    if gate:
        assert rendered["featureGates"]["NodeSwap"] is True


def test_render_keeps_behavior_gate_and_adds_node_swap() -> None:
    rendered = kind_config.render(WORKLOAD_CONTROLLED_SWAP, "kindest/node:v1.33.0")
    assert rendered["featureGates"] == {"WorkloadControlledSwap": True, "NodeSwap": True}
    assert kind_config.render(NO_SWAP)["name"] == "ksc-noswap"


def test_the_mixed_cluster_has_a_labeled_node_per_behavior_and_the_union_of_their_gates() -> None:
    rendered = kind_config.render_mixed([NO_SWAP, LIMITED_SWAP, WORKLOAD_CONTROLLED_SWAP], "kindest/node:v1.38.0", 40001)
    assert rendered["name"] == kind_config.MIXED_CLUSTER == "ksc-mixed"
    assert rendered["nodes"] == [
        {"role": "control-plane", "labels": {kind_config.BEHAVIOR_LABEL: LIMITED_SWAP}},
        {"role": "worker", "labels": {kind_config.BEHAVIOR_LABEL: NO_SWAP}},
        {"role": "worker", "labels": {kind_config.BEHAVIOR_LABEL: WORKLOAD_CONTROLLED_SWAP}},
    ]
    # cluster-wide (so the control plane's): LimitedSwap's committed KubeletConfiguration; the
    # control plane untainted (it is LimitedSwap's node under test)
    patches = rendered["kubeadmConfigPatches"]
    assert patches[:-1] == kind_config.load(LIMITED_SWAP)["kubeadmConfigPatches"]
    assert yaml.safe_load(patches[-1]) == {"kind": "InitConfiguration", "nodeRegistration": {"taints": []}}
    assert rendered["featureGates"] == {"WorkloadControlledSwap": True}
    assert rendered["networking"] == {"apiServerPort": 40001}


@pytest.mark.parametrize("behavior", [NO_SWAP, LIMITED_SWAP, WORKLOAD_CONTROLLED_SWAP])
def test_a_one_behavior_cluster_leaves_the_control_plane_taint_to_kind(behavior: str) -> None:
    # One node: kind removes the control-plane taint itself (`kubectl taint nodes --all
    # node-role.kubernetes.io/control-plane-`), which fails "taint ... not found" if kubeadm
    # never set it; `kind create` then failed on the emulated kind host with --behaviors X.
    rendered = kind_config.render_mixed([behavior])
    assert [n["role"] for n in rendered["nodes"]] == ["control-plane"]
    assert rendered["kubeadmConfigPatches"] == kind_config.load(behavior)["kubeadmConfigPatches"]
    assert kind_config.UNTAINTED_CONTROL_PLANE not in rendered["kubeadmConfigPatches"]


@pytest.mark.parametrize(("behaviors", "control_plane"), [
    ([NO_SWAP, LIMITED_SWAP], LIMITED_SWAP), ([NO_SWAP], NO_SWAP), ([WORKLOAD_CONTROLLED_SWAP, NO_SWAP], WORKLOAD_CONTROLLED_SWAP)])
def test_the_control_plane_runs_limited_swap_where_selected(behaviors: list[str], control_plane: str) -> None:
    rendered = kind_config.render_mixed(behaviors)
    assert kind_config.control_plane_behavior(behaviors) == control_plane
    own = kind_config.load(control_plane)["kubeadmConfigPatches"]
    assert rendered["kubeadmConfigPatches"][:len(own)] == own
    assert [n["labels"][kind_config.BEHAVIOR_LABEL] for n in rendered["nodes"]] == \
        [control_plane] + [b for b in behaviors if b != control_plane]
    assert "featureGates" not in rendered or WORKLOAD_CONTROLLED_SWAP in behaviors


# --- the real kind binary ------------------------------------------------------------------------

PLACEHOLDER = "ksc/not-a-node"


def _kind_binary() -> str | None:
    gopath_bin = Path(os.environ.get("GOPATH", Path.home() / "go")) / "bin" / "kind"
    return shutil.which("kind") or (str(gopath_bin) if gopath_bin.exists() else None)


@pytest.fixture(scope="module")
def kind_cli() -> str:
    kind = _kind_binary()
    if kind is None:
        pytest.skip("kind is not installed (go install sigs.k8s.io/kind@v0.33.0)")
    if subprocess.run(["docker", "info"], capture_output=True, timeout=30).returncode != 0:
        pytest.skip("no Docker engine answers: kind checks its engine before it reads a config")
    # An empty local image: kind finds it present, so nothing is pulled, and the run stops
    # at "Preparing nodes" after the config has been decoded and validated.
    empty = subprocess.run(["tar", "cf", "-", "--files-from", "/dev/null"], check=True, capture_output=True,
                           timeout=60).stdout
    for tag in ("v0", "v1.33.1"):
        subprocess.run(["docker", "import", "-", f"{PLACEHOLDER}:{tag}"], input=empty, check=True,
                       capture_output=True, timeout=60)
    return kind


def kind_create(kind: str, config: Path, image: str, name: str) -> subprocess.CompletedProcess:
    try:
        return subprocess.run([kind, "create", "cluster", "--config", str(config), "--image", image, "--name", name],
                              capture_output=True, text=True, timeout=120)
    finally:
        subprocess.run([kind, "delete", "cluster", "--name", name], capture_output=True, timeout=120)


@pytest.mark.parametrize("behavior", ALL_BEHAVIORS)
def test_real_kind_accepts_config(kind_cli: str, behavior: str) -> None:
    result = kind_create(kind_cli, kind_config.config_path(behavior), f"{PLACEHOLDER}:v0", f"ksc-validate-{behavior.lower()}")
    output = result.stdout + result.stderr
    assert "✓ Ensuring node image" in output, output  # the config passed decoding and validation
    assert "Preparing nodes" in output and "No command specified" in output, output
    assert "invalid configuration" not in output and "unable to decode" not in output


def test_real_kind_accepts_rendered_config_with_node_swap_gate(kind_cli: str, tmp_path: Path) -> None:
    image = f"{PLACEHOLDER}:v1.33.1"
    path = tmp_path / "old.yaml"
    path.write_text(yaml.safe_dump(kind_config.render(LIMITED_SWAP, image)))
    result = kind_create(kind_cli, path, image, "ksc-validate-gate")
    assert "✓ Ensuring node image" in result.stdout + result.stderr, result.stderr


def test_real_kind_accepts_the_rendered_mixed_config(kind_cli: str, tmp_path: Path) -> None:
    path = tmp_path / "mixed.yaml"
    path.write_text(yaml.safe_dump(kind_config.render_mixed(list(ALL_BEHAVIORS), f"{PLACEHOLDER}:v0")))
    result = kind_create(kind_cli, path, f"{PLACEHOLDER}:v0", "ksc-validate-mixed")
    output = result.stdout + result.stderr
    assert "✓ Ensuring node image" in output and "invalid configuration" not in output, output


@pytest.mark.parametrize(
    ("mutation", "message"),
    [
        (lambda c: c.update(kubeadmConfigPatchez=c.pop("kubeadmConfigPatches")), "unable to decode config"),
        (lambda c: c.update(nodes=[{"role": "worker"}]), "must have at least one control-plane node"),
    ],
    ids=["misspelled-field", "no-control-plane"],
)
def test_real_kind_rejects_broken_config(kind_cli: str, tmp_path: Path, mutation, message: str) -> None:
    config = kind_config.load(LIMITED_SWAP)
    mutation(config)
    path = tmp_path / "broken.yaml"
    path.write_text(yaml.safe_dump(config))
    result = kind_create(kind_cli, path, f"{PLACEHOLDER}:v0", "ksc-validate-broken")
    assert result.returncode != 0 and message in result.stderr, result.stderr
