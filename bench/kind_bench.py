"""Benchmark of the kind path on the kind host VM (not a test); prints a table and JSON.

    python bench/kind_bench.py [--cold] [--suite] [--keep] [--state-dir DIR]

* node image: ``--cold`` drops the kind-node rootfs and image caches first and measures the
  build from the cached Go binaries (their own cold build is bench/vm_bench.py's figure);
  then the cached build (hashing inputs only).
* kind host start: boot -> Docker answers, then loading and baking the node image.
* ``kind create cluster`` of the suite's one cluster, through its KindProvider (the config
  rendered from the committed ones, the emulated-host profile under TCG), until a worker per
  behavior is Ready running it (the switched workers' kubelet restarts included).
* ``--suite``: the whole conformance suite for NoSwap and LimitedSwap on kind, with ``-n 2``
  and without ``-n`` (each on fresh clusters), as subprocesses: wall time and the summary line.

Everything it creates is deleted at the end (``--keep`` leaves the kind host up). The kind host
runs in a state directory of the bench's own (default ``<cache>/bench/kind-host``), never the
one ``python -m clusters.vm kind-host`` uses, whose host may be someone else's; the bench does
not start while a kind host runs there, and stops only the one it booted.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.vm_bench import host_description, not_started_here, print_rows, started_here  # noqa: E402
from clusters import cli, commands, inputs, kind_config, shared  # noqa: E402
from clusters.behaviors import LIMITED_SWAP, NO_SWAP  # noqa: E402
from clusters.kind_provider import KindProvider  # noqa: E402
from clusters.vm import nodeimage  # noqa: E402
from clusters.vm.kindhost import CONFIG_PATCH_ENV, KindHost  # noqa: E402
from workloads.cache import cache_root  # noqa: E402

BEHAVIORS = (NO_SWAP, LIMITED_SWAP)


def timed(rows: list[tuple[str, str]], label: str, fn):
    t0 = time.monotonic()
    result = fn()
    rows.append((label, f"{time.monotonic() - t0:.0f} s"))
    return result


def run_suite(env: dict[str, str], image: str, workers: int | None) -> tuple[float, str]:
    argv = [sys.executable, "-m", "pytest", "e2e", "--provider", "kind", "--behaviors", ",".join(BEHAVIORS),
            "--node-image", image, "-p", "no:cacheprovider", "-q"]
    if workers:
        argv += ["-n", str(workers)]
    t0 = time.monotonic()
    done = commands.run(argv, timeout=None, cwd=REPO, env=env, grace=commands.OWN_COMMAND_GRACE)  # removes its clusters
    lines = [line for line in done.stdout.splitlines() if re.search(r"\d+ (passed|failed)", line)]
    return time.monotonic() - t0, (lines[-1].strip("= ") if lines else f"exit {done.returncode}")


def parser() -> cli.Parser:
    ap = cli.Parser(prog="python bench/kind_bench.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--cold", action="store_true", help="rebuild the node image's rootfs and archive first")
    ap.add_argument("--suite", action="store_true", help="also run the whole suite with -n 2 and without -n")
    ap.add_argument("--keep", action="store_true", help="leave the kind host running")
    ap.add_argument("--state-dir", type=inputs.state_directory, default=None,
                    help="the kind host's state directory (default <cache>/bench/kind-host)")
    ap.add_argument("--debug", action="store_true", help="a failure's traceback too")
    return ap


def main(argv: list[str] | None = None) -> int:
    return cli.run(_main, parser().parse_args(argv), command="bench.kind_bench")


def _main(a: argparse.Namespace) -> int:
    root = cache_root()
    host = KindHost(a.state_dir or root / "bench" / "kind-host")
    refused = not_started_here(host, "python -m clusters.vm kind-host down")
    if refused:
        raise cli.NotReady(refused)
    rows: list[tuple[str, str]] = [("host", host_description())]

    if a.cold:
        shutil.rmtree(root / "vm" / "rootfs" / nodeimage.RECIPE.key(), ignore_errors=True)
        shutil.rmtree(root / "vm" / "kind-node", ignore_errors=True)
        built = timed(rows, "node image, cold (rootfs + parts + archive; Go binaries cached)",
                      nodeimage.build_node_image)
    else:
        built = nodeimage.build_node_image()
    timed(rows, "node image, cached", nodeimage.build_node_image)
    rows.append(("  archive", f"{built.archive.stat().st_size >> 20} MiB, {built.ref}"))

    # a kind host that does not come up is stopped by up() itself
    state = timed(rows, "kind host start (boot, Docker, load + bake the node image)", lambda: host.up([built]))
    for name, seconds in host.timings.items():
        rows.append((f"  {name}", f"{seconds:.0f} s"))
    rows.append(("  accelerator", state.accel))
    env = dict(os.environ, **state.env(), PATH=f"{Path.home() / 'go' / 'bin'}{os.pathsep}{os.environ['PATH']}")
    kind = shutil.which("kind", path=env["PATH"]) or "kind"
    try:
        os.environ.update(state.env())
        run_dir = Path(tempfile.mkdtemp(prefix="ksc-bench-"))
        patch = env.get(CONFIG_PATCH_ENV)
        provider = KindProvider(kind, built.ref, run_dir, reuse=False, api_ports=state.api_ports,
                                config_patch=Path(patch) if patch else None, behaviors=BEHAVIORS)
        try:
            timed(rows, f"kind create cluster {kind_config.MIXED_CLUSTER} -> a worker per behavior Ready",
                  lambda: provider.node_for(BEHAVIORS[0]))
            for behavior in BEHAVIORS:
                node = provider.node_for(behavior)
                rows.append((f"  {node.name}", f"{node.behavior}, {node.kubelet_version}, kernel {node.kernel},"
                                               f" memory {node.memory_capacity}, swap {node.swap_capacity}"))
        finally:
            for message in provider.teardown(shared.created(run_dir)):
                rows.append(("  teardown", message))
            shutil.rmtree(run_dir, ignore_errors=True)
        if a.suite:
            for workers in (2, None):
                seconds, summary = run_suite(env, built.ref, workers)
                rows.append((f"suite NoSwap+LimitedSwap on kind, {'-n 2' if workers else 'no -n'}",
                             f"{seconds:.0f} s: {summary}"))
    finally:
        if not a.keep and started_here(host, state):
            host.down(quiet=True)
    print_rows(rows)
    return cli.Exit.OK


if __name__ == "__main__":
    raise SystemExit(main())
