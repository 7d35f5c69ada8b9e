"""Where a pod's start went (e2e/workspace.py start_breakdown): the "running" phase a test records
says whether scheduling, the sandbox or the containers took the time, from the pod's own stamps."""

from __future__ import annotations

from e2e.workspace import start_breakdown


def _pod(conditions: list[tuple[str, str, str]], started: list[str]) -> dict:
    return {"metadata": {"creationTimestamp": "2026-11-26T10:00:00Z"},
            "status": {"conditions": [{"type": t, "status": s, "lastTransitionTime": at} for t, s, at in conditions],
                       "containerStatuses": [{"state": {"running": {"startedAt": at}}} for at in started]}}


def test_the_start_is_split_at_scheduling_the_sandbox_and_the_last_container() -> None:
    pod = _pod([("PodScheduled", "True", "2026-11-26T10:00:01Z"),
                ("PodReadyToStartContainers", "True", "2026-11-26T10:02:00Z"),
                ("Ready", "False", "2026-11-26T10:00:01Z")],  # not True: not a step
               ["2026-11-26T10:02:30Z", "2026-11-26T10:02:10Z"])
    assert start_breakdown(pod) == " (scheduled +1s, sandbox +120s, started +150s)"


def test_a_pod_without_stamps_adds_nothing() -> None:
    assert start_breakdown({}) == ""
    assert start_breakdown(_pod([], [])) == ""


def test_api_timestamps_are_utc_moments_and_none_stays_none() -> None:
    from datetime import datetime, timezone

    from e2e.apitime import api_time

    assert api_time("2026-11-26T10:02:30Z") == datetime(2026, 11, 26, 10, 2, 30, tzinfo=timezone.utc)
    assert api_time(None) is None and api_time("") is None
