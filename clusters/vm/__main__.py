"""CLI for the vm provider.

    python -m clusters.vm up [--behavior LimitedSwap] [--k8s-version v1.36.3] [--kernel 6.12|6.1]
                             [--memory 4096] [--swap 2048] [--cpus 2] [--reuse] [--state-dir DIR]
    python -m clusters.vm status
    python -m clusters.vm set-behavior NoSwap
    python -m clusters.vm exec -- cat /proc/swaps
    python -m clusters.vm down
    python -m clusters.vm build [--k8s-version v1.37.2] [--kernel 6.12]   # caches only
    ... up|build|node-image|kind-host up [--k8s-patch FILE ...] [--k8s-source DIR] [--install-host-packages]
    python -m clusters.vm swap-kubelet --k8s-patch FILE   # that build's kubelet on the running node

    python -m clusters.vm node-image [--k8s-version v1.37.2]   # the local kind node image
    eval "$(python -m clusters.vm kind-host up)"              # a Docker host for kind, in a VM
    python -m clusters.vm kind-host env | status | down
    python -m clusters.vm kind-host exec -- docker ps

``up`` prints the kubeconfig path on stdout (progress goes to stderr) and leaves the VM running.
``kind-host up`` builds the node image, boots the host, loads the image into its Docker and
prints ``export`` lines (DOCKER_HOST, KSC_KIND_API_PORTS, KSC_KIND_NODE_IMAGE) on stdout.

Every command has one error path (clusters/cli.py): a message on stderr and the suite's exit
code (4 bad arguments, 3 the host is not ready: a missing tool, an unreachable proxy, a guest
already starting; 2 interrupted, with what it started stopped; 1 the work failed), a traceback
only with --debug. ``--state-dir`` and ``--debug`` go before or after the subcommand.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from clusters import cli, inputs, versions

from . import build as _build
from . import k8s_source, qemu
from .k8s_source import KubernetesSource, SourceError

def _failures() -> tuple[type[BaseException], ...]:
    """The errors whose message is the whole story (exit 1, no traceback)."""
    from .cluster import VmClusterError
    from .image import ImageError
    from .kindhost import KindHostError

    return (VmClusterError, KindHostError, ImageError, _build.BuildError, SourceError, OSError)


@inputs.typed("release", "k8s_version")
def k8s_version(text: str) -> str:
    """An argparse type: 'latest', or a release (or, with --k8s-source, a tag) of a supported minor
    (clusters/versions.py SUPPORTED)."""
    if text == "latest":
        return text
    match = k8s_source.CHECKOUT_TAG.fullmatch(text)
    if not match:
        raise ValueError(f"{text!r} is not a Kubernetes release (want v1.MINOR.PATCH, e.g. {versions.KUBERNETES}, or"
                         " 'latest')")
    refused = versions.out_of_range(text, text)
    if refused:
        raise ValueError(f"{refused}; {versions.PICK_A_RELEASE}")
    return text


def _common() -> argparse.ArgumentParser:
    """Options every command takes, before or after its subcommand (SUPPRESS: a subcommand's
    parser does not overwrite what the top level was given)."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--state-dir", type=inputs.state_directory, default=argparse.SUPPRESS,
                        help="run state directory (default ~/.cache/kube-swap-conformance/vm/run; for kind-host,"
                             " .../vm/kind-host)")
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                        help="a failure's traceback too")
    return common


def _add_source_args(s: argparse.ArgumentParser, version_help: str = "k8s.io/kubernetes release on the Go proxy,"
                                                                     " or 'latest'") -> None:
    # every command that takes a source builds or boots, so it checks host packages too
    s.add_argument("--install-host-packages", action="store_true",
                   help="install the Debian packages the preflight finds missing (apt-get update, then apt-get"
                        " install -y; root, Debian hosts only) before checking again")
    # None when not given (its default is _build.DEFAULT_K8S_VERSION): given, it is never ignored,
    # even when it names the default release
    s.add_argument("--k8s-version", type=k8s_version, default=None,
                   help=f"{version_help} (default {_build.DEFAULT_K8S_VERSION})")
    # argparse's own check of the pair: "argument --k8s-source: not allowed with argument --k8s-patch"
    source = s.add_mutually_exclusive_group()
    source.add_argument("--k8s-patch", action="append", default=[], type=inputs.patch_file, metavar="FILE",
                        help="apply this git-diff patch to the release's source before building (repeatable)")
    source.add_argument("--k8s-source", type=inputs.source_directory, default=None, metavar="DIR",
                        help="build from this local kubernetes checkout instead of the Go proxy")


def parser() -> cli.Parser:
    common = _common()
    p = cli.Parser(prog="python -m clusters.vm", description="single-node Kubernetes in a QEMU guest",
                   parents=[common])
    sub = p.add_subparsers(dest="cmd", required=True, parser_class=cli.Parser)
    node_memory = cli.mib(cli.MIN_NODE_MEMORY_MIB, "what a kubeadm control plane needs", guest=True)
    for name in ("up", "build"):
        s = sub.add_parser(name, parents=[common])
        _add_source_args(s)
        s.add_argument("--kernel", choices=("6.12", "6.1"), default="6.12")
        if name == "up":
            s.add_argument("--behavior", type=cli.behavior, default="LimitedSwap")
            s.add_argument("--memory", type=node_memory, default=4096, help="guest RAM in MiB (4096)")
            s.add_argument("--swap", type=cli.node_swap(), default=2048, help="guest swap file in MiB (2048)")
            s.add_argument("--cpus", type=cli.cpus, default=2)
            s.add_argument("--reuse", action="store_true", help="attach to a running VM if there is one")
    ni = sub.add_parser("node-image", parents=[common],
                        help="build the local kind node image (cached); print archive and ref")
    _add_source_args(ni)
    kh = sub.add_parser("kind-host", parents=[common], help="a Docker host for kind in a VM (cgroup v2, swap)")
    khs = kh.add_subparsers(dest="kh_cmd", required=True, parser_class=cli.Parser)
    khu = khs.add_parser("up", parents=[common])
    khu.add_argument("--kernel", choices=("6.12", "6.1"), default="6.12")
    khu.add_argument("--memory", type=cli.mib(cli.MIN_KIND_HOST_MEMORY_MIB, "a kind control plane and a worker per"
                                                                            " behavior, about 1 GiB each", guest=True),
                     default=8192, help="guest RAM in MiB (8192)")
    khu.add_argument("--swap", type=cli.kind_host_swap(), default=4096, help="guest swap file in MiB (4096)")
    khu.add_argument("--cpus", type=cli.cpus, default=2)
    _add_source_args(khu, "version of the node image to load")
    khu.add_argument("--no-node-image", action="store_true", help="do not build or load the local node image")
    khu.add_argument("--reuse", action="store_true", help="attach to a running kind host if there is one")
    for name in ("env", "status", "down"):
        khs.add_parser(name, parents=[common])
    khe = khs.add_parser("exec", parents=[common])
    khe.add_argument("argv", nargs=argparse.REMAINDER, type=inputs.argv_item)
    sk = sub.add_parser("swap-kubelet", parents=[common],
                        help="run another build's kubelet on the running node (control plane unchanged)")
    _add_source_args(sk)
    sub.add_parser("down", parents=[common])
    sub.add_parser("status", parents=[common])
    sb = sub.add_parser("set-behavior", parents=[common])
    sb.add_argument("behavior", type=cli.behavior)
    ex = sub.add_parser("exec", parents=[common])
    ex.add_argument("argv", nargs=argparse.REMAINDER, type=inputs.argv_item)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    # not set_defaults: the parsers share _common()'s actions, and a default there would let a
    # subcommand's parser overwrite the value given before it
    args.state_dir = getattr(args, "state_dir", None)
    args.debug = getattr(args, "debug", False)
    command = " ".join(["clusters.vm", args.cmd, *([args.kh_cmd] if args.cmd == "kind-host" else [])])
    return cli.run(_main, args, known=_failures(), command=command)


def _kubernetes(a: argparse.Namespace) -> KubernetesSource:
    """--k8s-version/--k8s-patch/--k8s-source as one KubernetesSource ('latest' probed by name)."""
    if a.k8s_patch and a.k8s_source:
        raise cli.UsageError("--k8s-patch and --k8s-source together: apply the patch in your checkout instead")
    try:
        if a.k8s_source:
            given = a.k8s_version
            source = k8s_source.checkout(a.k8s_source, given)
            refused = k8s_source.unsupported(source, given)
            if refused:  # its version is known only now, from git describe: still before anything is built
                raise cli.UsageError(refused)
            return source
        version = _build.latest_kubernetes_version() if a.k8s_version == "latest" else \
            a.k8s_version or _build.DEFAULT_K8S_VERSION
        return k8s_source.release(version, a.k8s_patch)
    except SourceError as error:
        raise cli.UsageError(str(error)) from None


def _preflight(kubernetes: KubernetesSource | None, cache: Path, *, guest_image: bool, boot: bool,
               binaries: bool = True, install: bool = False) -> None:
    """The host's tools, all at once, before anything is built or booted (exit 3); first a bad
    $KSC_DEBIAN_MIRROR, a usage error (exit 4); with ``install`` (--install-host-packages) the
    missing Debian packages installed first."""
    from clusters import hostpackages
    from clusters.checks import require

    from . import hostcheck, image
    from .progress import stderr_progress

    if guest_image:
        image.mirror()
    require(hostpackages.checked(
        lambda: hostcheck.checks(kubernetes, root=cache, guest_image=guest_image, boot=boot, binaries=binaries),
        install, stderr_progress("host")))
    if boot:  # the accelerator too: KSC_VM_ACCEL=kvm on a host whose KVM runs no guest is exit 3, before any build
        qemu.choose_accel()


def _install(a: argparse.Namespace) -> bool:
    """--install-host-packages, refused (a usage error) where apt-get cannot run it."""
    if not getattr(a, "install_host_packages", False):
        return False
    from clusters import hostpackages

    refused = hostpackages.refusal()
    if refused:
        raise cli.UsageError(refused)
    return True


def _cache() -> Path:
    """The cache root, writable and with room (the run's own preflight check), else PreflightError."""
    from clusters.checks import PreflightError
    from clusters.preflight import check_cache_dir
    from workloads.cache import cache_root

    checked = check_cache_dir()
    if not checked.ok:
        raise PreflightError([checked])
    return cache_root()


def _kind_host_main(a: argparse.Namespace) -> int:
    from .kindhost import KindHost
    from .nodeimage import build_node_image

    if a.kh_cmd == "up":
        given = [f for f, v in (("--k8s-version", a.k8s_version is not None),
                                ("--k8s-patch", a.k8s_patch), ("--k8s-source", a.k8s_source)) if v]
        if a.no_node_image and given:
            raise cli.UsageError(f"--no-node-image and {given[0]} together: {given[0]} says which node image to build,"
                                 " --no-node-image builds none; drop one")
        kubernetes = None if a.no_node_image else _kubernetes(a)  # a bad patch or checkout: before any lock
        host = KindHost(a.state_dir, kernel=a.kernel, memory_mb=a.memory, swap_mb=a.swap, cpus=a.cpus)
        with host.starting():  # before the node image is built: a second `up` stops here, at once
            _preflight(kubernetes, _cache(), guest_image=True, boot=True, binaries=not a.no_node_image,
                       install=a.install_host_packages)
            if not (a.reuse and host.usable()):  # what up() boots anew
                qemu.ensure_alone(host.paths)  # another emulated guest: before the node image's build
            images = [] if a.no_node_image else [build_node_image(kubernetes, progress=host.progress)]
            st = host.up(images, reuse=a.reuse)
        env = st.env()
        if images:
            env["KSC_KIND_NODE_IMAGE"] = images[0].ref
        print("\n".join(f"export {k}={v}" for k, v in env.items()))
        return cli.Exit.OK
    host = KindHost(a.state_dir)
    st = host.state()
    if a.kh_cmd == "down":
        host.down()
        return cli.Exit.OK
    if a.kh_cmd == "status":
        print(json.dumps(host.status(), indent=2, default=str))
        return cli.Exit.OK if host.is_running() else cli.Exit.FAILED
    if not (st and host.is_running()):
        print("error: no kind host is running (python -m clusters.vm kind-host up)", file=sys.stderr)
        return cli.Exit.FAILED
    if a.kh_cmd == "env":
        env = st.env()
        if st.node_images:
            env["KSC_KIND_NODE_IMAGE"] = st.node_images[-1]
        print("\n".join(f"export {k}={v}" for k, v in env.items()))
        return cli.Exit.OK
    args = a.argv[1:] if a.argv[:1] == ["--"] else a.argv
    rc, out, err = host.guest_exec(args)
    sys.stdout.write(out)
    sys.stderr.write(err)
    return rc


def _main(a: argparse.Namespace) -> int:
    from .cluster import VmCluster

    a.install_host_packages = _install(a)  # refused before anything is made
    if a.cmd == "kind-host":
        return _kind_host_main(a)
    if a.cmd == "node-image":
        from .nodeimage import build_node_image
        from .progress import stderr_progress

        kubernetes = _kubernetes(a)
        _preflight(kubernetes, _cache(), guest_image=True, boot=False, install=a.install_host_packages)
        built = build_node_image(kubernetes, progress=stderr_progress("node-image"))
        print(f"{built.archive}\n{built.ref}")
        return cli.Exit.OK

    if a.cmd in ("up", "build"):
        kw: dict[str, Any] = dict(kernel=a.kernel)
        if a.cmd == "up":
            kw.update(memory_mb=a.memory, swap_mb=a.swap, cpus=a.cpus)
        vm = VmCluster(a.state_dir, kubernetes=_kubernetes(a), **kw)
        if a.cmd == "build":
            _preflight(vm.kubernetes, _cache(), guest_image=True, boot=False, install=a.install_host_packages)
            print(vm.prepare().disk)
            return cli.Exit.OK
        with vm.starting():  # before anything is built: a second `up` stops here, at once
            _preflight(vm.kubernetes, _cache(), guest_image=True, boot=True, install=a.install_host_packages)
            print(vm.up(a.behavior, reuse=a.reuse))
        return cli.Exit.OK
    kubernetes = _kubernetes(a) if a.cmd == "swap-kubelet" else None  # checked before the VM is looked at
    vm = VmCluster(a.state_dir)
    if a.cmd == "swap-kubelet":
        _preflight(kubernetes, _cache(), guest_image=False, boot=False, install=a.install_host_packages)
        print(vm.swap_kubelet(kubernetes))
        return cli.Exit.OK
    if a.cmd == "down":
        vm.down()
        return cli.Exit.OK
    if a.cmd == "status":
        st = vm.status()
        print(json.dumps(st, indent=2, default=str))
        return cli.Exit.OK if st.get("running") else cli.Exit.FAILED
    if a.cmd == "set-behavior":
        vm.set_swap_behavior(a.behavior)
        return cli.Exit.OK
    args = a.argv[1:] if a.argv[:1] == ["--"] else a.argv
    rc, out, err = vm.guest_exec(args)
    sys.stdout.write(out)
    sys.stderr.write(err)
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
