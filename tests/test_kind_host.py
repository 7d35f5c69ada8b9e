"""Self-test of the kind path on a real kind host (select with ``-m kind``; boots a QEMU guest).

Brings up the kind host with the local node image, creates the suite's cluster ``ksc-mixed``
(the control plane, LimitedSwap's node, and a NoSwap worker) through the unmodified
``KindProvider`` (the real kind binary, the config rendered from the committed
``clusters/kind/<Behavior>.yaml``, the worker's kubelet switched to its behavior), and checks
every node: the live ``/configz`` runs the node's labeled behavior with ``failSwapOn: false``, every node reports the kind host's MemTotal and SwapTotal
as its capacities, and the workload image is loaded into each. Then deletes the cluster and
stops the host (``KSC_KIND_HOST_REUSE=1`` attaches to a running host and leaves it up).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from clusters import kind_config
from clusters.behaviors import LIMITED_SWAP, NO_SWAP

pytestmark = pytest.mark.kind

BEHAVIORS = (NO_SWAP, LIMITED_SWAP)


def _kind_binary() -> str:
    gopath_bin = Path(os.environ.get("GOPATH", Path.home() / "go")) / "bin" / "kind"
    found = shutil.which("kind") or (str(gopath_bin) if gopath_bin.exists() else None)
    if found is None:
        pytest.fail("the kind tier needs kind on PATH: go install sigs.k8s.io/kind@v0.33.0", pytrace=False)
    return found


@pytest.fixture(scope="module")
def kind_host():
    from clusters.vm.kindhost import KindHost
    from clusters.vm.nodeimage import build_node_image

    host = KindHost()
    built = build_node_image(progress=host.progress)
    reuse = os.environ.get("KSC_KIND_HOST_REUSE") == "1" and host.is_running()
    try:
        state = host.up([built], reuse=reuse)
    except BaseException:
        host.down(quiet=True)
        raise
    yield host, state, built
    if not reuse:
        host.down()


@pytest.fixture(scope="module")
def mixed_cluster(kind_host, tmp_path_factory: pytest.TempPathFactory):
    """The suite's one cluster, made through the unmodified KindProvider path; deleted at the
    end, and none of the suite's may be left."""
    from clusters.kind_provider import KindProvider, delete_cluster

    host, state, built = kind_host
    saved = {k: os.environ.get(k) for k in state.env()}
    os.environ.update(state.env())
    kind = _kind_binary()
    patch = state.env().get("KSC_KIND_CONFIG_PATCH")
    provider = KindProvider(kind, built.ref, tmp_path_factory.mktemp("kind-run"), reuse=False,
                            api_ports=state.api_ports, config_patch=Path(patch) if patch else None, behaviors=BEHAVIORS)
    provider.preflight(list(BEHAVIORS))
    try:
        yield provider, {b: provider.node_for(b) for b in BEHAVIORS}
    finally:
        delete_cluster(kind, kind_config.MIXED_CLUSTER)
        left = set(subprocess.run([kind, "get", "clusters"], capture_output=True, text=True).stdout.split())
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        assert kind_config.MIXED_CLUSTER not in left, left


def _guest_meminfo(host) -> dict[str, int]:
    rc, out, err = host.guest_exec(["cat", "/proc/meminfo"])
    assert rc == 0, err
    return {k: int(v.split()[0]) * 1024 for k, v in (line.split(":", 1) for line in out.splitlines())}


def _nodes(node) -> list[dict]:
    from clusters.discovery import api_client, get_json

    return get_json(api_client(node.kubeconfig), "/api/v1/nodes", "the node list")["items"]


def test_every_node_runs_its_behavior_and_reports_the_hosts_memory_and_swap(kind_host, mixed_cluster) -> None:
    from clusters.discovery import api_client, kubelet_config

    host, state, _ = kind_host
    provider, workers = mixed_cluster
    cluster = kind_config.MIXED_CLUSTER
    items = _nodes(workers[NO_SWAP])
    want = {f"{cluster}-control-plane": kind_config.control_plane_behavior(list(BEHAVIORS)),
            **{node.name: behavior for behavior, node in workers.items()}}
    assert sorted(i["metadata"]["name"] for i in items) == sorted(want)
    api = api_client(workers[NO_SWAP].kubeconfig)
    meminfo = _guest_meminfo(host)
    for item in items:
        name = item["metadata"]["name"]
        live = kubelet_config(api, name)
        # kubeadm gives every node the first one's KubeletConfiguration; the provider switched
        # the other workers: each runs its own, with the rest of the committed patch
        assert live["memorySwap"]["swapBehavior"] == want[name], (name, live.get("memorySwap"))
        assert live["failSwapOn"] is False, name
        if name in (n.name for n in workers.values()):
            behavior = want[name]
            assert (item["metadata"].get("labels") or {}).get(kind_config.BEHAVIOR_LABEL) == behavior, name
        # every node shares the kind host's kernel: its MemTotal and SwapTotal, exactly
        assert item["status"]["capacity"]["memory"] == f"{meminfo['MemTotal'] // 1024}Ki", (name, item["status"]["capacity"])
        assert item["status"]["nodeInfo"]["swap"]["capacity"] == meminfo["SwapTotal"], (name, item["status"]["nodeInfo"])
    # the workload image, as the suite loads it (kind load image-archive), on every node
    ref = provider.stress_image(workers[NO_SWAP])
    for name in want:
        listed = host.docker(state, "exec", name, "crictl", "images", "-o", "json")
        assert listed.returncode == 0, listed.stderr
        tags = [t for image in json.loads(listed.stdout)["images"] for t in image.get("repoTags") or []]
        assert ref in tags, (name, tags)
