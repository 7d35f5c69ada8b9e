"""Self-tests of e2e/oracle.py: vectors from the kubelet's own unit tests, the KEP/blog examples,
every exclusion rule, the float64 edge, and properties. No cluster."""

from __future__ import annotations

from typing import Any
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from e2e import oracle
from e2e.oracle import LIMITED_SWAP, NO_SWAP, WORKLOAD_CONTROLLED_SWAP

Ki, Mi, Gi = 1024, 1024**2, 1024**3


def container(name: str = "c", requests: dict | None = None, limits: dict | None = None, **extra: Any) -> dict:
    resources = {}
    if requests:
        resources["requests"] = requests
    if limits:
        resources["limits"] = limits
    return {"name": name, "image": "x", "resources": resources, **extra}


def pod(*containers: dict, init: list[dict] | None = None, priority: int | None = None,
        annotations: dict | None = None, volumes: list[dict] | None = None, name: str = "p",
        status_qos: str | None = None, **spec_extra: Any) -> dict:
    spec: dict[str, Any] = {"containers": list(containers), **spec_extra}
    if init:
        spec["initContainers"] = init
    if priority is not None:
        spec["priority"] = priority
    if volumes:
        spec["volumes"] = volumes
    manifest = {"metadata": {"name": name, "namespace": "ns", "annotations": annotations or {}}, "spec": spec}
    if status_qos:
        manifest["status"] = {"qosClass": status_qos}
    return manifest


def burstable(request: int | str, limit: int | str | None = None, **kw: Any) -> dict:
    limits = {"memory": limit} if limit is not None else None
    return pod(container(requests={"memory": request}, limits=limits), **kw)


def limited(p: dict, mem: int, swap: int, name: str = "c") -> int:
    return oracle.expected_swap_max(LIMITED_SWAP, p, name, mem, swap)


# --- vectors from the kubelet's unit tests -------------------------------------------------------

# TestGenerateLinuxContainerResourcesWithSwap: node 40Gi RAM, 5Gi swap.
@pytest.mark.parametrize(("request_", "expected"), [(1 * Gi, 134217728), (2 * Gi, 268435456)])
def test_kuberuntime_vectors(request_: int, expected: int) -> None:
    assert limited(burstable(request_), 40 * Gi, 5 * Gi) == expected


# TestCalcSwapForBurstablePods and limit_calculator_test.go.
@pytest.mark.parametrize(
    ("request_", "mem", "swap", "expected"),
    [
        (1 * Gi, 80 * Gi, 4 * Gi, 53687091),
        (2 * Gi, 40 * Gi, 2 * Gi, 107374182),
        (5 * Gi, 150 * Gi, 40 * Gi, 1431655765),
        (5 * Gi, 512 * Gi, 8 * Gi, 83886080),
    ],
)
def test_calc_swap_vectors(request_: int, mem: int, swap: int, expected: int) -> None:
    assert limited(burstable(request_), mem, swap) == expected


def test_blog_example_10gi_node_2gi_swap_2gi_request() -> None:
    # The blog: "about 0.4Gi". Exactly: 2/10 of 2Gi, truncated.
    assert limited(burstable("2Gi"), 10 * Gi, 2 * Gi) == 429496729


def test_float64_arithmetic_not_exact_integers() -> None:
    # Exact integer arithmetic gives 30; the kubelet's float64 proportion gives 29.999...
    # and int64() truncates it to 29. The oracle must say 29.
    request, mem, swap = 314572800, 1121976320, 107
    assert request * swap // mem == 30
    assert limited(burstable(request), mem, swap) == 29


def test_truncates_toward_zero() -> None:
    # 1 byte of request on a node with 3 bytes of memory and 2 of swap: 0.666... -> 0.
    assert limited(burstable(1), 3, 2) == 0


# --- every exclusion rule ------------------------------------------------------------------------

MEM, SWAP = 8 * Gi, 2 * Gi


def test_nominal_burstable_request_below_limit_gets_proportional_swap() -> None:
    assert limited(burstable("1Gi", "2Gi"), MEM, SWAP) == 256 * Mi


def test_request_only_gets_swap() -> None:
    assert limited(burstable("1Gi"), MEM, SWAP) == 256 * Mi


@pytest.mark.parametrize("behavior", ["", NO_SWAP])
def test_no_swap_behaviors_give_zero(behavior: str) -> None:
    assert oracle.expected_swap_max(behavior, burstable("1Gi", "2Gi"), "c", MEM, SWAP) == 0


def test_cgroup_v1_gives_zero() -> None:
    assert oracle.expected_swap_max(LIMITED_SWAP, burstable("1Gi", "2Gi"), "c", MEM, SWAP, cgroup_v2=False) == 0


@pytest.mark.parametrize("priority", [2_000_000_000, 2_000_001_000])
def test_critical_priority_gives_zero(priority: int) -> None:
    assert limited(burstable("1Gi", "2Gi", priority=priority), MEM, SWAP) == 0


def test_priority_just_below_critical_still_swaps() -> None:
    assert limited(burstable("1Gi", "2Gi", priority=1_999_999_999), MEM, SWAP) == 256 * Mi


@pytest.mark.parametrize(
    "annotations",
    [
        {"kubernetes.io/config.source": "file"},
        {"kubernetes.io/config.source": "http"},
        {"kubernetes.io/config.mirror": "abc", "kubernetes.io/config.source": "api"},
        {"kubernetes.io/config.mirror": ""},
    ],
)
def test_static_and_mirror_pods_give_zero(annotations: dict) -> None:
    assert limited(burstable("1Gi", "2Gi", annotations=annotations), MEM, SWAP) == 0


def test_api_sourced_pod_is_not_static() -> None:
    p = burstable("1Gi", "2Gi", annotations={"kubernetes.io/config.source": "api"})
    assert limited(p, MEM, SWAP) == 256 * Mi


def test_guaranteed_gives_zero() -> None:
    p = pod(container(limits={"memory": "1Gi", "cpu": "1"}))
    assert oracle.qos_class(p) == "Guaranteed"
    assert limited(p, MEM, SWAP) == 0


def test_guaranteed_by_pod_level_resources_gives_zero_despite_container_request_below_limit() -> None:
    # The only way a Guaranteed pod has a container with request < limit: pod-level resources
    # with requests == limits. The QoS exclusion alone stops swap (request == limit does not apply).
    pod_level = {"cpu": "1", "memory": "1Gi"}
    p = pod(
        container(requests={"memory": "100Mi"}, limits={"memory": "200Mi"}),
        resources={"requests": pod_level, "limits": pod_level},
    )
    assert oracle.qos_class(p) == "Guaranteed"
    assert limited(p, MEM, SWAP) == 0
    del p["spec"]["resources"]  # the same container in a pod without pod-level resources swaps
    assert limited(p, MEM, SWAP) == 25 * Mi


def test_pod_level_limits_alone_make_the_pod_burstable_when_a_container_requests_less() -> None:
    # With pod-level limits and no pod-level requests, the API server defaults the pod-level
    # requests to the containers' aggregated requests (v1.37 DefaultPodLevelResources, 1.34-1.36
    # defaultPodRequests), not to the limits: memory 100Mi < 1Gi, so Burstable, and the container
    # swaps on its own 100Mi request (8Gi node, 2Gi swap: 25Mi).
    p = pod(
        container(requests={"memory": "100Mi"}, limits={"memory": "200Mi"}),
        resources={"limits": {"cpu": "1", "memory": "1Gi"}},
    )
    resources = oracle.defaulted_pod(p)["spec"]["resources"]
    assert {k: oracle.quantity_bytes(v) for k, v in resources["requests"].items()} == {"memory": 100 * Mi, "cpu": 1}
    assert oracle.qos_class(p) == "Burstable"
    assert limited(p, MEM, SWAP) == 25 * Mi


def test_best_effort_gives_zero() -> None:
    p = pod(container())
    assert oracle.qos_class(p) == "BestEffort"
    assert limited(p, MEM, SWAP) == 0


def test_limit_only_defaults_request_to_limit_so_no_swap() -> None:
    p = pod(container(limits={"memory": "1Gi"}))  # cpu unset: Burstable, but request == limit
    assert oracle.qos_class(p) == "Burstable"
    assert limited(p, MEM, SWAP) == 0


def test_burstable_container_with_request_equal_limit_gets_zero() -> None:
    p = pod(container("eq", {"memory": "1Gi"}, {"memory": "1Gi"}), container("other", {"memory": "1Gi"}))
    assert oracle.qos_class(p) == "Burstable"
    assert limited(p, MEM, SWAP, "eq") == 0
    assert limited(p, MEM, SWAP, "other") == 256 * Mi


def test_container_without_memory_in_burstable_pod_gets_zero() -> None:
    p = pod(container("cpu-only", {"cpu": "100m"}), container("mem", {"memory": "1Gi"}))
    assert limited(p, MEM, SWAP, "cpu-only") == 0
    assert limited(p, MEM, SWAP, "mem") == 256 * Mi


def test_request_above_node_memory_falls_back_to_zero() -> None:
    assert limited(burstable(MEM + 1), MEM, SWAP) == 0
    assert limited(burstable(MEM), MEM, SWAP) == SWAP  # equal is still allowed


def test_zero_node_memory_falls_back_to_zero() -> None:
    assert limited(burstable("1Gi"), 0, SWAP) == 0


def test_init_container_and_sidecar_looked_up_by_name() -> None:
    p = pod(
        container("app", {"memory": "1Gi"}),
        init=[
            container("init", {"memory": "512Mi"}),
            container("sidecar", {"memory": "2Gi"}, {"memory": "4Gi"}, restartPolicy="Always"),
        ],
    )
    assert limited(p, MEM, SWAP, "init") == 128 * Mi
    assert limited(p, MEM, SWAP, "sidecar") == 512 * Mi
    with pytest.raises(KeyError, match="nope"):
        limited(p, MEM, SWAP, "nope")


def test_the_kubelet_reads_status_qos_class_first() -> None:
    # GetContainerSwapBehavior calls v1qos.GetPodQOS: status.qosClass when set (the API server
    # wrote it at creation), ComputePodQOS only without one (a static pod read from its file).
    # qos_class is ComputePodQOS on the spec, so a test can compare it with the API server's.
    p = burstable("1Gi", "2Gi", status_qos="Guaranteed")
    assert oracle.qos_class(p) == "Burstable" and oracle.pod_qos(p) == "Guaranteed"
    assert limited(p, MEM, SWAP) == 0
    assert limited(burstable("1Gi", "2Gi", status_qos="Burstable"), MEM, SWAP) == 256 * Mi
    assert limited(burstable("1Gi", "2Gi"), MEM, SWAP) == 256 * Mi  # no status: computed


def test_unknown_behavior_rejected() -> None:
    with pytest.raises(oracle.UnknownBehaviorError, match="UnlimitedSwap"):
        oracle.expected_swap_max("UnlimitedSwap", burstable("1Gi"), "c", MEM, SWAP)
    with pytest.raises(oracle.UnknownBehaviorError):
        oracle.expected_swap_max("limitedswap", burstable("1Gi"), "c", MEM, SWAP)


def test_decision_explains_itself() -> None:
    decision = oracle.decide_swap(LIMITED_SWAP, burstable("1Gi", "2Gi", priority=2_000_000_000), "c", MEM, SWAP)
    assert decision.value == 0 and "critical" in decision.rule
    assert decision.inputs["priority"] == 2_000_000_000
    assert "node_memory=8589934592" in str(decision)


def test_accepts_kubernetes_client_pod() -> None:
    from kubernetes import client

    v1 = client.V1Pod(
        metadata=client.V1ObjectMeta(name="p"),
        spec=client.V1PodSpec(
            containers=[
                client.V1Container(
                    name="c",
                    resources=client.V1ResourceRequirements(requests={"memory": "1Gi"}, limits={"memory": "2Gi"}),
                )
            ]
        ),
    )
    assert limited(v1, MEM, SWAP) == 256 * Mi


# --- WorkloadControlledSwap (KEP-5359) ----------------------------------------------------------

def wcs(p: dict, name: str = "c") -> int:
    return oracle.expected_swap_max(WORKLOAD_CONTROLLED_SWAP, p, name, MEM, SWAP)


def test_wcs_guaranteed_with_swap_limit() -> None:
    p = pod(container(limits={"memory": "1Gi", "cpu": "1", "swap": "512Mi"}))
    assert oracle.qos_class(p) == "Guaranteed"  # swap does not change QoS
    assert wcs(p) == 512 * Mi


def test_wcs_best_effort_and_burstable_with_swap_limit() -> None:
    assert wcs(pod(container(limits={"swap": "100Mi"}))) == 100 * Mi
    assert wcs(pod(container(requests={"memory": "1Gi"}, limits={"swap": "1Gi"}))) == Gi


def test_wcs_unset_or_zero_means_no_swap() -> None:
    assert wcs(burstable("1Gi", "2Gi")) == 0
    assert wcs(pod(container(limits={"memory": "1Gi", "swap": "0"}))) == 0


@pytest.mark.parametrize("behavior", [NO_SWAP, LIMITED_SWAP])
def test_swap_limit_has_no_effect_elsewhere(behavior: str) -> None:
    with_limit = pod(container(requests={"memory": "1Gi"}, limits={"memory": "2Gi", "swap": "64Mi"}))
    without = burstable("1Gi", "2Gi")
    assert oracle.expected_swap_max(behavior, with_limit, "c", MEM, SWAP) == oracle.expected_swap_max(
        behavior, without, "c", MEM, SWAP
    )


# --- QoS as the API server derives it -----------------------------------------------------------

@pytest.mark.parametrize(
    ("p", "qos"),
    [
        (pod(container()), "BestEffort"),
        (pod(container(requests={"ephemeral-storage": "1Gi"})), "BestEffort"),
        (pod(container(requests={"memory": "0", "cpu": "0"})), "BestEffort"),
        (pod(container(limits={"cpu": "1", "memory": "1Gi"})), "Guaranteed"),
        (pod(container(requests={"cpu": "1", "memory": "1Gi"}, limits={"cpu": "1", "memory": "1Gi"})), "Guaranteed"),
        (pod(container(requests={"cpu": "1000m", "memory": "1024Mi"}, limits={"cpu": "1", "memory": "1Gi"})), "Guaranteed"),
        (pod(container(limits={"cpu": "1"})), "Burstable"),
        (pod(container(limits={"cpu": "1", "memory": "1Gi", "hugepages-2Mi": "2Mi"})), "Guaranteed"),
        (pod(container("a", limits={"cpu": "1", "memory": "1Gi"}), container("b")), "Burstable"),
        (pod(container("a", limits={"cpu": "1", "memory": "1Gi"}), init=[container("i")]), "Burstable"),
        (pod(container("a", limits={"cpu": "1", "memory": "1Gi"}), init=[container("i", limits={"cpu": "1", "memory": "1Gi"})]), "Guaranteed"),
        (pod(container(), resources={"limits": {"cpu": "1", "memory": "1Gi"}}), "Guaranteed"),
        # v1.37 defaults the pod-level cpu request (the container's) and both pod-level limits
        # (every container limits them): Guaranteed. 1.34-1.36 left it Burstable (below).
        (pod(container(limits={"cpu": "1", "memory": "1Gi"}), resources={"requests": {"memory": "1Gi"}}), "Guaranteed"),
        (pod(container(requests={"cpu": "1", "memory": "1Gi"}), resources={"requests": {"memory": "1Gi"}}), "Burstable"),
        (pod(container(), resources={"requests": {"memory": "64Mi"}, "limits": {"memory": "128Mi"}}), "Burstable"),
        (pod(container(), resources={"requests": {"cpu": "1"}, "limits": {"cpu": "1"}}), "Burstable"),
    ],
    ids=lambda x: x if isinstance(x, str) else "",
)
def test_qos_class(p: dict, qos: str) -> None:
    assert oracle.qos_class(p) == qos


# --- read-back -----------------------------------------------------------------------------------

def test_readback_floors_to_pages() -> None:
    # Measured in a 6.12 guest with runc: 70085610 written, 70082560 read back.
    assert oracle.readback_swap_max(70085610) == "70082560"
    assert oracle.readback_swap_max(4095) == "0"
    assert oracle.readback_swap_max(4096) == "4096"
    assert oracle.readback_swap_max(0) == "0"
    assert oracle.readback_swap_max(None) == "max"


def test_expected_memory_max() -> None:
    assert oracle.expected_memory_max(burstable("1Gi", "2Gi"), "c") == str(2 * Gi)
    assert oracle.expected_memory_max(burstable("1Gi"), "c") == "max"
    assert oracle.expected_memory_max(burstable("1Gi", 1000000), "c") == "999424"


# --- memory-backed volumes -----------------------------------------------------------------------

VOLUMES = [
    {"name": "mem", "emptyDir": {"medium": "Memory", "sizeLimit": "64Mi"}},
    {"name": "mem-unbounded", "emptyDir": {"medium": "Memory"}},
    {"name": "disk", "emptyDir": {}},
    {"name": "secret", "secret": {"secretName": "s"}},
    {"name": "projected", "projected": {"sources": []}},
    {"name": "downward", "downwardAPI": {"items": []}},
    {"name": "config", "configMap": {"name": "cm"}},
    {"name": "host", "hostPath": {"path": "/tmp"}},
]


def test_memory_backed_volume_types() -> None:
    found = oracle.memory_backed_volumes(pod(container(), volumes=VOLUMES))
    assert [(v.name, v.kind, v.size_limit) for v in found] == [
        ("mem", "emptyDir", 64 * Mi),
        ("mem-unbounded", "emptyDir", None),
        ("secret", "secret", None),
        ("projected", "projected", None),
        ("downward", "downwardAPI", None),
    ]
    assert not oracle.is_memory_backed({"name": "config", "configMap": {"name": "cm"}})


@pytest.mark.parametrize("has_noswap", [True, False])
def test_noswap_follows_kernel_support_only(has_noswap: bool) -> None:
    assert oracle.expects_noswap(VOLUMES[0], has_noswap) is has_noswap
    assert oracle.expects_noswap(VOLUMES[6], True) is False  # configMap is on disk


def test_kernel_noswap_support() -> None:
    assert oracle.kernel_supports_noswap("6.4.0") is True
    assert oracle.kernel_supports_noswap("6.12.48+deb12-amd64") is True
    assert oracle.kernel_supports_noswap("6.1.0-40-amd64", probe_succeeded=False) is False
    assert oracle.kernel_supports_noswap("5.14.0-rhel", probe_succeeded=True) is True  # backport
    with pytest.raises(ValueError, match="probe"):
        oracle.kernel_supports_noswap("6.3.9")


def test_tmpfs_size() -> None:
    allocatable = 3 * Gi
    p = pod(container(requests={"memory": "100Mi"}, limits={"memory": "256Mi"}), volumes=VOLUMES)
    mem, unbounded, secret = oracle.memory_backed_volumes(p)[:3]
    assert oracle.expected_tmpfs_size(mem, p, allocatable) == 64 * Mi  # sizeLimit wins
    assert oracle.expected_tmpfs_size(unbounded, p, allocatable) == 256 * Mi  # pod limit
    assert oracle.expected_tmpfs_size(secret, p, allocatable) == 256 * Mi
    no_limit = pod(container(requests={"memory": "100Mi"}), volumes=VOLUMES)
    assert oracle.expected_tmpfs_size(secret, no_limit, allocatable) == allocatable
    assert oracle.readback_tmpfs_size_kib(64 * Mi) == 65536
    assert oracle.readback_tmpfs_size_kib(4097) == 8  # rounded up to two pages


# --- eviction ranking ----------------------------------------------------------------------------

def test_eviction_ranking_order() -> None:
    over_low = burstable("100Mi", priority=0, name="over-low")
    over_high = burstable("100Mi", priority=1000, name="over-high")
    over_more = burstable("100Mi", priority=0, name="over-more")
    under = burstable("1Gi", priority=0, name="under")
    usage = {"ns/over-low": 300 * Mi, "ns/over-high": 900 * Mi, "ns/over-more": 500 * Mi, "ns/under": 900 * Mi}
    assert oracle.eviction_ranking([under, over_high, over_low, over_more], usage) == [
        ["ns/over-more"],  # exceeds, priority 0, 400Mi above request
        ["ns/over-low"],  # exceeds, priority 0, 200Mi above
        ["ns/over-high"],  # exceeds but higher priority
        ["ns/under"],  # within its request: last, despite the largest usage
    ]


def test_eviction_ranking_ties_share_a_tier() -> None:
    a, b = burstable("100Mi", name="a"), burstable("100Mi", name="b")
    assert oracle.eviction_ranking([a, b], {"ns/a": 200 * Mi, "ns/b": 200 * Mi}) == [["ns/a", "ns/b"]]


def test_an_observed_eviction_sequence_is_judged_by_class_for_every_pod_and_fully_for_the_tests_own() -> None:
    low_big = burstable("32Mi", priority=-10, name="low-big")
    low_small = burstable("32Mi", priority=-10, name="low-small")
    above = burstable("32Mi", priority=0, name="above")
    within = burstable("128Mi", priority=0, name="within")
    critical = burstable("32Mi", priority=2_000_001_000, name="critical")
    foreign = burstable("0", priority=0, name="foreign")  # someone else's, 1 MiB above its request
    pods = [low_big, low_small, above, within, critical, foreign]
    usage = {"ns/low-big": 96 * Mi, "ns/low-small": 64 * Mi, "ns/above": 80 * Mi, "ns/within": 48 * Mi,
             "ns/critical": 96 * Mi, "ns/foreign": 1 * Mi}
    mine = ["ns/low-big", "ns/low-small", "ns/above", "ns/within", "ns/critical"]
    assert [p["metadata"]["name"] for p in oracle.eviction_candidates(pods)] == [
        "low-big", "low-small", "above", "within", "foreign"]
    judge = lambda evicted: oracle.eviction_order_problems(pods, usage, evicted, mine)  # noqa: E731
    assert judge(["ns/low-big", "ns/low-small", "ns/above", "ns/foreign", "ns/within"]) == []
    # same class (above request, priority 0): a foreign pod's place among them is not judged
    assert judge(["ns/low-big", "ns/low-small", "ns/foreign", "ns/above"]) == []
    assert judge(["ns/low-small", "ns/low-big"]) == [
        "ns/low-small (above request, priority -10, usage - request 33554432) evicted before"
        " ns/low-big (above request, priority -10, usage - request 67108864)"]
    assert judge(["ns/low-big", "ns/above"])[0].startswith(
        "ns/above (above request, priority 0, usage - request 50331648) evicted while ns/low-small")
    assert judge(["ns/low-big", "ns/low-small", "ns/within"])[0].startswith("ns/within (within request")
    assert judge(["ns/critical"]) == ["ns/critical is critical and was evicted"]


def test_pod_memory_request_with_init_and_sidecars() -> None:
    p = pod(
        container("app", {"memory": "100Mi"}),
        init=[container("big-init", {"memory": "1Gi"}), container("side", {"memory": "50Mi"}, restartPolicy="Always")],
    )
    assert oracle.pod_memory_request(p) == Gi  # the init peak exceeds app + sidecar
    p2 = pod(container("app", {"memory": "100Mi"}), init=[container("side", {"memory": "50Mi"}, restartPolicy="Always")])
    assert oracle.pod_memory_request(p2) == 150 * Mi


# --- properties ----------------------------------------------------------------------------------

node_memory = st.integers(min_value=1, max_value=2**40)
node_swap = st.integers(min_value=0, max_value=2**38)


@settings(max_examples=300, deadline=None)
@given(mem=node_memory, swap=node_swap, data=st.data())
def test_limited_swap_bounded_by_node_swap_and_close_to_exact(mem: int, swap: int, data: st.DataObject) -> None:
    request = data.draw(st.integers(min_value=1, max_value=mem))
    value = limited(burstable(request), mem, swap)
    assert 0 <= value <= swap
    # float64 may lose the last unit, never more than a handful relative to the exact quotient.
    exact = request * swap // mem
    assert abs(value - exact) <= max(1, swap >> 50)


@settings(max_examples=200, deadline=None)
@given(mem=st.integers(min_value=1 << 20, max_value=2**40), swap=node_swap, data=st.data())
def test_limited_swap_monotonic_in_request(mem: int, swap: int, data: st.DataObject) -> None:
    low = data.draw(st.integers(min_value=1, max_value=mem))
    high = data.draw(st.integers(min_value=low, max_value=mem))
    assert limited(burstable(low), mem, swap) <= limited(burstable(high), mem, swap)


@settings(max_examples=200, deadline=None)
@given(value=st.integers(min_value=0, max_value=2**50))
def test_readback_is_a_page_multiple_within_one_page(value: int) -> None:
    read = int(oracle.readback_swap_max(value))
    assert read % oracle.PAGE_SIZE == 0 and value - oracle.PAGE_SIZE < read <= value


# --- kubelet restart and behavior switch; in-place resize of containers with swap -------------

def test_a_container_keeps_the_behavior_it_was_created_under() -> None:
    assert oracle.behavior_applied(LIMITED_SWAP, NO_SWAP) == LIMITED_SWAP
    assert oracle.behavior_applied(NO_SWAP, LIMITED_SWAP) == NO_SWAP


def _resized(before: dict, **resources: dict) -> dict:
    return pod(container("c", **resources, resizePolicy=before["spec"]["containers"][0].get("resizePolicy", [])))


BURSTABLE = dict(requests={"memory": "1Gi", "cpu": "1"}, limits={"memory": "2Gi"})


@pytest.mark.parametrize("behavior, policy, after, refused", [
    # allocation_manager_test.go TestRetryPendingResizesWithSwap's three cases (1 CPU/1Gi -> 500m/500Mi)
    (NO_SWAP, "RestartContainer", dict(requests={"memory": "500Mi", "cpu": "500m"}, limits={"memory": "2Gi"}), []),
    (LIMITED_SWAP, "RestartContainer", dict(requests={"memory": "500Mi", "cpu": "500m"}, limits={"memory": "2Gi"}), []),
    (LIMITED_SWAP, "NotRequired", dict(requests={"memory": "500Mi", "cpu": "500m"}, limits={"memory": "2Gi"}), ["c"]),
    # no policy given: NotRequired, the API default
    (LIMITED_SWAP, None, dict(requests={"memory": "1100Mi", "cpu": "1"}, limits={"memory": "2Gi"}), ["c"]),
    # NoSwap: no container has swap
    (NO_SWAP, None, dict(requests={"memory": "1100Mi", "cpu": "1"}, limits={"memory": "2Gi"}), []),
    # a CPU-only or memory-limit-only change is never refused for swap
    (LIMITED_SWAP, None, dict(requests={"memory": "1Gi", "cpu": "2"}, limits={"memory": "2Gi"}), []),
    (LIMITED_SWAP, None, dict(requests={"memory": "1Gi", "cpu": "1"}, limits={"memory": "3Gi"}), []),
    # the desired pod counts too: a request raised to the limit leaves no swap after, but had some before
    (LIMITED_SWAP, None, dict(requests={"memory": "2Gi", "cpu": "1"}, limits={"memory": "2Gi"}), ["c"]),
])
def test_resize_refused_for_swap(behavior: str, policy: str | None, after: dict, refused: list[str]) -> None:
    extra = {"resizePolicy": [{"resourceName": "memory", "restartPolicy": policy}]} if policy else {}
    before = pod(container("c", **BURSTABLE, **extra))
    assert oracle.resize_refused_for_swap(behavior, before, _resized(before, **after)) == refused


def test_resize_of_a_guaranteed_container_on_limited_swap_is_allowed() -> None:
    g = {"memory": "1Gi", "cpu": "1"}
    before = pod(container("c", requests=g, limits=g))
    after = pod(container("c", requests={"memory": "2Gi", "cpu": "1"}, limits={"memory": "2Gi", "cpu": "1"}))
    assert oracle.resize_refused_for_swap(LIMITED_SWAP, before, after) == []


def test_resize_of_a_container_with_limits_swap_is_allowed_under_workload_controlled_swap() -> None:
    """KEP-5359: its swap is limits.swap, which a memory resize leaves alone; the same pod on a
    LimitedSwap node (the field ignored, a Burstable request) is refused."""
    swap = {"memory": "2Gi", "swap": "1Gi"}
    before = pod(container("c", requests={"memory": "1Gi", "cpu": "1"}, limits=swap))
    after = pod(container("c", requests={"memory": "1100Mi", "cpu": "1"}, limits=swap))
    assert oracle.container_swap_behavior(WORKLOAD_CONTROLLED_SWAP, before, "c") == WORKLOAD_CONTROLLED_SWAP
    assert oracle.resize_refused_for_swap(WORKLOAD_CONTROLLED_SWAP, before, after) == []
    assert oracle.resize_refused_for_swap(LIMITED_SWAP, before, after) == ["c"]


def test_resize_of_a_critical_pod_on_limited_swap_is_allowed() -> None:
    before = pod(container("c", **BURSTABLE), priority=2000001000)
    after = pod(container("c", requests={"memory": "1100Mi", "cpu": "1"}, limits={"memory": "2Gi"}), priority=2000001000)
    assert oracle.resize_refused_for_swap(LIMITED_SWAP, before, after) == []


def test_container_swap_behavior_follows_the_limited_swap_exclusions() -> None:
    assert oracle.container_swap_behavior(LIMITED_SWAP, pod(container("c", **BURSTABLE)), "c") == LIMITED_SWAP
    # request only (no limit) is Burstable with swap; limit only defaults request = limit: none
    assert oracle.container_swap_behavior(LIMITED_SWAP, pod(container("c", requests={"memory": "1Gi"})), "c") == LIMITED_SWAP
    assert oracle.container_swap_behavior(LIMITED_SWAP, pod(container("c", requests={"cpu": "1"}, limits={"memory": "1Gi"})), "c") == NO_SWAP
    # a request above the node's memory still runs the LimitedSwap rule (which then writes 0)
    assert oracle.container_swap_behavior(LIMITED_SWAP, pod(container("c", requests={"memory": "1Ei"})), "c") == LIMITED_SWAP
    assert oracle.container_swap_behavior(LIMITED_SWAP, pod(container("c", **BURSTABLE)), "c", cgroup_v2=False) == NO_SWAP


# --- pod-level resources (PodLevelResources, beta and on by default since 1.34) -----------------

def rl(cpu: str = "", memory: str = "") -> dict:
    """getResourceList of the kubelet's tests: an empty string leaves the resource out."""
    return {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v}


def ctr(name: str, requests: dict, limits: dict, sidecar: bool = False) -> dict:
    return container(name, requests or None, limits or None, **({"restartPolicy": "Always"} if sidecar else {}))


# pkg/registry/core/pod/strategy_test.go TestApplyPodLevelResourceDefaults (v1.37.1), the cases with
# both gates on: (containers, init containers, pod-level requests, limits) -> (requests, limits).
@pytest.mark.parametrize(("containers", "init", "requests", "limits", "want_requests", "want_limits"), [
    ([ctr("c1", rl("100m", "128Mi"), rl("200m", "256Mi"))], [], {}, {}, {}, {}),
    ([ctr("c1", rl("100m", "128Mi"), rl("100m")), ctr("c2", rl("200m", "128Mi"), rl("200m"))], [],
     rl(memory="256Mi"), {}, rl("300m", "256Mi"), rl("300m")),
    ([ctr("c1", rl(memory="128Mi"), rl(memory="128Mi")), ctr("c2", rl(memory="128Mi"), rl(memory="128Mi"))], [],
     rl(memory="256Mi"), {}, rl(memory="256Mi"), rl(memory="256Mi")),
    ([ctr("c1", rl("5m"), rl("9m")), ctr("c2", rl("6m"), rl("10m"))], [], rl(memory="256Mi"), {},
     rl("11m", "256Mi"), rl("19m")),
    ([ctr("c1", rl(memory="128Mi"), rl(memory="256Mi")), ctr("c2", rl(memory="128Mi"), rl(memory="256Mi"))], [],
     rl("200m"), {}, rl("200m", "256Mi"), rl(memory="512Mi")),
    ([ctr("c1", {}, rl("100m", "128Mi")), ctr("c2", {}, rl("100m", "128Mi"))], [], rl("200m", "256Mi"), {},
     rl("200m", "256Mi"), rl("200m", "256Mi")),
    ([ctr("c1", rl("50m", "64Mi"), rl("100m", "128Mi")), ctr("c2", rl("50m", "64Mi"), {})], [], rl("200m", "256Mi"), {},
     rl("200m", "256Mi"), {}),
    ([ctr("c1", rl("100m", "128Mi"), rl("100m", "128Mi")), ctr("c2", rl("100m", "128Mi"), rl("100m", "128Mi"))], [],
     rl("200m", "256Mi"), rl("200m"), rl("200m", "256Mi"), rl("200m", "256Mi")),
    ([ctr("c1", rl("100m", "128Mi"), rl("100m", "128Mi")), ctr("c2", rl("80m", "128Mi"), rl("100m", "128Mi"))], [],
     rl(memory="256Mi"), rl(memory="256Mi"), rl("180m", "256Mi"), rl("200m", "256Mi")),
    ([ctr("c1", rl("100m", "128Mi"), rl("100m", "128Mi"))], [ctr("init1", rl("200m", "256Mi"), rl("200m", "256Mi"))],
     rl("200m", "256Mi"), {}, rl("200m", "256Mi"), rl("200m", "256Mi")),
    ([ctr("c1", rl("100m", "128Mi"), rl("100m", "128Mi"))], [ctr("init1", rl("200m", "256Mi"), {})],
     rl("200m", "256Mi"), {}, rl("200m", "256Mi"), {}),
    ([ctr("c1", rl("100m", "128Mi"), rl("100m", "128Mi"))], [ctr("sidecar", rl("50m", "64Mi"), rl("50m", "64Mi"), True)],
     rl("150m", "192Mi"), {}, rl("150m", "192Mi"), rl("150m", "192Mi")),
    ([ctr("c1", rl("100m", "128Mi"), rl("100m", "128Mi"))], [], rl("500m", "512Mi"), {},
     rl("500m", "512Mi"), rl("500m", "512Mi")),
    ([ctr("c1", rl("100m", "128Mi"), rl("200m", "256Mi"))], [], rl("100m", "128Mi"), {},
     rl("100m", "128Mi"), rl("200m", "256Mi")),
    ([ctr("c1", rl("100m", "128Mi"), rl("200m", "256Mi"))], [], {}, rl("500m", "512Mi"),
     rl("100m", "128Mi"), rl("500m", "512Mi")),
])
def test_pod_level_defaulting_kubernetes_vectors(containers: list, init: list, requests: dict, limits: dict,
                                                 want_requests: dict, want_limits: dict) -> None:
    resources = {k: v for k, v in (("requests", requests), ("limits", limits)) if v}
    spec = oracle.defaulted_pod(pod(*containers, init=init, resources=resources))["spec"]
    got = spec.get("resources") or {}

    def exact(values: dict) -> dict:
        return {k: oracle._exact(v) for k, v in values.items()}

    assert exact(got.get("requests") or {}) == exact(want_requests)
    assert exact(got.get("limits") or {}) == exact(want_limits)


def test_pod_level_defaulting_before_1_37() -> None:
    # 1.34-1.36 (SetDefaults_Pod defaultPodRequests): requests from the containers' aggregate and
    # the limits, only when pod-level limits are set; pod-level limits are never defaulted.
    requests_only = pod(container(limits={"cpu": "1", "memory": "1Gi"}), resources={"requests": {"memory": "1Gi"}})
    legacy = oracle.defaulted_pod(requests_only, legacy_pod_level_defaulting=True)["spec"]["resources"]
    assert legacy == {"requests": {"memory": "1Gi"}}
    limits_only = pod(ctr("c1", rl("100m", "128Mi"), rl("200m", "256Mi")), resources={"limits": rl("500m", "512Mi")})
    legacy = oracle.defaulted_pod(limits_only, legacy_pod_level_defaulting=True)["spec"]["resources"]
    assert {k: oracle._exact(v) for k, v in legacy["requests"].items()} == {"cpu": oracle._exact("100m"),
                                                                           "memory": 128 * Mi}


def test_defaulting_is_idempotent() -> None:
    p = pod(ctr("c1", rl("100m", "128Mi"), rl("200m", "256Mi")), ctr("c2", rl(memory="150000001"), {}),
            resources={"limits": rl(memory="512Mi")})
    once = oracle.defaulted_pod(p)
    assert oracle.defaulted_pod(once) == once


def test_pod_level_resources_set_names_cpu_memory_or_hugepages() -> None:
    # resourcehelper.IsPodLevelResourcesSet
    assert oracle.pod_level_resources_set(pod(container(), resources={"limits": {"memory": "1Gi"}}))
    assert oracle.pod_level_resources_set(pod(container(), resources={"requests": {"hugepages-2Mi": "2Mi"}}))
    assert not oracle.pod_level_resources_set(pod(container(), resources={"requests": {"example.com/gpu": "1"}}))
    assert not oracle.pod_level_resources_set(pod(container(), resources={}))
    assert not oracle.pod_level_resources_set(pod(container()))


def test_swap_uses_the_containers_own_request_never_the_pod_level_one() -> None:
    # ConfigureLimitedSwap: calcSwapForBurstablePods(container.Resources.Requests.Memory().Value(), ...)
    # pod-level limit 256Mi, container requests 150000001 and 64Mi: pod-level request 217108865.
    p = pod(container("app", {"memory": "150000001"}), container("capped", {"memory": "64Mi"}, {"memory": "128Mi"}),
            resources={"limits": {"memory": "256Mi"}})
    assert oracle.quantity_bytes(oracle.defaulted_pod(p)["spec"]["resources"]["requests"]["memory"]) == 217108865
    assert oracle.qos_class(p) == "Burstable"
    assert limited(p, 4 * Gi, 2 * Gi, "app") == 75000000  # 150000001 / 2, truncated
    assert oracle.readback_swap_max(75000000) == "74997760"
    assert limited(p, 4 * Gi, 2 * Gi, "capped") == 32 * Mi
    # the pod-level request would give 108554432, read back 108552192: a different figure
    assert oracle.readback_swap_max(int(217108865 / (4 * Gi) * (2 * Gi))) == "108552192"


def test_containers_without_memory_get_no_swap_from_pod_level_resources() -> None:
    # GetContainerSwapBehavior: container.Resources.Requests.Memory().IsZero() &&
    # container.Resources.Limits.Memory().IsZero(): the pod-level request (Burstable) is no container's.
    p = pod(container("app"), container("helper"), resources={"requests": {"memory": "64Mi"}, "limits": {"memory": "128Mi"}})
    assert oracle.qos_class(p) == "Burstable"
    decision = oracle.decide_swap(LIMITED_SWAP, p, "app", 4 * Gi, 2 * Gi)
    assert decision.value == 0 and decision.rule.startswith("container has no memory request")
    assert decision.inputs["pod_level"] == {"requests": {"memory": "64Mi"}, "limits": {"memory": "128Mi"}}
    assert limited(p, 4 * Gi, 2 * Gi, "helper") == 0


def test_memory_max_falls_back_to_the_pod_level_limit() -> None:
    # getMemoryLimit: the container's own limit; none -> the pod-level memory limit (if any).
    p = pod(container("own", {"memory": "64Mi"}, {"memory": "128Mi"}), container("none", {"memory": "64Mi"}),
            resources={"limits": {"memory": "256Mi"}})
    assert oracle.expected_memory_max(p, "own") == str(128 * Mi)
    assert oracle.expected_memory_max(p, "none") == str(256 * Mi)
    assert oracle.container_memory_limit(p, "none") == 256 * Mi
    cpu_only = pod(container("none", {"memory": "64Mi"}), resources={"limits": {"cpu": "1"}})
    assert oracle.expected_memory_max(cpu_only, "none") == "max"  # pod level limits no memory
    odd = pod(container("none"), resources={"limits": {"memory": "1000000"}})
    assert oracle.expected_memory_max(odd, "none") == "999424"  # floored to pages like any limit
    sidecar = pod(container("app"), init=[container("side", restartPolicy="Always")], resources={"limits": {"memory": "1Gi"}})
    assert oracle.expected_memory_max(sidecar, "side") == str(Gi)


# --- requests that are not whole MiB: the float64 product, its truncation, the page floor ----------

def test_odd_request_exact_figures() -> None:
    # 4 GiB node, 2 GiB swap: 123456789 / 2 = 61728394.5 -> 61728394 -> 15070 pages = 61726720.
    p = burstable("123456789", "256Mi")
    assert limited(p, 4 * Gi, 2 * Gi) == 61728394
    assert oracle.readback_swap_max(61728394) == "61726720"
    # A MiB-granular formula (117 MiB) would read 61341696; a KiB-granular one 61726720 as well.
    assert oracle.readback_swap_max(117 * Mi // 2) == "61341696"


def test_page_edge_request_exact_figures() -> None:
    # swap/memory = 1/2: the value is request // 2, one byte short of a page for request = 8192k + 8191.
    request = oracle.page_edge_request(100_000_000, 4 * Gi, 2 * Gi)
    assert request == 100007935 == 8192 * 12207 + 8191
    value = limited(burstable(request), 4 * Gi, 2 * Gi)
    assert value == 50003967 and oracle.readback_swap_max(value) == "49999872"
    # rounded to nearest or up (the exact quotient is 50003967.5) it reads a page higher
    assert oracle.readback_swap_max(round(request / 2 + 0.1)) == "50003968"


def _an_exact_edge_exists(near: int, mem: int, swap: int, pages: int = 65536) -> bool:
    """Whether some request >= near (and <= mem) in the pages page_edge_request searches has an
    exact quotient request * swap / mem in [value + 1/2, value + 1) for a value one byte short of a
    page, in integers: q * (2 value + 1) <= 2 p request < 2 q (value + 1) for swap / mem = p / q."""
    ratio = Fraction(swap, mem)
    p, q = ratio.numerator, ratio.denominator
    first = near * p // q // oracle.PAGE_SIZE
    for page in range(first, first + pages):
        value = page * oracle.PAGE_SIZE + oracle.PAGE_SIZE - 1
        request = -(-q * (2 * value + 1) // (2 * p))  # the smallest with 2 p request >= q (2 value + 1)
        if request > mem:
            return False
        if request >= near and request * p < q * (value + 1):
            return True
    return False


@settings(max_examples=200, deadline=None)
@given(mem_kib=st.integers(min_value=512 * Ki, max_value=2**30), swap_per_mem=st.fractions(min_value=0, max_value=4),
       near=st.integers(min_value=Mi, max_value=256 * Mi))
def test_page_edge_request_sits_on_a_page_edge(mem_kib: int, swap_per_mem: Fraction, near: int) -> None:
    """Nodes as /proc/meminfo reports them (whole KiB), with up to 4 times as much swap as memory."""
    from fractions import Fraction

    mem = mem_kib * Ki
    swap = max(64 * Mi, int(mem * swap_per_mem) // Ki * Ki)
    request = oracle.page_edge_request(near, mem, swap)
    if request == near and not _an_exact_edge_exists(near, mem, swap):
        return  # nothing to find: e.g. a whole ratio, or 2/3 (every quotient is k/3, every edge value odd)
    value = limited(burstable(request), mem, swap)
    exact = Fraction(request * swap, mem)
    assert request >= near and value % oracle.PAGE_SIZE == oracle.PAGE_SIZE - 1
    assert value + Fraction(1, 2) <= exact < value + 1  # rounding or ceiling would cross the page
    assert int(oracle.readback_swap_max(value)) + oracle.PAGE_SIZE == int(oracle.readback_swap_max(value + 1))


def test_page_edge_request_without_swap_is_the_request_asked() -> None:
    assert oracle.page_edge_request(100_000_000, 4 * Gi, 0) == 100_000_000
    assert oracle.page_edge_request(100_000_000, Gi, 3 * Gi) == 100_000_000  # whole ratio: no edge
    # a ratio a hair above a multiple of 256: every quotient within the searched pages is a hair
    # above a multiple of 256 bytes, never half a byte short of a page (hypothesis found it)
    assert oracle.page_edge_request(Mi, 512 * Mi, 256 * 512 * Mi + Ki) == Mi


# --- the suite's own static pod -----------------------------------------------------------------

def test_a_static_pod_is_critical_whatever_its_priority() -> None:
    from workloads.pods import static_pod

    manifest = static_pod("ksc-static", "img", "ns", "t")
    assert "priority" not in manifest["spec"] and "priorityClassName" not in manifest["spec"]
    assert oracle.qos_class(manifest) == "Burstable"
    # were it an API pod it would swap: 64Mi of 4Gi, 2Gi swap
    assert limited(manifest, 4 * Gi, 2 * Gi, "app") == 32 * Mi
    # as the kubelet reads it from its staticPodPath (config.source "file"): IsStaticPod
    as_read = {**manifest, "metadata": {**manifest["metadata"], "annotations": {"kubernetes.io/config.source": "file"}}}
    assert limited(as_read, 4 * Gi, 2 * Gi, "app") == 0
    # its mirror pod, as the API server returns it (priority 0 from admission)
    mirror_annotations = {"kubernetes.io/config.source": "file", "kubernetes.io/config.mirror": "abc",
                          "kubernetes.io/config.hash": "abc"}
    mirror = {**manifest, "metadata": {**manifest["metadata"], "annotations": mirror_annotations},
              "spec": {**manifest["spec"], "priority": 0}, "status": {"qosClass": "Burstable"}}
    decision = oracle.decide_swap(LIMITED_SWAP, mirror, "app", 4 * Gi, 2 * Gi)
    assert decision.value == 0 and decision.rule.startswith("critical pod")
    assert oracle.expected_memory_max(mirror, "app") == str(128 * Mi)


def test_limits_swap_alone_is_best_effort_and_never_defaulted_into_requests() -> None:
    """KEP-5359: a container with only limits.swap is BestEffort (QoS reads cpu and memory only),
    gets its limits.swap under WorkloadControlledSwap and the behavior's own value elsewhere; the
    API server does not default requests.swap from it (a non-zero requests.swap is refused)."""
    from workloads.pods import stress_pod

    pod = stress_pod("p", "img", "ns", "t", ["pause"], None, {"swap": str(48 * 2**20)})
    defaulted = oracle.defaulted_pod(pod)
    assert "swap" not in (oracle.find_container(defaulted, "stress")["resources"].get("requests") or {})
    assert oracle.pod_qos(defaulted) == "BestEffort"
    for behavior, expected in (("WorkloadControlledSwap", 48 * 2**20), ("LimitedSwap", 0), ("NoSwap", 0)):
        assert oracle.expected_swap_max(behavior, pod, "stress", 4 * 2**30, 2 * 2**30) == expected


# --- G1: a memory resize with resizePolicy RestartContainer (oracle.resize_outcome) -------------

RESTART_MEMORY = [{"resourceName": "memory", "restartPolicy": "RestartContainer"}]


def _with(before: dict, requests: dict, limits: dict | None = None) -> dict:
    """`before` with the first container's resources replaced (its resizePolicy kept)."""
    first = dict(before["spec"]["containers"][0], resources={"requests": requests, **({"limits": limits} if limits else {})})
    return {**before, "spec": {**before["spec"], "containers": [first]}}


@pytest.mark.parametrize("behavior, policy, action, swap_of", [
    # allocation_manager_test.go TestRetryPendingResizesWithSwap's cases (1 CPU/1Gi -> 500m/500Mi), with
    # what computePodResizeAction then does: the memory policy RestartContainer restarts the container
    (NO_SWAP, RESTART_MEMORY, oracle.RESIZE_RESTART, None),
    (LIMITED_SWAP, RESTART_MEMORY, oracle.RESIZE_RESTART, 500 * Mi),
    (LIMITED_SWAP, [{"resourceName": "memory", "restartPolicy": "NotRequired"}], oracle.RESIZE_INFEASIBLE, Gi),
    # mutant 39's reading: a RestartContainer policy for cpu does not exempt a memory-request change
    (LIMITED_SWAP, [{"resourceName": "cpu", "restartPolicy": "RestartContainer"}], oracle.RESIZE_INFEASIBLE, Gi),
    # the test's policy list: cpu NotRequired first, memory RestartContainer
    (LIMITED_SWAP, [{"resourceName": "cpu", "restartPolicy": "NotRequired"}, *RESTART_MEMORY], oracle.RESIZE_RESTART,
     500 * Mi),
    (NO_SWAP, [], oracle.RESIZE_IN_PLACE, None),
])
def test_resize_outcome_kubelet_vectors(behavior: str, policy: list, action: str, swap_of: int | None) -> None:
    before = pod(container("c", **BURSTABLE, resizePolicy=policy))
    after = _with(before, {"memory": "500Mi", "cpu": "500m"}, {"memory": "2Gi"})
    outcome = oracle.resize_outcome(behavior, before, after, "c", MEM, SWAP)
    assert outcome.action == action, outcome
    assert outcome.swap.value == (0 if swap_of is None else swap_of * SWAP // MEM)
    assert (outcome.action == oracle.RESIZE_INFEASIBLE) == bool(oracle.resize_refused_for_swap(behavior, before, after))


def test_resize_outcome_says_what_it_does_and_why() -> None:
    before = pod(container("c", **BURSTABLE, resizePolicy=RESTART_MEMORY))
    restarted = oracle.resize_outcome(LIMITED_SWAP, before, _with(before, {"memory": "1100Mi", "cpu": "1"}, {"memory": "2Gi"}),
                                      "c", MEM, SWAP)
    assert str(restarted).startswith(f"restart (computePodResizeAction: memory request {Gi} -> {1100 * Mi}; resizePolicy"
                                     " RestartContainer for memory")
    assert restarted.swap.inputs["memory_request"] == 1100 * Mi and "memory.swap.max afterwards" in str(restarted)
    refused = oracle.resize_outcome(LIMITED_SWAP, pod(container("c", **BURSTABLE)),
                                    _with(before, {"memory": "1100Mi", "cpu": "1"}, {"memory": "2Gi"}), "c", MEM, SWAP)
    assert refused.action == oracle.RESIZE_INFEASIBLE and oracle.RESIZE_SWAP_MESSAGE in refused.rule
    assert refused.swap.inputs["memory_request"] == Gi  # refused: the container keeps the allocated request's share


def test_resize_outcome_of_other_changes() -> None:
    restart_cpu = [{"resourceName": "cpu", "restartPolicy": "RestartContainer"}]
    before = pod(container("c", **BURSTABLE, resizePolicy=restart_cpu))
    # a CPU change under a cpu RestartContainer policy restarts the container; its share is unchanged
    cpu = oracle.resize_outcome(LIMITED_SWAP, before, _with(before, {"memory": "1Gi", "cpu": "2"}, {"memory": "2Gi"}),
                                "c", MEM, SWAP)
    assert (cpu.action, cpu.swap.value) == (oracle.RESIZE_RESTART, Gi * SWAP // MEM)
    # a memory-limit change with no memory policy: in place (never refused for swap), the share sent again
    limit = oracle.resize_outcome(LIMITED_SWAP, before, _with(before, {"memory": "1Gi", "cpu": "1"}, {"memory": "3Gi"}),
                                  "c", MEM, SWAP)
    assert (limit.action, limit.swap.value) == (oracle.RESIZE_IN_PLACE, Gi * SWAP // MEM)
    # equal quantities written differently (1 and 1000m CPU, 1Gi and its bytes) are no change
    same = oracle.resize_outcome(LIMITED_SWAP, before, _with(before, {"memory": str(Gi), "cpu": "1000m"}, {"memory": "2Gi"}),
                                 "c", MEM, SWAP)
    assert same.action == oracle.RESIZE_NOTHING
    # a Guaranteed pod's memory resize under LimitedSwap: in place, no swap before or after
    g = {"memory": "1Gi", "cpu": "1"}
    guaranteed = pod(container("c", requests=g, limits=g))
    grown = _with(guaranteed, {"memory": "2Gi", "cpu": "1"}, {"memory": "2Gi", "cpu": "1"})
    assert (oracle.resize_outcome(LIMITED_SWAP, guaranteed, grown, "c", MEM, SWAP).action,
            oracle.resize_outcome(LIMITED_SWAP, guaranteed, grown, "c", MEM, SWAP).swap.value) == (oracle.RESIZE_IN_PLACE, 0)


@settings(max_examples=200, deadline=None)
@given(mem=st.integers(min_value=64 * Mi, max_value=2**40), swap=node_swap, data=st.data())
def test_a_restarted_container_gets_the_share_of_its_new_request(mem: int, swap: int, data: st.DataObject) -> None:
    """Any memory-request change of a Burstable container below its limit: with the memory policy
    RestartContainer it is restarted with the desired pod's share, never refused; without, it is
    refused and keeps the allocated pod's share."""
    limit = data.draw(st.integers(min_value=2, max_value=mem))
    old = data.draw(st.integers(min_value=1, max_value=limit - 1))
    new = data.draw(st.integers(min_value=1, max_value=limit - 1).filter(lambda r: r != old))
    for policy, action, request in ((RESTART_MEMORY, oracle.RESIZE_RESTART, new), ([], oracle.RESIZE_INFEASIBLE, old)):
        before = pod(container("c", {"memory": str(old)}, {"memory": str(limit)}, resizePolicy=policy))
        outcome = oracle.resize_outcome(LIMITED_SWAP, before, _with(before, {"memory": str(new)}, {"memory": str(limit)}),
                                        "c", mem, swap)
        assert outcome.action == action
        assert outcome.swap.value == limited(burstable(request, limit), mem, swap)


# --- G2, G3: every kind of container goes through the one decision (oracle.container_kind) ------

def _every_kind(**spec_extra: Any) -> dict:
    return pod(container("app", {"memory": "1Gi"}, {"memory": "2Gi"}),
               init=[container("init", {"memory": "256Mi"}, {"memory": "2Gi"}),
                     container("sidecar", {"memory": "512Mi"}, {"memory": "2Gi"}, restartPolicy="Always")],
               ephemeralContainers=[{"name": "debugger", "image": "x", "command": ["/swapstress", "pause"]}],
               **spec_extra)


def test_container_kind_names_the_start_that_creates_it() -> None:
    p = _every_kind()
    assert [oracle.container_kind(p, n) for n in ("app", "init", "sidecar", "debugger")] == [
        oracle.APP_CONTAINER, oracle.INIT_CONTAINER, oracle.SIDECAR, oracle.EPHEMERAL_CONTAINER]
    with pytest.raises(KeyError, match="ephemeral container named 'nope'.*'debugger'"):
        oracle.container_kind(p, "nope")
    assert oracle.find_container(p, "debugger")["command"] == ["/swapstress", "pause"]


def test_an_init_container_gets_the_share_of_its_own_request() -> None:
    """Mutant 40's shape: under LimitedSwap the init container's share is of its own 256Mi, not
    the app's 1Gi; 0 under NoSwap and, without limits.swap, under WorkloadControlledSwap."""
    p = _every_kind()
    assert limited(p, MEM, SWAP, "init") == 256 * Mi * SWAP // MEM == 64 * Mi
    assert limited(p, MEM, SWAP, "init") != limited(p, MEM, SWAP, "app")
    for behavior in (NO_SWAP, WORKLOAD_CONTROLLED_SWAP):
        assert oracle.expected_swap_max(behavior, p, "init", MEM, SWAP) == 0
    assert oracle.expected_memory_max(p, "init") == str(2 * Gi)


@settings(max_examples=200, deadline=None)
@given(mem=st.integers(min_value=64 * Mi, max_value=2**40), swap=node_swap, data=st.data())
def test_an_init_container_is_decided_as_an_app_container_with_its_resources(mem: int, swap: int,
                                                                            data: st.DataObject) -> None:
    limit = data.draw(st.integers(min_value=1, max_value=mem))
    request = data.draw(st.integers(min_value=1, max_value=limit))
    init = container("init", {"memory": str(request)}, {"memory": str(limit)})
    with_init = pod(container("app", {"memory": "1Mi"}, {"memory": "2Mi"}), init=[init])
    alone = pod(container("init", {"memory": str(request)}, {"memory": str(limit)}))
    for behavior in (NO_SWAP, LIMITED_SWAP, WORKLOAD_CONTROLLED_SWAP):
        assert (oracle.expected_swap_max(behavior, with_init, "init", mem, swap)
                == oracle.expected_swap_max(behavior, alone, "init", mem, swap))


@pytest.mark.parametrize("behavior", [NO_SWAP, LIMITED_SWAP, WORKLOAD_CONTROLLED_SWAP])
def test_an_ephemeral_container_gets_no_swap(behavior: str) -> None:
    """Mutant 41's shape: in a Burstable pod whose app container has a LimitedSwap share, the
    debug container has no memory request and no limit: NoSwap, 0 written (not left unset)."""
    p = _every_kind()
    decision = oracle.decide_swap(behavior, p, "debugger", MEM, SWAP)
    assert decision.value == 0 and oracle.readback_swap_max(decision.value) == "0"
    if behavior == LIMITED_SWAP:
        assert decision.rule.startswith("container has no memory request and no memory limit")
        assert limited(p, MEM, SWAP, "app") > 0
    assert oracle.expected_memory_max(p, "debugger") == "max"


def test_an_ephemeral_container_gets_the_pod_level_memory_limit() -> None:
    """getMemoryLimit: a container without a memory limit of its own (an ephemeral one never has
    one) gets the pod-level memory limit where pod-level resources are set."""
    p = _every_kind(resources={"requests": {"memory": "2Gi"}, "limits": {"memory": "3Gi"}})
    assert oracle.expected_memory_max(p, "debugger") == str(3 * Gi)
    assert oracle.expected_swap_max(LIMITED_SWAP, p, "debugger", MEM, SWAP) == 0


@settings(max_examples=100, deadline=None)
@given(behavior=st.sampled_from([NO_SWAP, LIMITED_SWAP, WORKLOAD_CONTROLLED_SWAP]),
       request=st.integers(min_value=0, max_value=4 * Gi), extra=st.integers(min_value=0, max_value=4 * Gi),
       priority=st.sampled_from([None, 0, 2_000_000_000]))
def test_an_ephemeral_container_never_gets_swap(behavior: str, request: int, extra: int, priority: int | None) -> None:
    app = container("app", {"memory": str(request)} if request else None, {"memory": str(request + extra)} if extra else None)
    p = pod(app, ephemeralContainers=[{"name": "debugger", "image": "x"}], priority=priority)
    assert oracle.expected_swap_max(behavior, p, "debugger", MEM, SWAP) == 0


def test_node_swap_allocated_sums_limits_swap_of_non_terminal_pods() -> None:
    running = {"spec": {"initContainers": [{"resources": {"limits": {"swap": "16Mi"}}}],
                        "containers": [{"resources": {"limits": {"swap": "48Mi", "memory": "1Gi"}}}, {"name": "no-swap"}]},
               "status": {"phase": "Running"}}
    ended = {"spec": {"containers": [{"resources": {"limits": {"swap": "8Mi"}}}]}, "status": {"phase": "Succeeded"}}
    pending = {"spec": {"containers": [{"resources": {"limits": {"swap": "1Mi"}}}]}, "status": {"phase": "Pending"}}
    assert oracle.node_swap_allocated([running, ended]) == 64 * 2**20
    assert oracle.node_swap_allocated([running, pending]) == 65 * 2**20  # admitted, not yet running: active
    assert oracle.node_swap_allocated([]) == 0
