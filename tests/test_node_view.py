"""When the API server stops answering a test, its failure shows the node as it shows itself
(Provider.node_view), read once for the failures of one loss; a failure that is an answer (a
wrong value, a 404) does not. The detection is a pure function of the exception."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import MaxRetryError, ProtocolError

from e2e.observe import WaitTimeout, api_server_lost
from tests.suite_project import the_suite

pytest_plugins = ["pytester"]


def raised_from(error: BaseException, cause: BaseException) -> BaseException:
    try:
        try:
            raise cause
        except BaseException as inner:
            raise error from inner
    except BaseException as outer:
        return outer


def raised_from_none(error: BaseException, context: BaseException) -> BaseException:
    try:
        try:
            raise context
        except BaseException:
            raise error from None
    except BaseException as outer:
        return outer


@pytest.mark.parametrize("error", [
    ProtocolError("Connection aborted.", ConnectionResetError(104, "Connection reset by peer")),
    MaxRetryError(None, "/api/v1/nodes/n1", "no answer"),
    ssl.SSLEOFError(8, "EOF occurred in violation of protocol (_ssl.c:2427)"),
    raised_from(RuntimeError("the node did not come back"), ProtocolError("Connection aborted.")),
    WaitTimeout("gave up after 120s waiting for the node Ready; last seen: MaxRetryError(\"HTTPSConnectionPool("
                "host='127.0.0.1', port=59883): Max retries exceeded with url: /api/v1/nodes/ksc-node\")"),
    # an API server that answered only 504s (etcd timed out) until a create's bound ran out (kind run 44)
    WaitTimeout("gave up after 300s waiting for create pod ksc-noswap/burstable; last seen: the API server answered"
                " 504 Gateway Timeout: context deadline exceeded"),
    WaitTimeout("gave up after 300s waiting for the node Ready; last seen: the API server answered 429 Too Many"
                " Requests: too many requests"),
], ids=["reset", "retries", "tls-cut", "cause", "wait-text", "wait-504", "wait-429"])
def test_a_lost_connection_is_seen_however_it_is_wrapped(error: BaseException) -> None:
    assert api_server_lost(error)


@pytest.mark.parametrize("error", [
    AssertionError("memory.swap.max of app: expected 35041280, observed 70082560"),
    ApiException(status=404, reason="Not Found"),
    ApiException(status=503, reason="Service Unavailable"),  # an answer: retried elsewhere, not a lost node
    WaitTimeout("gave up after 600s waiting for stress to terminate; last seen: phase=Running"),
    # the vm guest agent's own socket: not the API server
    TimeoutError("timed out"), ConnectionResetError(104, "Connection reset by peer"),
    RuntimeError("guest command swapoff /swapfile failed: Connection refused"),
    # a wrong kubeconfig: the client refuses the server's certificate
    MaxRetryError(None, "/api", ssl.SSLCertVerificationError(1, "certificate verify failed")),
    # the discovery's permanent error raised `from None` over a urllib3 error
    raised_from_none(RuntimeError("the kubeconfig's credentials are refused"), ProtocolError("Connection aborted.")),
], ids=["wrong-value", "404", "503", "wait", "agent-timeout", "agent-reset", "agent-text", "bad-cert", "from-none"])
def test_an_answer_is_not_a_lost_connection(error: BaseException) -> None:
    assert not api_server_lost(error)


VIEWING_PROVIDER = '''
import os
from pathlib import Path

from tests.standin_provider import StandInProvider


class ViewingProvider(StandInProvider):
    name = "viewing"

    def node_name(self, behavior):
        return "n1"

    def node_view(self, node):
        looks = Path(os.environ["KSC_VIEW_LOOKS"])
        looks.write_text(looks.read_text() + "look\\n" if looks.exists() else "look\\n")
        return f"## services\\nkubelet: active (node {node.name if node else None})"


def pytest_ksc_make_provider(config):
    return ViewingProvider()
'''

TESTS = '''
import pytest
from urllib3.exceptions import ProtocolError


def test_reset(swap_node):
    raise ProtocolError("Connection aborted.", ConnectionResetError(104, "Connection reset by peer"))


def test_reset_again(swap_node):
    raise ProtocolError("Connection aborted.", ConnectionResetError(104, "Connection reset by peer"))


def test_wrong_value(swap_node):
    assert 1 == 2, "memory.swap.max: expected 1, observed 2"
'''


def test_a_failure_where_the_api_server_went_shows_the_node_once_per_loss(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    the_suite(pytester, monkeypatch, viewing=VIEWING_PROVIDER, test_lost=TESTS)
    monkeypatch.setenv("KSC_VIEW_LOOKS", str(tmp_path / "looks"))
    monkeypatch.setenv("KSC_CACHE_DIR", str(tmp_path / "cache"))
    result = pytester.runpytest_subprocess("-p", "viewing", "-p", "no:cacheprovider", "--behaviors=LimitedSwap",
                                           "--results-dir", str(tmp_path / "results"))
    output = result.stdout.str()
    result.assert_outcomes(failed=3)
    sections = output.split("_ test_")
    reset = next(s for s in sections if s.startswith("reset["))
    again = next(s for s in sections if s.startswith("reset_again["))
    wrong = next(s for s in sections if s.startswith("wrong_value["))
    for section in (reset, again):
        assert "the node as it shows itself (the API server did not answer): n1" in section, output
        assert "kubelet: active (node n1)" in section, output
    assert "shows itself" not in wrong, output
    assert (tmp_path / "looks").read_text() == "look\n", "two failures of one loss: one look"
