"""Suite-wide pytest wiring: options, "a node running behavior X" fixtures, coverage, cleanup.

Tests never ask for a provider. They ask for `swap_node` (parametrized over the behaviors the
run selects), for a named node (`limited_swap_node`, `no_swap_node`,
`workload_controlled_swap_node`), or mark themselves `needs_behavior("LimitedSwap")`.
Expensive clusters are created once per run and shared by all pytest-xdist workers; only the
controller process deletes them, at the very end, and only those this run created.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from clusters import behaviors as swap_behaviors
from clusters import shared
from clusters.preflight import PreflightError
from clusters.provider import NotCoveredError, Provider, SwapNode
from e2e.gate import could_not_test

PROVIDERS = ("kind", "existing", "vm")
RUN_DIR_KEY = "ksc_run_dir"


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
    group.addoption("--keep-clusters", action="store_true", help="do not delete clusters/VMs at the end")
    group.addoption("--reuse-clusters", action="store_true",
                    help="use an existing suite cluster/VM of the right name instead of failing")
    group.addoption("--cleanup-leaked", action="store_true",
                    help="first delete clusters left behind by earlier runs (exact suite names only)")
    group.addoption("--k8s-version", default=None,
                    help="vm: Kubernetes version (a tag on the Go module proxy) to build the node from")
    group.addoption("--vm-kernel", choices=("6.12", "6.1"), default="6.12",
                    help="vm: guest kernel: 6.12 (bookworm-backports, has tmpfs noswap) or 6.1 (has not)")
    group.addoption("--vm-memory", type=int, default=4096, help="vm: guest memory in MiB")
    group.addoption("--vm-swap", type=int, default=2048, help="vm: guest swap file in MiB")
    group.addoption("--gate", action="store_true",
                    help="release gate: a behavior or prerequisite that could not be tested fails the run")


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


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_behaviors_key] = _selected_behaviors(config)
    if config.getoption("provider") == "existing":
        _kubeconfig(config)
    if _is_worker(config):
        run_dir = Path(config.workerinput[RUN_DIR_KEY])
    else:
        run_dir = Path(tempfile.mkdtemp(prefix="ksc-run-"))
    config.stash[_run_dir_key] = run_dir
    if not _is_worker(config) and config.getoption("cleanup_leaked"):
        _cleanup_leaked(config)


def pytest_configure_node(node) -> None:  # pytest-xdist: hand every worker the run directory
    node.workerinput[RUN_DIR_KEY] = str(node.config.stash[_run_dir_key])


_behaviors_key = pytest.StashKey[list]()
_run_dir_key = pytest.StashKey[Path]()
_provider_key = pytest.StashKey[Provider]()


def make_provider(config: pytest.Config) -> Provider:
    if _provider_key in config.stash:
        return config.stash[_provider_key]
    name = config.getoption("provider")
    run_dir = config.stash[_run_dir_key]
    if name == "kind":
        from clusters.kind_provider import KindProvider

        provider: Provider = KindProvider(
            config.getoption("kind_bin"), config.getoption("node_image"), run_dir, config.getoption("reuse_clusters")
        )
    elif name == "existing":
        from clusters.existing import ExistingProvider

        provider = ExistingProvider(_kubeconfig(config), stress_image=config.getoption("stress_image"))
    else:
        from clusters.vm_provider import VmProvider

        provider = VmProvider.from_pytest_config(config, run_dir)
    config.stash[_provider_key] = provider
    return provider


def _cleanup_leaked(config: pytest.Config) -> None:
    provider = make_provider(config)
    leaked = getattr(provider, "leaked", None)
    if leaked is None:
        return
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    for name in leaked():
        provider.delete(name)  # type: ignore[attr-defined]
        if reporter:
            reporter.write_line(f"kube-swap-conformance: deleted leaked cluster {name}")


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


@pytest.fixture(scope="session")
def swap_provider(pytestconfig: pytest.Config) -> Provider:
    provider = make_provider(pytestconfig)
    run_dir = pytestconfig.stash[_run_dir_key]
    try:
        shared.get_or_create(run_dir, "preflight", lambda: provider.preflight(pytestconfig.stash[_behaviors_key]) or {})
    except (PreflightError, shared.SharedCreationError) as error:
        if not _is_worker(pytestconfig):
            pytest.exit(str(error), returncode=3)  # one message, not one per test
        # pytest.exit inside an xdist worker is an INTERNALERROR: fail the test plainly; the
        # controller prints the message once and exits 3 (pytest_sessionfinish).
        pytest.fail(str(error).split(": ", 1)[-1] if isinstance(error, shared.SharedCreationError) else str(error), pytrace=False)
    return provider


def _record_coverage(config: pytest.Config, behavior: str, covered: str | None, reason: str | None) -> None:
    path = config.stash[_run_dir_key] / f"coverage-{behavior}.json"
    path.write_text(json.dumps({"node": covered, "reason": reason}))


def _not_covered(config: pytest.Config, behavior: str, reason: str) -> None:
    _record_coverage(config, behavior, None, reason)
    could_not_test(config, f"{behavior} not covered: {reason}")


def node_running(request: pytest.FixtureRequest, behavior: str) -> SwapNode:
    """The node for `behavior`, or a skip (a failure in gate mode) that says why there is none.

    Called for every test: providers cache their nodes, and a node that switches behavior in
    place (vm) is switched back here if an earlier test needed another behavior."""
    config = request.config
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


# --- end of run: teardown (controller only) and the coverage report ----------------------------

def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    if _is_worker(config):
        return
    run_dir = config.stash[_run_dir_key]
    preflight = shared.recorded_error(run_dir, "preflight")
    if preflight:
        config.stash[_teardown_key] = [preflight]
        session.exitstatus = 3
    created = shared.created(run_dir)
    if not created:
        return
    if config.getoption("keep_clusters"):
        config.stash[_teardown_key] = config.stash.get(_teardown_key, []) + [f"kept {e['provider']} {e['cluster']} (--keep-clusters)" for e in created]
        return
    config.stash[_teardown_key] = config.stash.get(_teardown_key, []) + make_provider(config).teardown(created)


_teardown_key = pytest.StashKey[list]()


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    if _is_worker(config):
        return
    run_dir = config.stash[_run_dir_key]
    lines = []
    for behavior in config.stash[_behaviors_key]:
        path = run_dir / f"coverage-{behavior}.json"
        if path.exists():
            record = json.loads(path.read_text())
            lines.append(f"{behavior}: " + (f"tested on {record['node']}" if record["node"] else f"NOT COVERED: {record['reason']}"))
    teardown = config.stash.get(_teardown_key, [])
    if lines or teardown:
        terminalreporter.section("swap coverage")
        for line in lines + teardown:
            terminalreporter.write_line(line)


def pytest_unconfigure(config: pytest.Config) -> None:
    # The run directory holds kubeconfigs of kept clusters; otherwise it goes with the run.
    if _is_worker(config) or _run_dir_key not in config.stash or config.getoption("keep_clusters"):
        return
    shutil.rmtree(config.stash[_run_dir_key], ignore_errors=True)
