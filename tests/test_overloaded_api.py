"""An overloaded control plane (etcd timing out under emulation) must not pass for a broken
kubelet, nor fail a correct one: writes resent only where that is safe, and a failed shared
deployment failing its tests at once instead of being deployed again by each of them."""

from __future__ import annotations

import multiprocessing
import time
from pathlib import Path

import pytest
from kubernetes.client.exceptions import ApiException

from e2e import observe
from e2e.shapes import deployed_once


def _error(status: int) -> ApiException:
    error = ApiException(status=status, reason="?")
    error.body = '{"kind":"Status","message":"%s"}' % {500: "etcdserver: request timed out",
                                                       409: "pods x already exists",
                                                       422: "Pod x is invalid"}.get(status, "?")
    return error


def _sender(*answers: int | None) -> tuple[list[int], object]:
    sent: list[int] = []

    def send() -> None:
        sent.append(1)
        answer = answers[len(sent) - 1]
        if answer is not None:
            raise _error(answer)

    return sent, send


def test_a_create_answered_500_is_resent_and_its_landing_accepted() -> None:
    sent, send = _sender(500, 409)  # the first attempt was stored after all
    observe.once("pod x created", send, seconds=30)
    assert len(sent) == 2


def test_a_create_answered_500_then_created() -> None:
    sent, send = _sender(500, 503, None)
    observe.once("pod x created", send, seconds=30)
    assert len(sent) == 3


def test_already_exists_on_the_first_attempt_is_an_error() -> None:
    # The name is the test's own: an object already there is another run's, or a bug.
    _, send = _sender(409)
    with pytest.raises(ApiException) as raised:
        observe.once("pod x created", send, seconds=30)
    assert raised.value.status == 409


def test_a_refused_create_is_not_resent() -> None:
    sent, send = _sender(422, None)
    with pytest.raises(ApiException):
        observe.once("pod x created", send, seconds=30)
    assert len(sent) == 1


def test_a_removal_answered_500_then_refused_as_already_gone_has_landed() -> None:
    """The node-status patch of the swapoff test: its first attempt was stored under a 500, so
    the resend's remove finds no field (422)."""
    sent, send = _sender(500, 422)
    assert observe.sent("bootID removed", send, seconds=30, landed=lambda e: e.status == 422) is None
    assert len(sent) == 2


def test_a_write_refused_on_its_first_attempt_is_an_error_whatever_landed_says() -> None:
    sent, send = _sender(422)
    with pytest.raises(ApiException):
        observe.sent("bootID removed", send, seconds=30, landed=lambda e: e.status == 422)
    assert len(sent) == 1


def test_a_resent_write_returns_the_answer_of_the_attempt_that_was_taken() -> None:
    answers = iter([_error(503), {"kind": "Pod"}])

    def send() -> dict:
        answer = next(answers)
        if isinstance(answer, ApiException):
            raise answer
        return answer

    assert observe.sent("resize of ns/x", send, seconds=30) == {"kind": "Pod"}


def test_a_create_the_server_never_takes_times_out_saying_why() -> None:
    def send() -> None:
        raise _error(500)

    with pytest.raises(observe.WaitTimeout, match="waiting for pod x created; last seen: the API server answered 500"
                                                  ".*etcdserver: request timed out"):
        observe.once("pod x created", send, seconds=2)


def test_a_failed_shape_deployment_is_not_repeated_by_each_test(tmp_path: Path) -> None:
    deployments: list[int] = []

    def deploy() -> dict:
        deployments.append(1)
        raise TimeoutError("The handshake operation timed out")

    with pytest.raises(TimeoutError):
        deployed_once(tmp_path, "kind-ksc/worker", "LimitedSwap", deploy)
    for _ in range(3):
        with pytest.raises(pytest.fail.Exception, match="could not be deployed on kind-ksc/worker under LimitedSwap"
                                                        ".*TimeoutError: The handshake operation timed out"):
            deployed_once(tmp_path, "kind-ksc/worker", "LimitedSwap", deploy)
    assert len(deployments) == 1
    # Another behavior (or node) is its own deployment.
    assert deployed_once(tmp_path, "kind-ksc/worker", "NoSwap", lambda: {"shapes": 1}) == {"shapes": 1}


def _deploy_slowly(run_dir: str, log: str) -> None:
    def deploy() -> dict:
        with open(log, "a") as f:
            f.write("deployed\n")
        time.sleep(0.5)  # the other process asks meanwhile
        return {"namespace": "ksc-shapes-x"}

    assert deployed_once(Path(run_dir), "n", "NoSwap", deploy) == {"namespace": "ksc-shapes-x"}


def test_a_deployment_is_made_once_for_every_process_of_the_run(tmp_path: Path) -> None:
    """xdist workers are processes: the first deploys, the others wait and read its result."""
    log = tmp_path / "log"
    ctx = multiprocessing.get_context("fork")
    workers = [ctx.Process(target=_deploy_slowly, args=(str(tmp_path), str(log))) for _ in range(3)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(30)
        assert worker.exitcode == 0
    assert log.read_text() == "deployed\n"
