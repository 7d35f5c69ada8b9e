"""SwapNode's version checks, which the min_kubernetes / min_kernel markers rely on."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusters.provider import SwapNode, version_tuple


def node(kubelet: str, kernel: str) -> SwapNode:
    return SwapNode("LimitedSwap", "vm", "c", "kc", "n", kubelet, kernel, 1, 1, 1, True)


@pytest.mark.parametrize(
    ("text", "parsed"),
    [("v1.36.3", (1, 36, 3)), ("1.34", (1, 34, 0)), ("6.12.95+deb12-amd64", (6, 12, 95)), ("v1.37.0-alpha.1", (1, 37, 0))],
)
def test_version_tuple(text: str, parsed: tuple[int, int, int]) -> None:
    assert version_tuple(text) == parsed


def test_version_tuple_rejects_garbage() -> None:
    with pytest.raises(ValueError, match="cannot read a version"):
        version_tuple("latest")


def test_at_least() -> None:
    n = node("v1.34.0", "6.1.0-40-amd64")
    assert n.kubelet_at_least("1.34") and n.kubelet_at_least("1.33.9") and not n.kubelet_at_least("1.34.1")
    assert n.kernel_at_least("6.1") and not n.kernel_at_least("6.4")


def test_eviction_thresholds_are_confirmed_live_and_restored() -> None:
    from clusters.kubelet_config import restored as _restored, shows as _shows

    from clusters.kubelet_config import eviction_thresholds

    change = eviction_thresholds({"memory.available": "2147483648"}, "60s")
    assert change.what == "evictionSoft {'memory.available': '2147483648'} grace 60s"
    config: dict = {"evictionHard": {"memory.available": "100Mi"}}
    change.apply(config)
    assert config == {"evictionHard": {"memory.available": "100Mi"},  # the file's hard thresholds stay
                      "evictionSoft": {"memory.available": "2147483648"},
                      "evictionSoftGracePeriod": {"memory.available": "60s"}, "evictionMaxPodGracePeriod": 1,
                      "evictionPressureTransitionPeriod": "30s"}
    settings = {"evictionSoft": {"memory.available": "2147483648"}, "evictionPressureTransitionPeriod": "5s"}
    defaults = {"evictionHard": {"memory.available": "100Mi", "nodefs.available": "10%"},
                "evictionPressureTransitionPeriod": "5m0s"}
    assert _shows({**defaults, **settings}, settings) and not _shows(defaults, settings)
    # the file set neither: restored once the kubelet no longer runs the test's values
    assert _restored(defaults, {}, settings) and not _restored({**defaults, **settings}, {}, settings)
    # kubeadm's file says 0s, which the kubelet reads back as its 5m0s default
    kubeadm = {"evictionPressureTransitionPeriod": "0s"}
    assert _restored(defaults, kubeadm, settings) and not _restored({**defaults, **settings}, kubeadm, settings)
    # a key the file already had at the test's value cannot tell a restored kubelet
    assert _restored(defaults | {"evictionPressureTransitionPeriod": "5s"}, {"evictionPressureTransitionPeriod": "5s"},
                     settings)


def test_a_provider_without_the_capability_says_so() -> None:
    from clusters import kubelet_config
    from clusters.provider import NotCoveredError, Provider

    class Bare(Provider):
        name = "bare"

        def coverage(self, behaviors):  # noqa: ANN001, ANN201
            return {}

        def node_for(self, behavior):  # noqa: ANN001, ANN201
            raise AssertionError

    node = SwapNode("LimitedSwap", "bare", "c", "kc", "n", "v1.37.1", "6.12", 1, 1, 1, True)
    with pytest.raises(NotCoveredError, match=r"the bare provider cannot reconfigure a kubelet for one test \(evictionSoft"):
        with Bare().eviction_thresholds(node, {"memory.available": "1Gi"}, "60s"):
            pass
    with pytest.raises(NotCoveredError, match=r"cannot reconfigure a kubelet for one test \(failSwapOn left out"):
        Bare().attempt_kubelet_start(node, kubelet_config.fail_swap_on_unset())
    with pytest.raises(NotCoveredError, match="the bare provider cannot restart a kubelet for one test"):
        Bare().restart_kubelet(node, "NoSwap")
    assert not Bare.reconfigures_kubelets and not Bare.restarts_kubelets


def test_providers_that_reach_their_nodes_reconfigure_kubelets() -> None:
    from clusters.existing import ExistingProvider
    from clusters.kind_provider import KindProvider
    from clusters.vm_provider import VmProvider

    for provider in (VmProvider, KindProvider):  # guest agent; docker exec into the node container
        assert provider.restarts_kubelets and provider.reconfigures_kubelets
    # a cluster the suite did not make is not its to reconfigure
    assert not ExistingProvider.restarts_kubelets and not ExistingProvider.reconfigures_kubelets


def test_each_provider_says_how_to_remove_what_it_kept(tmp_path: Path) -> None:
    from clusters.kind_provider import KindProvider
    from clusters.vm.paths import default_state_dir
    from clusters.vm_provider import VmProvider

    kind = KindProvider("kind", None, tmp_path, reuse=False)
    assert kind.kept({"provider": "kind", "cluster": "ksc-mixed"}) == (
        "kept kind ksc-mixed (--keep-clusters; reuse it with --reuse-clusters, delete it with"
        " `kind delete cluster --name ksc-mixed`)")
    vm = VmProvider(tmp_path, k8s_version=None, kernel="", memory_mb=4096, swap_mb=2048, reuse=False)
    assert vm.kept({"provider": "vm", "cluster": "ksc-vm", "state_dir": str(default_state_dir())}).endswith(
        "stop it with `python -m clusters.vm down`)")
    assert vm.kept({"provider": "vm", "cluster": "ksc-vm", "state_dir": "/tmp/my runs"}).endswith(
        "stop it with `python -m clusters.vm down --state-dir '/tmp/my runs'`)")
    assert vm.kept({"provider": "kind", "cluster": "x", "kept": "kept the kind host VM"}) == "kept the kind host VM"


def test_an_existing_cluster_whose_nodes_run_an_unsupported_release_is_refused_before_any_test(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing names the release of a cluster someone else runs: each node's kubelet says it, and
    one outside SUPPORTED is refused in preflight, with every such node named."""
    from clusters import existing, versions
    from clusters.checks import PreflightError

    def node(name: str, kubelet: str) -> SwapNode:
        return SwapNode("LimitedSwap", "existing", "c", "kc", name, kubelet, "6.12", 1, 1, 1, True)

    cluster = [node("a", "v1.37.2"), node("b", "v1.33.4"), node("c", "v1.38.0-alpha.1"), node("d", "")]
    monkeypatch.setattr(existing, "discover", lambda *args, **kwargs: cluster)
    with pytest.raises(PreflightError) as refused:
        existing.ExistingProvider("kc").preflight(["LimitedSwap"])
    (check,) = refused.value.checks
    assert check.detail == "; ".join([
        *(f"node {name}'s kubelet {kubelet} is Kubernetes {minor}: the suite supports Kubernetes"
          f" {versions.SUPPORTED_RANGE} only (clusters/versions.py SUPPORTED)"
          for name, kubelet, minor in (("b", "v1.33.4", "1.33"), ("c", "v1.38.0-alpha.1", "1.38"))),
        "node d reports no kubelet version ('')"])
    assert versions.SUPPORTED["1.37"] in check.remedy
    monkeypatch.setattr(existing, "discover", lambda *args, **kwargs: cluster[:1])
    existing.ExistingProvider("kc").preflight(["LimitedSwap"])  # every node supported: nothing to say


@pytest.mark.parametrize(("image", "labels", "why"), [
    ("kindest/node:v1.37.2", {}, "is Kubernetes 1.37, before KEP-5359 (1.38)"),
    ("kindest/node:latest", {}, "names no release in its tag and has no io.kube-swap-conformance.feature-gates label"),
    ("kind-node:v1.37.2-k", {"io.kube-swap-conformance.feature-gates": "NodeSwap,WorkloadControlledSwap"}, None),
    ("kindest/node:latest", {"io.kube-swap-conformance.feature-gates": "WorkloadControlledSwap"}, None),
])
def test_kind_offers_workload_controlled_swap_only_where_the_image_says_it_implements_it(
        tmp_path: Path, image: str, labels: dict, why: str | None) -> None:
    from clusters.behaviors import LIMITED_SWAP, WORKLOAD_CONTROLLED_SWAP
    from clusters.kind_provider import KindProvider

    kind = KindProvider("kind", image, tmp_path, reuse=False)
    kind._labels = labels  # what `docker image inspect` read of the image's labels
    said = kind.coverage([LIMITED_SWAP, WORKLOAD_CONTROLLED_SWAP])
    assert said[LIMITED_SWAP] is None
    assert (said[WORKLOAD_CONTROLLED_SWAP] is None) if why is None else why in said[WORKLOAD_CONTROLLED_SWAP]
