"""A bounded wait and the looks inside it (e2e/observe.py): what ends a wait early and what only
costs it one look. A wait inside a probe, or a description of the state that cannot be read,
must not end a wait that would have gone on; an overloaded answer in a loop with its own
deadline costs that loop one look."""

from __future__ import annotations

import pytest
from kubernetes.client.exceptions import ApiException

from e2e.observe import WaitTimeout, unless_overloaded, wait_for


def overloaded(status: int = 503) -> ApiException:
    error = ApiException(status=status, reason="Service Unavailable")
    error.body = '{"message": "error trying to reach service: dial tcp: connection refused"}'
    return error


def test_a_wait_inside_the_probe_that_gives_up_is_a_look_not_the_end() -> None:
    looks = []

    def probe() -> str | None:
        looks.append(1)
        if len(looks) < 3:
            raise WaitTimeout("gave up after 120s waiting for `swapstress cat` in ns/reader; last seen: 500 pod does not exist")
        return "served"

    assert wait_for("the pod's cgroup", probe, 30) == "served" and len(looks) == 3


def test_the_inner_waits_message_is_the_last_state_when_the_outer_gives_up() -> None:
    def probe() -> None:
        raise WaitTimeout("gave up after 1s waiting for an exec; last seen: 500 pod does not exist")

    with pytest.raises(WaitTimeout, match=r"waiting for the pod's cgroup; last seen: gave up after 1s waiting for an exec"):
        wait_for("the pod's cgroup", probe, 0.3)


def test_the_state_is_described_once_when_the_wait_gives_up() -> None:
    described = []

    def describe() -> str:
        described.append(1)
        return "phase=Pending"

    with pytest.raises(WaitTimeout, match="last seen: phase=Pending"):
        wait_for("the pod to run", lambda: None, 0.3, describe)
    assert described == [1]


def test_a_description_that_cannot_be_read_does_not_end_the_wait_early() -> None:
    looks = []

    def probe() -> str | None:
        looks.append(1)
        return "running" if len(looks) == 3 else None

    def describe() -> str:
        raise overloaded()

    assert wait_for("the pod to run", probe, 30, describe) == "running"
    with pytest.raises(WaitTimeout, match=r"last seen: \(the state could not be read: ApiException"):
        wait_for("the pod to run", lambda: None, 0.3, describe)


def test_an_overloaded_answer_costs_a_loop_one_look() -> None:
    missed: list[str] = []
    assert unless_overloaded(lambda: 7, missed) == 7 and missed == []

    def refused() -> int:
        raise overloaded(429)

    assert unless_overloaded(refused, missed) is None
    assert missed == ["the API server answered 429 Service Unavailable: error trying to reach service: dial tcp:"
                      " connection refused"]

    def wrong() -> int:
        raise ApiException(status=404, reason="Not Found")

    with pytest.raises(ApiException):  # an answer, not a moment's overload: the loop ends
        unless_overloaded(wrong, missed)
