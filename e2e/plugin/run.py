"""The run's life: its directory (one per run, handed to every xdist worker), its provider, the
progress lines the user sees, SIGTERM taken as Ctrl-C, and its end: teardown of what it created.

Expensive clusters are created once per run and shared by all pytest-xdist workers; only the
process that owns the run (the xdist controller, or the only process) deletes them, at the very
end, and only those this run created (the ledger in clusters/shared.py).
"""

from __future__ import annotations

import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

import pytest

from clusters import progress, shared
from clusters.provider import Provider
from e2e.plugin import hooks
from e2e.plugin.options import settings

RUN_DIR_KEY = "ksc_run_dir"
RUN_START_KEY = "ksc_run_start"


class Run:
    """One run of the suite, as one process of it sees it."""

    def __init__(self, config: pytest.Config, directory: Path, start: float, owner: bool):
        self.config = config
        self.directory = directory
        self.start = start
        self.owner = owner  # the xdist controller, or the only process: it tears down
        self._provider: Provider | None = None
        self.teardown_lines: list[str] = []

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

    def teardown(self) -> None:
        """Remove what this run created (or say what --keep-clusters keeps)."""
        created = shared.created(self.directory)
        if not created:
            return
        if self.config.getoption("keep_clusters"):
            self.teardown_lines += [_kept(entry) for entry in created]
            return
        self.teardown_lines += self.provider.teardown(created)


RUN = pytest.StashKey[Run]()


def the_run(config: pytest.Config) -> Run:
    return config.stash[RUN]


def is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def uses_xdist(config: pytest.Config) -> bool:
    return config.pluginmanager.has_plugin("dsession")


def progress_for(config: pytest.Config, source: str) -> progress.Progress:
    return the_run(config).progress(source)


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hooks)


@pytest.hookimpl(trylast=True)
def pytest_ksc_make_provider(config: pytest.Config) -> Provider:
    run = the_run(config)
    name = settings(config).provider
    if name == "kind":
        from clusters.kind_provider import KindProvider

        patch = config.getoption("kind_config_patch")
        return KindProvider(
            config.getoption("kind_bin"), config.getoption("node_image"), run.directory, config.getoption("reuse_clusters"),
            config_patch=Path(patch) if patch else None, progress=run.progress("kind"),
            behaviors=settings(config).behaviors,
        )
    if name == "existing":
        from clusters.existing import ExistingProvider

        return ExistingProvider(settings(config).kubeconfig, stress_image=config.getoption("stress_image"))
    from clusters.vm_provider import VmProvider

    return VmProvider.from_pytest_config(config, run.directory, run.progress("vm"), kubernetes=settings(config).kubernetes)


def pytest_configure(config: pytest.Config) -> None:
    _sigterm_is_ctrl_c()
    if is_worker(config):
        run = Run(config, Path(config.workerinput[RUN_DIR_KEY]), float(config.workerinput[RUN_START_KEY]), owner=False)
    else:
        run = Run(config, Path(tempfile.mkdtemp(prefix="ksc-run-")), time.time(), owner=True)
    config.stash[RUN] = run
    if run.owner and config.getoption("cleanup_leaked"):
        _cleanup_leaked(run)


def pytest_configure_node(node) -> None:  # pytest-xdist: hand every worker the run directory
    run = the_run(node.config)
    node.workerinput[RUN_DIR_KEY] = str(run.directory)
    node.workerinput[RUN_START_KEY] = run.start


def _sigterm_is_ctrl_c() -> None:
    """SIGTERM (what CI sends on cancel) takes the Ctrl-C path: pytest stops, and the
    controller's teardown deletes what the run created."""

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum} (SIGTERM)")

    signal.signal(signal.SIGTERM, interrupt)


def _cleanup_leaked(run: Run) -> None:
    provider = run.provider
    leaked = getattr(provider, "leaked", None)
    if leaked is None:
        raise pytest.UsageError(f"--cleanup-leaked: the {provider.name} provider creates no clusters to clean up")
    from clusters.kind_provider import KindError

    try:
        messages = [provider.delete(name) for name in leaked()]  # type: ignore[attr-defined]
    except KindError as error:
        raise pytest.UsageError(f"--cleanup-leaked could not list or delete suite clusters: {error}") from None
    run.say(*(messages or ["--cleanup-leaked: no leaked suite cluster (ksc-mixed, or the ksc-noswap,"
                           " ksc-limitedswap, ksc-workloadcontrolledswap of earlier versions) found"]))


def _kept(entry: dict) -> str:
    cluster = entry["cluster"]
    how = (f"delete it with `kind delete cluster --name {cluster}`" if entry["provider"] == "kind"
           else "stop it with `python -m clusters.vm down`")
    return f"kept {entry['provider']} {cluster} (--keep-clusters; reuse it with --reuse-clusters, {how})"


# --- what the user sees --------------------------------------------------------------------------

def say(config: pytest.Config, *lines: str) -> None:
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    for line in lines:
        if reporter is not None:
            reporter.write_line(f"kube-swap-conformance: {line}")
        else:
            print(f"kube-swap-conformance: {line}", file=sys.stderr, flush=True)


def _show(config: pytest.Config, line: str) -> None:
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None:
        return
    # xdist's progress characters leave the line open; start a new one first
    if getattr(getattr(reporter, "_tw", None), "width_of_current_line", 0):
        reporter.write("\n")
    reporter.write_line(f"kube-swap-conformance {line}")


def _show_past_capture(config: pytest.Config, line: str) -> None:
    """Cluster creation runs inside a fixture, where pytest captures output: show the line the
    way pytest's live logging does."""
    capture = config.pluginmanager.get_plugin("capturemanager")
    if capture is None:
        _show(config, line)
        return
    with capture.global_and_fixture_disabled():
        _show(config, line)


_follower_key = pytest.StashKey[progress.Follower]()


def pytest_sessionstart(session: pytest.Session) -> None:
    config = session.config
    if not the_run(config).owner or not uses_xdist(config):
        return  # without xdist every process shows its own progress (Run.progress)
    config.stash[_follower_key] = progress.Follower(the_run(config).directory, lambda line: _show(config, line)).start()


def _stop_progress(config: pytest.Config) -> None:
    follower = config.stash.get(_follower_key, None)
    if follower is not None:
        follower.stop()


# --- the end -------------------------------------------------------------------------------------

# trylast: after pytest-xdist's own sessionfinish has stopped (or killed) the workers, so no
# worker is still creating a cluster while the controller deletes them.
@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    from e2e.plugin import summary

    config = session.config
    run = the_run(config)
    if not run.owner:
        return
    try:
        preflight = shared.recorded_error(run.directory, "preflight")
        if preflight:
            run.teardown_lines.append(preflight)
            session.exitstatus = 3
        summary.conclude(session, judge_gate=not preflight)
        run.teardown()
    finally:
        _stop_progress(config)  # after teardown's own lines


def pytest_unconfigure(config: pytest.Config) -> None:
    # Nothing in the run directory outlives the run: --reuse-clusters finds kind clusters by
    # name (`kind get kubeconfig`) and the vm node by its state directory in the cache.
    run = config.stash.get(RUN, None)
    if run is None or not run.owner:
        return
    shutil.rmtree(run.directory, ignore_errors=True)
