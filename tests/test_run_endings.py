"""However a run ends (Ctrl-C or SIGTERM in any phase, a crash in any end-of-run hook), what it
created is deleted, nothing of it stays in the temp directory, and the exit code says what
happened. Real runs of the suite (pytest in a subprocess) through the real kind provider, with a
fake kind and docker (tests/fake_kind.py) standing in for the binaries."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests import fake_kind
from tests.suite_project import the_suite

pytest_plugins = ["pytester"]

NEEDS_A_NODE = "def test_any(swap_node):\n    pass\n"

SLOW_TEST = '''
import os, time
from pathlib import Path

def test_slow(swap_provider):
    Path(os.environ["FAKE_KIND_STATE"], "testing").touch()
    time.sleep(300)
'''

PASSING_TEST = "def test_ok(swap_provider):\n    pass\n"


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.Pytester:
    the_suite(pytester, monkeypatch)
    fake_kind.install(tmp_path)
    for key, value in fake_kind.environment(tmp_path).items():
        monkeypatch.setenv(key, value)
    return pytester


def start(suite: pytest.Pytester, tmp_path: Path, *args: str) -> subprocess.Popen:
    # pytester.popen hands the child a copy of os.environ (the fixture's variables). SIGINT back
    # to its default: a self-test run started in the background of a shell inherits it ignored,
    # and Python then never raises KeyboardInterrupt, so these tests would see a run that cannot
    # be interrupted instead of the run a user's Ctrl-C reaches.
    return suite.popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", f"--rootdir={suite.path}",
                        f"--kind-bin={tmp_path / 'bin' / 'kind'}", *args], stdin=subprocess.DEVNULL,
                       preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def finish(process: subprocess.Popen) -> str:
    process.wait(timeout=180)
    return process.stdout.read().decode(errors="replace") + process.stderr.read().decode(errors="replace")


def assert_nothing_left(tmp_path: Path, output: str) -> None:
    state = tmp_path / "kind-state"
    assert fake_kind.clusters(state) == [], f"the run left its cluster behind:\n{output}"
    assert "create cluster --name ksc-mixed" in (state / "calls").read_text(), "the run never created a cluster"
    assert not list((tmp_path / "tmp").glob("ksc-run-*")), f"the run directory outlived the run:\n{output}"
    assert "Traceback" not in output and "INTERNALERROR" not in output, output


@pytest.mark.parametrize(("sig", "workers"), [(signal.SIGINT, []), (signal.SIGTERM, ["-n", "2"])],
                         ids=["SIGINT", "SIGTERM-xdist"])
def test_killed_during_preflight(suite: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                 sig: signal.Signals, workers: list[str]) -> None:
    monkeypatch.setenv("FAKE_DOCKER_INFO", "hang")
    suite.makepyfile(test_swap=NEEDS_A_NODE)
    process = start(suite, tmp_path, *workers)
    fake_kind.wait_for(tmp_path / "kind-state" / "preflight", process)
    process.send_signal(sig)
    output = finish(process)
    assert process.returncode == pytest.ExitCode.INTERRUPTED, output
    assert not list((tmp_path / "tmp").glob("ksc-run-*")), f"the run directory outlived the run:\n{output}"
    assert "Traceback" not in output and "INTERNALERROR" not in output, output
    docker_pids = [int(p) for p in (tmp_path / "kind-state" / "docker-pids").read_text().split()]
    assert fake_kind.gone(docker_pids) == [], "`docker info` or its child outlived the run"


@pytest.mark.parametrize(("sig", "workers"), [(signal.SIGINT, []), (signal.SIGTERM, []), (signal.SIGTERM, ["-n", "2"])],
                         ids=["SIGINT", "SIGTERM", "SIGTERM-xdist"])
def test_killed_while_kind_creates_the_cluster(suite: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               sig: signal.Signals, workers: list[str]) -> None:
    monkeypatch.setenv("FAKE_KIND_CREATE", "hang")
    suite.makepyfile(test_swap=NEEDS_A_NODE)
    process = start(suite, tmp_path, *workers)
    fake_kind.wait_for(tmp_path / "kind-state" / "creating", process)
    process.send_signal(sig)
    output = finish(process)
    assert process.returncode == pytest.ExitCode.INTERRUPTED, output
    assert "deleted kind cluster ksc-mixed" in output, output
    assert_nothing_left(tmp_path, output)
    kind_pids = [int(p) for p in (tmp_path / "kind-state" / "pids").read_text().split()]
    assert fake_kind.gone(kind_pids) == [], "`kind create` or its child outlived the run"


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_killed_while_tests_run(suite: pytest.Pytester, tmp_path: Path, sig: signal.Signals) -> None:
    suite.makepyfile(test_slow=SLOW_TEST)
    process = start(suite, tmp_path)
    fake_kind.wait_for(tmp_path / "kind-state" / "testing", process)
    process.send_signal(sig)
    output = finish(process)
    assert process.returncode == pytest.ExitCode.INTERRUPTED, output
    assert "deleted kind cluster ksc-mixed" in output, output
    assert_nothing_left(tmp_path, output)


def test_a_signal_while_deleting_lets_the_deletion_finish(suite: pytest.Pytester, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_KIND_DELETE_SECONDS", "3")
    suite.makepyfile(test_ok=PASSING_TEST)
    process = start(suite, tmp_path)
    fake_kind.wait_for(tmp_path / "kind-state" / "deleting", process)
    process.send_signal(signal.SIGTERM)
    process.send_signal(signal.SIGINT)
    output = finish(process)
    assert "SIGTERM while deleting what the run created: deleting it first" in output, output
    assert "deleted kind cluster ksc-mixed" in output, output
    assert process.returncode == pytest.ExitCode.OK, output  # the run's verdict: its one test passed
    assert_nothing_left(tmp_path, output)


# --- a crash at the end of the run ------------------------------------------------------------

CRASHES = {
    # pytest's own junitxml, whose directory became a file while the run went on
    "junitxml": '''
from pathlib import Path
def pytest_sessionstart(session):
    Path("junit").rmdir()
    Path("junit").write_text("no longer a directory")
''',
    "sessionfinish": '''
def pytest_sessionfinish(session):
    raise RuntimeError("a plugin's sessionfinish broke")
''',
    "terminal_summary": '''
def pytest_terminal_summary(terminalreporter):
    raise RuntimeError("a plugin's terminal summary broke")
''',
    "unconfigure": '''
import pytest
@pytest.hookimpl(tryfirst=True)
def pytest_unconfigure(config):
    raise RuntimeError("a plugin's unconfigure broke")
''',
}


@pytest.mark.parametrize("where", sorted(CRASHES))
def test_a_crash_at_the_end_deletes_the_cluster_and_says_so(suite: pytest.Pytester, tmp_path: Path, where: str) -> None:
    suite.makepyfile(test_ok=PASSING_TEST, crash=CRASHES[where])
    (suite.path / "junit").mkdir()
    process = start(suite, tmp_path, "-p", "crash", "--junitxml=junit/junit.xml")
    output = finish(process)
    # The tests passed, the run's end did not: not a pass (the gate reads "error")
    assert process.returncode == pytest.ExitCode.INTERNAL_ERROR, output
    assert output.count("kube-swap-conformance: the end of the run failed: ") == 1, output
    assert "deleted kind cluster ksc-mixed" in output, output
    assert_nothing_left(tmp_path, output)


def test_a_preflight_failure_stays_exit_3_when_the_end_crashes(suite: pytest.Pytester, tmp_path: Path) -> None:
    suite.makepyfile(test_swap=NEEDS_A_NODE, crash=CRASHES["junitxml"])
    (suite.path / "junit").mkdir()
    (tmp_path / "bin" / "docker").write_text("#!/bin/sh\necho 'Cannot connect to the Docker daemon' >&2\nexit 1\n")
    process = start(suite, tmp_path, "-p", "crash", "--junitxml=junit/junit.xml")
    output = finish(process)
    assert process.returncode == 3, output
    assert output.count("preflight failed (") == 1, output
    assert "[FAIL] docker: the Docker engine is not reachable: Cannot connect to the Docker daemon" in output
    assert output.count("kube-swap-conformance: the end of the run failed: ") == 1, output
    assert not list((tmp_path / "tmp").glob("ksc-run-*")), output
    assert "Traceback" not in output and "INTERNALERROR" not in output, output


def test_a_failed_creation_keeps_kinds_logs_and_deletes_the_cluster(suite: pytest.Pytester, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_KIND_CREATE", "fail")
    suite.makepyfile(test_swap=NEEDS_A_NODE)
    process = start(suite, tmp_path, "--results-dir", str(tmp_path / "results"))
    output = finish(process)
    assert process.returncode == pytest.ExitCode.TESTS_FAILED, output
    calls = (tmp_path / "kind-state" / "calls").read_text()
    assert "--retain" in calls and "export logs" in calls, calls
    logs = tmp_path / "results" / "kind-logs" / "ksc-mixed"
    assert (logs / "ksc-mixed-control-plane" / "kubelet.log").is_file(), output
    assert f"kind's logs of its nodes (journals of the kubelet and containerd, the control plane's containers): {logs}" in output
    assert_nothing_left(tmp_path, output)
