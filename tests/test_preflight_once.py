"""A preflight failure is one message and exit 3, with pytest-xdist as without it: the process
that owns the run checks once, before any test runs, and stops the run (no test fails, no
worker repeats it)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests import fake_kind
from tests.suite_project import the_suite
from tests.test_bad_inputs import html_server, kubeconfig_for, silent_server, unauthorized_server  # noqa: F401 - fixtures

pytest_plugins = ["pytester"]

TESTS = """
import pytest

def test_any(swap_node):
    pass

@pytest.mark.parametrize("n", range(24))
def test_many(limited_swap_node, n):
    pass
"""


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.Pytester:
    the_suite(pytester, monkeypatch, test_swap=TESTS)
    fake_kind.install(tmp_path)
    for key, value in fake_kind.environment(tmp_path).items():
        monkeypatch.setenv(key, value)
    return pytester


def message(output: str) -> str:
    """The preflight message, from its first line to the last check's fix."""
    start = output.index("preflight failed (")
    lines = []
    for line in output[start:].splitlines():
        if lines and not line.startswith(("[", "       fix:")):
            break
        lines.append(line.rstrip(" !"))
    return "\n".join(lines)


def once(suite: pytest.Pytester, *args: str) -> str:
    """Run without and with -n 2: exit 3 both times, the message once, no test run; the same
    message (seconds aside); return it."""
    said = []
    for workers in ([], ["-n", "2"]):
        result = suite.runpytest_subprocess("-p", "no:cacheprovider", *args, *workers)
        output = result.stdout.str() + result.stderr.str()
        assert result.ret == 3, output
        assert output.count("preflight failed (") == 1, output
        assert not re.search(r"\d+ (passed|failed|errors?)\b", output), output
        assert "Traceback" not in output and "INTERNALERROR" not in output, output
        said.append(message(output))
    seconds = re.compile(r"after \d+s|timeout=[\d.]+")  # how long a wait took is not the message
    assert seconds.sub("N", said[0]) == seconds.sub("N", said[1]), f"{said[0]}\n---- with -n 2:\n{said[1]}"
    return said[0]


def test_kind_missing(suite: pytest.Pytester, tmp_path: Path) -> None:
    said = once(suite, "--provider=kind", f"--kind-bin={tmp_path / 'nope'}")
    assert f"[FAIL] kind: --kind-bin {tmp_path / 'nope'} does not exist" in said, said
    assert "[ok  ] docker: Docker 27.5.1, cgroup v2" in said, said


def test_an_html_answer(suite: pytest.Pytester, html_server: str) -> None:  # noqa: F811
    said = once(suite, "--provider=existing", f"--kubeconfig={kubeconfig_for(suite.path / 'kc', html_server)}")
    assert "not a Kubernetes API server" in said and "JSONDecodeError" not in said, said


def test_refused_credentials(suite: pytest.Pytester, unauthorized_server) -> None:  # noqa: F811
    server, _ = unauthorized_server
    said = once(suite, "--provider=existing", f"--kubeconfig={kubeconfig_for(suite.path / 'kc', server)}")
    assert "refused the kubeconfig's credentials (401 Unauthorized)" in said, said


def test_a_server_that_never_answers(suite: pytest.Pytester, silent_server: str) -> None:  # noqa: F811
    said = once(suite, "--provider=existing", f"--kubeconfig={kubeconfig_for(suite.path / 'kc', silent_server)}")
    took = re.search(r"gave up after (\d+)s waiting for the node list", said)
    assert took and int(took.group(1)) >= 15, said  # preflight's budget, spent (never more than once)
