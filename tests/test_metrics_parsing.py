"""The Prometheus text parser the metrics tests read /metrics/resource with, and the relations a
consistent swap scrape must satisfy."""

from __future__ import annotations

import pytest

from e2e.metrics import find, parse_prometheus, swap_usage_inconsistencies

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


def test_a_consistent_scrape_has_no_inconsistencies() -> None:
    assert swap_usage_inconsistencies(40 * MiB, {"container": 40 * MiB, "pod": 40 * MiB, "node": 41 * MiB}) == []


@pytest.mark.parametrize(
    ("current", "usage", "expected"),
    [
        # The failure seen on the vm: the pod level was sampled before the container stopped swapping.
        (39751680, {"container": 39751680.0, "pod": 16756736.0, "node": 5e7}, ["pod >= memory.swap.current"]),
        (42041344, {"container": 42041344, "pod": 42741760, "node": 41771008}, ["node >= memory.swap.current"]),
        (40 * MiB, {"container": 40 * MiB + 4096, "pod": 41 * MiB, "node": 41 * MiB}, ["container == memory.swap.current"]),
        (40 * MiB, {"container": 40 * MiB, "pod": None, "node": None},
         ["pod >= memory.swap.current", "node >= memory.swap.current"]),
        (-1, {"container": 40 * MiB, "pod": 40 * MiB, "node": 40 * MiB},
         ["memory.swap.current > 0 and unchanged around the scrape", "container == memory.swap.current"]),
        (0, {"container": 0, "pod": 0, "node": 0}, ["memory.swap.current > 0 and unchanged around the scrape"]),
    ],
)
def test_inconsistent_scrapes_name_what_failed(current: int, usage: dict, expected: list[str]) -> None:
    assert swap_usage_inconsistencies(current, usage) == expected
