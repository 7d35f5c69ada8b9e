"""Credentials never reach the user: clusters/redact.py, and the places messages become output
(the commands' error path, progress lines, the pytest plugin's messages and test reports).

The end-to-end cases run the suite for real against a kubeconfig with a password in its server
URL and a bearer token: a loopback port nothing listens on, and a loopback server that refuses
the user and echoes its Authorization header in its answer, as a proxy or a webhook may."""

from __future__ import annotations

import argparse
import contextlib
import http.server
import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clusters import cli, progress
from clusters.discovery import DiscoveryError, discover
from clusters.redact import MASK, redact
from tests.suite_project import the_suite

pytest_plugins = ["pytester"]

PASSWORD = "hunter2-Pa55word"
TOKEN = "tok3n.S3cretBearerValue"
SECRETS = (PASSWORD, TOKEN)


# --- the function ------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "masked"), [
    ("on https://admin:hunter2@127.0.0.1:6443: refused", "on https://***@127.0.0.1:6443: refused"),
    ("https://user:pa/ss@host:6443/x", "https://***@host:6443/x"),  # an unencoded "/" in the password
    ("GOPROXY=https://u:p@proxy.example/x,direct", "GOPROXY=https://***@proxy.example/x,direct"),
    ("ssh://git@github.com/o/r", "ssh://***@github.com/o/r"),
    ("users: [{name: u, user: {token: abc.def}}]", "users: [{name: u, user: {token: ***}}]"),
    ("{'token': 'abc', 'password': \"pw\"}", "{'token': '***', 'password': \"***\"}"),
    ("client-key-data: LS0tLS1CRUdJTi\nclient-certificate-data: LS0tQ0VSVA",
     "client-key-data: ***\nclient-certificate-data: LS0tQ0VSVA"),
    ("accessToken=xyz; id-token: abc; KUBE_PASSWORD=pw; client-secret: s",
     "accessToken=***; id-token: ***; KUBE_PASSWORD=***; client-secret: ***"),
    ("GET /api?token=abc&watch=1", "GET /api?token=***&watch=1"),
    ("Authorization: Basic dXNlcjpwYXNz\nnext", "Authorization: ***\nnext"),
    ("-H 'Authorization: Bearer abc.def' x", "-H 'Authorization: ***' x"),
    ("the server said: Bearer abc.def is not valid", "the server said: Bearer *** is not valid"),
    ("kubeadm join 10.0.2.15:6443 --token abcdef.0123456789abcdef --discovery-token-ca-cert-hash sha256:12",
     "kubeadm join 10.0.2.15:6443 --token *** --discovery-token-ca-cert-hash sha256:12"),
    ("key:\n-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----\nafter", "key:\n***\nafter"),
    ("cut short: -----BEGIN PRIVATE KEY-----\nMIIE", "cut short: ***"),
])
def test_credentials_are_masked(text: str, masked: str) -> None:
    assert redact(text) == masked


@pytest.mark.parametrize("text", [
    "gave up after 15s waiting for the node list of c (/api/v1/nodes on https://127.0.0.1:6443): refused",
    "https://proxy.golang.org/k8s.io/kubernetes/@v/list",  # a module proxy's /@v/ is no userinfo
    "kindest/node:v1.37.0@sha256:0123abcd",
    "tokenFile: /var/run/secrets/token; secretName: my-secret",  # a path and a name, not secrets
    "https://127.0.0.1:6443 refused the kubeconfig's credentials (401 Unauthorized): its token or client"
    " certificate is not accepted there",
    "[FAIL] swap: no active swap in /proc/swaps: kind nodes share the host's swap",
    "export DOCKER_HOST=tcp://127.0.0.1:40001",
])
def test_the_suites_own_messages_are_left_as_they_are(text: str) -> None:
    assert redact(text) == text


_USERINFO = st.text(st.sampled_from("abcXYZ019-._~!$&()*+,;=:%"), min_size=1, max_size=40)
_HOST = st.from_regex(r"[a-z][a-z0-9-]{0,20}(\.[a-z]{2,6})?(:[0-9]{1,5})?", fullmatch=True)
_PATH = st.from_regex(r"(/[a-zA-Z0-9._-]{0,12}){0,3}", fullmatch=True)
_PROSE = st.text(st.sampled_from("abcdefghijklmnopqrstuvwxyz ABC0123456789.,()[]/\n"), max_size=60)


@given(scheme=st.sampled_from(["https", "http", "ssh", "tcp", "git+ssh"]), userinfo=_USERINFO, host=_HOST,
       path=_PATH, before=_PROSE, after=_PROSE)
def test_a_urls_userinfo_never_shows(scheme: str, userinfo: str, host: str, path: str, before: str, after: str) -> None:
    url = f"{scheme}://{userinfo}@{host}{path}"
    assert redact(f"{before} {url} {after}") == f"{redact(before)} {scheme}://{MASK}@{host}{path} {redact(after)}"


_VALUE = st.text(st.sampled_from("abcdefXYZ0123456789+/=._~-"), min_size=1, max_size=64).filter(
    lambda v: not v.startswith("-"))


@given(key=st.sampled_from(["token", "password", "client-key-data", "id-token", "refresh-token", "client-secret",
                            "accessToken", "KUBE_PASSWORD", "apiKey", "private_key"]),
       separator=st.sampled_from([": ", "=", " = ", ":"]), quote=st.sampled_from(["", "'", '"']), value=_VALUE,
       before=_PROSE, after=_PROSE)
def test_a_secrets_value_never_shows(key: str, separator: str, quote: str, value: str, before: str, after: str) -> None:
    text = f"{before}\n{key}{separator}{quote}{value}{quote}\n{after}"
    assert redact(text) == f"{redact(before)}\n{key}{separator}{quote}{MASK}{quote}\n{redact(after)}"


@given(scheme=st.sampled_from(["Bearer", "bearer"]), value=_VALUE, before=_PROSE)
def test_a_bearer_credential_never_shows(scheme: str, value: str, before: str) -> None:
    assert redact(f"{before} {scheme} {value}") == f"{redact(before)} {scheme} {MASK}"


@given(st.text(max_size=300))
def test_redacting_twice_changes_nothing_more(text: str) -> None:
    once = redact(text)
    assert redact(once) == once


@given(st.text(st.characters(blacklist_characters="@:=-", blacklist_categories=("Cs",)), max_size=300))
def test_text_without_a_credentials_shape_is_unchanged(text: str) -> None:
    if "bearer" not in text.lower():
        assert redact(text) == text


def test_long_text_is_redacted_in_linear_time() -> None:
    import time

    for text in ("x://a," * 20000, "a." * 60000, "token=" * 20000, "--token " * 15000, "-" * 120000):
        t0 = time.monotonic()
        redact(text)
        assert time.monotonic() - t0 < 5, f"{text[:12]!r}... took {time.monotonic() - t0:.1f}s"


# --- where messages become output ------------------------------------------------------------

SECRET_URL = f"https://admin:{PASSWORD}@127.0.0.1:6443"


@pytest.mark.parametrize("debug", [False, True])
@pytest.mark.parametrize("raised", [cli.UsageError, cli.NotReady, RuntimeError, KeyError])
def test_a_commands_error_shows_no_credential(capsys: pytest.CaptureFixture[str], raised: type[Exception],
                                             debug: bool) -> None:
    def main(args: argparse.Namespace) -> int:
        raise raised(f"{SECRET_URL} answered 401 to Authorization: Bearer {TOKEN}")

    code = cli.run(main, argparse.Namespace(debug=debug), known=(RuntimeError,))
    out, err = capsys.readouterr()
    assert code != cli.Exit.OK and "127.0.0.1:6443" in err, err
    assert not any(s in out + err for s in SECRETS), err
    assert ("Traceback" in err) == debug, err


def test_progress_lines_show_no_credential(tmp_path: Path) -> None:
    shown: list[str] = []
    progress.writer(tmp_path, "kind", show=shown.append)(f"pulling through {SECRET_URL} with token: {TOKEN}")
    written = (tmp_path / progress.FILE).read_text()
    assert "127.0.0.1:6443" in written and not any(s in written + "".join(shown) for s in SECRETS), written


def _kubeconfig(path: Path, server: str) -> Path:
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters: [{{name: c, cluster: {{server: '{server}', insecure-skip-tls-verify: true}}}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\n"
        f"users: [{{name: u, user: {{token: '{TOKEN}'}}}}]\n")
    return path


def _refusing_port() -> int:
    """A loopback port nothing listens on (bound once for a free number, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def _echoing_server() -> Iterator[int]:
    """An API server that forbids the user everything, quoting the Authorization header it got."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
            body = json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 403,
                               "reason": "Forbidden", "message": f"nodes is forbidden for Authorization:"
                                                                 f" {self.headers.get('Authorization')}"}).encode()
            self.send_response(403)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def test_a_discovery_error_names_the_server_without_its_password(tmp_path: Path) -> None:
    port = _refusing_port()
    kubeconfig = _kubeconfig(tmp_path / "kc", f"https://admin:{PASSWORD}@127.0.0.1:{port}")
    with pytest.raises(DiscoveryError) as raised:
        discover(str(kubeconfig), "existing", "c", seconds=2)
    assert f"https://{MASK}@127.0.0.1:{port}" in str(raised.value) and PASSWORD not in str(raised.value)


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    return the_suite(pytester, monkeypatch)


@pytest.mark.parametrize("server", ["refusing", "echoing"])
def test_a_failed_preflight_shows_no_credential(suite: pytest.Pytester, server: str) -> None:
    suite.makepyfile(test_swap="def test_any(swap_node):\n    pass\n")
    with contextlib.ExitStack() as stack:
        port = _refusing_port() if server == "refusing" else stack.enter_context(_echoing_server())
        scheme = "https" if server == "refusing" else "http"
        kubeconfig = _kubeconfig(suite.path / "kc", f"{scheme}://admin:{PASSWORD}@127.0.0.1:{port}")
        result = suite.runpytest_subprocess("--provider=existing", f"--kubeconfig={kubeconfig}")
    output = result.stdout.str() + result.stderr.str()
    assert result.ret == cli.Exit.PREFLIGHT and f"127.0.0.1:{port}" in output, output
    assert not any(s in output for s in SECRETS), output
    if server == "echoing":  # the answer that quoted the token is in the message, masked
        assert f"Authorization: {MASK}" in output, output


def test_a_tests_failure_skip_and_output_show_no_credential(suite: pytest.Pytester) -> None:
    suite.makepyfile(test_secrets=f"""
import pytest

def test_fails():
    print("connecting to {SECRET_URL}")
    raise RuntimeError("{SECRET_URL} said: Bearer {TOKEN}")

def test_skips():
    pytest.skip("no node at {SECRET_URL}")

def test_asserts():
    server = "{SECRET_URL}"
    assert server.startswith("http://"), f"{{server}} is no plain http server"
""")
    junit = suite.path / "junit.xml"
    result = suite.runpytest_subprocess("-rA", f"--junitxml={junit}")
    output = result.stdout.str() + result.stderr.str()
    result.assert_outcomes(failed=2, skipped=1)
    assert "127.0.0.1:6443" in output and "RuntimeError" in output, output
    assert not any(s in output for s in SECRETS), output
    assert not any(s in junit.read_text() for s in SECRETS), junit.read_text()
