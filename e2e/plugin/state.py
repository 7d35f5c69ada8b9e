"""The run as every part of the plugin sees it: the Run (its directory, its provider, its
teardown), where a process finds it (the_run), which process this is (is_worker, uses_xdist), and
how the run speaks to the user (say, show).

run.py sets the run up and ends it (summary.py's verdict, then teardown); nodes.py, workers.py and
summary.py read it while tests run, and run.py in turn asks nodes.py and summary.py. So the run's
state lives here, in a module that imports none of them: every dependency points one way.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import traceback
from pathlib import Path
from typing import Any

import pytest

from clusters import progress, shared
from clusters.cli import Exit, signals_handled
from clusters.checks import PreflightError
from clusters.provider import Provider
from clusters.redact import redact
from e2e.plugin.options import settings


class Run:
    """One run of the suite, as one process of it sees it."""

    def __init__(self, config: pytest.Config, directory: Path, start: float, owner: bool):
        self.config = config
        self.directory = directory
        self.start = start
        self.owner = owner  # the xdist controller, or the only process: it tears down
        self._provider: Provider | None = None
        self._torn_down = False
        self._preflight_asked = False
        self.teardown_lines: list[str] = []  # what teardown did, for the summary
        self.teardown_said = False
        self.session: pytest.Session | None = None
        self.sigterm_before: Any = signal.SIG_DFL

    @property
    def provider_if_made(self) -> Provider | None:
        """The provider, where this process has made it (a failure report does not make one)."""
        return self._provider

    @property
    def provider(self) -> Provider:
        if self._provider is None:
            self._provider = self.config.hook.pytest_ksc_make_provider(config=self.config)
        return self._provider

    def progress(self, source: str) -> progress.Progress:
        """Lines the user sees live in the terminal, from whichever process of the run writes them:
        an xdist worker's reach the terminal through the controller (which follows the run's
        progress file); without xdist the process shows its own, past pytest's output capture."""
        show = None if not self.owner or uses_xdist(self.config) else lambda line: _show_past_capture(self.config, line)
        return progress.writer(self.directory, source, self.start, show)

    def say(self, *lines: str) -> None:
        say(self.config, *lines)

    def preflight(self) -> None:
        """The provider's preflight, once per run (any process may ask; clusters/shared.py runs
        it in one and records the outcome). Raises PreflightError, or SharedCreationError when it
        failed in another process."""
        behaviors = settings(self.config).behaviors
        decided = shared.get_or_create(self.directory, "preflight", lambda: self.provider.preflight(behaviors) or {})
        # How what the preflight set up (a kind host's DOCKER_HOST) reaches the xdist workers:
        # they started before it, and read it here from the run directory's record.
        adopt = getattr(self.provider, "adopt", None)  # a stand-in provider may not derive from Provider
        if adopt is not None:
            adopt(decided)

    def preflight_or_stop(self) -> None:
        """In the process that owns the run, before any test: a failure stops the run with its one
        message and exit 3, as pytest.exit does, whether or not xdist workers wait for tests."""
        if self._preflight_asked:
            return
        self._preflight_asked = True
        try:
            self.preflight()
        except (PreflightError, shared.SharedCreationError) as error:
            message = str(error).removeprefix("preflight: creation failed earlier in this run: PreflightError: ")
            pytest.exit(redact(message), returncode=Exit.PREFLIGHT)

    def teardown(self) -> None:
        """Remove what this run created (or say what --keep-clusters keeps), once, whatever
        raised before; a Ctrl-C or SIGTERM meanwhile is said and waited out (stopping now would
        leave behind what is being deleted)."""
        if not self.owner or self._torn_down:
            return
        self._torn_down = True
        with _signals_deferred():
            created = shared.created(self.directory)
            if not created:
                return
            if self.config.getoption("keep_clusters"):
                self.teardown_lines += [self.provider.kept(entry) for entry in created]
                return
            try:
                self.teardown_lines += self.provider.teardown(created)
            except Exception as error:  # noqa: BLE001 - said, with what is left, instead of a traceback
                names = ", ".join(f"{e['provider']} {e['cluster']}" for e in created)
                self.teardown_lines.append(f"FAILED to delete what the run created ({names}): {type(error).__name__}:"
                                           f" {error}")

    def crashed(self, session: pytest.Session | None, error: BaseException) -> None:
        """An end-of-run hook raised: say it once, and a run that would have passed exits 3."""
        frame = traceback.extract_tb(error.__traceback__)[-1:] if error.__traceback__ else []
        where = f" (at {frame[0].filename}:{frame[0].lineno})" if frame else ""
        self.say(f"the end of the run failed: {type(error).__name__}: {error}{where}; teardown runs all"
                 " the same")
        if session is not None and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.INTERNAL_ERROR

    def show_teardown(self) -> None:
        """The teardown lines, where the summary section that carries them was not written."""
        if not self.teardown_said:
            self.teardown_said = True
            self.say(*self.teardown_lines)


RUN = pytest.StashKey[Run]()


def the_run(config: pytest.Config) -> Run:
    return config.stash[RUN]


def is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def uses_xdist(config: pytest.Config) -> bool:
    return config.pluginmanager.has_plugin("dsession")


def progress_for(config: pytest.Config, source: str) -> progress.Progress:
    return the_run(config).progress(source)


# --- what the user sees: every line through clusters.redact (a message may carry a kubeconfig's ---
# --- URL, a token, a tool's output) --------------------------------------------------------------

def say(config: pytest.Config, *lines: str) -> None:
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    for line in map(redact, lines):
        if reporter is not None:
            reporter.write_line(f"kube-swap-conformance: {line}")
        else:
            print(f"kube-swap-conformance: {line}", file=sys.stderr, flush=True)


def show(config: pytest.Config, line: str) -> None:
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None:
        return
    line = redact(line)
    # xdist's progress characters leave the line open; start a new one first
    if getattr(getattr(reporter, "_tw", None), "width_of_current_line", 0):
        reporter.write("\n")
    reporter.write_line(f"kube-swap-conformance {line}")


def _show_past_capture(config: pytest.Config, line: str) -> None:
    """Cluster creation runs inside a fixture, where pytest captures output: show the line the
    way pytest's live logging does."""
    capture = config.pluginmanager.get_plugin("capturemanager")
    if capture is None:
        show(config, line)
        return
    with capture.global_and_fixture_disabled():
        show(config, line)


# --- the end -------------------------------------------------------------------------------------

def _signals_deferred() -> contextlib.AbstractContextManager[None]:
    def later(signum: int, frame: object) -> None:
        sys.stderr.write(f"kube-swap-conformance: {signal.Signals(signum).name} while deleting what the run created:"
                         " deleting it first\n")
        sys.stderr.flush()

    return signals_handled(later)
