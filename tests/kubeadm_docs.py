"""Reading kubeadm config documents in the self-tests: a duration as kubeadm writes it, and one
document of a multi-document YAML text."""
from __future__ import annotations

import re

import yaml


def seconds(duration: str) -> int:
    """Seconds of a kubeadm duration ("40m0s", "1h", "90s")."""
    parts = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?", duration)
    assert parts and duration, f"not a kubeadm duration: {duration!r}"
    hours, minutes, secs = (int(p or 0) for p in parts.groups())
    return hours * 3600 + minutes * 60 + secs


def of_kind(text: str, kind: str) -> dict:
    return next(d for d in yaml.safe_load_all(text) if d and d["kind"] == kind)
