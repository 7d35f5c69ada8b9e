"""The emulated-host profile as kind really applies it: kind's own kubeadm template and patching
(its module from the Go module proxy, at the pinned kind version; tests/kind_render/main.go runs
them without Docker) on the suite's mixed-cluster config, for a node image of every supported
pin. kind writes kubeadm's v1beta3 before 1.36 and v1beta4 from it, and applies a patch only to
its own apiVersion: each pin's config must carry the profile in its own terms. Where the pin's
kubeadm is in the suite's cache (built by `python -m clusters.vm build`), kubeadm itself
validates the result."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from clusters import kind_config, versions
from clusters.behaviors import LIMITED_SWAP, NO_SWAP
from clusters.vm import build as vbuild
from clusters.vm import k8s_source, node
from tests.kubeadm_docs import seconds
from workloads.cache import cache_root

RENDERER = Path(__file__).resolve().parent / "kind_render" / "main.go"
PROFILE = kind_config.PROFILES_DIR / "emulated-host.yaml"
PINS = list(versions.SUPPORTED.values())


@pytest.fixture(scope="module")
def kind_render(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tests/kind_render built inside a writable copy of kind's module (its internal packages are
    importable only from within its tree)."""
    if not shutil.which("go"):
        pytest.skip("the Go toolchain is not installed (kind's module is built with it)")
    env = vbuild.go_env()
    try:
        module = k8s_source.module_dir("sigs.k8s.io/kind", versions.KIND, env)
    except k8s_source.SourceError as error:
        pytest.fail(str(error))
    tree = tmp_path_factory.mktemp("kind") / "src"
    shutil.copytree(module, tree)
    for path in [tree, *tree.rglob("*")]:
        path.chmod(path.stat().st_mode | 0o200)
    (tree / "pkg" / "cluster" / "kscrender").mkdir()
    shutil.copyfile(RENDERER, tree / "pkg" / "cluster" / "kscrender" / "main.go")
    binary = tree / "kind_render"
    done = subprocess.run(["go", "build", "-o", str(binary), "./pkg/cluster/kscrender"], cwd=tree, env=env,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    return binary


def _render(kind_render: Path, tmp_path: Path, pin: str, profile: bool, role: str = "control-plane") -> str:
    patch = kind_config.load_patch(PROFILE) if profile else None
    config = kind_config.render_mixed([NO_SWAP, LIMITED_SWAP], node_image=f"kindest/node:{pin}", patch=patch)
    path = tmp_path / f"kind-{pin}-{profile}.yaml"
    path.write_text(yaml.safe_dump(config))
    done = subprocess.run([str(kind_render), str(path), pin, role], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _documents(text: str) -> dict[str, dict]:
    return {d["kind"]: d for d in yaml.safe_load_all(text) if d}


def _args(component: dict) -> dict[str, str]:
    """extraArgs or extraEnvs as a map, whichever form the API version has."""
    items = component or {}
    return {i["name"]: i["value"] for i in items} if isinstance(items, list) else dict(items)


@pytest.mark.parametrize("pin", PINS)
def test_kind_applies_the_emulated_profile_on_every_pin(kind_render: Path, tmp_path: Path, pin: str) -> None:
    """The control plane's kubeadm config, as kind writes it for a node image of ``pin``, with the
    profile: the API server without priority and fairness, no controller-manager election, ECDSA
    keys, the control plane on one Go thread (v1beta4's extraEnvs, or the node image's patches kubeadm
    is pointed at), CoreDNS and kube-proxy skipped, a 40-min control-plane wait; the kubelet's
    swap settings untouched. Without the profile none of it is there."""
    api = "v1beta3" if versions.minor_of(pin) < (1, 36) else "v1beta4"
    with_profile = _documents(_render(kind_render, tmp_path, pin, True))
    without = _documents(_render(kind_render, tmp_path, pin, False))
    for docs in (with_profile, without):
        assert docs["ClusterConfiguration"]["apiVersion"] == f"kubeadm.k8s.io/{api}"
        kubelet = docs["KubeletConfiguration"]
        assert (kubelet["failSwapOn"], kubelet["memorySwap"]["swapBehavior"]) == (False, LIMITED_SWAP)

    cluster, init = with_profile["ClusterConfiguration"], with_profile["InitConfiguration"]
    assert _args(cluster["apiServer"]["extraArgs"])["enable-priority-and-fairness"] == "false"
    assert _args(cluster["controllerManager"]["extraArgs"])["leader-elect"] == "false"
    assert {"preflight", "addon/coredns", "addon/kube-proxy"} <= set(init["skipPhases"])
    assert init["patches"]["directory"] == node.PATCHES_DIR
    if api == "v1beta4":
        assert cluster["encryptionAlgorithm"] == "ECDSA-P256"
        for component in (cluster["apiServer"], cluster["controllerManager"], cluster["scheduler"],
                          cluster["etcd"]["local"]):
            assert _args(component["extraEnvs"]) == node.ONE_GO_THREAD
        wait = init["timeouts"]["controlPlaneComponentHealthCheck"]
    else:
        assert cluster["featureGates"]["PublicKeysECDSA"] is True
        wait = cluster["apiServer"]["timeoutForControlPlane"]
    assert seconds(wait) >= 40 * 60

    bare_cluster, bare_init = without["ClusterConfiguration"], without["InitConfiguration"]
    assert "enable-priority-and-fairness" not in _args(bare_cluster["apiServer"].get("extraArgs"))
    assert "addon/coredns" not in bare_init.get("skipPhases", []) and "patches" not in bare_init


def _kubeadm(pin: str) -> Path | None:
    binary = vbuild.kubernetes_component(pin).bin_dir(cache_root()) / "kubeadm"
    return binary if binary.is_file() else None


@pytest.mark.parametrize("pin", PINS)
def test_kubeadm_accepts_what_kind_writes_with_the_profile(kind_render: Path, tmp_path: Path, pin: str) -> None:
    """kubeadm of the pin validates the control plane's and a worker's config (strict decoding: a
    field misspelt or of another API version fails)."""
    kubeadm = _kubeadm(pin)
    if kubeadm is None:
        pytest.skip(f"kubeadm {pin} is not built in this machine's cache (python -m clusters.vm build"
                    f" --k8s-version {pin}, about 15 min)")
    for role in ("control-plane", "worker"):
        path = tmp_path / f"{role}.yaml"
        path.write_text(_render(kind_render, tmp_path, pin, True, role))
        done = subprocess.run([str(kubeadm), "config", "validate", "--config", str(path)], capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0 and "unknown field" not in done.stderr, f"{role}: {done.stderr}"
