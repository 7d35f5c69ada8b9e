"""pytest's own checks come before the suite's preflight: a collection error, a path that does not
exist, a bad -k and a selection of no test end the run with pytest's message and exit code, and
the provider's preflight (on vm: the Kubernetes build) is never called. With and without -n."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.suite_project import the_suite

pytest_plugins = ["pytester"]


# A provider whose preflight leaves a mark: the run's own hook (pytest_ksc_make_provider) offers it.
MARKING_PROVIDER = '''
import os
import re
from pathlib import Path

from tests.standin_provider import StandInProvider


class MarkingProvider(StandInProvider):
    name = "marking"

    def preflight(self, behaviors):
        Path(os.environ["KSC_PREFLIGHT_MARK"]).write_text("preflight ran")


def pytest_ksc_make_provider(config):
    return MarkingProvider()
'''

TESTS = '''
def test_any(swap_node):
    pass
'''


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.Pytester:
    the_suite(pytester, monkeypatch, marking=MARKING_PROVIDER, test_swap=TESTS)
    monkeypatch.setenv("KSC_PREFLIGHT_MARK", str(tmp_path / "preflight-ran"))
    monkeypatch.setenv("KSC_CACHE_DIR", str(tmp_path / "cache"))
    return pytester


def run(suite: pytest.Pytester, tmp_path: Path, *args: str, workers: bool) -> tuple[int, str]:
    result = suite.runpytest_subprocess("-p", "marking", "-p", "no:cacheprovider", "--behaviors=LimitedSwap", *args,
                                        *(["-n", "2"] if workers else []))
    return result.ret, result.stdout.str() + result.stderr.str()


@pytest.mark.parametrize("workers", [False, True], ids=["alone", "-n 2"])
def test_the_fake_provider_is_asked_for_its_preflight(suite: pytest.Pytester, tmp_path: Path, workers: bool) -> None:
    """The control: a good run does call the preflight, so its absence below means something."""
    code, output = run(suite, tmp_path, workers=workers)
    assert code == 0, output
    assert (tmp_path / "preflight-ran").exists(), output


CASES = [  # (arguments, test files, exit code (alone, -n 2), what pytest says)
    # pytest alone stops here; pytest-xdist would run the tests that collected, the suite stops it
    ((), {"test_broken": "def test_x(:\n"}, pytest.ExitCode.INTERRUPTED, "error during collection"),
    ((), {"test_importing": "import no_such_module_ksc\n"}, pytest.ExitCode.INTERRUPTED, "error during collection"),
    (("-k", "any and"), {}, pytest.ExitCode.USAGE_ERROR, "Wrong expression passed to '-k'"),
    (("-k", "no_test_is_called_this"), {}, pytest.ExitCode.NO_TESTS_COLLECTED, "deselected|no tests ran"),
    (("-m", "no_such_marker and"), {}, pytest.ExitCode.USAGE_ERROR, "Wrong expression passed to '-m'"),
    # a test id that is not there: pytest-xdist's workers say "no tests ran" (exit 5)
    (("test_swap.py::test_nope",), {}, (pytest.ExitCode.USAGE_ERROR, pytest.ExitCode.NO_TESTS_COLLECTED),
     "not found|no tests ran"),
    (("no_such_dir/",), {}, pytest.ExitCode.USAGE_ERROR, "file or directory not found"),
]
NAMES = ["syntax-error", "import-error", "bad-k", "k-selects-none", "bad-m", "unknown-test", "unknown-path"]
# every case alone; under -n those where pytest-xdist's own handling differs from pytest's (the
# rest take the same path), to keep the subprocesses few
UNDER_XDIST = ("syntax-error", "bad-k", "k-selects-none", "unknown-path")


@pytest.mark.parametrize(("args", "files", "code", "said", "workers"), [
    pytest.param(*case, workers, id=f"{name}-{'n2' if workers else 'alone'}")
    for name, case in zip(NAMES, CASES) for workers in (False, True) if not workers or name in UNDER_XDIST])
def test_pytests_own_refusal_comes_before_the_preflight(suite: pytest.Pytester, tmp_path: Path, args: tuple[str, ...],
                                                        files: dict[str, str], code: int, said: str,
                                                        workers: bool) -> None:
    if files:
        suite.makepyfile(**files)
    exit_code, output = run(suite, tmp_path, *args, workers=workers)
    assert exit_code == (code[workers] if isinstance(code, tuple) else code), output
    assert re.search(said, output), output
    assert not (tmp_path / "preflight-ran").exists(), f"the preflight ran before pytest's refusal:\n{output}"
    assert "preflight failed" not in output and "Traceback" not in output.replace("Traceback:", ""), output
