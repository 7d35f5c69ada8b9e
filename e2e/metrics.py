"""The kubelet's /metrics/resource (Prometheus text) and /stats/summary, as typed values."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

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


def swap_usage_mismatches(expected: dict[str, int | None], reported: dict[str, float | None]) -> list[str]:
    """Each level whose reported swap usage is not exactly its figure read from the node.

    ``expected`` holds each level's figure (None when it moved while the scrape was read: such
    a scrape proves nothing either way): the container's and the pod's own cgroup
    memory.swap.current, and the node's figure as cAdvisor computes it."""
    problems = []
    for level in ("container", "pod", "node"):
        want, got = expected.get(level), reported.get(level)
        if want is None:
            problems.append(f"{level}: its figure moved during the scrape")
        elif got is None:
            problems.append(f"{level}: not reported (expected {want})")
        elif got != want:
            problems.append(f"{level}: reported {got:.0f}, its figure is {want}")
    if (expected.get("container") or 0) <= 0:
        problems.append("the container has nothing in swap: the comparison would prove nothing")
    return problems
