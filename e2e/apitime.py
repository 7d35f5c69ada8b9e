"""Timestamps as the Kubernetes API writes them (metav1.Time: RFC 3339, whole seconds, "Z")."""

from __future__ import annotations

from datetime import datetime


def api_time(stamp: object) -> datetime | None:
    """The moment an API timestamp names, timezone-aware; None where there is none. The "Z" is
    spelled out because `datetime.fromisoformat` takes it only from Python 3.11 (the project
    supports 3.10)."""
    return datetime.fromisoformat(str(stamp).replace("Z", "+00:00")) if stamp else None
