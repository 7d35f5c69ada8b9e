"""An exec's outcome read from the stream's status channel: exit codes as numbers, and a kubelet
that refused to run the command (right after a restart, on 1.34 as a Failure status on the
stream, "unable to upgrade connection: pod does not exist") as ExecRefused, which the readers
that meet restarting kubelets retry, never a ValueError from the client library."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from e2e.observe import ERROR_CHANNEL, ExecRefused, exit_status


@dataclass
class Stream:
    status: str
    open: bool = False

    def is_open(self) -> bool:
        return self.open

    def read_channel(self, channel: int) -> str:
        assert channel == ERROR_CHANNEL
        return self.status


REFUSED = {"metadata": {}, "status": "Failure", "message": "unable to upgrade connection: pod does not exist",
           "reason": "InternalError", "details": {"causes": [{"message": "unable to upgrade connection: pod does not exist"}]},
           "code": 500}


def exited(code: int) -> str:
    return json.dumps({"metadata": {}, "status": "Failure", "message": f"command terminated with non-zero exit code: {code}",
                       "reason": "NonZeroExitCode", "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]}})


def test_success_and_exit_codes() -> None:
    assert exit_status(Stream(json.dumps({"metadata": {}, "status": "Success"}))) == 0
    assert exit_status(Stream(exited(3))) == 3
    assert exit_status(Stream(exited(137))) == 137


def test_no_status_yet_is_none() -> None:
    assert exit_status(Stream("", open=True)) is None
    assert exit_status(Stream("")) is None


@pytest.mark.parametrize("raw", [json.dumps(REFUSED), "<html>bad gateway</html>", json.dumps([1, 2]),
                                 json.dumps({"status": "Failure", "details": {"causes": "x"}})])
def test_anything_else_is_a_refusal_naming_what_the_kubelet_said(raw: str) -> None:
    with pytest.raises(ExecRefused) as refused:
        exit_status(Stream(raw))
    if raw == json.dumps(REFUSED):
        assert "pod does not exist" in str(refused.value)


def test_the_agents_reader_retries_a_refusal(monkeypatch: pytest.MonkeyPatch) -> None:
    """NodeFiles._exec: a refusal is "not yet" for a bounded wait, and the answer after it is read."""
    from e2e import nodefiles

    answers = [ExecRefused("unable to upgrade connection: pod does not exist"), "ok\n"]

    class Observer:
        def exec(self, *args, **kwargs):
            answer = answers.pop(0)
            if isinstance(answer, Exception):
                raise answer
            return type("R", (), {"stdout": answer})()

    class Space:
        namespace, observer = "ns", Observer()

    reader = nodefiles.NodeFiles.__new__(nodefiles.NodeFiles)
    reader.ws, reader.pod = Space(), "agent"
    assert reader._exec("cat", "/x") == "ok\n"
    assert not answers


def test_a_refusal_that_lasts_fails_the_bounded_wait_with_the_last_refusal() -> None:
    from kubernetes.client.exceptions import ApiException

    from e2e.observe import exec_once_served

    refusals = iter([ExecRefused("unable to upgrade connection: pod does not exist")]
                    + [ApiException(status=400, reason="container not found")] * 1000)

    def run() -> str:
        raise next(refusals)

    with pytest.raises(Exception, match="gave up after .* the exec; last seen: 400 container not found"):
        exec_once_served("the exec", run, 1.0)
