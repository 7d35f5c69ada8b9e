"""clusters/versions.py: the one table of supported Kubernetes minors (and everything that reads
it: the range the options accept, the README's statement of it), and the probe of the Go module
proxy, run against a fake proxy on 127.0.0.1 (gaps, refusals, partly served releases, a server
that answers 200 to everything, one that cannot be reached)."""

from __future__ import annotations

import http.server
import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from clusters import cli, versions

REPO = Path(__file__).resolve().parent.parent
DEAD_PROXY = "http://127.0.0.1:9"  # nothing listens on the discard port: refused at once


# --- the table ---------------------------------------------------------------------------------

def test_the_table_is_consecutive_minors_each_pinned_to_one_of_its_patches() -> None:
    minors = [versions.minor_of(m) for m in versions.SUPPORTED]
    assert minors == sorted(minors) and len(minors) >= 1
    assert minors == [(minors[0][0], minors[0][1] + i) for i in range(len(minors))], "consecutive minors, oldest first"
    for minor, pinned in versions.SUPPORTED.items():
        assert re.fullmatch(rf"v{re.escape(minor)}\.\d+", pinned), f"{minor}'s pin {pinned} is not a patch of it"
    assert versions.MIN_KUBERNETES == minors[0] and versions.MAX_KUBERNETES == minors[-1]
    assert versions.SUPPORTED_RANGE == f"{minors[0][0]}.{minors[0][1]} to {minors[-1][0]}.{minors[-1][1]}"
    # The default build is a release of a supported minor, never ahead of that minor's pin.
    default = versions.minor_of(versions.KUBERNETES)
    assert default in minors
    pin = versions.SUPPORTED[f"{default[0]}.{default[1]}"]
    assert int(versions.KUBERNETES.rsplit(".", 1)[1]) <= int(pin.rsplit(".", 1)[1])


def test_the_supported_range_is_1_34_to_1_37() -> None:
    assert versions.SUPPORTED == {"1.34": "v1.34.12", "1.35": "v1.35.8", "1.36": "v1.36.5", "1.37": "v1.37.2"}
    assert versions.SUPPORTED_RANGE == "1.34 to 1.37"


@pytest.mark.parametrize(("version", "supported"), [
    ("v1.33.12", False), ("v1.34.0", True), ("v1.37.2", True), ("v1.38.0", False), ("v1.38.0-alpha.1+src.ab", False),
    ("v1.37.0-rc.1", True), ((1, 34, 1), True), ((1, 28), False), ("1.35", True), ("latest", False)])
def test_the_range_is_the_table_s(version, supported: bool) -> None:
    assert versions.is_supported(version) is supported
    refused = versions.out_of_range("X", version)
    assert (refused is None) is supported
    if refused:
        assert refused.startswith("X is Kubernetes ") and "the suite supports Kubernetes 1.34 to 1.37 only" in refused


# The README's statements of the range: "Kubernetes 1.34 to 1.37" (any two minors), and no older
# form ("1.28 or newer", "older than 1.28") that a new table would leave behind.
RANGE = re.compile(r"\b1\.(\d+) to 1\.(\d+)\b")
OPEN_ENDED = re.compile(r"\b(?:Kubernetes )?1\.\d+ (?:or|and) (?:newer|later)\b|\bolder than 1\.\d+\b")


@pytest.mark.parametrize("readme", ["README.md", "clusters/vm/README.md"])
def test_the_readme_states_exactly_the_table_s_range(readme: str) -> None:
    text = (REPO / readme).read_text()
    stated = {f"1.{a} to 1.{b}" for a, b in RANGE.findall(text)}
    if readme == "README.md":
        assert f"Kubernetes {versions.SUPPORTED_RANGE}" in text, "README.md says which Kubernetes the suite supports"
    assert stated <= {versions.SUPPORTED_RANGE}, f"{readme} states {stated}, the table {versions.SUPPORTED_RANGE}"
    assert not OPEN_ENDED.findall(text), f"{readme}: an open-ended range: {OPEN_ENDED.findall(text)}"


# --- the probe, against a fake Go module proxy ---------------------------------------------------

class FakeProxy:
    """A Go module proxy on 127.0.0.1: ``files`` maps a path ("k8s.io/kubernetes/@v/v1.34.0.info")
    to (status, body); everything else is 404, or ``default`` when set. Every request is logged."""

    def __init__(self) -> None:
        self.files: dict[str, tuple[int, bytes]] = {}
        self.default: tuple[int, bytes] | None = None
        self.asked: list[tuple[str, str]] = []
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def _answer(self, body_too: bool) -> None:
                path = self.path.lstrip("/")
                proxy.asked.append((self.command, path))
                status, body = proxy.files.get(path, proxy.default or (404, b"not found"))
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if body_too:
                    self.wfile.write(body)

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                self._answer(True)

            def do_HEAD(self) -> None:  # noqa: N802
                self._answer(False)

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def release(self, version: str, info: int = 200, mod: int = 200, zip_: int = 200) -> None:
        base = f"k8s.io/kubernetes/@v/{version}"
        self.files[f"{base}.info"] = (info, json.dumps({"Version": version, "Time": "2026-01-01T00:00:00Z"}).encode())
        self.files[f"{base}.mod"] = (mod, b"module k8s.io/kubernetes\n\ngo 1.24.0\n")
        self.files[f"{base}.zip"] = (zip_, b"PK")


@pytest.fixture
def proxy(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeProxy]:
    fake = FakeProxy()
    thread = threading.Thread(target=fake.server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("GOPROXY", f"{fake.url},direct")
    try:
        yield fake
    finally:
        fake.server.shutdown()
        fake.server.server_close()


def test_a_refused_patch_between_served_ones_is_stepped_over(proxy: FakeProxy) -> None:
    for patch in [*range(0, 6), *range(7, 13)]:  # v1.34.6 refused (403), v1.34.13 and later unknown (404)
        proxy.release(f"v1.34.{patch}")
    proxy.release("v1.34.6", info=403, mod=403, zip_=403)
    assert versions.newest_patch("1.34") == "v1.34.12"
    asked = {path.rsplit("/", 1)[1] for _, path in proxy.asked if path.endswith(".info")}
    assert asked == {f"v1.34.{p}.info" for p in range(0, 13 + versions.MISSES)}, "asked by name, up to MISSES past"
    # What was refused below the newest is said, with the file refused; the patches past it are
    # the ones not released yet, not refusals.
    assert versions.probe("1.34") == versions.Probe("v1.34.12", (("v1.34.6", "k8s.io/kubernetes/@v/v1.34.6.info"
                                                                             " refused (403)"),))


def test_only_a_release_whose_info_mod_and_zip_are_all_served_counts(proxy: FakeProxy) -> None:
    for patch in range(0, 9):
        proxy.release(f"v1.35.{patch}")
    proxy.release("v1.35.7", info=403, mod=403)  # refused
    proxy.release("v1.35.9", info=403, mod=403)  # its zip answers, its .info and .mod do not: not buildable
    proxy.release("v1.35.10", zip_=403)  # .info and .mod served, the zip refused: not buildable
    assert versions.newest_patch("1.35") == "v1.35.8"
    assert versions.unbuildable("v1.35.9") == "k8s.io/kubernetes/@v/v1.35.9.info refused (403)"
    assert versions.unbuildable("v1.35.10") == "k8s.io/kubernetes/@v/v1.35.10.zip refused (403)"
    assert versions.unbuildable("v1.35.8") is None
    heads = [path for method, path in proxy.asked if method == "HEAD"]
    assert heads and all(path.endswith(".zip") for path in heads), "the zip is asked with HEAD, not downloaded"


def test_the_probe_gives_up_after_misses_in_a_row(proxy: FakeProxy) -> None:
    for patch in (0, 1, 2, 3 + versions.MISSES):  # a gap of MISSES: the probe stops before it
        proxy.release(f"v1.36.{patch}")
    assert versions.newest_patch("1.36") == "v1.36.2"
    proxy.release("v1.36.3")  # the gap is now MISSES - 1 long: stepped over
    assert versions.newest_patch("1.36") == f"v1.36.{3 + versions.MISSES}"


def test_a_minor_with_nothing_served_has_no_newest_patch(proxy: FakeProxy) -> None:
    assert versions.newest_patch("1.38") is None
    assert len([p for _, p in proxy.asked]) == versions.MISSES  # one .info per patch asked, nothing more
    assert versions.probe("1.38") == versions.Probe(None, ()), "nothing released is nothing refused"
    with pytest.raises(ValueError, match="not a Kubernetes minor"):
        versions.newest_patch("latest")


def test_a_server_that_answers_200_html_to_everything_is_not_a_proxy(proxy: FakeProxy) -> None:
    proxy.default = (200, b"<!doctype html><html><body>Welcome to the captive portal</body></html>")
    with pytest.raises(versions.ProxyUnreachable) as raised:
        versions.newest_patch("1.34")
    message = str(raised.value)
    assert message.startswith(f"the Go module proxy {proxy.url} answered k8s.io/kubernetes/@v/v1.34.0.info with"
                              " '<!doctype html>"), message
    assert "is GOPROXY a Go module proxy?" in message
    assert len(proxy.asked) == 1, "one answer was enough to tell"


def test_a_server_that_serves_every_version_asked_for_is_not_believed(proxy: FakeProxy) -> None:
    # Valid JSON naming each version asked for, for every name: the probe stops at its bound.
    for patch in range(0, 20):
        proxy.release(f"v1.37.{patch}")
    with pytest.raises(versions.ProxyUnreachable, match=r"serves every k8s.io/kubernetes 1.37 patch asked for, up to"
                                                        r" v1.37.11"):
        versions.newest_patch("1.37", limit=12)
    assert len({p for _, p in proxy.asked if p.endswith(".info")}) == 12


def test_other_answers_are_an_error_naming_the_proxy(proxy: FakeProxy) -> None:
    proxy.default = (502, b"bad gateway")
    with pytest.raises(versions.ProxyUnreachable, match=rf"^the Go module proxy {re.escape(proxy.url)} answered 502"
                                                        r" for k8s.io/kubernetes/@v/v1.34.0.info$"):
        versions.newest_patch("1.34")


def test_an_unreachable_proxy_is_one_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOPROXY", DEAD_PROXY)
    with pytest.raises(versions.ProxyUnreachable, match=rf"^the Go module proxy {DEAD_PROXY} cannot be reached"):
        versions.newest_patch("1.34")


STAGING_MOD = b"""module k8s.io/kubernetes

go 1.26.0

replace (
\tk8s.io/api => ./staging/src/k8s.io/api
\tk8s.io/sample-cli-plugin => ./staging/src/k8s.io/sample-cli-plugin
)
"""


def _build_module_of(proxy: FakeProxy, api_zip: int) -> str:
    """The go.mod of the Kubernetes build's wrapper module for v1.37.2, its staging modules asked
    of the fake proxy: k8s.io/api's zip answered ``api_zip``, k8s.io/sample-cli-plugin's 404."""
    from clusters.vm import build

    proxy.release("v1.37.2")
    proxy.files["k8s.io/kubernetes/@v/v1.37.2.mod"] = (200, STAGING_MOD)
    proxy.files["k8s.io/api/@v/v0.37.2.zip"] = (api_zip, b"PK")
    return build.kubernetes_component("v1.37.2").files["go.mod"]


def test_a_staging_module_the_proxy_does_not_publish_is_stubbed(proxy: FakeProxy) -> None:
    gomod = _build_module_of(proxy, 200)
    assert "\tk8s.io/api => k8s.io/api v0.37.2\n" in gomod, gomod
    assert "\tk8s.io/sample-cli-plugin => ./stubs/sample-cli-plugin\n" in gomod, gomod


@pytest.mark.parametrize("status", [500, 502, 429])
def test_a_staging_module_the_proxy_could_not_answer_for_fails_the_build_naming_it(proxy: FakeProxy,
                                                                                   status: int) -> None:
    """Not "not published": a stub in its place would fail `go build` minutes later on a missing
    package, with no word of the proxy."""
    with pytest.raises(versions.ProxyUnreachable, match=rf"answered {status} for k8s.io/api@v0.37.2$"):
        _build_module_of(proxy, status)


def _versions_command(proxy_url: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "GOPROXY": proxy_url, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "clusters.versions"], env=env, cwd=REPO, capture_output=True,
                          text=True, timeout=120)


def _serve_the_pins(proxy: FakeProxy) -> None:
    for pinned in versions.SUPPORTED.values():
        minor, patch = pinned.rsplit(".", 1)
        for p in range(0, int(patch) + 1):
            proxy.release(f"{minor}.{p}")


def test_the_command_reports_each_minor_current_or_stale(proxy: FakeProxy) -> None:
    _serve_the_pins(proxy)
    done = _versions_command(proxy.url)
    assert done.returncode == cli.Exit.OK, done.stdout + done.stderr
    for minor, pinned in versions.SUPPORTED.items():
        assert re.search(rf"^  {re.escape(minor)}  pinned {pinned} +served {pinned} +current$", done.stdout, re.M), \
            done.stdout
    assert re.search(r"^  1\.38  not supported +served none$", done.stdout, re.M), done.stdout

    first, pinned = next(iter(versions.SUPPORTED.items()))
    newer = f"v{first}.{int(pinned.rsplit('.', 1)[1]) + 2}"  # past a refused patch
    proxy.release(newer)
    proxy.release("v1.38.0")
    done = _versions_command(proxy.url)
    assert done.returncode == cli.Exit.FAILED, done.stdout + done.stderr
    assert re.search(rf"^  {re.escape(first)}  pinned {pinned} +served {newer} +STALE: {newer} is served \(update"
                     r" SUPPORTED in .*versions\.py\)$", done.stdout, re.M), done.stdout
    skipped = f"v{first}.{int(pinned.rsplit('.', 1)[1]) + 1}"  # each patch refused below the newest is said
    assert re.search(rf"^ +refused {skipped}: k8s\.io/kubernetes/@v/{skipped}\.info refused \(404\)$", done.stdout,
                     re.M), done.stdout
    assert re.search(r"^  1\.38  not supported +served v1\.38\.0 +a new minor: add it to SUPPORTED", done.stdout, re.M)


def test_the_command_says_when_a_pin_is_no_longer_served(proxy: FakeProxy) -> None:
    _serve_the_pins(proxy)
    last_minor, last_pin = list(versions.SUPPORTED.items())[-1]
    proxy.release(last_pin, zip_=403)
    done = _versions_command(proxy.url)
    assert done.returncode == cli.Exit.FAILED, done.stdout + done.stderr
    assert f"PIN NOT SERVED: k8s.io/kubernetes/@v/{last_pin}.zip refused (403)" in done.stdout, done.stdout


def test_the_command_on_a_200_to_everything_server_is_one_error(proxy: FakeProxy) -> None:
    proxy.default = (200, b"<html>hello</html>")
    done = _versions_command(proxy.url)
    assert done.returncode == cli.Exit.PREFLIGHT, done.stdout + done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and errors[0].startswith(f"error: the Go module proxy {proxy.url} answered"), done.stderr
    assert "Traceback" not in done.stderr


def test_a_goproxy_credential_is_sent_as_basic_auth_not_taken_for_the_host(monkeypatch: pytest.MonkeyPatch) -> None:
    """Go takes user:password in a GOPROXY URL (a private proxy); urllib would look up
    "user:password@host" as the host name."""
    import base64

    from tests.test_bad_inputs import http_server

    seen: list[str | None] = []

    def answer(request):  # type: ignore[no-untyped-def]
        seen.append(request.headers.get("Authorization"))
        return 404, "text/plain", b"not found"

    with http_server(answer) as url:
        monkeypatch.setenv("GOPROXY", url.replace("http://", "http://me:p%40ss@"))
        assert versions.proxy_get("k8s.io/kubernetes/@v/v1.37.1.info")[0] == 404
    assert seen == ["Basic " + base64.b64encode(b"me:p@ss").decode()]


# Prose that lists the pins, or names the default build, outside the records of what ran then
# (docs/measurements, docs/design): each copy is the table's.
PROSE = [p for p in [REPO / "README.md", *REPO.glob("*/README.md"), *(REPO / "docs").glob("*.md")] if p.is_file()]


@pytest.mark.parametrize("doc", PROSE, ids=lambda p: str(p.relative_to(REPO)))
def test_prose_that_lists_the_pins_or_the_default_build_says_the_table_s(doc: Path) -> None:
    text = doc.read_text(encoding="utf-8")
    minors = [versions.minor_of(m) for m in versions.SUPPORTED]
    listing = re.compile(", ".join(rf"v{a}\.{b}\.\d+" for a, b in minors))  # type: ignore[misc]
    for found in listing.findall(text):
        assert found == ", ".join(versions.SUPPORTED.values()), f"{doc.name} lists the pins as {found}"
    for found in re.findall(r"\bdefault:? (v1\.\d+\.\d+)\b", text):
        assert found == versions.KUBERNETES, f"{doc.name} names the default build {found}, not {versions.KUBERNETES}"
