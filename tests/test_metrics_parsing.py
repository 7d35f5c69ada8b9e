"""The Prometheus text parser the metrics tests read /metrics/resource with, and how a kubelet
sample is put beside the figure the node's files had while the kubelet read it."""

from __future__ import annotations

import pytest

from e2e.metrics import (
    has_swap_stats,
    STAMPED_AFTER_READ_MS,
    UNPLACED,
    Reported,
    SwapEvidence,
    figure_during,
    find,
    parse_prometheus,
    reported_from_prometheus,
    reported_from_summary,
)

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
T = 1_795_264_289_000  # a node-clock instant, ms


def series(*points: tuple[int, int]) -> list[tuple[int, int]]:
    """Reads at T + offset (ms)."""
    return [(T + dt, v) for dt, v in points]


def every_100ms(start: int, end: int, value_at) -> list[tuple[int, int]]:
    return [(T + dt, value_at(dt)) for dt in range(start, end + 1, 100)]


def test_the_figure_during_a_read_is_known_only_where_the_reads_show_it_still() -> None:
    reads = series((-1500, 7), (-900, 7), (-200, 7), (300, 7), (800, 9), (1600, 9))
    assert figure_during(reads, T - 1000, T) == 7           # reads on both sides, all 7
    assert figure_during(reads, T - 1000, T + 600) is None  # 7 then 9 within the span: it moved
    assert figure_during(reads, T + 800, T + 1600) == 9     # reads exactly at both ends count
    assert figure_during(reads, T - 2000, T) is None        # no read before the span starts
    assert figure_during(reads, T, T + 2000) is None        # none after it ends
    assert figure_during([], T - 1000, T) is None


def test_prometheus_and_summary_times_become_the_span_of_the_kubelets_read() -> None:
    sample = parse_prometheus(f"node_swap_usage_bytes 4.194304e+07 {T}\n")[0]
    assert reported_from_prometheus("node", sample) == Reported("node", 41943040, T - STAMPED_AFTER_READ_MS, T)
    # metav1.Time: whole seconds, truncated, so the read may lie up to a second after it
    assert reported_from_summary("pod", 5.0, "2026-11-25T18:30:00Z") == \
        Reported("pod", 5.0, 1795631400000 - STAMPED_AFTER_READ_MS, 1795631400000 + 1000)
    assert reported_from_prometheus("pod", None) == Reported("pod", None, *UNPLACED)
    assert reported_from_summary("node", None, "2026-11-25T18:30:00Z") == Reported("node", None, *UNPLACED)


def kubelet_sample(level: str, value: float | None, at_ms: int) -> Reported:
    return Reported(level, value, T + at_ms - STAMPED_AFTER_READ_MS, T + at_ms)


def test_two_distinct_samples_equal_to_their_figure_prove_a_level_while_the_figure_drifts() -> None:
    # The node's figure drifts a page every 7 s (seen on kind after other tests: the node
    # container's own processes swap back in); a correct kubelet's samples every ~12 s each equal
    # the figure at their own time, never the one at the scrape.
    drifting = every_100ms(-5000, 60000, lambda dt: 50 * MiB - (dt // 7000) * 4096)
    evidence = SwapEvidence(("node",))
    for at in (2000, 13000, 26000):
        value = next(v for t, v in drifting if t >= T + at - 500)
        evidence.add(kubelet_sample("node", value, at), drifting)
        evidence.add(kubelet_sample("node", value, at), drifting)  # the same sample scraped twice counts once
    assert evidence.proved("node") == 3 and evidence.complete()


@pytest.mark.parametrize(
    ("what", "reported_at"),
    [
        ("frozen at its first sample", lambda at, figure: (figure(2000), 2000)),  # one distinct sample only
        ("a page off", lambda at, figure: (figure(at) + 4096, at)),
        ("0", lambda at, figure: (0, at)),
        ("the figure at the scrape, stamped with an older time", lambda at, figure: (figure(at + 9000), at)),
        ("not reported", lambda at, figure: (None, at)),
    ],
)
def test_a_kubelet_whose_figure_is_wrong_never_proves_the_level(what: str, reported_at) -> None:
    moving = every_100ms(-5000, 60000, lambda dt: 40 * MiB + (dt // 5000) * 4096)

    def figure(at: int) -> int:
        return next(v for t, v in moving if t >= T + at - 500)

    evidence = SwapEvidence(("container",))
    for at in (2000, 14500, 27000, 39500):
        value, stamp = reported_at(at, figure)
        evidence.add(kubelet_sample("container", value, stamp), moving)
    assert not evidence.complete(), what
    assert "0 of 2 samples proved" in evidence.describe(T) or evidence.proved("container") < 2


def test_a_container_with_nothing_in_swap_proves_nothing() -> None:
    zero = every_100ms(-5000, 30000, lambda dt: 0)
    evidence = SwapEvidence(("container", "pod"))
    for at in (2000, 14500):
        evidence.add(kubelet_sample("container", 0, at), zero)
        evidence.add(kubelet_sample("pod", 0, at), zero)
    assert evidence.proved("pod") == 2 and evidence.proved("container") == 0 and not evidence.complete()


def test_the_failure_lists_every_sample_with_its_figure() -> None:
    reads = series((-1500, 7), (0, 7), (500, 9), (12000, 9))
    evidence = SwapEvidence(("node",))
    evidence.add(kubelet_sample("node", 7, 0), reads)        # equal
    evidence.add(kubelet_sample("node", 8, 11000), reads)    # the figure was 9
    evidence.add(kubelet_sample("node", 7, 1000), reads)     # moved during its read
    evidence.add(Reported("node", None, *UNPLACED), reads)
    assert evidence.describe(T).splitlines() == [
        "node: 1 of 2 samples proved",
        "  no time given: not reported: no figure (it moved during the kubelet's read, or outside our reads)",
        "  read at -1.0..+0.0s: 7: equal",
        "  read at +0.0..+1.0s: 7: no figure (it moved during the kubelet's read, or outside our reads)",
        "  read at +10.0..+11.0s: 8: figure 9 (still at 9 for 10 s before: refuted)",
    ]
    assert evidence.refuted() == ["node: reported 8 where its figure was 9 for 10 s up to the sample's time"]


def test_a_value_frozen_while_the_figure_moved_once_is_refuted_though_earlier_samples_matched() -> None:
    # The swapping container holds still: its figure moves once (+4 KiB at 30 s) and stays. A
    # kubelet that keeps its first value under fresh times matches the two samples before the
    # move, and contradicts every sample 10 s after it.
    once = every_100ms(-5000, 90000, lambda dt: 40 * MiB + (4096 if dt >= 30000 else 0))
    evidence = SwapEvidence(("container",))
    for at in (5000, 17000, 45000, 60000):
        evidence.add(kubelet_sample("container", 40 * MiB, at), once)
    assert evidence.proved("container") == 2 and not evidence.complete()
    assert len(evidence.refuted()) == 2


def test_a_correct_kubelet_is_never_refuted() -> None:
    still = every_100ms(-15000, 60000, lambda dt: 40 * MiB)
    drifting = every_100ms(-15000, 60000, lambda dt: 50 * MiB - (dt // 7000) * 4096)
    evidence = SwapEvidence(("container", "node"))
    for at in (2000, 13000, 26000, 40000):
        evidence.add(kubelet_sample("container", 40 * MiB, at), still)
        figure = next(v for t, v in drifting if t >= T + at - 500)
        evidence.add(kubelet_sample("node", figure, at), drifting)
    assert evidence.refuted() == [] and evidence.complete()


def test_swap_total_for_kubelets_without_node_info_swap() -> None:
    from clusters.discovery import swap_total_from_summary

    # numbers from the vm node: SwapTotal 2147479552, 9 MiB in use
    summary = {"node": {"swap": {"time": "t", "swapAvailableBytes": 2147479552 - 9 * MiB, "swapUsageBytes": 9 * MiB}}}
    assert swap_total_from_summary(summary) == 2147479552
    assert swap_total_from_summary({"node": {"swap": {"time": "t", "swapUsageBytes": 0}}}) is None  # no swap limit: none
    assert swap_total_from_summary({"node": {}}) is None


def test_the_kubelets_zeros_for_a_container_without_stats_are_not_swap_stats() -> None:
    # makeContainerStats without CRI swap stats, before cAdvisor has a sample: 0 and 0, stamped now
    placeholder = {"time": "2026-11-25T21:10:02Z", "swapUsageBytes": 0, "swapAvailableBytes": 0}
    assert not has_swap_stats(placeholder, 67108864)
    assert not has_swap_stats(None, 67108864) and not has_swap_stats({}, 67108864)
    # cAdvisor's: usage + available = memory.swap.max, swapping or not yet
    assert has_swap_stats({"swapUsageBytes": 39714816, "swapAvailableBytes": 27394048}, 67108864)
    assert has_swap_stats({"swapUsageBytes": 0, "swapAvailableBytes": 67108864}, 67108864)
    # no limit ("max"): no available figure; usage is the only sign
    assert has_swap_stats({"swapUsageBytes": 4096}, None) and not has_swap_stats({"swapUsageBytes": 0}, None)
    # a container with no swap: nothing tells the kubelet's zeros from its stats
    assert not has_swap_stats({"swapUsageBytes": 0, "swapAvailableBytes": 0}, 0)
