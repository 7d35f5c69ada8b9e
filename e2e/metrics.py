"""The kubelet's /metrics/resource (Prometheus text) and /stats/summary, as typed values."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from e2e.apitime import api_time

_SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>.*)\})?\s+(?P<value>\S+)(?:\s+(?P<ts>-?\d+))?\s*$")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


@dataclass(frozen=True)
class Sample:
    name: str
    labels: dict[str, str]
    value: float
    timestamp_ms: int | None

    def matches(self, **labels: str) -> bool:
        return all(self.labels.get(k) == v for k, v in labels.items())


def parse_prometheus(text: str) -> list[Sample]:
    samples = []
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        match = _SAMPLE.match(line)
        if not match:
            raise ValueError(f"not a Prometheus sample line: {line!r}")
        labels = {k: bytes(v, "utf-8").decode("unicode_escape") for k, v in _LABEL.findall(match.group("labels") or "")}
        ts = match.group("ts")
        samples.append(Sample(match.group("name"), labels, float(match.group("value")), int(ts) if ts else None))
    return samples


def find(samples: list[Sample], name: str, **labels: str) -> Sample | None:
    return next((s for s in samples if s.name == name and s.matches(**labels)), None)


def summary_container(summary: dict[str, Any], namespace: str, pod: str, container: str) -> dict[str, Any] | None:
    for entry in summary.get("pods") or []:
        ref = entry.get("podRef") or {}
        if ref.get("namespace") == namespace and ref.get("name") == pod:
            return next((c for c in entry.get("containers") or [] if c.get("name") == container), None)
    return None


def summary_pod(summary: dict[str, Any], namespace: str, pod: str) -> dict[str, Any] | None:
    return next(
        (p for p in summary.get("pods") or [] if (p.get("podRef") or {}).get("namespace") == namespace
         and (p.get("podRef") or {}).get("name") == pod),
        None,
    )


def summary_system_container(summary: dict[str, Any], name: str) -> dict[str, Any] | None:
    """node.systemContainers' entry `name` ("pods": the kubelet's kubepods cgroup; "kubelet",
    "runtime", "misc" where their cgroups are configured)."""
    return next((c for c in (summary.get("node") or {}).get("systemContainers") or [] if c.get("name") == name), None)


def has_swap_stats(swap: dict[str, Any] | None, swap_max: int | None) -> bool:
    """Does a container's /stats/summary `swap` carry cAdvisor's figures? Until cAdvisor has a
    sample of a new container, the kubelet fills in zeros stamped with the current time (1.37:
    pkg/kubelet/stats cri_stats_provider makeContainerStats, where the CRI gives no swap stats;
    seen on kind: 0 for ~15 s while the container held 38 MiB in swap). A real sample of a
    container whose memory.swap.max is above 0 has usage + available = that limit, never 0 + 0;
    without a limit (None: "max") it has no available figure, and a swapping container's usage
    above 0 is the only sign."""
    if not swap or swap_max == 0:
        return False
    return (swap.get("swapUsageBytes") or 0) + (swap.get("swapAvailableBytes") or 0) > 0


# cAdvisor stamps a sample right after reading its cgroup (newContainerStats: Timestamp time.Now(),
# after GetStats); the read lies within this much before the stamp, even on an emulated node.
STAMPED_AFTER_READ_MS = 1000


@dataclass(frozen=True)
class Reported:
    """One figure of one kubelet sample: its value (None: not reported) and the span of the
    node's clock in which the kubelet read it, from the time the sample carries."""

    level: str
    value: float | None
    lo_ms: int
    hi_ms: int


UNPLACED = (0, 0)  # the span of a figure reported without a time: no read can vouch for it


def reported_from_prometheus(level: str, sample: Sample | None) -> Reported:
    """A /metrics/resource sample, placed by its timestamp (ms)."""
    if sample is None or sample.timestamp_ms is None:
        return Reported(level, sample.value if sample else None, *UNPLACED)
    return Reported(level, sample.value, sample.timestamp_ms - STAMPED_AFTER_READ_MS, sample.timestamp_ms)


def reported_from_summary(level: str, value: float | None, time: str | None) -> Reported:
    """A /stats/summary figure: its `time` is RFC 3339 in whole seconds (metav1.Time), so the
    read lies up to a second after it too."""
    moment = api_time(time)
    if value is None or moment is None:
        return Reported(level, value, *UNPLACED)
    stamp = int(moment.timestamp() * 1000)
    return Reported(level, value, stamp - STAMPED_AFTER_READ_MS, stamp + 1000)


def figure_during(series: Sequence[tuple[int, int | None]], lo_ms: int, hi_ms: int) -> int | None:
    """The figure through [lo_ms, hi_ms], where the reads show it: the last read at or before
    lo_ms, the first at or after hi_ms, and every read between them the same value. None where
    it moved in between, or the reads do not reach both ends (nothing can be said)."""
    before = [i for i, (t, _) in enumerate(series) if t <= lo_ms]
    after = [i for i, (t, _) in enumerate(series) if t >= hi_ms]
    if not before or not after:
        return None
    values = {v for _, v in series[before[-1]:after[0] + 1]}
    return values.pop() if len(values) == 1 else None


# A sample contradicts its figure only where the figure was still over a much longer span before
# its stamp than any delay between cAdvisor's read and its stamp: a kubelet that reports another
# value there is wrong (a frozen or late value, another cgroup's), whatever else it got right.
REFUTED_STILL_MS = 10_000


@dataclass
class SwapEvidence:
    """Every distinct kubelet sample seen per level, each with the figure the node's own files
    had while the kubelet read it. A level is proved by `needed` distinct samples equal to their
    figure (distinct: a kubelet that froze its first sample proves one at most); a sample whose
    figure is unknown (it moved, or lies outside the reads) proves nothing either way, and a
    sample that differs from a figure still for REFUTED_STILL_MS before its stamp refutes the
    level, whatever the other samples showed."""

    levels: tuple[str, ...]
    needed: int = 2
    # level -> the sample's span -> (reported value, its figure, the figure if still long enough to refute)
    seen: dict[str, dict[tuple[int, int], tuple[float | None, int | None, int | None]]] = field(default_factory=dict)

    def add(self, reported: Reported, series: Sequence[tuple[int, int | None]]) -> None:
        """Place a sample against one window of reads (call once per window it may fall in)."""
        samples = self.seen.setdefault(reported.level, {})
        span = (reported.lo_ms, reported.hi_ms)
        figure = figure_during(series, *span)
        still = figure_during(series, reported.hi_ms - REFUTED_STILL_MS, reported.hi_ms) if span != UNPLACED else None
        known = samples.get(span, (reported.value, None, None))
        samples[span] = (reported.value, known[1] if figure is None else figure, known[2] if still is None else still)

    def proved(self, level: str) -> int:
        # A container with nothing in swap would prove nothing: 0 = 0 holds for any kubelet.
        return sum(1 for value, figure, _ in self.seen.get(level, {}).values()
                   if figure is not None and value == figure and (figure > 0 or level != "container"))

    def refuted(self) -> list[str]:
        return [f"{level}: reported {'nothing' if value is None else f'{value:.0f}'} where its figure was {still}"
                f" for {REFUTED_STILL_MS / 1000:.0f} s up to the sample's time"
                for level in self.levels for value, _, still in self.seen.get(level, {}).values()
                if still is not None and value != still]

    def complete(self) -> bool:
        return not self.refuted() and all(self.proved(level) >= self.needed for level in self.levels)

    def describe(self, origin_ms: int) -> str:
        lines = []
        for level in self.levels:
            lines.append(f"{level}: {self.proved(level)} of {self.needed} samples proved")
            for (lo, hi), (value, figure, still) in sorted(self.seen.get(level, {}).items()):
                verdict = ("no figure (it moved during the kubelet's read, or outside our reads)" if figure is None
                           else "equal" if value == figure else f"figure {figure}")
                if still is not None and value != still:
                    verdict += f" (still at {still} for {REFUTED_STILL_MS / 1000:.0f} s before: refuted)"
                shown = "not reported" if value is None else f"{value:.0f}"
                when = "no time given" if (lo, hi) == UNPLACED else \
                    f"read at {(lo - origin_ms) / 1000:+.1f}..{(hi - origin_ms) / 1000:+.1f}s"
                lines.append(f"  {when}: {shown}: {verdict}")
        return "\n".join(lines)
