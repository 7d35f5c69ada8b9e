"""The Prometheus text parser the metrics tests read /metrics/resource with, and the relations a
consistent swap scrape must satisfy."""

from __future__ import annotations

import pytest

from e2e.metrics import find, parse_prometheus, swap_usage_mismatches

TEXT = """# HELP container_swap_usage_bytes [ALPHA] Current amount of the container swap usage in bytes. Reported only on non-windows systems
# TYPE container_swap_usage_bytes gauge
container_swap_usage_bytes{container="stress",namespace="ksc-1",pod="over-limit"} 3.3554432e+07 1795264289909
container_swap_usage_bytes{container="app",namespace="ksc-1",pod="other"} 0 1795264289909
node_swap_usage_bytes 4.194304e+07 1795264289000
scrape_error 0
weird{a="quote \\" inside",b=""} 1
"""


def test_parses_names_labels_values_timestamps() -> None:
    samples = parse_prometheus(TEXT)
    assert len(samples) == 5
    usage = find(samples, "container_swap_usage_bytes", pod="over-limit", namespace="ksc-1")
    assert usage is not None and usage.value == 33554432 and usage.timestamp_ms == 1795264289909
    assert usage.labels == {"container": "stress", "namespace": "ksc-1", "pod": "over-limit"}
    node = find(samples, "node_swap_usage_bytes")
    assert node is not None and node.value == 41943040 and node.labels == {}
    assert find(samples, "scrape_error").timestamp_ms is None
    assert find(samples, "weird").labels == {"a": 'quote " inside', "b": ""}
    assert find(samples, "container_swap_usage_bytes", pod="absent") is None


def test_rejects_garbage() -> None:
    with pytest.raises(ValueError, match="not a Prometheus sample"):
        parse_prometheus("this is not { a metric")


MiB = 1024**2


def test_a_scrape_equal_to_every_figure_is_consistent() -> None:
    figures = {"container": 40 * MiB, "pod": 40 * MiB, "node": 41 * MiB}
    assert swap_usage_mismatches(figures, {k: float(v) for k, v in figures.items()}) == []


@pytest.mark.parametrize(
    ("figures", "reported", "expected"),
    [
        # Seen on the vm with the old ">= container" rule: a pod sample taken before the container
        # stopped swapping. Now it is a mismatch until the pod's own cgroup and its sample agree.
        ({"container": 39751680, "pod": 39751680, "node": 5 * 10**7},
         {"container": 39751680.0, "pod": 16756736.0, "node": 5e7}, ["pod: reported 16756736, its figure is 39751680"]),
        # A node level that sums the containers (or reads another figure) instead of what it is defined as.
        ({"container": 40 * MiB, "pod": 40 * MiB, "node": 50 * MiB},
         {"container": 40 * MiB, "pod": 40 * MiB, "node": 40 * MiB}, [f"node: reported {40 * MiB}, its figure is {50 * MiB}"]),
        ({"container": 40 * MiB, "pod": 40 * MiB, "node": 41 * MiB},
         {"container": 40 * MiB + 4096, "pod": 40 * MiB, "node": 41 * MiB}, [f"container: reported {40 * MiB + 4096}, its figure is {40 * MiB}"]),
        ({"container": 40 * MiB, "pod": 40 * MiB, "node": 41 * MiB},
         {"container": 40 * MiB, "pod": None, "node": None},
         [f"pod: not reported (expected {40 * MiB})", f"node: not reported (expected {41 * MiB})"]),
        ({"container": None, "pod": 40 * MiB, "node": 41 * MiB},
         {"container": 40 * MiB, "pod": 40 * MiB, "node": 41 * MiB},
         ["container: its figure moved during the scrape", "the container has nothing in swap: the comparison would prove nothing"]),
        ({"container": 0, "pod": 0, "node": 0}, {"container": 0.0, "pod": 0.0, "node": 0.0},
         ["the container has nothing in swap: the comparison would prove nothing"]),
    ],
)
def test_mismatched_scrapes_name_each_level(figures: dict, reported: dict, expected: list[str]) -> None:
    assert swap_usage_mismatches(figures, reported) == expected


def test_swap_total_for_kubelets_without_node_info_swap() -> None:
    from clusters.discovery import swap_total_from_summary

    # numbers from the vm node: SwapTotal 2147479552, 9 MiB in use
    summary = {"node": {"swap": {"time": "t", "swapAvailableBytes": 2147479552 - 9 * MiB, "swapUsageBytes": 9 * MiB}}}
    assert swap_total_from_summary(summary) == 2147479552
    assert swap_total_from_summary({"node": {"swap": {"time": "t", "swapUsageBytes": 0}}}) is None  # no swap limit: none
    assert swap_total_from_summary({"node": {}}) is None
