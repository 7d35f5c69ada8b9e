"""The suite's command line: every option, and every check of the values that needs nothing but the
values and this machine's file system, made in pytest_configure before anything costly starts (a
build, a cluster, a network call). Bad input is one pytest.UsageError: exit 4, nothing created."""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from clusters import behaviors as swap_behaviors
from clusters import cli
from clusters.redact import redact

PROVIDERS = ("kind", "existing", "vm")


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
    group.addoption("--install-host-packages", action="store_true",
                    help="kind, vm: install the Debian packages the preflight finds missing (apt-get update, then"
                         " apt-get install -y; root, Debian hosts only) before checking again; without it nothing"
                         " is installed and the preflight names them in one apt-get line")
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
    group.addoption("--vm-memory", type=cli.mib(cli.MIN_NODE_MEMORY_MIB, "what a kubeadm control plane needs"),
                    default=4096, help=f"vm: guest memory in MiB (at least {cli.MIN_NODE_MEMORY_MIB})")
    group.addoption("--vm-swap", type=cli.mib(), default=2048, help="vm: guest swap file in MiB")
    group.addoption("--vm-state-dir", type=Path, default=None, metavar="DIR",
                    help="vm: the node's state directory (default: that of `python -m clusters.vm`,"
                         " <cache>/vm/run); the mutant bench gives its runs one of its own")
    group.addoption("--gate", action="store_true",
                    help="release gate: the run fails unless, for every required behavior, every module with"
                         " tests for it (e2e/verdict.py REQUIRED_CHECKS) ran and passed; in the core modules a skip"
                         " counts as not tested, elsewhere only a checked version/kernel skip is accepted")
    group.addoption("--results-dir", default="results", type=Path,
                    help="where a run of the suite writes its report: junit.xml (unless --junitxml),"
                         " matrix.md, report.html and plots/ (default: ./results)")
    group.addoption("--gate-behaviors", default=None,
                    help="with --gate: behaviors the gate requires, each also in --behaviors (default"
                         " NoSwap,LimitedSwap, plus WorkloadControlledSwap where the provider can offer it)")


@dataclass(frozen=True)
class Settings:
    """The options as the run uses them, checked."""

    provider: str
    behaviors: list[str]
    gate_behaviors: list[str] | None  # None: the gate's default
    kubeconfig: str | None  # the existing provider's
    kubernetes: Any  # clusters.vm.k8s_source.KubernetesSource | None: the vm provider's build
    suite: bool  # the command line selects conformance tests (e2e/), not only self-tests
    results_dir: Path  # absolute


SETTINGS = pytest.StashKey[Settings]()


def settings(config: pytest.Config) -> Settings:
    return config.stash[SETTINGS]


def runs_the_suite(config: pytest.Config) -> bool:
    """Whether the command line selects conformance tests (e2e/ beside the conftest.py that
    registers the plugin, or that directory itself), not only self-tests."""
    e2e = config.rootpath / "e2e"
    for arg in config.args:
        path = Path(config.invocation_params.dir, arg.split("::", 1)[0]).resolve()
        if path in (e2e, config.rootpath) or e2e in path.parents:
            return True
    return False


def results_dir(config: pytest.Config) -> Path:
    return Path(config.invocation_params.dir, config.getoption("results_dir")).resolve()


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    # The JUnit XML goes with the rest of the report unless --junitxml says otherwise (before
    # pytest's junitxml plugin reads the option in its pytest_configure).
    if not config.option.xmlpath and runs_the_suite(config):
        config.option.xmlpath = str(results_dir(config) / "junit.xml")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    try:
        config.stash[SETTINGS] = read(config)
    except pytest.UsageError as error:  # a value it quotes may carry a credential (a mirror's URL)
        raise pytest.UsageError(redact(str(error))) from None


def read(config: pytest.Config) -> Settings:
    """Every option checked, in the order a person reads the command line; the first bad one is
    the usage error."""
    provider = config.getoption("provider")
    behaviors = _behaviors(config.getoption("behaviors"), "--behaviors") or list(swap_behaviors.ALL_BEHAVIORS)
    gate_behaviors = _gate_behaviors(config, behaviors)
    kubeconfig = _kubeconfig(config) if provider == "existing" else None
    if provider == "kind":
        _kind_settings(config)
    if provider == "vm":
        _vm_settings(config)
    kubernetes = _kubernetes_source(config)
    if config.getoption("install_host_packages"):
        _host_packages(provider)
    suite = runs_the_suite(config)
    results = results_dir(config)
    if suite and not hasattr(config, "workerinput"):  # the controller checked them for its workers
        _writable_report_paths(config, results)
    return Settings(provider, behaviors, gate_behaviors, kubeconfig, kubernetes, suite, results)


def _behaviors(text: str | None, option: str) -> list[str] | None:
    if text is None:
        return None
    try:
        return swap_behaviors.parse_list(text)
    except swap_behaviors.UnknownBehaviorError as error:
        raise pytest.UsageError(f"{option}: {error}") from None


def _gate_behaviors(config: pytest.Config, selected: list[str]) -> list[str] | None:
    required = _behaviors(config.getoption("gate_behaviors"), "--gate-behaviors")
    if required is None:
        return None
    if not config.getoption("gate"):
        raise pytest.UsageError("--gate-behaviors names what the release gate requires, and --gate is not given:"
                                " add --gate (or drop --gate-behaviors)")
    missing = [b for b in required if b not in selected]
    if missing:
        raise pytest.UsageError(
            f"--gate-behaviors requires {', '.join(missing)}, which --behaviors {config.getoption('behaviors')} does"
            f" not select: the gate would fail without testing it. Add {', '.join(missing)} to --behaviors"
            " (or leave --behaviors out: every behavior runs)")
    return required


def _kubeconfig(config: pytest.Config) -> str:
    path = config.getoption("kubeconfig") or os.environ.get("KUBECONFIG") or str(Path.home() / ".kube" / "config")
    path = path.split(os.pathsep)[0]
    if not Path(path).is_file():
        raise pytest.UsageError(f"--provider existing: kubeconfig {path} does not exist (pass --kubeconfig FILE)")
    return path


def _vm_settings(config: pytest.Config) -> None:
    """Bad vm-only input: the Debian mirror the guest's root filesystem comes from, the state directory."""
    from clusters.vm import image

    try:
        image.mirror()
    except cli.UsageError as error:
        raise pytest.UsageError(str(error)) from None
    state_dir = config.getoption("vm_state_dir")
    problem = directory_problem(state_dir, "--vm-state-dir", parents=True) if state_dir is not None else None
    if problem:
        raise pytest.UsageError(problem)


def _kind_settings(config: pytest.Config) -> None:
    """Bad kind-only input (a host profile, the API server port map, the node image's name)."""
    from clusters import kind_config, preflight
    from clusters.kind_provider import api_ports_from_env

    patch = config.getoption("kind_config_patch")
    try:
        if patch:
            kind_config.load_patch(Path(patch))
        api_ports_from_env()
    except ValueError as error:
        raise pytest.UsageError(str(error)) from None
    image = config.getoption("node_image")
    if image is not None:
        refused = preflight.node_image_refusal(image, kind_config.image_version(image))
        if refused is not None:
            raise pytest.UsageError(f"--node-image: {refused.detail}: {refused.remedy}")


def _host_packages(provider: str) -> None:
    """--install-host-packages where it can work: a provider with host packages to install, on a
    Debian host with apt-get, as root."""
    from clusters import hostpackages

    if provider == "existing":
        raise pytest.UsageError(f"{hostpackages.OPTION}: the existing provider needs no host packages (it is for"
                                " --provider kind and vm)")
    refused = hostpackages.refusal()
    if refused:
        raise pytest.UsageError(refused)


def _kubernetes_source(config: pytest.Config) -> Any:
    """--k8s-version/--k8s-patch/--k8s-source as one KubernetesSource (None: the provider's
    default release)."""
    from clusters import versions
    from clusters.vm import k8s_source

    patches, checkout = config.getoption("k8s_patch"), config.getoption("k8s_source")
    version = config.getoption("k8s_version")
    if not (patches or checkout or version):
        return None
    if config.getoption("provider") != "vm":
        given = "--k8s-patch/--k8s-source" if patches or checkout else "--k8s-version"
        raise pytest.UsageError(
            f"{given} builds the vm provider's node (--provider vm); the {config.getoption('provider')} provider"
            " runs what its nodes run. For kind build a node image instead (`python -m clusters.vm node-image"
            " --k8s-version V [--k8s-patch FILE]` or `kind-host up ...`) and pass it with --node-image")
    if patches and checkout:
        raise pytest.UsageError("--k8s-patch and --k8s-source together: apply the patch in your checkout instead")
    try:
        source = k8s_source.checkout(checkout, version) if checkout else \
            k8s_source.release(version or versions.KUBERNETES, patches)
    except k8s_source.SourceError as error:
        raise pytest.UsageError(str(error)) from None
    # A checkout's version is known only now (git describe, unless --k8s-version names it): the
    # range is checked here, for a release and a checkout alike, before anything is built.
    refused = k8s_source.unsupported(source, version)
    if refused:
        raise pytest.UsageError(refused)
    return source


def directory_problem(path: Path, what: str, parents: bool = False) -> str | None:
    """Why ``path`` cannot be (or become) a directory this run writes into; None when it can.
    It may not exist yet; its parent must (a typo is not made into a tree of directories),
    unless ``parents`` (pytest's --junitxml creates them): then the nearest existing one counts."""
    if path.exists() and not path.is_dir():
        return f"{what} {path} is a file, not a directory: name a directory (it is created if missing)"
    existing = path if path.is_dir() else path.parent
    while parents and not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        state = "is not a directory" if existing.exists() else "does not exist"
        return f"{what} {path}: its parent {existing} {state}: create it first (mkdir -p {existing}) or name another"
    try:
        with tempfile.TemporaryFile(dir=existing, prefix=".ksc-write-check-"):
            pass
    except OSError as error:
        return f"{what} {path}: {existing} is not writable ({error.strerror}): name a directory you can write to"
    return None


def _writable_report_paths(config: pytest.Config, results: Path) -> None:
    """The results directory, and where the JUnit XML goes, can be written: found now, not by
    pytest's junitxml raising at the end of a run that created clusters."""
    problem = directory_problem(results, "--results-dir")
    xmlpath = config.option.xmlpath
    if problem is None and xmlpath:
        junit = Path(config.invocation_params.dir, xmlpath).resolve()
        if junit.parent != results:
            problem = directory_problem(junit.parent, "--junitxml's directory", parents=True)
    if problem:
        raise pytest.UsageError(problem)
