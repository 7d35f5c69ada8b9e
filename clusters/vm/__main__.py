"""CLI for the vm provider.

    python -m clusters.vm up [--behavior LimitedSwap] [--k8s-version v1.36.3] [--kernel 6.12|6.1]
                             [--memory 4096] [--swap 2048] [--cpus 2] [--reuse] [--state-dir DIR]
    python -m clusters.vm status
    python -m clusters.vm set-behavior NoSwap
    python -m clusters.vm exec -- cat /proc/swaps
    python -m clusters.vm down
    python -m clusters.vm build [--k8s-version v1.36.3] [--kernel 6.12]   # caches only

``up`` prints the kubeconfig path on stdout (progress goes to stderr) and leaves the VM running.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from . import build as _build
from .cluster import VmCluster


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m clusters.vm", description="single-node Kubernetes in a QEMU guest")
    p.add_argument("--state-dir", type=Path, default=None, help="run state directory (default ~/.cache/kube-swap-conformance/vm/run)")
    sub = p.add_subparsers(dest="cmd", required=True)
    for name in ("up", "build"):
        s = sub.add_parser(name)
        s.add_argument("--k8s-version", default=_build.DEFAULT_K8S_VERSION,
                       help="k8s.io/kubernetes release on the Go proxy, or 'latest'")
        s.add_argument("--kernel", choices=("6.12", "6.1"), default="6.12")
        if name == "up":
            s.add_argument("--behavior", default="LimitedSwap")
            s.add_argument("--memory", type=int, default=4096, help="guest RAM in MiB")
            s.add_argument("--swap", type=int, default=2048, help="guest swap file in MiB")
            s.add_argument("--cpus", type=int, default=2)
            s.add_argument("--reuse", action="store_true", help="attach to a running VM if there is one")
    sub.add_parser("down")
    sub.add_parser("status")
    sb = sub.add_parser("set-behavior")
    sb.add_argument("behavior")
    ex = sub.add_parser("exec")
    ex.add_argument("argv", nargs=argparse.REMAINDER)
    a = p.parse_args(argv)

    if a.cmd in ("up", "build"):
        version = _build.latest_kubernetes_version() if a.k8s_version == "latest" else a.k8s_version
        kw = dict(k8s_version=version, kernel=a.kernel)
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
