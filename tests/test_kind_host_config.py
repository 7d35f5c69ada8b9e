"""The kind host's and the local node image's generated pieces, checked without a VM: the API
server port map, the rendered kind config, the node image's files and manifests, and the
accelerator choice."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest
import yaml

from clusters import cli, kind_config, versions, waits
from clusters.behaviors import LIMITED_SWAP
from clusters.kind_provider import api_ports_from_env
from clusters.vm import guestfiles, kindhost, nodeimage, qemu
from tests.kubeadm_docs import of_kind, seconds


def test_api_port_map_round_trips_and_rejects_garbage() -> None:
    ports = {"ksc-noswap": 40001, "ksc-limitedswap": 40002}
    assert kindhost.parse_api_ports(kindhost.format_api_ports(ports)) == ports
    assert kindhost.parse_api_ports("") == {}
    for bad in ("ksc-noswap", "ksc-noswap=", "=1", "ksc-noswap=x", "ksc-noswap=70000"):
        with pytest.raises(ValueError, match="KSC_KIND_API_PORTS"):
            kindhost.parse_api_ports(bad)
    assert api_ports_from_env({"KSC_KIND_API_PORTS": "ksc-limitedswap=40002"}) == {"ksc-limitedswap": 40002}


def test_kind_host_offers_a_port_for_every_suite_cluster() -> None:
    assert kindhost.cluster_names() == ["ksc-mixed", "ksc-noswap", "ksc-limitedswap", "ksc-workloadcontrolledswap"]


def test_rendered_config_fixes_the_api_server_port_only_when_asked() -> None:
    assert "networking" not in kind_config.render(LIMITED_SWAP)
    rendered = kind_config.render(LIMITED_SWAP, "kindest/node:v1.37.1", api_server_port=40002)
    assert rendered["networking"] == {"apiServerPort": 40002}
    # the committed patch is untouched
    assert rendered["kubeadmConfigPatches"] == kind_config.load(LIMITED_SWAP)["kubeadmConfigPatches"]


@pytest.mark.parametrize(("image", "version"), [
    ("localhost/kube-swap-conformance/kind-node:v1.37.1-0123456789ab", (1, 37, 1)),
    ("kindest/node:v1.33.1", (1, 33, 1)),
    ("kindest/node:v1.37.0-rc.1", (1, 37, 0)),
])
def test_image_version_reads_local_node_image_tags(image: str, version: tuple[int, int, int]) -> None:
    assert kind_config.image_version(image) == version


def test_kind_host_guest_relays_and_docker() -> None:
    files = kindhost.guest_files()
    relay = files["usr/local/sbin/ksc-relays"].decode()
    assert "ksc\\.relay_ports=" in relay and f"bind={guestfiles.GUEST_IP}" in relay and "TCP:127.0.0.1" in relay
    dropin = files["etc/systemd/system/docker.service.d/10-ksc.conf"].decode()
    assert f"-H tcp://{guestfiles.GUEST_IP}:{kindhost.DOCKER_PORT}" in dropin and "-H fd://" in dropin
    assert "ksc-swap.service" in dropin  # swap is on before Docker (and kind's kubelets) start
    assert "docker.service" in kindhost.UNITS.enable["multi-user.target.wants"]
    assert files["etc/hostname"] == b"ksc-kind-host\n"


def test_node_image_files_follow_kinds_node_contract() -> None:
    files = {k: v.decode() for k, v in nodeimage.node_files("registry.k8s.io/pause:3.10.2").items()}
    entrypoint = files["usr/local/bin/entrypoint"]
    assert entrypoint.startswith("#!/bin/sh") and entrypoint.rstrip().endswith('exec "$@"')
    assert "mount --make-rshared /" in entrypoint and "systemd-machine-id-setup" in entrypoint
    containerd = files["etc/containerd/config.toml"]
    # kind reads the snapshotter of a version 3 config from exactly this table for `kind load`
    assert "version = 3" in containerd and "[plugins.'io.containerd.cri.v1.images']" in containerd
    assert "snapshotter = 'overlayfs'" in containerd and "SystemdCgroup = true" in containerd
    assert "sandbox = 'registry.k8s.io/pause:3.10.2'" in containerd
    kubelet = files["etc/systemd/system/kubelet.service"]
    # multi-user.target waits for the kubelet's start job: ordering it after the image import
    # (or containerd) held the target past kind's 30 s (seen for real); it waits in ExecStartPre
    assert not [line for line in kubelet.splitlines() if line.startswith(("After=", "Wants=", "Requires="))]
    assert "ExecStartPre=/bin/systemctl start ksc-images.service" in kubelet and "Slice=kubelet.slice" in kubelet
    assert "ConditionPathExists=/var/lib/kubelet/config.yaml" in kubelet
    images = files["etc/systemd/system/ksc-images.service"]
    # kind gives a node 30 s to reach multi-user.target: the import must not hold it up
    assert "DefaultDependencies=no" in images and "Before=" not in images
    assert "containerd.service" not in nodeimage.UNITS.enable["multi-user.target.wants"]
    assert {"modprobe@.service", "systemd-logind.service"} <= set(nodeimage.UNITS.mask)
    assert f"for tar in {nodeimage.IMAGES_DIR}/*.tar" in files["usr/local/sbin/ksc-images-import"]
    assert "kubelet.slice" in files["usr/local/sbin/ksc-kubelet-cgroups"]
    assert yaml.safe_load(files["kind/manifests/default-storage.yaml"])["kind"] == "StorageClass"


def test_default_cni_manifest_installs_the_bridge_cni() -> None:
    docs = {d["kind"]: d for d in yaml.safe_load_all(nodeimage.cni_manifest("localhost/x/bridge-cni:abc"))}
    assert set(docs) == {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "DaemonSet"}
    pod = docs["DaemonSet"]["spec"]["template"]["spec"]
    assert pod["hostNetwork"] is True and pod["tolerations"] == [{"operator": "Exists"}]
    container = pod["containers"][0]
    assert container["image"] == "localhost/x/bridge-cni:abc" and container["imagePullPolicy"] == "Never"
    assert pod["volumes"][0]["hostPath"]["path"] == "/etc/cni/net.d"
    assert docs["ClusterRole"]["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]}]
    # kind templates manifests that carry its template marker (ours must not: Go templates) and
    # adds CONTROL_PLANE_ENDPOINT to the first container's env list of those with its patch marker
    manifest = nodeimage.cni_manifest("x:y")
    assert "would you kindly template this file" not in manifest
    assert manifest.startswith("# would you kindly patch this file\n") and isinstance(container["env"], list)


@pytest.mark.skipif(shutil.which("sh") is None, reason="no POSIX shell")
def test_bridge_cni_talks_to_the_control_plane_kind_names_not_the_service() -> None:
    prelude = nodeimage.BRIDGE_CNI_SCRIPT.split("conf=", 1)[0]
    show = prelude + 'echo "${KUBERNETES_SERVICE_HOST}:${KUBERNETES_SERVICE_PORT}"\n'
    env = {"PATH": os.environ["PATH"], "KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    named = subprocess.run(["sh", "-c", show], env={**env, "CONTROL_PLANE_ENDPOINT": "ksc-mixed-control-plane:6443"},
                           capture_output=True, text=True, check=True)
    assert named.stdout == "ksc-mixed-control-plane:6443\n"
    # a manifest installed without kind's patch keeps the Service
    assert subprocess.run(["sh", "-c", show], env=env, capture_output=True, text=True, check=True).stdout == "10.96.0.1:443\n"


def test_bridge_cni_script_writes_the_config_atomically_and_routes_other_nodes() -> None:
    script = nodeimage.BRIDGE_CNI_SCRIPT
    assert 'mv "$conf.tmp" "$conf"' in script
    assert 'ip route replace "$cidr" via "$ip"' in script and '"$name" != "$NODE_NAME"' in script
    for applet in ("sh", "ip", "sleep", "mv", "cat"):
        assert applet in nodeimage.BUSYBOX_APPLETS


@pytest.mark.skipif(shutil.which("sh") is None, reason="no POSIX shell")
def test_node_image_shell_scripts_parse() -> None:
    scripts = {"entrypoint": nodeimage.ENTRYPOINT, "kubelet-cgroups": nodeimage.KUBELET_CGROUPS_SCRIPT,
               "bridge-cni": nodeimage.BRIDGE_CNI_SCRIPT, "relays": kindhost.RELAY_SCRIPT,
               "images": guestfiles.images_script(nodeimage.IMAGES_DIR), "bake": nodeimage.BAKE_SCRIPT}
    for name, text in scripts.items():
        result = subprocess.run(["sh", "-n"], input=text, capture_output=True, text=True)
        assert result.returncode == 0, f"{name}: {result.stderr}"


def test_accelerator_can_be_forced_and_rejects_nonsense(monkeypatch: pytest.MonkeyPatch) -> None:
    qemu.choose_accel.cache_clear()
    monkeypatch.setenv("KSC_VM_ACCEL", "tcg")
    assert qemu.choose_accel() == qemu.Accel("tcg", "forced by KSC_VM_ACCEL=tcg")
    assert qemu.Accel("kvm", "").argv() == ["-accel", "kvm", "-cpu", "host"]
    qemu.choose_accel.cache_clear()
    monkeypatch.delenv("KSC_VM_TCG_THREAD", raising=False)
    monkeypatch.delenv("KSC_VM_TCG_TB_MIB", raising=False)
    assert qemu.Accel("tcg", "").argv() == ["-accel", "tcg,thread=multi,tb-size=2048"]
    monkeypatch.setenv("KSC_VM_TCG_TB_MIB", "512")
    assert qemu.Accel("tcg", "").argv() == ["-accel", "tcg,thread=multi,tb-size=512"]
    monkeypatch.setenv("KSC_VM_TCG_TB_MIB", "2G")
    with pytest.raises(cli.UsageError, match="^KSC_VM_TCG_TB_MIB=2G is not a size in MiB"):
        qemu.Accel("tcg", "").argv()
    monkeypatch.setenv("KSC_VM_ACCEL", "xen")
    with pytest.raises(cli.UsageError, match="^KSC_VM_ACCEL=xen is not an accelerator: use kvm"):
        qemu.choose_accel()
    qemu.choose_accel.cache_clear()


def test_pinned_versions_are_one_place() -> None:
    from clusters.vm import build

    assert build.DEFAULT_K8S_VERSION == versions.KUBERNETES
    assert build.DEFAULT_CRICTL_VERSION == versions.CRICTL


def test_the_node_image_runs_the_scheduler_without_leader_election() -> None:
    """kubeadm patches the scheduler's manifest from the image's patch directory, the one the
    emulated-host profile names (its lease renewals time out under emulation and it exits)."""
    profile = yaml.safe_load((kind_config.PROFILES_DIR / "emulated-host.yaml").read_text())
    directories = [yaml.safe_load(p).get("patches", {}).get("directory") for p in profile["kubeadmConfigPatches"]]
    patch = nodeimage.node_files("pause:x")[nodeimage.SCHEDULER_PATCH.lstrip("/")]
    assert nodeimage.SCHEDULER_PATCH.rsplit("/", 1)[0] in directories
    assert nodeimage.SCHEDULER_PATCH.endswith("/kube-scheduler+json.json")
    assert json.loads(patch) == [{"op": "add", "path": "/spec/containers/0/command/-", "value": "--leader-elect=false"}]


def test_the_emulated_host_profile_skips_the_addons_no_test_uses() -> None:
    """As on the vm node: kubeadm deploys neither CoreDNS nor kube-proxy (appended to the
    skipPhases kind writes, whose "preflight" stays)."""
    profile = yaml.safe_load((kind_config.PROFILES_DIR / "emulated-host.yaml").read_text())
    for version in KUBEADM_APIS:
        init = [p for p in profile["kubeadmConfigPatchesJSON6902"]
                if p["kind"] == "InitConfiguration" and p["version"] == version]
        ops = [op for p in init for op in yaml.safe_load(p["patch"])]
        assert ops == [{"op": "add", "path": "/skipPhases/-", "value": "addon/coredns"},
                       {"op": "add", "path": "/skipPhases/-", "value": "addon/kube-proxy"}], version


def test_the_bridge_cni_does_not_masquerade() -> None:
    conflist = nodeimage.BRIDGE_CNI_SCRIPT.split("<<EOF\n", 1)[1].split("\nEOF\n", 1)[0]
    bridge = json.loads(conflist.replace("$cidr", "10.244.0.0/24"))["plugins"][0]
    assert bridge["type"] == "bridge" and bridge["ipMasq"] is False


def _pairs(obj: object, path: tuple = ()) -> set[tuple]:
    """A kubeadm document as (path, value) pairs; a list of {name, value} (extraArgs, extraEnvs)
    is a map by name, as kubeadm reads it."""
    if isinstance(obj, dict):
        return {pair for key, value in obj.items() for pair in _pairs(value, (*path, key))}
    if isinstance(obj, list) and obj and all(isinstance(i, dict) and set(i) == {"name", "value"} for i in obj):
        return {((*path, i["name"]), i["value"]) for i in obj}
    return {(path, tuple(obj) if isinstance(obj, list) else obj)}


def _profile_documents(version: str) -> tuple[list[dict], list[dict]]:
    """The emulated-host profile's patches kind applies to kubeadm's ``version`` documents: merge
    patches, JSON 6902 patches."""
    profile = yaml.safe_load((kind_config.PROFILES_DIR / "emulated-host.yaml").read_text())
    merge = [d for d in map(yaml.safe_load, profile["kubeadmConfigPatches"])
             if d.get("apiVersion") in (None, f"kubeadm.k8s.io/{version}")]
    json6902 = [p for p in profile["kubeadmConfigPatchesJSON6902"] if p["version"] == version]
    return merge, json6902


def test_the_kind_emulated_profile_lightens_the_control_plane_as_the_vm_node_does() -> None:
    """One emulated profile, two renderings (decision 0025): whatever the vm node's kubeadm config
    adds to the control plane under TCG, the kind emulated-host profile adds too, and nothing else
    (in kubeadm v1beta4, through its ClusterConfiguration patch or a JSON 6902 add); kubeadm waits
    there at least as long as on the vm node, whose host runs one node where the kind host runs a
    cluster; containerd's CRI stats are as sparse. A lightening on one side alone fails here."""
    from clusters.vm import node

    light, _ = node.kubeadm_config(versions.KUBERNETES, LIMITED_SWAP, emulated=True)
    plain, _ = node.kubeadm_config(versions.KUBERNETES, LIMITED_SWAP, emulated=False)
    assert of_kind(light, "InitConfiguration") == of_kind(plain, "InitConfiguration"), \
        "the vm node's emulated InitConfiguration differs: give it a kind rendering and check it here"
    light_cluster = _pairs(of_kind(light, "ClusterConfiguration"))
    wanted = light_cluster - _pairs(of_kind(plain, "ClusterConfiguration"))
    assert wanted, "the vm node's emulated config adds nothing: this check reads the wrong documents"

    merge, json6902 = _profile_documents("v1beta4")
    kind_has = set().union(*(_pairs(p) for p in merge if p["kind"] == "ClusterConfiguration"))
    for patch in (p for p in json6902 if p["kind"] == "ClusterConfiguration"):
        for op in yaml.safe_load(patch["patch"]):
            *where, last = op["path"].strip("/").split("/")
            assert op["op"] == "add" and last == "-", op
            kind_has |= _pairs([op["value"]], tuple(where))
    kind_has -= {(("apiVersion",), "kubeadm.k8s.io/v1beta4"), (("kind",), "ClusterConfiguration")}
    assert sorted(wanted - kind_has, key=str) == []
    assert sorted(kind_has - light_cluster, key=str) == [], "the kind profile lightens what the vm node does not"

    vm_waits = of_kind(light, "InitConfiguration")["timeouts"]
    kind_waits = next(p for p in merge if p["kind"] == "InitConfiguration")["timeouts"]
    shorter = {key: (kind_waits.get(key), wait) for key, wait in vm_waits.items()
               if key not in kind_waits or seconds(kind_waits[key]) < seconds(wait)}
    assert shorter == {}, "kind's wait (left) is shorter than the vm node's (right)"
    join = next(p for p in merge if p["kind"] == "JoinConfiguration")["timeouts"]
    assert all(seconds(join[key]) >= seconds(vm_waits[key]) for key in join if key in vm_waits), join
    # the suite's own bound on `kind create` outlasts kubeadm's longest wait, whose message is the better one
    assert waits.KIND_CREATE.work > max(seconds(w) for w in kind_waits.values())
    assert waits.VM_KUBEADM_INIT.seconds() > max(seconds(w) for w in vm_waits.values())

    profile = yaml.safe_load((kind_config.PROFILES_DIR / "emulated-host.yaml").read_text())
    containerd = "\n".join(profile["containerdConfigPatches"])
    assert f"stats_collect_period = '{guestfiles.EMULATED_STATS_COLLECT_PERIOD}'" in containerd


# kubeadm's config API kind writes for a node image: v1beta3 before 1.36, v1beta4 from it (kind v0.33
# pkg/cluster/internal/kubeadm/config.go Config); a patch applies only to its own apiVersion
KUBEADM_APIS = ("v1beta3", "v1beta4")
_COMPONENTS = {"apiServer": "kube-apiserver", "controllerManager": "kube-controller-manager",
               "scheduler": "kube-scheduler", "etcd": "etcd"}


def test_the_kind_emulated_profile_says_the_same_in_kubeadms_v1beta3() -> None:
    """For the node images kind configures with v1beta3 (1.34, 1.35): each item the vm node's config
    adds under TCG has its v1beta3 rendering (an extraArgs map entry; the ECDSA feature gate for
    encryptionAlgorithm; the node image's kubeadm patches for extraEnvs, which v1beta3 lacks), the
    addons are skipped, kubeadm is pointed at the image's patches and its control-plane wait is the
    v1beta4 profile's. An item with no known v1beta3 rendering fails here until it has one."""
    from clusters.vm import node

    light, _ = node.kubeadm_config(versions.KUBERNETES, LIMITED_SWAP, emulated=True)
    plain, _ = node.kubeadm_config(versions.KUBERNETES, LIMITED_SWAP, emulated=False)
    wanted = _pairs(of_kind(light, "ClusterConfiguration")) - _pairs(of_kind(plain, "ClusterConfiguration"))
    merge, _ = _profile_documents("v1beta3")
    cluster = next(p for p in merge if p.get("kind") == "ClusterConfiguration")
    init = next(p for p in merge if p.get("kind") == "InitConfiguration" and "apiVersion" in p)
    image_patches = {path: yaml.safe_load(text) for path, text in nodeimage.node_files("pause:x").items()
                     if path.startswith(node.PATCHES_DIR.lstrip("/")) and path.endswith("+strategic.yaml")}

    def env_of(container: str) -> dict[str, str]:
        doc = image_patches[f"{node.PATCHES_DIR.lstrip('/')}/{container}+strategic.yaml"]
        return {e["name"]: e["value"] for e in doc["spec"]["containers"][0].get("env", [])}

    for path, value in sorted(wanted, key=str):
        component = path[0]
        if path == ("encryptionAlgorithm",):
            assert value == "ECDSA-P256" and cluster["featureGates"]["PublicKeysECDSA"] is True
        elif path[-2] == "extraEnvs":
            assert env_of(_COMPONENTS[component]).get(path[-1]) == value, path
        elif path[-2] == "extraArgs":
            assert cluster[component]["extraArgs"][path[-1]] == value, path
        else:
            pytest.fail(f"no v1beta3 rendering known for {path}: add one to the profile and here")
    # the scheduler's and the controller manager's elections, off on the vm node whatever the CPU
    assert cluster["controllerManager"]["extraArgs"]["leader-elect"] == "false"
    assert init["patches"]["directory"] == node.PATCHES_DIR
    v1beta4 = next(p for p in _profile_documents("v1beta4")[0] if p["kind"] == "InitConfiguration")
    assert seconds(cluster["apiServer"]["timeoutForControlPlane"]) >= \
        seconds(v1beta4["timeouts"]["controlPlaneComponentHealthCheck"])
