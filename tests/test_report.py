"""The report: what tests record (e2e/record.py), the samples parsed from the node's sampler
(e2e/sampler.py) and the results directory built from them (e2e/report.py)."""

from __future__ import annotations

import json
from pathlib import Path

from e2e import report
from e2e.record import CHECK_PROPERTY, Check, Recorder, Series, records
from e2e.sampler import parse_series
from e2e.verdict import Result

Mi = 1 << 20


def test_a_check_records_what_was_compared_and_says_whether_it_held() -> None:
    properties: list = []
    recorder = Recorder(properties)
    assert recorder.check("memory.swap.max of stress", "67108864", "67108864", "request 1Gi") is True
    assert recorder.check("memory.max of stress", "max", "536870912") is False
    assert recorder.check("swap in range", ">= 10", 12, ok=True) is True
    checks, series = records(properties + properties[:1])  # a property seen in two phases counts once
    assert [c.ok for c in checks] == [True, False, True] and series == []
    assert checks[0] == Check("memory.swap.max of stress", "67108864", "67108864", "request 1Gi", True)
    assert json.loads(properties[1][1])["observed"] == "536870912" and properties[1][0] == CHECK_PROPERTY


SAMPLER_OUTPUT = """ready
sample 1000 cri-containerd-aaaa.scope 100 - max -
sample 1000 cri-containerd-bbbb.scope 1048576 0 8388608 4194304
sample 1100 cri-containerd-bbbb.scope 9437184 1048576 8388608 4194304
sample 1200 cri-containerd-aaaa.scope 100 - max -
sample 1300 cri-containerd-bbbb.scope - - - -
stopped reason=asked
"""


def test_samples_are_the_containers_own_on_the_nodes_clock() -> None:
    terminated = {"reason": "OOMKilled", "exitCode": 137, "finishedAt": "1970-01-01T00:00:02Z"}
    series = parse_series(SAMPLER_OUTPUT, "beyond/stress", "bbbb", terminated)
    assert series.t == [0.0, 0.1] and series.current == [1048576, 9437184] and series.swap == [0, 1048576]
    assert (series.memory_max, series.swap_max) == (8388608, 4194304)
    assert series.ended == "OOMKilled (exit 137)" and series.ended_at == 1.0  # 2 s on the node's clock, first sample at 1 s
    other = parse_series(SAMPLER_OUTPUT, "pause", "aaaa", None)
    assert other.swap == [None, None] and other.memory_max is None and other.ended == "" and other.ended_at is None
    assert parse_series(SAMPLER_OUTPUT, "x", "cccc", None).t == []


def test_the_kernels_oom_kill_count_is_read_until_the_cgroup_goes() -> None:
    """The eighth field, memory.events oom_kill, counts even in a sample whose memory.current
    could no longer be read (the cgroup going away after the kill); an older agent writes seven."""
    output = ("sample 1000 cri-containerd-bbbb.scope 1048576 0 8388608 0 0\n"
              "sample 1100 cri-containerd-bbbb.scope 8388608 0 8388608 0 0\n"
              "sample 1200 cri-containerd-bbbb.scope - - - - 1\n"
              "sample 1200 cri-containerd-aaaa.scope 100 - max - 3\n")
    series = parse_series(output, "guaranteed/stress", "bbbb", {"reason": "Error", "exitCode": 137})
    assert series.current == [1048576, 8388608] and series.oom_kills == 1
    assert (series.memory_max, series.swap_max) == (8388608, 0)


def test_the_limits_are_the_last_ones_read_not_a_last_sample_cut_short() -> None:
    """kind run 23: the killed container's last sample read memory.current but not
    memory.swap.max (the cgroup going away), and the swap limit became "max"."""
    output = ("sample 1000 cri-containerd-bbbb.scope 1048576 0 8388608 0 0\n"
              "sample 1100 cri-containerd-bbbb.scope 8388608 0 - - -\n")
    series = parse_series(output, "guaranteed/stress", "bbbb", None)
    assert series.current == [1048576, 8388608]
    assert (series.memory_max, series.swap_max) == (8388608, 0)
    unlimited = parse_series("sample 1000 cri-containerd-bbbb.scope 5 - max max -\n", "b/stress", "bbbb", None)
    assert (unlimited.memory_max, unlimited.swap_max) == (None, None)  # "max" read: unlimited
    assert parse_series(SAMPLER_OUTPUT, "beyond/stress", "bbbb", None).oom_kills is None


def test_an_oom_kill_is_the_runtimes_reason_or_the_kernels_count() -> None:
    from e2e.oom import killed_by_the_oom_killer

    counted, uncounted, unread = (Series("g/stress", oom_kills=1), Series("g/stress", oom_kills=0),
                                  Series("g/stress"))
    assert killed_by_the_oom_killer({"reason": "OOMKilled", "exitCode": 137}, unread) == (
        True, "OOMKilled (exit 137), memory.events oom_kill not read")
    # containerd missed the OOM event (kind run 22): the kernel's count says what happened
    assert killed_by_the_oom_killer({"reason": "Error", "exitCode": 137}, counted) == (
        True, "Error (exit 137), memory.events oom_kill 1")
    assert not killed_by_the_oom_killer({"reason": "Error", "exitCode": 137}, uncounted)[0]  # a SIGKILL, not the OOM killer
    assert not killed_by_the_oom_killer({"reason": "Error", "exitCode": 137}, unread)[0]
    assert not killed_by_the_oom_killer({"reason": "Completed", "exitCode": 0}, counted)[0]  # a child killed, the container not


def results_and_records() -> report.Run:
    results = [
        Result("e2e/test_cgroup_limits.py::test_memory_swap_max[NoSwap-burstable]", "NoSwap", "passed"),
        Result("e2e/test_cgroup_limits.py::test_memory_swap_max[LimitedSwap-burstable]", "LimitedSwap", "failed"),
        Result("e2e/test_cgroup_limits.py::test_memory_swap_max[LimitedSwap-guaranteed]", "LimitedSwap", "passed"),
        Result("e2e/test_metrics.py::test_x[LimitedSwap]", "LimitedSwap", "skipped", "needs kubelet >= 1.34"),
        Result("e2e/test_stress_outcomes.py::test_beyond[LimitedSwap]", "LimitedSwap", "failed"),
    ]
    series = Series("beyond/stress", [0.0, 0.5, 1.0], [10 * Mi, 40 * Mi, 48 * Mi], [0, 8 * Mi, 16 * Mi], 48 * Mi,
                    16 * Mi, "OOMKilled (exit 137)", 1.2)
    records = {
        "e2e/test_cgroup_limits.py::test_memory_swap_max[LimitedSwap-burstable]":
            ([Check("memory.swap.max of stress", "67108864", "0", "request 1Gi; LimitedSwap", False)], []),
        "e2e/test_stress_outcomes.py::test_beyond[LimitedSwap]":
            ([Check("termination reason", "OOMKilled", "OOMKilled", "limit 48Mi", True)], [series]),
    }
    return report.Run(results, records, ["NoSwap", "LimitedSwap"], {"LimitedSwap": "vm:ksc/ksc-node"},
                      {}, (["NoSwap", "LimitedSwap"], ["LimitedSwap: test_cgroup_limits: 1 passed, 1 failed"]))


def test_a_check_is_the_test_without_the_behavior() -> None:
    assert report.check_of(Result("e2e/test_cgroup_limits.py::test_m[LimitedSwap-burstable-limit]", "LimitedSwap",
                                  "passed")) == "test_cgroup_limits::test_m[burstable-limit]"
    assert report.check_of(Result("e2e/test_metrics.py::test_x[NoSwap]", "NoSwap", "passed")) == "test_metrics::test_x"


def test_the_matrix_counts_per_test_and_behavior() -> None:
    header, rows = report.overview(results_and_records())
    assert header == ["check", "NoSwap", "LimitedSwap"]
    assert rows == [
        ["test_cgroup_limits::test_memory_swap_max", "✓ 1", "✗ 1 failed, 1 passed"],
        ["test_metrics::test_x", " ", "– 1 skipped"],
        ["test_stress_outcomes::test_beyond", " ", "✗ 1 failed"],
    ]
    assert report.terminal_lines(results_and_records())[0].split() == ["check", "NoSwap", "LimitedSwap"]


def test_details_show_expected_inputs_observed_and_a_failure_no_check_explains() -> None:
    rows = report.detail_rows(results_and_records(), "LimitedSwap")
    by_check = {(r["test"], r["check"]): r for r in rows}
    wrong = by_check[("test_cgroup_limits::test_memory_swap_max[burstable]", "memory.swap.max of stress")]
    assert (wrong["expected"], wrong["observed"], wrong["inputs"], wrong["verdict"]) == (
        "67108864", "0", "request 1Gi; LimitedSwap", "failed")
    # its recorded check held, yet the test failed: the report must not show it green only
    assert by_check[("test_stress_outcomes::test_beyond", "(another assertion of the test)")]["verdict"] == "failed"
    assert by_check[("test_metrics::test_x", "(the test's own assertions)")]["observed"] == "needs kubelet >= 1.34"


def test_the_results_directory(tmp_path: Path) -> None:
    (tmp_path / "kind-logs").mkdir()  # others' files stay
    (tmp_path / report.PLOTS).mkdir()
    (tmp_path / report.PLOTS / "stale.png").write_bytes(b"old")
    html_path = report.write(tmp_path, results_and_records())
    assert html_path == tmp_path / report.REPORT_HTML and (tmp_path / "kind-logs").is_dir()
    pngs = sorted(p.name for p in (tmp_path / report.PLOTS).iterdir())
    assert pngs == ["test_beyond_LimitedSwap___beyond_stress.png"]
    png = (tmp_path / report.PLOTS / pngs[0]).read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 10_000
    text = html_path.read_text()
    assert f"src='plots/{pngs[0]}'" in text and "Release gate: FAILED" in text and "67108864" in text
    markdown = (tmp_path / report.MATRIX_MD).read_text()
    assert "| test_cgroup_limits::test_memory_swap_max | ✓ 1 | ✗ 1 failed, 1 passed |" in markdown
    assert "| request 1Gi; LimitedSwap | 0 | ✗ failed |" in markdown
    assert f"(plots/{pngs[0]})" in markdown and "Node: vm:ksc/ksc-node" in markdown


def test_a_plot_without_samples_still_says_so(tmp_path: Path) -> None:
    report.plot(Series("x/stress"), "empty", tmp_path / "p.png")
    assert (tmp_path / "p.png").read_bytes().startswith(b"\x89PNG")
