"""The suite's command line: every option, and every check of the values that needs nothing but the
values and this machine's file system, made in pytest_configure before anything costly starts (a
build, a cluster, a network call). Bad input is one pytest.UsageError: exit 4, nothing created."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from clusters import behaviors as swap_behaviors
from clusters import cli, inputs
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
    group.addoption("--k8s-patch", action="append", default=[], type=inputs.nonempty_path, metavar="FILE",
                    help="vm: apply this unified diff (git diff form, paths relative to the kubernetes repository"
                         " root) to the release's source before building; repeatable, applied in order. The"
                         " binaries report v1.X.Y+patch.<hash>")
    group.addoption("--k8s-source", default=None, type=inputs.nonempty_path, metavar="DIR",
                    help="vm: build Kubernetes from this local checkout (repository root) instead of the Go proxy;"
                         " the binaries report <tag>+src.<hash>")
    group.addoption("--vm-kernel", choices=("6.12", "6.1"), default="6.12",
                    help="vm: guest kernel: 6.12 (bookworm-backports, has tmpfs noswap) or 6.1 (has not)")
    group.addoption("--vm-memory", type=cli.mib(cli.MIN_NODE_MEMORY_MIB, "what a kubeadm control plane needs", guest=True),
                    default=4096, help=f"vm: guest memory in MiB (at least {cli.MIN_NODE_MEMORY_MIB})")
    group.addoption("--vm-swap", type=cli.node_swap(), default=2048, help="vm: guest swap file in MiB")
    group.addoption("--vm-state-dir", type=inputs.nonempty_path, default=None, metavar="DIR",
                    help="vm: the node's state directory (default: that of `python -m clusters.vm`,"
                         " <cache>/vm/run); the mutant bench gives its runs one of its own")
    group.addoption("--gate", action="store_true",
                    help="release gate: the run fails unless, for every required behavior, every module with"
                         " tests for it (e2e/verdict.py REQUIRED_CHECKS) ran and passed; in the core modules a skip"
                         " counts as not tested, elsewhere only a checked version/kernel skip is accepted")
    group.addoption("--results-dir", default="results", type=inputs.nonempty_path,
                    help="where a run of the suite writes its report: junit.xml (unless --junitxml),"
                         " matrix.md, report.html and plots/ (default: ./results)")
    group.addoption("--gate-behaviors", default=None,
                    help="with --gate: behaviors the gate requires, each also in --behaviors (default"
                         " NoSwap,LimitedSwap, plus WorkloadControlledSwap where the provider can offer it)")
    _DEFAULTS.update({option.dest: _default(option) for option in group.options})


# Every option above, declared: its value's kind (the bad values tests/test_fault_harness.py
# tries on it), the providers it is for (given with another, it is a usage error naming both)
# and what it cannot go with. An option added above without a row here fails the harness.
_VM, _KIND, _EXISTING = ("vm",), ("kind",), ("existing",)
OPTIONS: tuple[inputs.Option, ...] = (
    inputs.Option(flag="--provider", kind="choice"),
    inputs.Option(flag="--kubeconfig", kind="file", providers=_EXISTING),
    inputs.Option(flag="--behaviors", kind="behaviors"),
    inputs.Option(flag="--node-image", kind="image", providers=_KIND),
    inputs.Option(flag="--stress-image", kind="image", providers=_EXISTING),
    inputs.Option(flag="--kind-bin", kind="command", providers=_KIND),
    inputs.Option(flag="--kind-config-patch", kind="file", providers=_KIND),
    inputs.Option(flag="--keep-clusters", kind="flag", providers=("kind", "vm")),
    inputs.Option(flag="--reuse-clusters", kind="flag", providers=("kind", "vm"), conflicts=("--cleanup-leaked",),
                  why="--cleanup-leaked first deletes the suite's clusters that --reuse-clusters would use: drop one"),
    inputs.Option(flag="--cleanup-leaked", kind="flag", providers=_KIND),
    inputs.Option(flag="--install-host-packages", kind="flag", providers=("kind", "vm")),
    inputs.Option(flag="--k8s-version", kind="release", providers=_VM),
    inputs.Option(flag="--k8s-patch", kind="patch", providers=_VM, conflicts=("--k8s-source",),
                  why="apply the patch in your checkout instead"),
    inputs.Option(flag="--k8s-source", kind="source-directory", providers=_VM),
    inputs.Option(flag="--vm-kernel", kind="choice", providers=_VM),
    inputs.Option(flag="--vm-memory", kind="guest-mib", providers=_VM),
    inputs.Option(flag="--vm-swap", kind="mib", providers=_VM),
    inputs.Option(flag="--vm-state-dir", kind="directory", providers=_VM),
    inputs.Option(flag="--gate", kind="flag"),
    inputs.Option(flag="--results-dir", kind="directory"),
    inputs.Option(flag="--gate-behaviors", kind="behaviors", requires=("--gate",)),
)
_DEFAULTS: dict[str, Any] = {}  # dest -> default, as the command line's parser made it


def _default(option: Any) -> Any:
    """An option's default as its value would be without it (argparse passes a string default
    through the option's type)."""
    default, kind = option.default, option.type
    return kind(default) if isinstance(default, str) and kind is not None else default


def _dest(flag: str) -> str:
    return flag.removeprefix("--").replace("-", "_")


def _given(config: pytest.Config, flag: str) -> bool:
    dest = _dest(flag)
    value = config.getoption(dest)
    return dest in _DEFAULTS and value != _DEFAULTS[dest]


def _providers_and_conflicts(config: pytest.Config, provider: str) -> None:
    """An option given for another provider, or with one it cannot go with: a usage error naming
    both (the default of an option is never "given": KSC_KIND_CONFIG_PATCH exported for kind
    does not stop a vm run)."""
    for option in OPTIONS:
        if not _given(config, option.flag):
            continue
        if config.getoption(_dest(option.flag)) == "":  # a shell variable that was not set, most often
            raise pytest.UsageError(f"{option.flag} is empty: give it a value, or leave it out")
        if option.providers and provider not in option.providers:
            wanted = " or ".join(f"--provider {p}" for p in option.providers)
            raise pytest.UsageError(f"{option.flag} is for {wanted}, and this run's provider is {provider}: drop"
                                    f" {option.flag}, or pass {wanted}")
        for other in option.conflicts:
            if _given(config, other):
                raise pytest.UsageError(f"{option.flag} and {other} together: {option.why}")
        for needed in option.requires:
            if not _given(config, needed):
                raise pytest.UsageError(f"{option.flag} needs {needed}: add {needed} (or drop {option.flag})")


def _pytest_arguments(config: pytest.Config) -> None:
    """pytest's own refusals of -k, -m and a path that does not exist, said now, in pytest's words:
    under -n pytest-xdist turns them into an internal error or "no tests ran" (its workers raise
    them), and without -n they come after the collection."""
    for flag, expression in (("-k", config.option.keyword), ("-m", config.option.markexpr)):
        if expression and expression.strip():
            try:
                inputs.pytest_expression(expression)
            except inputs.Invalid as error:
                raise pytest.UsageError(f"Wrong expression passed to '{flag}': {error}") from None
    if config.option.pyargs:
        return
    for arg in config.args:
        path = Path(config.invocation_params.dir, arg.split("::", 1)[0])
        if not path.exists():
            raise pytest.UsageError(f"file or directory not found: {arg}")


def _workers(config: pytest.Config, provider: str, behaviors: list[str]) -> None:
    """The vm provider's one node runs one behavior at a time, and switching it restarts the
    kubelet under whatever runs there: under -n another worker's test of another behavior would
    be on the node meanwhile (clusters/vm_provider.py)."""
    workers = config.getoption("numprocesses", None)
    if provider == "vm" and len(behaviors) > 1 and workers not in (None, 0, 1):
        raise pytest.UsageError(f"-n ({workers} pytest-xdist workers) with --provider vm testing {', '.join(behaviors)}:"
                                " the vm node runs"
                                " one behavior at a time and switching it restarts its kubelet under the other"
                                " workers' tests; drop -n (the vm provider runs its tests one by one), or test one"
                                " behavior per run (--behaviors LimitedSwap)")


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
        path = Path(os.path.abspath(Path(config.invocation_params.dir, arg.split("::", 1)[0])))
        if path in (e2e, config.rootpath) or e2e in path.parents:
            return True
    return False


def results_dir(config: pytest.Config) -> Path:
    # absolute, its symlinks left as they are: resolving a symlink loop raises (directory_problem says it)
    return Path(os.path.abspath(Path(config.invocation_params.dir, config.getoption("results_dir"))))


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
    try:  # the variables this run's provider reads (clusters/inputs.py VARIABLES), before any option
        inputs.check_environment(f"suite:{provider}")
    except inputs.UsageError as error:
        raise pytest.UsageError(str(error)) from None
    behaviors = _behaviors(config.getoption("behaviors"), "--behaviors") or list(swap_behaviors.ALL_BEHAVIORS)
    gate_behaviors = _gate_behaviors(config, behaviors)
    kubernetes_given = any(_given(config, f) for f in ("--k8s-version", "--k8s-patch", "--k8s-source"))
    if kubernetes_given and provider != "vm":
        _kubernetes_source(config)  # its own message: for kind, how to build a node image instead
    _providers_and_conflicts(config, provider)
    _pytest_arguments(config)
    if provider == "existing" and config.getoption("stress_image") is not None:
        _value(inputs.image, config.getoption("stress_image"), "--stress-image")
    kubeconfig = _kubeconfig(config) if provider == "existing" else None
    if provider == "kind":
        _kind_settings(config)
    if provider == "vm":
        _vm_settings(config)
    kubernetes = _kubernetes_source(config)
    _workers(config, provider, behaviors)  # after the values: a bad one is said first, with or without -n
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
        return inputs.behaviors(text)
    except inputs.Invalid as error:
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
    """The existing provider's kubeconfig, read and its shape checked now (clusters/inputs.py), in
    the name of where its path came from: --kubeconfig, $KUBECONFIG's first entry, ~/.kube/config."""
    from clusters.discovery import DiscoveryError, check_kubeconfig

    given, listed = config.getoption("kubeconfig"), [p for p in os.environ.get("KUBECONFIG", "").split(os.pathsep) if p]
    if given:
        path, what = given, "--kubeconfig"
    elif listed:
        path, what = listed[0], "KUBECONFIG" if len(listed) == 1 else "KUBECONFIG's first entry"
    else:
        path, what = str(Path.home() / ".kube" / "config"), "--provider existing: the default kubeconfig"
    try:
        check_kubeconfig(path, what)
    except DiscoveryError as error:
        raise pytest.UsageError(f"{redact(str(error))}: pass --kubeconfig FILE, a kubeconfig of the cluster to test")\
            from None
    return path


def _value(parse: Any, text: str, flag: str) -> Any:
    """An option's value through its declared type (clusters/inputs.py), as argparse would."""
    try:
        return parse(text)
    except inputs.Invalid as error:
        raise pytest.UsageError(f"{flag}: {error}") from None


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
    what = "--kind-config-patch" if _given(config, "--kind-config-patch") else "KSC_KIND_CONFIG_PATCH"
    try:
        if patch:
            kind_config.load_patch(Path(patch), what)
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


directory_problem = inputs.directory_problem  # why a path cannot be a directory the run writes into


def _writable_report_paths(config: pytest.Config, results: Path) -> None:
    """The results directory, and where the JUnit XML goes, can be written: found now, not by
    pytest's junitxml raising at the end of a run that created clusters."""
    problem = directory_problem(results, "--results-dir")
    xmlpath = config.option.xmlpath
    if problem is None and xmlpath:
        junit = Path(os.path.abspath(Path(config.invocation_params.dir, xmlpath)))
        if junit.parent != results:
            problem = directory_problem(junit.parent, "--junitxml's directory", parents=True)
    if problem:
        raise pytest.UsageError(problem)
