"""Suite-wide pytest wiring: options, "a node running behavior X" fixtures, coverage, cleanup.

Tests never ask for a provider. They ask for `swap_node` (parametrized over the behaviors the
run selects), for a named node (`limited_swap_node`, `no_swap_node`,
`workload_controlled_swap_node`), or mark themselves `needs_behavior("LimitedSwap")`.
Expensive clusters are created once per run and shared by all pytest-xdist workers; only the
controller process deletes them, at the very end, and only those this run created.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from clusters import behaviors as swap_behaviors
from clusters import progress, shared
from clusters.preflight import PreflightError
from clusters.provider import NotCoveredError, Provider, SwapNode
from e2e import gate, record, verdict
from e2e.gate import could_not_test

PROVIDERS = ("kind", "existing", "vm")
RUN_DIR_KEY = "ksc_run_dir"
RUN_START_KEY = "ksc_run_start"


def _positive_mib(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of MiB") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number of MiB, got {value}")
    return value


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("swap", "kube-swap-conformance")
    group.addoption("--provider", choices=PROVIDERS, default="kind",
                    help="where nodes come from: kind clusters (default), an existing cluster, or a QEMU vm")
    group.addoption("--kubeconfig", default=None,
                    help="existing provider: kubeconfig to test (default: $KUBECONFIG, then ~/.kube/config)")
    group.addoption("--behaviors", default=None,
                    help="comma-separated swapBehaviors to test (default: every behavior; those the"
                         " environment cannot offer are reported as not covered)")
    group.addoption("--node-image", default=None, help="kind: node image (default: kind's own default)")
    group.addoption("--stress-image", default=None,
                    help="existing: ref of the suite's workload image, already present on the nodes")
    group.addoption("--kind-bin", default="kind", help="kind: the kind binary (default: kind on PATH)")
    group.addoption("--kind-config-patch", default=os.environ.get("KSC_KIND_CONFIG_PATCH") or None,
                    help="kind: a host profile appended to every cluster's kind config, e.g."
                         " clusters/kind/profiles/emulated-host.yaml (default: $KSC_KIND_CONFIG_PATCH);"
                         " it may not touch the kubelet configuration")
    group.addoption("--keep-clusters", action="store_true", help="do not delete clusters/VMs at the end")
    group.addoption("--reuse-clusters", action="store_true",
                    help="use an existing suite cluster/VM of the right name instead of failing")
    group.addoption("--cleanup-leaked", action="store_true",
                    help="first delete clusters left behind by earlier runs (exact suite names only)")
    group.addoption("--k8s-version", default=None,
                    help="vm: Kubernetes version (a tag on the Go module proxy) to build the node from")
    group.addoption("--k8s-patch", action="append", default=[], type=Path, metavar="FILE",
                    help="vm: apply this unified diff (git diff form, paths relative to the kubernetes repository"
                         " root) to the release's source before building; repeatable, applied in order. The"
                         " binaries report v1.X.Y+patch.<hash>")
    group.addoption("--k8s-source", default=None, type=Path, metavar="DIR",
                    help="vm: build Kubernetes from this local checkout (repository root) instead of the Go proxy;"
                         " the binaries report <tag>+src.<hash>")
    group.addoption("--vm-kernel", choices=("6.12", "6.1"), default="6.12",
                    help="vm: guest kernel: 6.12 (bookworm-backports, has tmpfs noswap) or 6.1 (has not)")
    group.addoption("--vm-memory", type=_positive_mib, default=4096, help="vm: guest memory in MiB")
    group.addoption("--vm-swap", type=_positive_mib, default=2048, help="vm: guest swap file in MiB")
    group.addoption("--gate", action="store_true",
                    help="release gate: the run fails unless, for every required behavior, every module with"
                         " tests for it (e2e/verdict.py REQUIRED_CHECKS) ran and passed; in the core modules a skip"
                         " counts as not tested, elsewhere only a checked version/kernel skip is accepted")
    group.addoption("--results-dir", default="results", type=Path,
                    help="where a run of the suite writes its report: junit.xml (unless --junitxml),"
                         " matrix.md, report.html and plots/ (default: ./results)")
    group.addoption("--gate-behaviors", default=None,
                    help="behaviors the gate requires (default NoSwap,LimitedSwap, plus WorkloadControlledSwap"
                         " where the provider can offer it)")


# --- configuration -----------------------------------------------------------------------------

def _selected_behaviors(config: pytest.Config) -> list[str]:
    text = config.getoption("behaviors")
    if text is None:
        return list(swap_behaviors.ALL_BEHAVIORS)
    try:
        return swap_behaviors.parse_list(text)
    except swap_behaviors.UnknownBehaviorError as error:
        raise pytest.UsageError(f"--behaviors: {error}") from None


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def _kubeconfig(config: pytest.Config) -> str:
    path = config.getoption("kubeconfig") or os.environ.get("KUBECONFIG") or str(Path.home() / ".kube" / "config")
    path = path.split(os.pathsep)[0]
    if not Path(path).is_file():
        raise pytest.UsageError(f"--provider existing: kubeconfig {path} does not exist (pass --kubeconfig FILE)")
    return path


def _sigterm_is_ctrl_c() -> None:
    """SIGTERM (what CI sends on cancel) takes the Ctrl-C path: pytest stops, and the
    controller's teardown deletes what the run created."""

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum} (SIGTERM)")

    signal.signal(signal.SIGTERM, interrupt)


def _gate_behaviors(config: pytest.Config) -> list[str] | None:
    text = config.getoption("gate_behaviors")
    if text is None:
        return None
    try:
        return swap_behaviors.parse_list(text)
    except swap_behaviors.UnknownBehaviorError as error:
        raise pytest.UsageError(f"--gate-behaviors: {error}") from None


E2E_DIR = Path(__file__).parent / "e2e"


def _runs_the_suite(config: pytest.Config) -> bool:
    """Whether the command line selects conformance tests (e2e/), not only self-tests."""
    for arg in config.args:
        path = Path(config.invocation_params.dir, arg.split("::", 1)[0]).resolve()
        if path in (E2E_DIR, E2E_DIR.parent) or E2E_DIR in path.parents:
            return True
    return False


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    # The JUnit XML goes with the rest of the report unless --junitxml says otherwise (before
    # pytest's junitxml plugin reads the option in its pytest_configure).
    if not config.option.xmlpath and _runs_the_suite(config):
        config.option.xmlpath = str(config.getoption("results_dir") / "junit.xml")


def pytest_configure(config: pytest.Config) -> None:
    _sigterm_is_ctrl_c()
    config.stash[_behaviors_key] = _selected_behaviors(config)
    config.stash[_gate_required_key] = _gate_behaviors(config)
    config.stash[_phases_key] = []
    config.stash[gate.REQUIRED_KEY] = functools.cache(lambda: _required_behaviors(config))
    config.stash[_records_key] = {}
    if not _is_worker(config):
        config.pluginmanager.register(_ResultRecorder(config.stash[_phases_key], config.stash[_records_key]),
                                      "ksc-result-recorder")
    if config.getoption("provider") == "existing":
        _kubeconfig(config)
    if config.getoption("provider") == "kind":
        _kind_settings(config)
    config.stash[_kubernetes_key] = _kubernetes_source(config)
    if _is_worker(config):
        run_dir = Path(config.workerinput[RUN_DIR_KEY])
        config.stash[_run_start_key] = float(config.workerinput[RUN_START_KEY])
    else:
        run_dir = Path(tempfile.mkdtemp(prefix="ksc-run-"))
        config.stash[_run_start_key] = time.time()
    config.stash[_run_dir_key] = run_dir
    if not _is_worker(config) and config.getoption("cleanup_leaked"):
        _cleanup_leaked(config)


def _kind_settings(config: pytest.Config) -> None:
    """Bad kind-only input (a host profile, the API server port map) is a usage error, once."""
    from clusters import kind_config
    from clusters.kind_provider import api_ports_from_env

    patch = config.getoption("kind_config_patch")
    try:
        if patch:
            kind_config.load_patch(Path(patch))
        api_ports_from_env()
    except ValueError as error:
        raise pytest.UsageError(str(error)) from None


def _kubernetes_source(config: pytest.Config):
    """--k8s-version/--k8s-patch/--k8s-source as one KubernetesSource (None: the provider's
    default release); bad input is a usage error before anything is built."""
    from clusters.vm import k8s_source

    patches, checkout = config.getoption("k8s_patch"), config.getoption("k8s_source")
    version = config.getoption("k8s_version")
    if not (patches or checkout or version):
        return None
    if config.getoption("provider") != "vm" and (patches or checkout):
        raise pytest.UsageError(
            "--k8s-patch/--k8s-source build the vm provider's node; for kind build a node image with them"
            " (`python -m clusters.vm node-image --k8s-patch FILE` or `kind-host up --k8s-patch FILE`)"
            " and pass it with --node-image")
    if patches and checkout:
        raise pytest.UsageError("--k8s-patch and --k8s-source together: apply the patch in your checkout instead")
    try:
        if checkout:
            return k8s_source.checkout(checkout, version)
        from clusters import versions

        return k8s_source.release(version or versions.KUBERNETES, patches)
    except k8s_source.SourceError as error:
        raise pytest.UsageError(str(error)) from None


def pytest_configure_node(node) -> None:  # pytest-xdist: hand every worker the run directory
    node.workerinput[RUN_DIR_KEY] = str(node.config.stash[_run_dir_key])
    node.workerinput[RUN_START_KEY] = node.config.stash[_run_start_key]


def progress_for(config: pytest.Config, source: str) -> progress.Progress:
    """Lines the user sees live in the terminal, from whichever process of the run writes them:
    an xdist worker's reach the terminal through the controller (which follows the run's
    progress file); without xdist the process shows its own, past pytest's output capture."""
    show = None if _is_worker(config) or _uses_xdist(config) else lambda line: _show_past_capture(config, line)
    return progress.writer(config.stash[_run_dir_key], source, config.stash[_run_start_key], show)


def _uses_xdist(config: pytest.Config) -> bool:
    return config.pluginmanager.has_plugin("dsession")


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


_behaviors_key = pytest.StashKey[list]()
_gate_required_key = pytest.StashKey["list[str] | None"]()
_phases_key = pytest.StashKey[list]()
_run_dir_key = pytest.StashKey[Path]()
_run_start_key = pytest.StashKey[float]()
_follower_key = pytest.StashKey[progress.Follower]()
_provider_key = pytest.StashKey[Provider]()
_kubernetes_key = pytest.StashKey[object]()  # KubernetesSource | None


def make_provider(config: pytest.Config) -> Provider:
    if _provider_key in config.stash:
        return config.stash[_provider_key]
    name = config.getoption("provider")
    run_dir = config.stash[_run_dir_key]
    if name == "kind":
        from clusters.kind_provider import KindProvider

        patch = config.getoption("kind_config_patch")
        provider: Provider = KindProvider(
            config.getoption("kind_bin"), config.getoption("node_image"), run_dir, config.getoption("reuse_clusters"),
            config_patch=Path(patch) if patch else None, progress=progress_for(config, "kind"),
            behaviors=config.stash[_behaviors_key],
        )
    elif name == "existing":
        from clusters.existing import ExistingProvider

        provider = ExistingProvider(_kubeconfig(config), stress_image=config.getoption("stress_image"))
    else:
        from clusters.vm_provider import VmProvider

        provider = VmProvider.from_pytest_config(config, run_dir, progress_for(config, "vm"),
                                                 kubernetes=config.stash[_kubernetes_key])
    config.stash[_provider_key] = provider
    return provider


def _cleanup_leaked(config: pytest.Config) -> None:
    provider = make_provider(config)
    leaked = getattr(provider, "leaked", None)
    if leaked is None:
        raise pytest.UsageError(f"--cleanup-leaked: the {provider.name} provider creates no clusters to clean up")
    from clusters.kind_provider import KindError

    try:
        messages = [provider.delete(name) for name in leaked()]  # type: ignore[attr-defined]
    except KindError as error:
        raise pytest.UsageError(f"--cleanup-leaked could not list or delete suite clusters: {error}") from None
    _say(config, *(messages or ["--cleanup-leaked: no leaked suite cluster (ksc-noswap, ksc-limitedswap,"
                                " ksc-workloadcontrolledswap) found"]))


def _say(config: pytest.Config, *lines: str) -> None:
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    for line in lines:
        if reporter is not None:
            reporter.write_line(f"kube-swap-conformance: {line}")
        else:
            print(f"kube-swap-conformance: {line}", file=sys.stderr, flush=True)


# --- fixtures ----------------------------------------------------------------------------------

def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "swap_node" not in metafunc.fixturenames:
        return
    marker = metafunc.definition.get_closest_marker("needs_behavior")
    wanted = [swap_behaviors.normalize(b) for b in marker.args] if marker else list(swap_behaviors.ALL_BEHAVIORS)
    # Behaviors the user did not select are not generated at all; a test none of whose
    # behaviors is selected keeps them, to skip once with that reason.
    selected = [b for b in wanted if b in metafunc.config.stash[_behaviors_key]] or wanted
    metafunc.parametrize("swap_node", selected, indirect=True, ids=selected)


_NAMED = {"no_swap_node": swap_behaviors.NO_SWAP, "limited_swap_node": swap_behaviors.LIMITED_SWAP,
          "workload_controlled_swap_node": swap_behaviors.WORKLOAD_CONTROLLED_SWAP}


def _behavior_of(item: pytest.Item) -> int:
    callspec = getattr(item, "callspec", None)
    behavior = callspec.params.get("swap_node") if callspec else None
    behavior = behavior or next((b for f, b in _NAMED.items() if f in getattr(item, "fixturenames", ())), None)
    return swap_behaviors.ALL_BEHAVIORS.index(behavior) if behavior else -1


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    # One behavior after another: a node that switches behavior in place (vm) switches once
    # per behavior, and a failure report reads by behavior. The sort is stable within one.
    items.sort(key=_behavior_of)
    # Tests that share one expensive deployment per behavior (the 12 pod shapes) run on one
    # xdist worker, so each behavior's shapes are deployed once, not once per worker.
    for item in items:
        group = item.get_closest_marker("shared_deployment")
        if group and _behavior_of(item) >= 0:
            behavior = swap_behaviors.ALL_BEHAVIORS[_behavior_of(item)]
            item.add_marker(pytest.mark.xdist_group(f"{group.args[0]}-{behavior}"))


def pytest_xdist_make_scheduler(config: pytest.Config, log):  # pragma: no cover - only with -n
    """The default distribution honours the xdist_group marks above (``--dist loadgroup``)."""
    if config.getoption("dist") == "load":
        from xdist.scheduler import LoadGroupScheduling

        return LoadGroupScheduling(config, log)
    return None


@pytest.fixture(autouse=True)
def _alone_or_together(request: pytest.FixtureRequest) -> Iterator[None]:
    """Under -n, a `runs_alone` test runs while no other test of the run does (e2e/alone.py)."""
    from e2e.alone import AloneTimeout, turn

    try:
        with turn(request.config.stash[_run_dir_key], request.node.get_closest_marker("runs_alone") is not None):
            yield
    except AloneTimeout as error:
        pytest.fail(str(error), pytrace=False)


@pytest.fixture(scope="session")
def swap_provider(pytestconfig: pytest.Config) -> Provider:
    provider = make_provider(pytestconfig)
    run_dir = pytestconfig.stash[_run_dir_key]
    behaviors = pytestconfig.stash[_behaviors_key]
    try:
        shared.get_or_create(run_dir, "preflight", lambda: provider.preflight(behaviors) or {})
    except (PreflightError, shared.SharedCreationError) as error:
        if not _is_worker(pytestconfig):
            pytest.exit(str(error), returncode=3)  # one message, not one per test
        # pytest.exit inside an xdist worker is an INTERNALERROR: fail the test plainly; the
        # controller prints the message once and exits 3 (pytest_sessionfinish).
        pytest.fail(str(error).split(": ", 1)[-1] if isinstance(error, shared.SharedCreationError) else str(error), pytrace=False)
    shared.get_or_create(run_dir, "prepared", lambda: provider.prepare(behaviors) or {})
    return provider


def _record_coverage(config: pytest.Config, behavior: str, covered: str | None, reason: str | None) -> None:
    path = config.stash[_run_dir_key] / f"coverage-{behavior}.json"
    path.write_text(json.dumps({"node": covered, "reason": reason}))


def _not_covered(config: pytest.Config, behavior: str, reason: str) -> None:
    _record_coverage(config, behavior, None, reason)
    could_not_test(config, f"{behavior} not covered: {reason}", behavior)


def node_running(request: pytest.FixtureRequest, behavior: str) -> SwapNode:
    """The node for `behavior`, or a skip (a failure in gate mode) that says why there is none.

    Called for every test: providers cache their nodes, and a node that switches behavior in
    place (vm) is switched back here if an earlier test needed another behavior."""
    config = request.config
    request.node.user_properties.append((verdict.BEHAVIOR_PROPERTY, behavior))  # the report knows its behavior
    if behavior not in config.stash[_behaviors_key]:
        pytest.skip(f"{behavior} not selected (--behaviors {config.getoption('behaviors')})")
    provider: Provider = request.getfixturevalue("swap_provider")
    reason = provider.coverage([behavior])[behavior]
    if reason:
        _not_covered(config, behavior, reason)
    try:
        node = provider.node_for(behavior)
    except NotCoveredError as error:
        _not_covered(config, behavior, error.reason)
    except shared.SharedCreationError as error:
        # The full output went to the terminal once, as progress; each test says what and why.
        lines = str(error).strip().splitlines()
        pytest.fail(f"no {behavior} node: {lines[0]}" + (f" ... {lines[-1].strip()}" if len(lines) > 1 else ""),
                    pytrace=False)
    except Exception as error:  # noqa: BLE001 - a provider's failure (kind, qemu, the API): its message, no traceback
        pytest.fail(f"no {behavior} node: {type(error).__name__}: {error}", pytrace=False)
    _record_coverage(config, behavior, node.describe(), None)
    _skip_if_too_old(request, node)
    return node


def _skip_if_too_old(request: pytest.FixtureRequest, node: SwapNode) -> None:
    """`min_kubernetes("1.34")` / `min_kernel("6.4")`: skip, saying so, only when the node is older."""
    for marker, at_least, have, what in (("min_kubernetes", node.kubelet_at_least, node.kubelet_version, "kubelet"),
                                         ("min_kernel", node.kernel_at_least, node.kernel, "kernel")):
        mark = request.node.get_closest_marker(marker)
        if mark and not at_least(mark.args[0]):
            pytest.skip(f"needs {what} >= {mark.args[0]}; node {node.name} runs {have}")


@pytest.fixture
def swap_node(request: pytest.FixtureRequest) -> SwapNode:
    """A node running the behavior this test instance is parametrized with."""
    return node_running(request, request.param)


@pytest.fixture
def no_swap_node(request: pytest.FixtureRequest) -> SwapNode:
    return node_running(request, swap_behaviors.NO_SWAP)


@pytest.fixture
def limited_swap_node(request: pytest.FixtureRequest) -> SwapNode:
    return node_running(request, swap_behaviors.LIMITED_SWAP)


@pytest.fixture
def workload_controlled_swap_node(request: pytest.FixtureRequest) -> SwapNode:
    return node_running(request, swap_behaviors.WORKLOAD_CONTROLLED_SWAP)


# --- end of run: results, the gate, teardown (controller only) and the coverage report --------

class _ResultRecorder:
    """Every phase of every test with the behavior it ran on (on the controller, xdist hands
    over the workers' reports, user properties included)."""

    def __init__(self, phases: list, properties: dict[str, list]):
        self.phases = phases
        self.properties = properties  # nodeid -> user properties, over all phases

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        behavior = dict(report.user_properties).get(verdict.BEHAVIOR_PROPERTY, "")
        self.properties.setdefault(report.nodeid, []).extend(report.user_properties)
        reason = ""
        if report.skipped and isinstance(report.longrepr, tuple):
            reason = str(report.longrepr[2]).removeprefix("Skipped: ")
        self.phases.append((report.nodeid, behavior, report.when, report.outcome, reason))


def pytest_sessionstart(session: pytest.Session) -> None:
    config = session.config
    if _is_worker(config) or not _uses_xdist(config):
        return  # without xdist every process shows its own progress (progress_for)
    config.stash[_follower_key] = progress.Follower(config.stash[_run_dir_key],
                                                    lambda line: _show(config, line)).start()


def _stop_progress(config: pytest.Config) -> None:
    follower = config.stash.get(_follower_key, None)
    if follower is not None:
        follower.stop()


def _results(config: pytest.Config) -> list[verdict.Result]:
    return verdict.final_results(config.stash.get(_phases_key, []))


def _required_behaviors(config: pytest.Config) -> list[str]:
    required = config.stash.get(_gate_required_key, None)
    if required is not None:
        return required
    required = list(verdict.DEFAULT_REQUIRED)
    try:
        if make_provider(config).coverage([swap_behaviors.WORKLOAD_CONTROLLED_SWAP])[swap_behaviors.WORKLOAD_CONTROLLED_SWAP] is None:
            required.append(swap_behaviors.WORKLOAD_CONTROLLED_SWAP)
    except Exception:  # noqa: BLE001 - a provider that cannot say: not required, and the summary says why
        pass
    return required


# trylast: after pytest-xdist's own sessionfinish has stopped (or killed) the workers, so no
# worker is still creating a cluster while the controller deletes them.
@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    if _is_worker(config):
        return
    try:
        _finish(session, config)
    finally:
        _stop_progress(config)  # after teardown's own lines


def _finish(session: pytest.Session, config: pytest.Config) -> None:
    run_dir = config.stash[_run_dir_key]
    preflight = shared.recorded_error(run_dir, "preflight")
    if preflight:
        config.stash[_teardown_key] = [preflight]
        session.exitstatus = 3
    elif config.getoption("gate"):
        required = gate.required_behaviors(config)
        problems = verdict.gate_problems(_results(config), required)
        config.stash[_gate_key] = (required, problems)
        if problems and session.exitstatus == 0:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
    _write_report(config)
    created = shared.created(run_dir)
    if not created:
        return
    if config.getoption("keep_clusters"):
        config.stash[_teardown_key] = config.stash.get(_teardown_key, []) + [_kept(run_dir, e) for e in created]
        return
    config.stash[_teardown_key] = config.stash.get(_teardown_key, []) + make_provider(config).teardown(created)


def _kept(run_dir: Path, entry: dict) -> str:
    cluster = entry["cluster"]
    how = (f"delete it with `kind delete cluster --name {cluster}`" if entry["provider"] == "kind"
           else "stop it with `python -m clusters.vm down`")
    return f"kept {entry['provider']} {cluster} (--keep-clusters; reuse it with --reuse-clusters, {how})"


_teardown_key = pytest.StashKey[list]()
_gate_key = pytest.StashKey[tuple]()
_records_key = pytest.StashKey[dict]()
_report_key = pytest.StashKey[tuple]()


def _report_run(config: pytest.Config):
    from e2e import report

    nodes, not_covered = _coverage_records(config)
    records = {nodeid: record.records(props) for nodeid, props in config.stash.get(_records_key, {}).items()}
    return report.Run(_results(config), records, config.stash[_behaviors_key], nodes, not_covered,
                      config.stash.get(_gate_key, None))


def _write_report(config: pytest.Config) -> None:
    """The results directory, whenever conformance tests ran (self-test runs have no results)."""
    from e2e import report

    if not _results(config):
        return
    run = _report_run(config)
    try:
        path = report.write(Path(config.invocation_params.dir, config.getoption("results_dir")).resolve(), run)
        config.stash[_report_key] = (run, f"report: {path} (matrix.md beside it, plots in {path.parent / report.PLOTS})")
    except Exception as error:  # noqa: BLE001 - the verdict stands without its report; say so loudly
        config.stash[_report_key] = (run, f"REPORT NOT WRITTEN to {config.getoption('results_dir')}: {error!r}")


def _coverage_records(config: pytest.Config) -> tuple[dict[str, str], dict[str, str]]:
    """(behavior -> node it ran on, behavior -> why not covered), as the fixtures recorded them."""
    nodes, not_covered = {}, {}
    for behavior in swap_behaviors.ALL_BEHAVIORS:
        path = config.stash[_run_dir_key] / f"coverage-{behavior}.json"
        if path.exists():
            record = json.loads(path.read_text())
            if record["node"]:
                nodes[behavior] = record["node"]
            else:
                not_covered[behavior] = record["reason"]
    return nodes, not_covered


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    if _is_worker(config):
        return
    results = _results(config)
    teardown = config.stash.get(_teardown_key, [])
    gate = config.stash.get(_gate_key, None)
    if not (results or teardown or gate):
        return
    nodes, not_covered = _coverage_records(config)
    written = config.stash.get(_report_key, None)
    if written:
        from e2e import report

        terminalreporter.section("conformance matrix")
        for line in report.terminal_lines(written[0]) + [written[1]]:
            terminalreporter.write_line(line)
    terminalreporter.section("swap coverage")
    for line in verdict.summary_lines(results, config.stash[_behaviors_key], nodes, not_covered) + teardown:
        terminalreporter.write_line(line)
    if gate:
        required, problems = gate
        terminalreporter.section("release gate", red=bool(problems), green=not problems)
        terminalreporter.write_line(f"required: {', '.join(required)}; checks per behavior:"
                                    f" {'; '.join(f'{b}: ' + ', '.join(verdict.checks_for(b)) for b in required)}")
        for line in problems or ["PASSED: every core check of every required behavior ran and passed"]:
            terminalreporter.write_line(("FAILED " if problems else "") + line)


def pytest_unconfigure(config: pytest.Config) -> None:
    # Nothing in the run directory outlives the run: --reuse-clusters finds kind clusters by
    # name (`kind get kubeconfig`) and the vm node by its state directory in the cache.
    if _is_worker(config) or _run_dir_key not in config.stash:
        return
    shutil.rmtree(config.stash[_run_dir_key], ignore_errors=True)
