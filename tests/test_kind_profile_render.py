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
from clusters.vm import k8s_source, node, nodeimage
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


# The node image's kubeadm shim (decision 0032) on what kind really writes: kind's own rendering,
# and the pin's own kubeadm for the migration. Its last step, `exec` of the real kubeadm with kind's
# arguments, goes to a recorder here: a real `kubeadm init` would set up this machine.
V1BETA3_PINS = [pin for pin in PINS if versions.minor_of(pin) < (1, 36)]


def _recorder(tmp_path: Path, kubeadm: Path | None) -> Path:
    """A kubeadm whose `config` subcommands are ``kubeadm``'s (absent: refused) and whose other
    runs are recorded in ``<tmp_path>/ran``."""
    script = tmp_path / "real-kubeadm"
    config = f'exec {kubeadm} "$@"' if kubeadm else "exit 97"
    script.write_text(f'#!/bin/sh\nif [ "$1" = config ]; then {config}; fi\necho "$@" >> {tmp_path / "ran"}\n')
    script.chmod(0o755)
    return script


def _run_shim(tmp_path: Path, real: Path, config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    shim = tmp_path / "kubeadm"
    shim.write_text(nodeimage.kubeadm_shim(real=str(real), config=str(config)))
    shim.chmod(0o755)
    return subprocess.run([str(shim), *args], capture_output=True, text=True, timeout=120)


def _not_kubeadms(text: str) -> list[dict]:
    return [d for d in yaml.safe_load_all(text) if d and not d["apiVersion"].startswith("kubeadm.k8s.io/")]


@pytest.mark.parametrize("pin", V1BETA3_PINS)
def test_the_node_images_kubeadm_gives_kinds_v1beta3_config_the_profiles_waits(
        kind_render: Path, tmp_path: Path, pin: str) -> None:
    """With the profile on a node image kind configures in v1beta3, the kubeadm kind runs first has
    the pin's kubeadm migrate the config to v1beta4 with every wait of the vm node (the API calls
    30 min, not v1beta3's fixed 1), which that kubeadm then validates; the profile's items survive
    the migration; every other document (the KubeletConfiguration under test) is kind's, unchanged;
    and the real kubeadm runs with kind's own arguments. Run twice, the second leaves it alone."""
    kubeadm = _kubeadm(pin)
    if kubeadm is None:
        pytest.skip(f"kubeadm {pin} is not built in this machine's cache (python -m clusters.vm build"
                    f" --k8s-version {pin}, about 15 min)")
    real = _recorder(tmp_path, kubeadm)
    for role, args in (("control-plane", ["init", "--config=CONFIG", "--skip-token-print", "--v=6"]),
                       ("worker", ["join", "--config", "CONFIG", "--v=6"])):
        config = tmp_path / role / "kubeadm.conf"
        config.parent.mkdir()
        kinds = _render(kind_render, tmp_path, pin, True, role)
        config.write_text(kinds)
        args = [a.replace("CONFIG", str(config)) for a in args]
        done = _run_shim(tmp_path, real, config, *args)
        assert done.returncode == 0, done.stderr
        migrated = config.read_text()
        docs = _documents(migrated)
        for kind in ("InitConfiguration", "ClusterConfiguration", "JoinConfiguration"):
            assert docs[kind]["apiVersion"] == "kubeadm.k8s.io/v1beta4", (role, kind)
        for kind in ("InitConfiguration", "JoinConfiguration"):
            waits = docs[kind]["timeouts"]
            assert {key: waits.get(key) for key in node.KUBEADM_TIMEOUTS} == node.KUBEADM_TIMEOUTS, (role, kind)
        assert _not_kubeadms(migrated) == _not_kubeadms(kinds) != []
        cluster, init = docs["ClusterConfiguration"], docs["InitConfiguration"]
        assert _args(cluster["apiServer"]["extraArgs"])["enable-priority-and-fairness"] == "false"
        assert _args(cluster["controllerManager"]["extraArgs"])["leader-elect"] == "false"
        assert {"preflight", "addon/coredns", "addon/kube-proxy"} <= set(init["skipPhases"])
        assert init["patches"]["directory"] == node.PATCHES_DIR
        # kubeadm's EncryptionAlgorithmType: the v1beta3 gate, kept by the migration, wins over the field
        assert cluster["featureGates"]["PublicKeysECDSA"] is True
        checked = subprocess.run([str(kubeadm), "config", "validate", "--config", str(config)],
                                 capture_output=True, text=True, timeout=120)
        assert checked.returncode == 0 and "unknown field" not in checked.stderr, f"{role}: {checked.stderr}"
        assert (tmp_path / "ran").read_text().splitlines()[-1] == " ".join(args)
        again = _run_shim(tmp_path, real, config, *args)
        assert again.returncode == 0 and config.read_text() == migrated, again.stderr


@pytest.mark.parametrize("pin", PINS)
def test_the_node_images_kubeadm_is_kubeadm_everywhere_else(kind_render: Path, tmp_path: Path, pin: str) -> None:
    """Without the profile, on a v1beta4 pin, or for any other command, the kubeadm kind runs is
    the real one with the same arguments and kind's config untouched."""
    real = _recorder(tmp_path, None)  # a migration would be refused: none may be tried
    config = tmp_path / "kubeadm.conf"
    runs = [(False, ["init", f"--config={config}", "--skip-token-print", "--v=6"]),
            (True, ["version", "-o", "short"]), (True, ["reset", "-f"])]
    if versions.minor_of(pin) >= (1, 36):
        runs.append((True, ["init", f"--config={config}", "--skip-token-print", "--v=6"]))
    for profile, args in runs:
        text = _render(kind_render, tmp_path, pin, profile)
        config.write_text(text)
        done = _run_shim(tmp_path, real, config, *args)
        assert done.returncode == 0, done.stderr
        assert config.read_text() == text and not (tmp_path / "kubeadm.conf.v1beta3").exists()
        assert (tmp_path / "ran").read_text().splitlines()[-1] == " ".join(args)
