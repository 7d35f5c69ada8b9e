"""Fast checks of the vm provider's generated configuration and guest-agent client (no VM)."""
from __future__ import annotations

import base64
import json
import socket
import threading

import pytest
import yaml

from clusters.vm import guestfiles, node, qemu


def _docs(text: str) -> dict[str, dict]:
    return {d["kind"]: d for d in yaml.safe_load_all(text)}


@pytest.mark.parametrize("behavior", ["LimitedSwap", "NoSwap"])
def test_kubeadm_config_carries_the_kind_patch(behavior):
    text, source = node.kubeadm_config("v1.36.3", behavior)
    docs = _docs(text)
    kubelet = docs["KubeletConfiguration"]
    assert kubelet["memorySwap"]["swapBehavior"] == behavior
    assert kubelet["failSwapOn"] is False
    assert kubelet["cgroupDriver"] == "systemd"
    assert "featureGates" not in kubelet  # NodeSwap is locked GA on 1.34+: setting it breaks the kubelet
    if (node.KIND_CONFIG_DIR / f"{behavior}.yaml").exists():
        assert source == f"clusters/kind/{behavior}.yaml"
    init, cluster = docs["InitConfiguration"], docs["ClusterConfiguration"]
    assert init["apiVersion"] == "kubeadm.k8s.io/v1beta4"
    assert init["nodeRegistration"]["taints"] == []
    assert set(init["skipPhases"]) == {"addon/coredns", "addon/kube-proxy"}
    assert cluster["kubernetesVersion"] == "v1.36.3"
    assert "127.0.0.1" in cluster["apiServer"]["certSANs"]
    assert init["timeouts"]["kubernetesAPICall"] == "30m0s"
    assert cluster["networking"]["podSubnet"] == guestfiles.POD_SUBNET


def test_an_emulated_node_gets_a_lighter_control_plane_and_the_same_kubelet():
    """Under TCG (decision 0023) the control plane runs on one Go thread each, with ECDSA keys and
    without priority and fairness; the kubelet (under test) is the same document as on KVM."""
    plain, emulated = (_docs(node.kubeadm_config("v1.37.1", "LimitedSwap", ("WorkloadControlledSwap",), emulated=e)[0])
                       for e in (False, True))
    assert emulated["KubeletConfiguration"] == plain["KubeletConfiguration"]
    assert emulated["InitConfiguration"] == plain["InitConfiguration"]
    cluster, before = emulated["ClusterConfiguration"], plain["ClusterConfiguration"]
    assert cluster["encryptionAlgorithm"] == "ECDSA-P256" and "encryptionAlgorithm" not in before
    one = [{"name": "GOMAXPROCS", "value": "1"}]
    assert [cluster[c]["extraEnvs"] for c in ("apiServer", "controllerManager", "scheduler")] == [one] * 3
    assert cluster["etcd"]["local"]["extraEnvs"] == one
    no_apf = {"name": "enable-priority-and-fairness", "value": "false"}
    assert cluster["apiServer"]["extraArgs"] == [no_apf, *before["apiServer"]["extraArgs"]]  # the gates kept
    for component in ("controllerManager", "scheduler"):
        assert cluster[component]["extraArgs"] == before[component]["extraArgs"]


def test_containerd_collects_cpu_stats_every_10s_only_when_asked():
    import tomllib

    runtime = "io.containerd.cri.v1.runtime"
    assert guestfiles.containerd_config("p") == guestfiles.CONTAINERD_CONFIG.format(pause_ref="p")  # the cached disk's
    assert "stats_collect_period" not in tomllib.loads(guestfiles.containerd_config("p"))["plugins"][runtime]
    slow = tomllib.loads(guestfiles.containerd_config("p", guestfiles.EMULATED_STATS_COLLECT_PERIOD))
    assert slow["plugins"][runtime]["stats_collect_period"] == "10s"
    assert slow["plugins"][runtime]["containerd"]["runtimes"]["runc"]["options"]["SystemdCgroup"] is True


def test_old_kubelets_get_the_nodeswap_gate():
    kubelet, _ = node.kubelet_configuration("LimitedSwap", "v1.33.5")
    assert kubelet["featureGates"]["NodeSwap"] is True


def test_guest_files_use_the_local_pause_image_and_order_swap_first():
    files = guestfiles.guest_files("registry.k8s.io/pause:3.10.2")
    assert "sandbox = 'registry.k8s.io/pause:3.10.2'" in files["etc/containerd/config.toml"].decode()
    assert "SystemdCgroup = true" in files["etc/containerd/config.toml"].decode()
    swap_unit = files["etc/systemd/system/ksc-swap.service"].decode()
    assert "Before=containerd.service kubelet.service" in swap_unit
    assert "ksc-swap.service" in files["etc/systemd/system/kubelet.service"].decode()
    conflist = json.loads(files["etc/cni/net.d/10-ksc.conflist"])
    assert [p["type"] for p in conflist["plugins"]] == ["bridge", "portmap"]


def test_probe_patches_are_strategic_merge_per_component():
    patches = node.probe_patches()
    assert set(patches) == {f"{node.PATCHES_DIR}/{c}+strategic.yaml" for c in node.PROBE_PATCH}
    doc = yaml.safe_load(patches[f"{node.PATCHES_DIR}/kube-apiserver+strategic.yaml"])
    assert doc["spec"]["containers"][0]["name"] == "kube-apiserver"


def _fake_agent(path, stale: bytes = b""):
    """A one-connection qemu-guest-agent stand-in: answers sync, exec and exec-status."""
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(str(path))
    srv.listen(1)

    def serve():
        conn, _ = srv.accept()
        conn.sendall(stale)
        buf = b""
        with conn:
            while True:
                data = conn.recv(65536)
                if not data:
                    return
                buf += data
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    cmd = json.loads(line)
                    ex, args = cmd["execute"], cmd.get("arguments", {})
                    if ex == "guest-sync":
                        ret = args["id"]
                    elif ex == "guest-exec":
                        assert args["path"] == "/usr/bin/env" and args["arg"][-2:] == ["cat", "/x"]
                        ret = {"pid": 42}
                    else:
                        ret = {"exited": True, "exitcode": 3, "out-data": base64.b64encode(b"out").decode(),
                               "err-data": base64.b64encode(b"err").decode()}
                    conn.sendall(json.dumps({"return": ret}).encode() + b"\n")

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    return srv, t


def test_guest_agent_exec_skips_stale_replies(tmp_path):
    sock = tmp_path / "qga.sock"
    srv, t = _fake_agent(sock, stale=b'{"return": 12345}\n{"error": {"class": "GenericError", "desc": "x"}}\n')
    try:
        assert qemu.GuestAgent(sock).exec(["cat", "/x"], timeout=10) == (3, "out", "err")
    finally:
        srv.close()
        t.join(5)


PROTOTYPE = node.KIND_CONFIG_DIR.parent / "prototypes" / "kep-5359.patch"


def test_workload_controlled_swap_on_the_prototype_turns_its_gate_on_everywhere():
    """`clusters.vm up --behavior WorkloadControlledSwap --k8s-patch clusters/prototypes/kep-5359.patch`:
    the kubelet runs WorkloadControlledSwap with its gate, and the API server (which validates
    limits.swap), the controller manager and the scheduler get the gate too."""
    from clusters.vm import k8s_source

    source = k8s_source.release("v1.37.1", [PROTOTYPE])
    text, _ = node.kubeadm_config(source.build_id, "WorkloadControlledSwap", source.feature_gates)
    docs = _docs(text)
    kubelet, cluster = docs["KubeletConfiguration"], docs["ClusterConfiguration"]
    assert kubelet["memorySwap"]["swapBehavior"] == "WorkloadControlledSwap"
    assert kubelet["featureGates"] == {"WorkloadControlledSwap": True}
    for component in ("apiServer", "controllerManager", "scheduler"):
        assert {"name": "feature-gates", "value": "WorkloadControlledSwap=true"} in cluster[component]["extraArgs"]
    assert cluster["kubernetesVersion"] == source.build_id


def test_the_prototype_build_keeps_its_gate_on_other_behaviors_and_a_release_gets_none():
    """On LimitedSwap the prototype's API server must still accept limits.swap and its kubelet
    send the Pod event; a released build knows no such gate (setting it stops the kubelet)."""
    from clusters.vm import k8s_source

    source = k8s_source.release("v1.37.1", [PROTOTYPE])
    docs = _docs(node.kubeadm_config(source.build_id, "LimitedSwap", source.feature_gates)[0])
    assert docs["KubeletConfiguration"]["featureGates"] == {"WorkloadControlledSwap": True}
    assert docs["KubeletConfiguration"]["memorySwap"]["swapBehavior"] == "LimitedSwap"
    docs = _docs(node.kubeadm_config("v1.37.1", "LimitedSwap")[0])
    assert "featureGates" not in docs["KubeletConfiguration"]
    assert all(a["name"] != "feature-gates" for a in docs["ClusterConfiguration"]["apiServer"].get("extraArgs", []))


def test_switching_a_kubelet_to_workload_controlled_swap_sets_its_gate():
    from clusters.kubelet_config import switch_behavior

    cfg = {"memorySwap": {"swapBehavior": "LimitedSwap"}, "featureGates": {"Other": False}}
    switch_behavior(cfg, "WorkloadControlledSwap")
    assert cfg == {"memorySwap": {"swapBehavior": "WorkloadControlledSwap"},
                   "featureGates": {"Other": False, "WorkloadControlledSwap": True}}
    switch_behavior(cfg, "NoSwap")  # the gate stays: the build knows it, and NoSwap sends the event with it
    assert cfg["memorySwap"]["swapBehavior"] == "NoSwap" and cfg["featureGates"]["WorkloadControlledSwap"] is True
    plain = {"memorySwap": {"swapBehavior": "NoSwap"}}
    switch_behavior(plain, "LimitedSwap")
    assert plain == {"memorySwap": {"swapBehavior": "LimitedSwap"}}
