"""The run's life: its directory (one per run, handed to every xdist worker), its provider, the
progress lines the user sees, SIGTERM taken as Ctrl-C, and its end. The Run itself, which the
other parts of the plugin read, is in e2e/plugin/state.py.

Expensive clusters are created once per run and shared by all pytest-xdist workers; only the
process that owns the run (the xdist controller, or the only process) deletes them, and only
those this run created (the ledger in clusters/shared.py). The end has one path, however the
run ends: the gate's verdict and the report, then teardown, then the run directory goes. It is
reached after Ctrl-C or SIGTERM in any phase, and after any end-of-run hook raised (pytest's
junitxml that cannot write its file, a plugin's summary): what raised is said once, the exit
code says so (3 where the run would otherwise have passed), and nothing the run made is left.
"""

from __future__ import annotations

import shutil
import signal
import tempfile
import time
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

from clusters import progress, shared
from clusters.cli import Exit
from clusters.provider import Provider, SwapNode
from clusters.redact import redact
from e2e.observe import api_server_lost
from e2e.plugin import hooks, summary
from e2e.plugin.nodes import behavior_of
from e2e.plugin.options import settings
from e2e.plugin.state import RUN, Run, is_worker, show, the_run, uses_xdist

RUN_DIR_KEY = "ksc_run_dir"
RUN_START_KEY = "ksc_run_start"


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
            behaviors=settings(config).behaviors, install_packages=config.getoption("install_host_packages"),
            logs_dir=settings(config).results_dir / "kind-logs",
        )
    if name == "existing":
        from clusters.existing import ExistingProvider

        return ExistingProvider(settings(config).kubeconfig, stress_image=config.getoption("stress_image"))
    from clusters.vm_provider import VmProvider

    return VmProvider.from_pytest_config(config, run.directory, run.progress("vm"), kubernetes=settings(config).kubernetes)


def pytest_configure(config: pytest.Config) -> None:
    if is_worker(config):
        run = Run(config, Path(config.workerinput[RUN_DIR_KEY]), float(config.workerinput[RUN_START_KEY]), owner=False)
    else:
        run = Run(config, Path(tempfile.mkdtemp(prefix="ksc-run-")), time.time(), owner=True)
    config.stash[RUN] = run
    run.sigterm_before = _sigterm_is_ctrl_c()
    if run.owner:
        config.pluginmanager.register(_Guard(run), "ksc-end-guard")
        config.pluginmanager.register(_CollectionErrors(), "ksc-collection-errors")
    if run.owner and config.getoption("cleanup_leaked"):
        _cleanup_leaked(run)


def pytest_configure_node(node) -> None:  # pytest-xdist: hand every worker the run directory
    run = the_run(node.config)
    node.workerinput[RUN_DIR_KEY] = str(run.directory)
    node.workerinput[RUN_START_KEY] = run.start


def _sigterm_is_ctrl_c() -> Any:
    """SIGTERM (what CI sends on cancel) takes the Ctrl-C path: pytest stops, and the
    controller's teardown deletes what the run created. Returns the handler it replaced."""

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum} (SIGTERM)")

    return signal.signal(signal.SIGTERM, interrupt)


def _cleanup_leaked(run: Run) -> None:
    provider = run.provider
    leaked = getattr(provider, "leaked", None)
    if leaked is None:
        raise pytest.UsageError(f"--cleanup-leaked: the {provider.name} provider creates no clusters to clean up")
    from clusters.kind_provider import KindError

    try:
        messages = [provider.delete(name) for name in leaked()]  # type: ignore[attr-defined]
    except KindError as error:
        raise pytest.UsageError(redact(f"--cleanup-leaked could not list or delete suite clusters: {error}")) from None
    run.say(*(messages or ["--cleanup-leaked: no leaked suite cluster (ksc-mixed, or the ksc-noswap,"
                           " ksc-limitedswap, ksc-workloadcontrolledswap of earlier versions) found"]))


# --- preflight: once, in the process that owns the run, before any test -------------------------

PREFLIGHT_NEEDED = "preflight-needed"  # a worker collected tests that need nodes


def _needs_nodes(config: pytest.Config, items: list[pytest.Item]) -> bool:
    """Whether a collected test will ask for the provider or a node of a selected behavior."""
    selected = settings(config).behaviors
    return any("swap_provider" in getattr(item, "fixturenames", ()) or "workspace" in getattr(item, "fixturenames", ())
               or behavior_of(item) in selected for item in items)


_COLLECTED = pytest.StashKey[bool]()  # the collection ended without raising (pytest's own checks passed)


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(session: pytest.Session) -> Generator[None, None, None]:
    """Around every plugin's modifyitems (-k and -m deselect there, and a bad expression raises
    there): past it, the selection is final."""
    result = yield
    session.stash[_COLLECTED] = True
    return result


def collection_stands(session: pytest.Session) -> bool:
    """Whether pytest found the run's collection good: pytest calls pytest_collection_finish
    even when the collection raised (a path not found, a bad -k) and before it ends a run that had
    collection errors. A run it is about to stop needs no preflight: its own message comes first."""
    if not session.stash.get(_COLLECTED, False):
        return False
    return not (session.testsfailed and not session.config.option.continue_on_collection_errors)


# tryfirst: in an xdist worker, before pytest-xdist reports the collection to the controller
@pytest.hookimpl(tryfirst=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    config = session.config
    if config.option.collectonly or not collection_stands(session) or not _needs_nodes(config, session.items):
        return
    run = the_run(config)
    if run.owner:
        run.preflight_or_stop()
    else:
        (run.directory / PREFLIGHT_NEEDED).touch()


class _CollectionErrors:
    """The xdist controller's count of the collection errors its workers reported. Unlike pytest
    alone, pytest-xdist runs the tests that did collect; the suite stops as pytest does, before
    the preflight (and so before a build or a boot)."""

    def __init__(self) -> None:
        self.count = 0

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self.count += 1


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node, ids: list[str]) -> None:
    """The controller, when a worker has collected and before any test is scheduled."""
    config = node.config
    errors = config.pluginmanager.get_plugin("ksc-collection-errors")
    if errors is not None and errors.count and not config.option.continue_on_collection_errors:
        pytest.exit(f"{errors.count} error{'s' if errors.count > 1 else ''} during collection",
                    returncode=pytest.ExitCode.INTERRUPTED)
    run = the_run(config)
    if (run.directory / PREFLIGHT_NEEDED).exists():
        run.preflight_or_stop()


# --- what the user sees --------------------------------------------------------------------------

@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Generator[None, pytest.TestReport,
                                                                                     pytest.TestReport]:
    """A test's report, before anything shows or keeps it (the terminal, the JUnit XML, the
    results directory, an xdist worker's report to the controller): a failure or a skip may say
    what a kubeconfig, a node or a tool said."""
    report = yield
    if report.failed and call.excinfo is not None and api_server_lost(call.excinfo.value):
        section = node_view_section(item)
        if section:
            report.sections.append(section)
    redact_report(report)
    return report


NODE_VIEW_TITLE = "the node as it shows itself (the API server did not answer)"
NODE_VIEW_REUSED = 60.0  # seconds: the tests failing together after one loss share one look
_node_view_key = pytest.StashKey[tuple[float, str, str]]()


def node_view_section(item: pytest.Item) -> tuple[str, str] | None:
    """The provider's node_view for the test's node (or its only node), read once a minute at
    most; None where the provider reaches nodes only through the API server."""
    provider = the_run(item.config).provider_if_made
    if provider is None:
        return None
    node = next((value for value in getattr(item, "funcargs", {}).values() if isinstance(value, SwapNode)), None)
    name = node.name if node is not None else ""
    last = item.config.stash.get(_node_view_key, None)
    if last is not None and last[1] == name and time.monotonic() - last[0] < NODE_VIEW_REUSED:
        view = last[2]
    else:
        try:
            view = provider.node_view(node)
        except Exception as error:  # noqa: BLE001 - the failure itself is what the report is about
            view = f"could not read it: {type(error).__name__}: {error}"
        item.config.stash[_node_view_key] = (time.monotonic(), name, view)
    return (NODE_VIEW_TITLE + (f": {name}" if name else ""), view) if view else None


def redact_report(report: pytest.TestReport) -> None:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple):  # a skip: (file, line, reason)
        report.longrepr = (longrepr[0], longrepr[1], redact(longrepr[2]))
    elif longrepr is not None:
        text = str(longrepr)
        masked = redact(text)
        if masked != text:  # the traceback as text: pytest shows a string longrepr as it is
            report.longrepr = masked
    report.sections = [(title, redact(content)) for title, content in report.sections]


_follower_key = pytest.StashKey[progress.Follower]()


def pytest_sessionstart(session: pytest.Session) -> None:
    config = session.config
    if not the_run(config).owner or not uses_xdist(config):
        return  # without xdist every process shows its own progress (Run.progress)
    config.stash[_follower_key] = progress.Follower(the_run(config).directory, lambda line: show(config, line)).start()


def _stop_progress(config: pytest.Config) -> None:
    follower = config.stash.get(_follower_key, None)
    if follower is not None:
        follower.stop()


# --- the end -------------------------------------------------------------------------------------

# trylast, and a wrapper: after every other sessionfinish (pytest-xdist's has stopped, or
# killed, the workers, so none is still creating a cluster while this deletes it), and whether
# or not one of them raised.
@pytest.hookimpl(wrapper=True, trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> Generator[None, None, None]:
    run = session.config.stash.get(RUN, None)
    if run is None or not run.owner:
        return (yield)
    try:
        yield
    except Exception as error:  # noqa: BLE001 - another plugin's end (junitxml writing its file): said, not fatal
        run.crashed(session, error)
    finally:
        _end(session, run)
    return None


def _end(session: pytest.Session, run: Run) -> None:
    """The gate's verdict and the report (e2e/plugin/summary.py), then teardown: each happens
    even when the one before raised."""
    try:
        preflight = shared.recorded_error(run.directory, "preflight")
        if preflight and session.exitstatus != pytest.ExitCode.INTERRUPTED:  # a preflight cut short is no failure
            session.exitstatus = Exit.PREFLIGHT
        summary.conclude(session, judge_gate=not preflight)
    except Exception as error:  # noqa: BLE001 - the verdict or the report broke: said, and teardown still runs
        run.crashed(session, error)
    finally:
        run.teardown()
        _stop_progress(run.config)  # after teardown's own lines


class _Guard:
    """Around everything else at the end of the run (the terminal summary included): whatever
    raises there, the run tears down, says what happened once, and exits with a code for it."""

    def __init__(self, run: Run):
        self.run = run

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> Generator[None, None, None]:
        self.run.session = session
        try:
            yield
        except KeyboardInterrupt:
            session.exitstatus = pytest.ExitCode.INTERRUPTED
        except Exception as error:  # noqa: BLE001 - e.g. a plugin's terminal summary
            self.run.crashed(session, error)
        self.run.teardown()  # done already, unless what raised came before it
        if self.run.teardown_lines:
            self.run.show_teardown()
        return None

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_unconfigure(self, config: pytest.Config) -> Generator[None, None, None]:
        try:
            yield
        except Exception as error:  # noqa: BLE001 - a plugin's unconfigure, after the run's exit code was set
            self.run.crashed(self.run.session, error)
            raise SystemExit(self.run.session.exitstatus if self.run.session else pytest.ExitCode.INTERNAL_ERROR) \
                from None
        finally:
            self.run.teardown()  # done already, unless the session never ended (Ctrl-C while configuring)
            # Nothing in the run directory outlives the run: --reuse-clusters finds kind clusters
            # by name (`kind get kubeconfig`) and the vm node by its state directory in the cache.
            shutil.rmtree(self.run.directory, ignore_errors=True)
            signal.signal(signal.SIGTERM, self.run.sigterm_before)
        return None
