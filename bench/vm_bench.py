"""Benchmark of the vm provider (not a test): cold build, warm start, pod start, guest memory.

    python bench/vm_bench.py [--behavior LimitedSwap] [--kernel 6.12] [--keep] [--state-dir DIR]

* cold build: measured if the caches are empty; otherwise the times recorded by the cold
  build (the ``.complete`` markers under ~/.cache/kube-swap-conformance) are reported.
* warm start: cached binaries and disk -> node Ready (qemu start, boot, kubeadm init, Ready).
* pod to Running: one stress-image pod (imagePullPolicy Never), create -> Running.
* the guest's /proc/meminfo MemTotal / SwapTotal / SwapFree.

The VM runs in a state directory of the bench's own (default ``<cache>/bench/vm-bench``), not
the one ``python -m clusters.vm`` and the suite use; the bench does not start while a VM runs
there, and at its end stops only the VM it booted (the pid and start time it recorded).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from clusters import cli  # noqa: E402
from clusters import inputs  # noqa: E402
from clusters.vm import VmCluster  # noqa: E402
from clusters.vm import build as vbuild  # noqa: E402
from clusters.vm import image as vimage  # noqa: E402
from clusters.vm.guest import Guest  # noqa: E402
from workloads.cache import cache_root  # noqa: E402


def not_started_here(guest: Guest, stop: str) -> str | None:
    """Why a bench must not start in ``guest``'s state directory: a guest it did not boot runs
    there (``up`` would stop it first, and so would the bench's end)."""
    st = guest.state()
    if not guest.is_running():
        return None
    return (f"a {guest.what} runs in {guest.state_dir} (pid {getattr(st, 'pid', '?')}), which this bench did not"
            f" start: stop it with `{stop} --state-dir {guest.state_dir}`, or give the bench another --state-dir")


def started_here(guest: Guest, started: object | None) -> bool:
    """Whether the guest running in ``guest``'s state directory is the one the bench booted, by
    the pid and start time its state file recorded then."""
    now = guest.state()
    return (started is not None and now is not None and guest.is_running()
            and (now.pid, now.started_at) == (started.pid, started.started_at))  # type: ignore[attr-defined]


def host_description() -> str:
    cpu = "unknown cpu"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_kb = 0
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            mem_kb = int(line.split()[1])
    osr = "linux"
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                osr = line.split("=", 1)[1].strip('"')
    except OSError:
        pass
    from clusters.vm.qemu import choose_accel

    accel = choose_accel()
    return (f"{platform.node()}: {os.cpu_count()} cores ({cpu}), {mem_kb / 1048576:.0f} GiB, {osr}, "
            f"kernel {platform.release()}, QEMU {accel.name.upper()} ({accel.reason})")


def recorded_build_times(root: Path) -> dict[str, str]:
    out = {}
    for marker in sorted((root / "bin").glob("*/.complete")):
        out[marker.parent.name] = marker.read_text().strip()
    for marker in sorted((root / "vm" / "rootfs").glob("*/.complete")):
        out[f"rootfs {marker.parent.name}"] = marker.read_text().strip()
    for marker in sorted((root / "vm" / "images").glob("*/.complete")):
        out[f"disk {marker.parent.name}"] = marker.read_text().strip()
    return out


def meminfo(vm: VmCluster) -> dict[str, int]:
    rc, out, err = vm.guest_exec(["cat", "/proc/meminfo"])
    if rc:
        raise RuntimeError(err)
    vals = {}
    for line in out.splitlines():
        k, _, rest = line.partition(":")
        vals[k] = int(rest.split()[0]) * 1024
    return vals


def pod_to_running(vm: VmCluster, timeout: float = 900) -> float:
    from kubernetes import client

    from e2e.observe import absent, once, sent, unless_overloaded

    core = client.CoreV1Api(vm.api())
    name = f"bench-{int(time.time())}"
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
           "spec": {"terminationGracePeriodSeconds": 1, "containers": [{
               "name": "main", "image": vm.stress_image, "imagePullPolicy": "Never", "args": ["pause"],
               "resources": {"requests": {"memory": "64Mi"}, "limits": {"memory": "128Mi"}}}]}}
    t0 = time.monotonic()
    once(f"pod {name} created", lambda: core.create_namespaced_pod("default", pod))
    missed: list[str] = []
    status = None
    try:
        # polled every 0.5 s, not with wait_for's backoff: the figure is the time to Running; each
        # read is bounded, and one the API server answers overloaded is a look lost
        while time.monotonic() - t0 < timeout:
            p = unless_overloaded(lambda: core.read_namespaced_pod(name, "default", _request_timeout=30), missed)
            status = p.status if p else status
            if status is not None and status.phase == "Running":
                return time.monotonic() - t0
            time.sleep(0.5)
        raise RuntimeError(f"pod {name} not Running after {timeout}s: {status}"
                           + (f"; {len(missed)} reads answered overloaded, the last: {missed[-1]}" if missed else ""))
    finally:
        sent(f"pod {name} deleted", lambda: core.delete_namespaced_pod(name, "default", grace_period_seconds=0),
             landed=absent)


def parser() -> cli.Parser:
    from clusters.vm.__main__ import k8s_version

    ap = cli.Parser(prog="python bench/vm_bench.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--behavior", type=cli.behavior, default="LimitedSwap")
    ap.add_argument("--kernel", choices=("6.12", "6.1"), default="6.12")
    ap.add_argument("--k8s-version", type=k8s_version, default=vbuild.DEFAULT_K8S_VERSION)
    ap.add_argument("--keep", action="store_true", help="leave the VM running")
    ap.add_argument("--state-dir", type=inputs.state_directory, default=None,
                    help="the VM's state directory (default <cache>/bench/vm-bench)")
    ap.add_argument("--debug", action="store_true", help="a failure's traceback too")
    return ap


def main(argv: list[str] | None = None) -> int:
    return cli.run(_main, parser().parse_args(argv), command="bench.vm_bench")


def _main(a: argparse.Namespace) -> int:
    vm = VmCluster(a.state_dir or cache_root() / "bench" / "vm-bench", k8s_version=a.k8s_version, kernel=a.kernel)
    refused = not_started_here(vm, "python -m clusters.vm down")
    if refused:
        raise cli.NotReady(refused)
    root = vm.cache_dir
    rows: list[tuple[str, str]] = [("host", host_description())]
    cold_needed = not all(c.is_cached(root) for c in (
        vbuild.containerd_component(), vbuild.runc_component(), vbuild.cni_component(), vbuild.etcd_component(),
        vbuild.Component("kubernetes", a.k8s_version, vbuild.K8S_COMMANDS)))
    cold_needed = cold_needed or not (root / "vm" / "rootfs" / vimage.rootfs_key(a.kernel) / ".complete").exists()
    if cold_needed:
        t0 = time.monotonic()
        vm.prepare()
        rows.append(("cold build (binaries + rootfs + disk)", f"{time.monotonic() - t0:.0f} s (measured now)"))
    else:
        rows.append(("cold build", "caches warm: recorded cold times below"))
    for k, v in recorded_build_times(root).items():
        rows.append((f"  recorded: {k}", v))
    started = None  # the VM this bench booted, as its state file recorded it
    try:
        t0 = time.monotonic()
        vm.up(a.behavior)  # a VM that does not come up is stopped by up() itself
        started = vm.state()
        warm = time.monotonic() - t0
        rows.append(("warm start: cached -> node Ready", f"{warm:.0f} s"))
        # what the guest really runs under (the host row's accelerator may be the firmware's estimate)
        rows.append(("  accelerator", "TCG" if vm.emulated() else "KVM"))
        for k in ("build", "image", "boot", "kubeadm_init", "boot_to_ready"):
            if k in vm.timings:
                rows.append((f"  phase {k}", f"{vm.timings[k]:.1f} s"))
        rows.append(("pod (stress image) create -> Running", f"{pod_to_running(vm):.1f} s"))
        mi = meminfo(vm)
        for k in ("MemTotal", "SwapTotal", "SwapFree"):
            rows.append((f"guest {k}", f"{mi[k]} bytes ({mi[k] / 1048576:.0f} MiB)"))
        st = vm.status()
        rows.append(("node", f"{st.get('kubelet_version')} kernel {st.get('kernel_release')} "
                             f"swap capacity {st.get('swap_capacity')}"))
    finally:
        if not a.keep and started_here(vm, started):
            vm.down(quiet=True)
    print_rows(rows)
    return cli.Exit.OK


def print_rows(rows: list[tuple[str, str]]) -> None:
    """The measurements as an aligned table on stdout and as JSON on stderr."""
    width = max(len(k) for k, _ in rows)
    print()
    for k, v in rows:
        print(f"{k.ljust(width)}  {v}")
    print(json.dumps(dict(rows)), file=sys.stderr)


if __name__ == "__main__":
    raise SystemExit(main())
