"""Waiting for a container that its limits must OOM-kill (NodeObserver.wait_terminated_or_printed):
it ends, and the wait returns its state; or it allocates its whole target and says so, and the
wait returns at once instead of at its bound (mutant 05 kept a Guaranteed pod running for 600 s)."""

from __future__ import annotations

from typing import Any

import pytest

from e2e.observe import NodeObserver, WaitTimeout


class ScriptedObserver(NodeObserver):
    """The pod's states and logs in turn, one per look; the last one stays."""

    def __init__(self, looks: list[tuple[dict[str, Any], str]]):  # no API client: nothing is asked of a cluster
        self.looks = looks
        self.logs_read = 0

    def _look(self) -> tuple[dict[str, Any], str]:
        return self.looks.pop(0) if len(self.looks) > 1 else self.looks[0]

    def pod(self, namespace: str, name: str) -> dict[str, Any]:
        self.current = self._look()
        return self.current[0]

    def log(self, namespace: str, pod: str, container: str) -> str:
        self.logs_read += 1
        return self.current[1]


def state(**state: Any) -> dict[str, Any]:
    return {"status": {"phase": "Running", "containerStatuses": [{"name": "stress", "state": state}]}}


WAITING = state(waiting={"reason": "ContainerCreating"})
RUNNING = state(running={"startedAt": "2026-11-26T16:00:00Z"})
KILLED = {"reason": "OOMKilled", "exitCode": 137}


def test_a_killed_container_gives_its_terminated_state() -> None:
    observer = ScriptedObserver([(WAITING, ""), (RUNNING, "allocated 4194304\n"), (state(terminated=KILLED), "")])
    assert observer.wait_terminated_or_printed("ns", "guaranteed", "stress", "holding 8388608", seconds=30) == KILLED


def test_a_container_holding_its_whole_target_ends_the_wait_at_once() -> None:
    log = "allocated 4194304\nallocated 8388608\nholding 8388608\n"
    observer = ScriptedObserver([(WAITING, ""), (RUNNING, log)])
    assert observer.wait_terminated_or_printed("ns", "guaranteed", "stress", "holding 8388608", seconds=30) is None


def test_only_the_exact_line_counts() -> None:
    """`holding 83886080` is not `holding 8388608`, nor is an `allocated` line: the wait goes on."""
    observer = ScriptedObserver([(RUNNING, "allocated 8388608\nholding 83886080\n")])
    with pytest.raises(WaitTimeout, match="to terminate; last seen: phase=Running containers=\\[stress=running\\]"):
        observer.wait_terminated_or_printed("ns", "guaranteed", "stress", "holding 8388608", seconds=1)
    assert observer.logs_read >= 1


def test_no_log_is_read_before_the_container_runs() -> None:
    observer = ScriptedObserver([(WAITING, "")])
    with pytest.raises(WaitTimeout):
        observer.wait_terminated_or_printed("ns", "guaranteed", "stress", "holding 8388608", seconds=1)
    assert observer.logs_read == 0


def test_a_series_shows_its_limits_as_the_cgroup_files_read_them() -> None:
    from e2e.record import Series

    assert (Series("p/c").memory_max_as_read, Series("p/c").swap_max_as_read) == ("max", "max")
    limited = Series("p/c", memory_max=161480704, swap_max=0)
    assert (limited.memory_max_as_read, limited.swap_max_as_read) == (161480704, 0)
