"""CLI for the vm provider.

    python -m clusters.vm up [--behavior LimitedSwap] [--k8s-version v1.36.3] [--kernel 6.12|6.1]
                             [--memory 4096] [--swap 2048] [--cpus 2] [--reuse] [--state-dir DIR]
    python -m clusters.vm status
    python -m clusters.vm set-behavior NoSwap
    python -m clusters.vm exec -- cat /proc/swaps
    python -m clusters.vm down
    python -m clusters.vm build [--k8s-version v1.37.1] [--kernel 6.12]   # caches only
    ... up|build|node-image|kind-host up [--k8s-patch FILE ...] [--k8s-source DIR]
    python -m clusters.vm swap-kubelet --k8s-patch FILE   # that build's kubelet on the running node

    python -m clusters.vm node-image [--k8s-version v1.37.1]   # the local kind node image
    eval "$(python -m clusters.vm kind-host up)"              # a Docker host for kind, in a VM
    python -m clusters.vm kind-host env | status | down
    python -m clusters.vm kind-host exec -- docker ps

``up`` prints the kubeconfig path on stdout (progress goes to stderr) and leaves the VM running.
``kind-host up`` builds the node image, boots the host, loads the image into its Docker and
prints ``export`` lines (DOCKER_HOST, KSC_KIND_API_PORTS, KSC_KIND_NODE_IMAGE) on stdout.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from . import build as _build
from . import k8s_source
from .cluster import VmCluster
from .k8s_source import KubernetesSource, SourceError


def _positive(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number of MiB, got {value}")
    return value


def _add_source_args(s: argparse.ArgumentParser) -> None:
    s.add_argument("--k8s-patch", action="append", default=[], type=Path, metavar="FILE",
                   help="apply this git-diff patch to the release's source before building (repeatable)")
    s.add_argument("--k8s-source", type=Path, default=None, metavar="DIR",
                   help="build from this local kubernetes checkout instead of the Go proxy")


def _kubernetes(a: argparse.Namespace) -> KubernetesSource:
    """--k8s-version/--k8s-patch/--k8s-source as one KubernetesSource ('latest' probed by name)."""
    if a.k8s_patch and a.k8s_source:
        raise SourceError("--k8s-patch and --k8s-source together: apply the patch in your checkout instead")
    if a.k8s_source:
        given = None if a.k8s_version in (None, _build.DEFAULT_K8S_VERSION) else a.k8s_version
        return k8s_source.checkout(a.k8s_source, given)
    version = _build.latest_kubernetes_version() if a.k8s_version == "latest" else a.k8s_version
    return k8s_source.release(version, a.k8s_patch)


def _kind_host_main(a: argparse.Namespace) -> int:
    from .kindhost import KindHost
    from .nodeimage import build_node_image

    if a.kh_cmd == "up":
        host = KindHost(a.state_dir, kernel=a.kernel, memory_mb=a.memory, swap_mb=a.swap, cpus=a.cpus)
        images = []
        if not a.no_node_image:
            built = build_node_image(_kubernetes(a), progress=host.progress)
            images.append(built)
        try:
            st = host.up(images, reuse=a.reuse)
        except KeyboardInterrupt:
            print("interrupted: kind host stopped", file=sys.stderr)
            return 130
        env = st.env()
        if not a.no_node_image:
            env["KSC_KIND_NODE_IMAGE"] = built.ref
        print("\n".join(f"export {k}={v}" for k, v in env.items()))
        return 0
    host = KindHost(a.state_dir)
    st = host.state()
    if a.kh_cmd == "down":
        host.down()
        return 0
    if a.kh_cmd == "status":
        print(json.dumps(host.status(), indent=2, default=str))
        return 0 if host.is_running() else 1
    if not (st and host.is_running()):
        print("no kind host is running (python -m clusters.vm kind-host up)", file=sys.stderr)
        return 1
    if a.kh_cmd == "env":
        env = st.env()
        if st.node_images:
            env["KSC_KIND_NODE_IMAGE"] = st.node_images[-1]
        print("\n".join(f"export {k}={v}" for k, v in env.items()))
        return 0
    args = a.argv[1:] if a.argv[:1] == ["--"] else a.argv
    rc, out, err = host.guest_exec(args)
    sys.stdout.write(out)
    sys.stderr.write(err)
    return rc


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m clusters.vm", description="single-node Kubernetes in a QEMU guest")
    p.add_argument("--state-dir", type=Path, default=None, help="run state directory (default ~/.cache/kube-swap-conformance/vm/run)")
    sub = p.add_subparsers(dest="cmd", required=True)
    for name in ("up", "build"):
        s = sub.add_parser(name)
        s.add_argument("--k8s-version", default=_build.DEFAULT_K8S_VERSION,
                       help="k8s.io/kubernetes release on the Go proxy, or 'latest'")
        s.add_argument("--kernel", choices=("6.12", "6.1"), default="6.12")
        _add_source_args(s)
        if name == "up":
            s.add_argument("--behavior", default="LimitedSwap")
            s.add_argument("--memory", type=int, default=4096, help="guest RAM in MiB")
            s.add_argument("--swap", type=int, default=2048, help="guest swap file in MiB")
            s.add_argument("--cpus", type=int, default=2)
            s.add_argument("--reuse", action="store_true", help="attach to a running VM if there is one")
    ni = sub.add_parser("node-image", help="build the local kind node image (cached); print archive and ref")
    ni.add_argument("--k8s-version", default=_build.DEFAULT_K8S_VERSION)
    _add_source_args(ni)
    kh = sub.add_parser("kind-host", help="a Docker host for kind in a VM (cgroup v2, swap)")
    kh.add_argument("--state-dir", type=Path, default=None, help="default ~/.cache/kube-swap-conformance/vm/kind-host")
    khs = kh.add_subparsers(dest="kh_cmd", required=True)
    khu = khs.add_parser("up")
    khu.add_argument("--kernel", choices=("6.12", "6.1"), default="6.12")
    khu.add_argument("--memory", type=_positive, default=8192, help="guest RAM in MiB (8192)")
    khu.add_argument("--swap", type=_positive, default=4096, help="guest swap file in MiB (4096)")
    khu.add_argument("--cpus", type=_positive, default=2)
    khu.add_argument("--k8s-version", default=_build.DEFAULT_K8S_VERSION, help="version of the node image to load")
    _add_source_args(khu)
    khu.add_argument("--no-node-image", action="store_true", help="do not build or load the local node image")
    khu.add_argument("--reuse", action="store_true", help="attach to a running kind host if there is one")
    for name in ("env", "status", "down"):
        khs.add_parser(name)
    khe = khs.add_parser("exec")
    khe.add_argument("argv", nargs=argparse.REMAINDER)
    sk = sub.add_parser("swap-kubelet", help="run another build's kubelet on the running node (control plane unchanged)")
    sk.add_argument("--k8s-version", default=_build.DEFAULT_K8S_VERSION)
    _add_source_args(sk)
    sub.add_parser("down")
    sub.add_parser("status")
    sb = sub.add_parser("set-behavior")
    sb.add_argument("behavior")
    ex = sub.add_parser("exec")
    ex.add_argument("argv", nargs=argparse.REMAINDER)
    a = p.parse_args(argv)
    try:
        return _main(a)
    except (SourceError, _build.BuildError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2 if isinstance(error, SourceError) else 1


def _main(a: argparse.Namespace) -> int:
    if a.cmd == "kind-host":
        return _kind_host_main(a)
    if a.cmd == "node-image":
        from .nodeimage import build_node_image
        from .progress import stderr_progress

        built = build_node_image(_kubernetes(a), progress=stderr_progress("node-image"))
        print(f"{built.archive}\n{built.ref}")
        return 0

    if a.cmd in ("up", "build"):
        kw: dict = dict(kubernetes=_kubernetes(a), kernel=a.kernel)
        if a.cmd == "up":
            kw.update(memory_mb=a.memory, swap_mb=a.swap, cpus=a.cpus)
        vm = VmCluster(a.state_dir, **kw)
        if a.cmd == "build":
            img = vm.prepare()
            print(img.disk)
            return 0
        try:
            kubeconfig = vm.up(a.behavior, reuse=a.reuse)
        except KeyboardInterrupt:
            print("interrupted: VM stopped", file=sys.stderr)
            return 130
        print(kubeconfig)
        return 0
    vm = VmCluster(a.state_dir)
    if a.cmd == "swap-kubelet":
        print(vm.swap_kubelet(_kubernetes(a)))
        return 0
    if a.cmd == "down":
        vm.down()
        return 0
    if a.cmd == "status":
        st = vm.status()
        print(json.dumps(st, indent=2, default=str))
        return 0 if st.get("running") else 1
    if a.cmd == "set-behavior":
        vm.set_swap_behavior(a.behavior)
        return 0
    if a.cmd == "exec":
        args = a.argv[1:] if a.argv[:1] == ["--"] else a.argv
        rc, out, err = vm.guest_exec(args)
        sys.stdout.write(out)
        sys.stderr.write(err)
        return rc
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
