"""The mutant bench: build Kubernetes with each patch, run the conformance tests on it, and say
which tests caught it; then the unmodified build (which must pass).

    python -m bench.mutants [--k8s-version V] [--patches DIR] [--provider vm|kind] [-k EXPR]
                            [--mutant NAME ...] [--no-baseline] [--baseline-only] [--rerun]
                            [--results-dir results] [--kept DIR]

Each mutant runs ``pytest e2e --provider vm --k8s-version V --k8s-patch PATCH`` (one fresh VM,
its build cached by release and the patch's diff), restricted to the tests its header names
(``# tests:``, as -k) on the behaviors it names, or the full suite when it names none. The
release V is ``--k8s-version``, else $KSC_MUTANTS_RELEASE, else clusters/versions.py KUBERNETES;
on another minor a mutant runs as its variant rebased there, or not at all where its header
declares it not applicable (bench/mutants/releases.py): its row says n/a and why. Results are
kept per release, patch (its diff and the header lines that choose its run, not its prose:
``Mutant.content_hash``) and suite version under ``<results-dir>/mutants/``: a second run
resumes where the first stopped and re-runs a mutant only when that or the suite changed (or
``--rerun``).
``--kept DIR`` keeps them elsewhere (default ``<results-dir>/mutants``): a directory in the
checkout, committed, lets a bench longer than one sitting resume on another machine.
The unmodified release's baseline is the version matrix's gate-passed run of the same suite
where it kept one for every behavior the baseline runs (``--matrix-cells``), else it runs.
The table goes to stdout and ``<results-dir>/mutants.md`` (and, with ``--docs docs/mutants.md``, into
that page's generated block).

A mutant with a ``# base:`` (a prototype, e.g. clusters/prototypes/kep-5359.patch) is built
as release + base + mutant; its unmodified build is release + base, run as a baseline of its
own. The shared VM is then booted from release + base (its API server has the prototype's API)
and each such kubelet-only mutant's kubelet is swapped in, as for the release's mutants.

``--provider kind``: each build becomes a kind node image (``clusters.vm.nodeimage``), loaded
into the Docker host ``DOCKER_HOST`` names (the kind host VM: ``clusters.vm kind-host up``),
and the suite runs with ``--provider kind --node-image``.

``--provider vm`` runs every VM in a state directory of the bench's own (``--state-dir``, default
``<cache>/bench/vm-run``), never the one ``python -m clusters.vm`` and the suite use by default,
where someone else's VM may run; it holds that directory for the whole run, stops only a VM it
booted there itself (the pid and start time it recorded), and does not start while a VM it did
not boot runs there.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from bench import cells
from bench import mutants as model
from bench.mutants import blind, docs, releases, standing
from clusters import cli, commands, inputs, pidlock
from clusters.redact import redact
from clusters.vm import build as vbuild
from clusters.vm import k8s_source

ROOT = Path(__file__).resolve().parents[2]


def _say(line: str) -> None:
    print(redact(f"[mutants {time.strftime('%H:%M:%S')}] {line}"), file=sys.stderr, flush=True)


def _node_image(patches: list[Path], provider: str, release: str) -> list[str]:
    """kind: build the node image of this build and load it into the Docker host; its --node-image."""
    if provider != "kind":
        return []
    from clusters.vm import nodeimage

    built = nodeimage.build_node_image(k8s_source.release(release, patches), progress=_say)

    def docker(*args: str, timeout: float = 600):
        return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)

    nodeimage.load_and_bake(built, docker, progress=_say)
    return ["--node-image", built.ref]


def _release() -> str:
    """The release without --k8s-version: $KSC_MUTANTS_RELEASE, else clusters/versions.py KUBERNETES."""
    from clusters import versions

    return inputs.variable("KSC_MUTANTS_RELEASE", versions.KUBERNETES)


def _vm(*args: str) -> subprocess.CompletedProcess[str]:
    return commands.run([sys.executable, "-m", "clusters.vm", *args], timeout=None, capture_output=False, cwd=ROOT,
                        stdout=subprocess.PIPE, grace=commands.OWN_COMMAND_GRACE)


def default_state_dir() -> Path:
    from workloads.cache import cache_root

    return cache_root() / "bench" / "vm-run"


Started = tuple[int, float]  # a VM as its state directory records it: qemu's pid, its start time


def running_vm(state_dir: Path) -> Started | None:
    """The VM running in ``state_dir`` (its pid file names a live qemu of that directory), None
    when none runs there."""
    from clusters.vm import qemu

    pid = qemu.read_pid(qemu.VmPaths(state_dir))
    if pid is None:
        return None
    try:
        started = float(json.loads((state_dir / "state.json").read_text())["started_at"])
    except (OSError, ValueError, KeyError, TypeError):
        started = 0.0
    return pid, started


def not_ours(state_dir: Path, running: Started) -> str:
    return (f"a VM this bench did not start runs in {state_dir} (pid {running[0]}): it is left alone; stop it with"
            f" `python -m clusters.vm down --state-dir {shlex.quote(str(state_dir))}`, or give the bench another"
            " --state-dir")


_HELD: list[object] = []  # the state directories' lock files, open (so locked) until the process ends


def claim(state_dir: Path) -> str | None:
    """Hold ``state_dir`` for this bench until it exits; why not, when another bench holds it or
    a VM this bench did not start runs there."""
    try:
        handle = pidlock.take(state_dir / "bench.lock")
    except pidlock.Held as held:
        return (f"another bench (pid {held.holder}) runs its VMs in {state_dir}: wait for it, or give this one"
                " another --state-dir")
    _HELD.append(handle)
    running = running_vm(state_dir)
    return not_ours(state_dir, running) if running is not None else None


class SharedVm:
    """One VM for every kubelet-only mutant: booted once from the release, each mutant's kubelet
    swapped in (``clusters.vm swap-kubelet``: the node then reports that build), the suite run
    with --reuse-clusters. A node left unhealthy by a mutant is stopped; the next one boots anew.
    It lives in the bench's state directory, and is stopped only while it is the VM this bench
    booted there (the pid and start time recorded when it came up)."""

    def __init__(self, state_dir: Path | None = None, release: str | None = None) -> None:
        self.state_dir = state_dir or default_state_dir()
        self.release = release or _release()
        self.booted = False
        self.base: list[Path] = []  # the patches the running VM's whole build was made with
        self.started: Started | None = None  # the VM this bench booted, as its state directory recorded it

    def _vm(self, *args: str) -> subprocess.CompletedProcess[str]:
        return _vm(*args, "--state-dir", str(self.state_dir))

    def ours(self) -> bool:
        return self.started is not None and running_vm(self.state_dir) == self.started

    def stranger(self) -> str | None:
        """Why the bench must not boot here now: a VM it did not start runs in its state directory."""
        running = running_vm(self.state_dir)
        return not_ours(self.state_dir, running) if running is not None and running != self.started else None

    def ready(self) -> bool:
        out = self._vm("status")
        try:
            return out.returncode == 0 and bool(json.loads(out.stdout).get("node_ready"))
        except ValueError:
            return False

    def swap_in(self, patches: list[Path], base: list[Path]) -> str | None:
        """None when that build's kubelet runs on a Ready node booted from release + `base`; else why not."""
        if not (self.ours() and self.ready() and self.base == base):
            why = self.stranger()
            if why:
                return why
            self.down()
            from clusters.vm import qemu

            # another guest running: the bench ends here (exit 3), rather than every mutant NOT RUN
            qemu.ensure_alone(qemu.VmPaths(self.state_dir))
            built = k8s_source.release(self.release, base).build_id
            for attempt in (1, 2):  # under emulation kubeadm's 10 s API deadlines are sometimes missed
                _say(f"booting the shared VM ({built}), attempt {attempt}")
                up = self._vm("up", "--k8s-version", self.release, "--behavior", "LimitedSwap",
                              *[f"--k8s-patch={p}" for p in base])
                # nothing ran here before the up (stranger() above), and no other bench boots here: ours
                self.started = running_vm(self.state_dir)
                if up.returncode == 0:
                    break
                self.down()
            else:
                return f"the shared VM did not come up (exit {up.returncode}, twice)"
            self.booted, self.base = True, list(base)
        swap = self._vm("swap-kubelet", "--k8s-version", self.release, *[f"--k8s-patch={p}" for p in patches])
        return None if swap.returncode == 0 else f"swapping the kubelet in failed (exit {swap.returncode})"

    def after(self) -> None:
        if self.ours() and not self.ready():
            _say("the node is not Ready after this run: stopping the VM, the next run boots a fresh one")
            self.down()

    def down(self) -> None:
        """Stop the VM this bench booted, if it still runs; never another."""
        running = running_vm(self.state_dir)
        if running is not None and running == self.started:
            self._vm("down")
        elif running is not None:
            _say(not_ours(self.state_dir, running))
        self.booted, self.started = False, None


def run_one(name: str, patches: list[Path], behaviors: str | None, selection: list[str], label: str,
            provider: str, out_dir: Path, extra: list[str], shared: SharedVm | None = None,
            base: list[Path] | None = None, state_dir: Path | None = None, release: str | None = None) -> model.Outcome:
    """One pytest run of the suite on one build of ``release`` (default: the shared VM's, else
    _release()); live progress per test on stderr. vm: in the bench's ``state_dir``; without
    ``shared`` the run boots a VM of its own there (and stops it), so it does not start while a
    VM runs there (the run would stop it first)."""
    release = release or (shared.release if shared is not None else _release())
    out_dir.mkdir(parents=True, exist_ok=True)
    junit = out_dir / "junit.xml"
    junit.unlink(missing_ok=True)
    build = k8s_source.release(release, patches).build_id
    t0 = time.monotonic()
    try:
        image_args = _node_image(patches, provider, release)
    except Exception as error:  # noqa: BLE001 - a build that fails is this mutant's result
        out = model.judge(name, build, None, None, str(error))
        out.seconds, out.selection = time.monotonic() - t0, label
        return out
    state_dir = shared.state_dir if shared is not None else state_dir or default_state_dir()
    running = running_vm(state_dir) if provider == "vm" and shared is None else None
    if running is not None:
        out = model.judge(name, build, None, None, not_ours(state_dir, running))
        out.seconds, out.selection = time.monotonic() - t0, label
        return out
    if shared is not None:
        why = shared.swap_in(patches, base or [])
        if why:
            out = model.judge(name, build, None, None, why)
            out.seconds, out.selection = time.monotonic() - t0, label
            return out
        extra = [*extra, "--reuse-clusters"]
        label += " (shared VM)" if patches else " (shared VM, before any mutant)"
    argv = [sys.executable, "-m", "pytest", "e2e", "--provider", provider, "-p", "no:cacheprovider",
            "-v", "--results-dir", str(out_dir), "--junitxml", str(junit), *image_args, *selection, *extra]
    if provider == "vm":  # the release too: the suite's own default is clusters/versions.py KUBERNETES
        argv += ["--k8s-version", release, *[f"--k8s-patch={p}" for p in patches], "--vm-state-dir", str(state_dir)]
    argv += ["--behaviors", behaviors or standing.BOTH]
    _say(f"{name}: {shlex.join(argv[1:])}")
    log = out_dir / "pytest.log"
    tail: list[str] = []
    with open(log, "w") as f:
        # interrupted: the run tears down what it made, then its group goes
        with commands.started(argv, commands.OWN_COMMAND_GRACE, cwd=ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, drained=f.write, text=True) as proc:
            assert proc.stdout is not None  # noqa: S101 - narrows the type: stdout=PIPE
            for line in proc.stdout:
                f.write(line)
                f.flush()  # the log is read while the run goes on
                tail = (tail + [line])[-40:]
                words = line.split()
                if any(w in ("PASSED", "FAILED", "ERROR", "SKIPPED") for w in words[1:3]) and "::" in words[0]:
                    _say(f"{name}: {words[0].rsplit('::', 1)[-1]} {words[1]} ({time.monotonic() - t0:.0f}s)")
                elif "kube-swap-conformance [" in line and ("vm:" in line) and ("building" in line or "Ready" in line
                                                                                  or "booting" in line):
                    _say(f"{name}: {line.split('] ', 1)[-1].strip()}")
            rc = proc.wait()
    if shared is not None:
        shared.after()
    out = model.judge(name, build, junit, rc, "".join(tail))
    out.seconds, out.selection = time.monotonic() - t0, label
    if out.verdict == model.NOT_RUN and not out.detail:
        out.detail = f"pytest exit {rc}; log {log}"
    return out


def scope_args(a: argparse.Namespace, selection: list[str], behaviors: str | None) -> list[str]:
    """pytest's arguments that chose what a run of the bench took in (run_one's, less those that
    only say where it runs), for the result's scope (standing.scope)."""
    return ["--provider", a.provider, *selection, *a.pytest_args, "--behaviors", behaviors or standing.BOTH]


def _baseline_path(a: argparse.Namespace, base: Path | None, keep: Path) -> Path:
    if base is None:
        return standing.baseline_path(keep, a.release, a.provider)
    return keep / f"baseline-{base.stem}-{k8s_source.release(a.release, [base]).build_id}-{a.provider}.json"


def _kept_baseline(a: argparse.Namespace, mutants: list[model.Mutant], base: Path | None, suite: str,
                   keep: Path, say: Callable[[str], None] | None = None) -> model.Outcome | None:
    """The unmodified build's kept result, while it is of this suite and covers these mutants'
    tests and behaviors."""
    if a.rerun:
        return None
    _, label, behaviors = standing.baseline_selection(mutants, a.k)
    return standing.kept_baseline(_baseline_path(a, base, keep), suite, label, behaviors, say)


def _matrix_baseline(a: argparse.Namespace, mutants: list[model.Mutant], base: Path | None, suite: str,
                     say: Callable[[str], None] | None = None) -> model.Outcome | None:
    """The version matrix's gate-passed run of the release as these mutants' baseline. A matrix
    run of the release is the full suite, with no pytest arguments: it stands for a baseline that
    adds none (-k only narrows it). A prototype's build (release + base) is no matrix cell's."""
    if base is not None or a.rerun or a.pytest_args:
        return None
    _, _, behaviors = standing.baseline_selection(mutants, a.k)
    return standing.from_matrix(a.matrix_cells, a.release, a.provider, behaviors, suite, say)


def _baseline(a: argparse.Namespace, mutants: list[model.Mutant], base: Path | None, suite: str, keep: Path,
              runs: Path, share_all: bool, shared: SharedVm) -> model.Outcome:
    """The unmodified build of these mutants (the release, or the release with their base),
    on every test and behavior any of them runs; kept while the suite and the base are unchanged."""
    selection, label, behaviors = standing.baseline_selection(mutants, a.k)
    patches = [base] if base is not None else []
    name = "baseline" if base is None else f"baseline-{base.stem}"
    kept = _baseline_path(a, base, keep)
    o = _kept_baseline(a, mutants, base, suite, keep, _say)
    if o is not None:
        _say(f"{name}: kept result ({len(o.failed) + len(o.errors)} failed), what it ran unchanged on suite {suite}")
        return o
    o = _matrix_baseline(a, mutants, base, suite, _say)
    if o is not None:
        _say(f"{name}: {o.selection}")
        kept.write_text(o.to_json())
        return o
    _say(f"{name}: the unmodified {k8s_source.release(a.release, patches).build_id} ({label})")
    if a.provider == "vm" and not share_all:
        shared.down()
    taken = standing.before_run(scope_args(a, selection, behaviors))
    o = run_one(name, patches, behaviors, selection, label, a.provider, runs / f"{name}-{a.release}-{a.provider}",
                a.pytest_args, shared if share_all else None, patches, state_dir=shared.state_dir, release=a.release)
    return standing.keep(o, kept, taken, say=_say)


def _run_mutant(a: argparse.Namespace, i: int, m: model.Mutant, total: int, suite: str, keep: Path, runs: Path,
                shared: SharedVm) -> model.Outcome:
    """One mutant (the form that runs on the release: releases.on): its kept result while its
    build (release, base and patch) and the suite are unchanged, else a run."""
    kept = standing.mutant_path(keep, m, a.release, a.provider)
    o = None if a.rerun else standing.kept_result(keep, m, a.release, a.provider, suite, _say)
    if o is not None:
        _say(f"[{i}/{total}] {m.name}: kept result ({o.verdict}), what it ran unchanged on suite {suite}")
        return o
    selection, label = standing.selection(a.k, m.tests)
    _say(f"[{i}/{total}] {m.name}: {m.wrong} ({label})")
    share = a.provider == "vm" and not a.fresh_vm and m.binaries == ["kubelet"]
    if a.provider == "vm" and not share:
        shared.down()  # this one boots its own VM with the whole build
    base = [m.base] if m.base is not None else []
    out_dir = runs / f"{m.name}-{m.content_hash}-{a.release}-{a.provider}"

    def run(on: SharedVm | None) -> model.Outcome:
        return run_one(m.name, m.patches, m.behaviors, selection, label, a.provider, out_dir, a.pytest_args, on, base,
                       state_dir=shared.state_dir, release=a.release)

    taken = standing.before_run(scope_args(a, selection, m.behaviors))
    o = run(shared if share else None)
    if share and o.verdict == model.NOT_RUN:
        # Swapping a kubelet in can break what the shared node runs, not what the mutant is
        # about: one whose container hash differs re-creates every container, the control
        # plane's too, and the suite met an API server still starting (403, refused). The node
        # is not trusted any more (the next mutant boots anew), and this one gets its own VM.
        why = o.detail.partition("\n")[0][:200]
        _say(f"[{i}/{total}] {m.name}: could not test on the shared VM ({why}); "
             "stopping it, and running this mutant on a fresh VM of its build")
        shared.down()
        o = run(None)
    elif share and o.unjudged:
        # The run judged its mutant, but the API server was lost or refused the suite on the way:
        # the control plane had been re-created (a kubelet whose container hash differs) or fell
        # over. The next mutant's kubelet would re-create whatever this one wrote again, under its
        # tests (mutant 31, then 32, on v1.36.5): that node is not trusted for another mutant.
        _say(f"[{i}/{total}] {m.name}: the API server was lost or refused the suite during this run"
             f" ({', '.join(o.unjudged)}); stopping the shared VM, the next mutant boots a fresh one")
        shared.down()
    standing.keep(o, kept, taken, say=_say)
    caught_by = ", ".join(sorted({t.rsplit('::', 1)[-1] for t in model.seen(o)})) or o.detail
    _say(f"[{i}/{total}] {m.name}: {o.verdict} in {o.seconds / 60:.1f} min ({caught_by})")
    return o


def _blind_path(a: argparse.Namespace, group: list[model.Mutant], keep: Path) -> Path:
    return keep / f"blind-{blind.key(group)}-{a.release}-{a.provider}.json"


def _kept_blind(a: argparse.Namespace, group: list[model.Mutant], suite: str, keep: Path,
                say: Callable[[str], None] | None = None) -> model.Outcome | None:
    """A group's kept result, while the suite, its patches and its selection are unchanged (a run
    asked to --rerun takes none; the docs' table, after it, takes what it kept)."""
    _, label = blind.selection(group, a.k, a.pytest_args)
    o = standing.read(_blind_path(a, group, keep), say)
    return o if o is not None and standing.holds(o, suite) and o.selection == label else None


def _blind_not_applicable(a: argparse.Namespace, forms: list[model.Mutant | releases.NotApplicable]
                          ) -> list[tuple[list[model.Mutant] | str, model.Outcome]]:
    """The rows of the mutants with tests of their own that the release has no rule for."""
    return [(f.name, model.Outcome(f.name, a.release, model.NOT_APPLICABLE, detail=f.reason))
            for f in forms if isinstance(f, releases.NotApplicable) and f.name in blind.OWN_TESTS]


def _blind(a: argparse.Namespace, forms: list[model.Mutant | releases.NotApplicable], suite: str, keep: Path,
           runs: Path, shared: SharedVm) -> int:
    """Each group's build on the suite without the group's own tests (bench/mutants/blind.py),
    kept while the suite, the patches and that selection are unchanged. Exit 1 unless every
    group survived."""
    mutants = [f for f in forms if isinstance(f, model.Mutant)]
    done = _blind_not_applicable(a, forms)
    groups = blind.groups(mutants, blind.applies_on(a.release, vbuild.go_env()))
    _say(f"blind: {len(groups)} build(s) for {sum(map(len, groups))} mutant(s) with tests of their own")
    for i, group in enumerate(groups, 1):
        name = f"blind-{blind.key(group)}"
        selection, label = blind.selection(group, a.k, a.pytest_args)
        kept = _blind_path(a, group, keep)
        o = None if a.rerun else _kept_blind(a, group, suite, keep, _say)
        if o is not None:
            _say(f"[{i}/{len(groups)}] {name}: kept result ({o.verdict}), what it ran unchanged on suite {suite}")
        else:
            _say(f"[{i}/{len(groups)}] {name}: {', '.join(m.name for m in group)} together, on {label}")
            out_dir = runs / f"{name}-{a.release}-{a.provider}"
            taken = standing.before_run(scope_args(a, selection, blind.behaviors(group)))
            o = run_one(name, blind.patches_of(group), blind.behaviors(group), selection, label, a.provider,
                        out_dir, a.pytest_args, None, state_dir=shared.state_dir, release=a.release)
            judged = blind.judged(o, _refused_skips(out_dir / "junit.xml", blind.behaviors(group)))
            o = standing.keep(judged, kept, taken, say=_say)
        done.append((group, o))
        _say(f"[{i}/{len(groups)}] {name}: {blind.verdict(o)}")
    today = dt.date.today().isoformat()
    table = blind.table(done, today, a.release)
    (a.results_dir / "blind.md").write_text(table)
    print(table, end="")
    if a.docs is not None:
        docs.write_blind(a.docs, a.release, blind.table(_every_blind_group(a, suite, keep), today, a.release),
                         suite, a.provider)
    ran = [o for _, o in done if o.verdict != model.NOT_APPLICABLE]
    return cli.Exit.OK if all(o.verdict == model.SURVIVED for o in ran) else cli.Exit.FAILED


def _every_blind_group(a: argparse.Namespace, suite: str,
                       keep: Path) -> list[tuple[list[model.Mutant] | str, model.Outcome | None]]:
    """The docs' table: every group of the bench's mutants on the release (not only those this run
    took), each by its result kept for this suite, None where it has none, so the page never reads
    as complete when a group has no result."""
    forms = [releases.on(m, a.release, None) for m in model.load(a.patches) if m.name in blind.OWN_TESTS]
    groups = blind.groups([f for f in forms if isinstance(f, model.Mutant)], blind.applies_on(a.release, vbuild.go_env()))
    return [*_blind_not_applicable(a, forms), *((g, _kept_blind(a, g, suite, keep)) for g in groups)]


def builds(a: argparse.Namespace, forms: list[model.Mutant | releases.NotApplicable],
           suite: str, keep: Path) -> list[tuple[str, list[Path]]]:
    """(name, patches) of each build the bench's runs would make: each base's unmodified build
    whose baseline does not stand (and is not left out by --no-baseline), then each mutant whose
    kept result does not stand; with --blind each group whose kept result does not stand. The
    release's own build is not listed: every patched build starts from it."""
    quiet: Callable[[str], None] = lambda line: None  # noqa: E731 - what is kept is the runs' to say
    mutants = [f for f in forms if isinstance(f, model.Mutant)]
    if a.blind:
        found = blind.groups(mutants, blind.applies_on(a.release, vbuild.go_env()))
        out = [(f"blind-{blind.key(g)}", blind.patches_of(g)) for g in found
               if a.rerun or _kept_blind(a, g, suite, keep, quiet) is None]
        return out
    out = []
    if not a.no_baseline:
        for b in list(dict.fromkeys(m.base for m in mutants)) or [None]:
            of_base = [m for m in mutants if m.base == b]
            if _kept_baseline(a, of_base, b, suite, keep, quiet) is None \
                    and _matrix_baseline(a, of_base, b, suite, quiet) is None:
                out.append((f"baseline-{b.stem}" if b is not None else "baseline", [b] if b is not None else []))
    out += [(m.name, m.patches) for m in mutants
            if standing.kept_result(keep, m, a.release, a.provider, suite, quiet) is None or a.rerun]
    return out


def build_ahead(a: argparse.Namespace, forms: list[model.Mutant | releases.NotApplicable]) -> int:
    """--build-only: every build of ``builds``, its binaries into the cache the runs read, at the
    lowest CPU priority (it is meant to run beside a VM). The binaries only, on kind too: a node
    image is 1.4 GiB and the cache keeps the last two (clusters/vm/nodeimage.py), so images made
    ahead would be pruned before their runs; a run assembles its image from the cached binaries.
    A build that fails is said and the next goes on; exit 1 if any failed."""
    from clusters.checks import PreflightError
    from clusters.preflight import check_cache_dir

    room = check_cache_dir()
    if not room.ok:
        raise PreflightError([room])
    os.nice(19)
    keep = a.kept or a.results_dir / "mutants"
    todo = builds(a, forms, model.suite_hash(ROOT), keep)
    _say(f"build only: {len(todo)} build(s) of {a.release} (binaries, for --provider {a.provider})")
    failed: list[str] = []
    for i, (name, patches) in enumerate(todo, 1):
        source = k8s_source.release(a.release, patches)
        t0 = time.monotonic()
        try:
            vbuild.build_all(source, progress=_say)
        except Exception as error:  # noqa: BLE001 - one build's failure is its row, the next goes on
            failed.append(name)
            _say(f"[{i}/{len(todo)}] {name}: build {source.build_id} FAILED: {str(error).splitlines()[0][:300]}")
            continue
        _say(f"[{i}/{len(todo)}] {name}: {source.build_id} ready ({time.monotonic() - t0:.0f} s)")
    if failed:
        _say(f"{len(failed)} build(s) failed: {', '.join(failed)} (their runs will say NOT RUN)")
    return cli.Exit.FAILED if failed else cli.Exit.OK


def _refused_skips(junit: Path, behaviors: str) -> list[str]:
    """The skips of a run on ``behaviors`` (the run's --behaviors) that the release gate would not
    accept (e2e/verdict.py accepted_skip), read as the version matrix reads a cell's
    (bench/cells.py). A test of a behavior the run left out is in no cell of it, as in the
    matrix: its skip ("not selected") is the run's scope, not a test it lost."""
    from e2e import verdict

    if not junit.is_file():
        return []
    try:
        ran = set(behaviors.split(","))
        tests = [r for r, _ in cells.read_junit(junit) if r.behavior in ran]
    except inputs.UsageError:
        return []  # a report cut short: judge() already said the run could not test
    return sorted({f"{r.nodeid}: {r.reason}" for r in tests if r.outcome == "skipped"
                   and not verdict.accepted_skip(r.behavior, r.module, r.reason, r.function)})


def parser() -> cli.Parser:
    ap = cli.Parser(prog="python -m bench.mutants", description=__doc__.split("\n\n")[0])
    ap.add_argument("--k8s-version", type=inputs.release, default=None, metavar="V",
                    help="the release to patch and run on (default $KSC_MUTANTS_RELEASE, else clusters/versions.py"
                         " KUBERNETES): a supported minor's pin, e.g. v1.34.12; each mutant runs as its variant rebased"
                         " onto that minor where it has one, and not at all (n/a) where its header says so")
    ap.add_argument("--patches", type=inputs.patch_directory, default=model.HERE,
                    help="directory of *.patch mutants (default: bench/mutants)")
    ap.add_argument("--provider", choices=releases.PROVIDERS, default="vm")
    ap.add_argument("-k", dest="k", type=inputs.pytest_expression, default=None,
                    help="also restrict every run to these tests (pytest -k)")
    ap.add_argument("--mutant", action="append", type=inputs.name, default=[],
                    help="only this mutant (name or file stem); repeatable")
    only = ap.add_mutually_exclusive_group()  # argparse's own check: "not allowed with argument ..."
    only.add_argument("--no-baseline", action="store_true", help="skip the unmodified build's run")
    only.add_argument("--baseline-only", action="store_true", help="only the unmodified build's run")
    only.add_argument("--blind", action="store_true",
                      help="instead: was the suite blind to these mutants before their own tests? Each group of"
                           " mutants with tests of their own (bench/mutants/blind.py) runs on one build carrying"
                           " them all, on the whole suite without those tests; each must survive")
    ap.add_argument("--build-only", action="store_true",
                    help="only build what the runs would need and do not find kept (each mutant's Kubernetes, or"
                         " with --blind each group's: its binaries; a kind run assembles its node image from them),"
                         " cached, and stop; nothing boots. It runs at the lowest CPU priority (nice 19): beside a"
                         " running VM, it readies the next bench's builds")
    ap.add_argument("--rerun", action="store_true", help="run again even where a kept result matches")
    ap.add_argument("--results-dir", type=inputs.output_directory, default=ROOT / "results")
    ap.add_argument("--kept", type=inputs.output_directory, default=None, metavar="DIR",
                    help="where each mutant's and baseline's result is kept, read back and resumed from (default"
                         " <results-dir>/mutants); a directory in the checkout, committed, lets a bench longer than"
                         " one sitting resume on another machine")
    ap.add_argument("--matrix-cells", type=inputs.source_directory, default=standing.MATRIX_CELLS,
                    metavar="DIR",
                    help="the version matrix's kept cells (default: docs/measurements/matrix-cells): where this suite"
                         " already passed the gate on the unmodified release, on every behavior the baseline runs,"
                         " those cells are the baseline and it is not run again (not with --rerun or pytest arguments"
                         " after --)")
    ap.add_argument("--fresh-vm", action="store_true",
                    help="vm: boot a fresh VM for every mutant (default: kubelet-only mutants share one VM and"
                         " swap their kubelet in; others always get a fresh VM)")
    ap.add_argument("--state-dir", type=inputs.state_directory, default=None,
                    help="vm: the state directory of the bench's VMs (default <cache>/bench/vm-run); the bench"
                         " holds it while it runs and stops only a VM it booted there")
    ap.add_argument("--docs", type=inputs.existing_file, default=None, metavar="FILE",
                    help="also write the table into FILE's generated block (docs/mutants.md: its results on the"
                         " current code come from the bench itself, never by hand); with --blind, its blind block:"
                         " every group, from the results kept for this suite")
    ap.add_argument("--debug", action="store_true", help="a failure's traceback too")
    ap.add_argument("pytest_args", nargs="*", type=inputs.pytest_arg,
                    help="after --: more pytest arguments for every run")
    return ap


def main(argv: list[str] | None = None) -> int:
    return cli.run(_main, parser().parse_args(argv), command="bench.mutants")


def _checked(a: argparse.Namespace) -> list[model.Mutant | releases.NotApplicable]:
    """Everything the bench takes from outside, before it claims a state directory or builds:
    the options of one provider only, the release (``a.release``), the mutants named and their
    form on that release, the pytest arguments."""
    from clusters import versions

    if a.provider == "kind":
        given = [f for f, v in (("--fresh-vm", a.fresh_vm), ("--state-dir", a.state_dir)) if v]
        if given:
            raise cli.UsageError(f"{given[0]} is for --provider vm (the bench's VMs); --provider kind runs on the kind"
                                 f" host DOCKER_HOST names: drop {given[0]}")
    if a.build_only:
        given = [f for f, v in (("--docs", a.docs), ("--fresh-vm", a.fresh_vm), ("--state-dir", a.state_dir),
                                ("--baseline-only", a.baseline_only), ("pytest arguments after --", a.pytest_args))
                 if v]
        if given:
            raise cli.UsageError(f"{given[0]} is not for --build-only (it builds, and nothing runs): drop {given[0]}")
    if a.blind and a.fresh_vm:
        raise cli.UsageError("--fresh-vm is not for --blind (each group boots a VM of its own build): drop --fresh-vm")
    a.release = a.k8s_version or _release()
    given = f"--k8s-version {a.release}" if a.k8s_version else f"KSC_MUTANTS_RELEASE={a.release}"
    refused = versions.out_of_range(given, a.release)
    if refused:
        raise cli.UsageError(f"{refused}; {versions.PICK_A_RELEASE}")
    try:
        mutants = model.load(a.patches)
    except k8s_source.SourceError as error:
        raise cli.UsageError(str(error)) from None
    if a.mutant:
        wanted = set(a.mutant)
        mutants = [m for m in mutants if m.name in wanted or m.patch.path.stem in wanted]
        missing = wanted - {m.name for m in mutants} - {m.patch.path.stem for m in mutants}
        if missing:
            raise cli.UsageError(f"--mutant: no mutant named {', '.join(sorted(missing))} in {a.patches}")
    try:  # a malformed `# not-applicable:` line, or a variant that contradicts one: now, not mid-run
        # A blind run is the rest of the suite, which any provider runs: a mutant's own tests
        # needing another provider does not keep it out.
        forms = [releases.on(m, a.release, None if a.blind else a.provider) for m in mutants]
    except k8s_source.SourceError as error:
        raise cli.UsageError(str(error)) from None
    if a.pytest_args:
        problem = pytest_args_problem(a.provider, a.pytest_args)
        if problem:
            raise cli.UsageError(problem)
    if a.docs is not None:
        try:  # a page without the block is refused now, not after hours of runs
            docs.block(a.docs, docs.BLIND if a.blind else "mutants")
        except (OSError, ValueError) as error:
            raise cli.UsageError(f"--docs {a.docs}: {error}") from None
    return forms


def pytest_args_problem(provider: str, args: list[str]) -> str | None:
    """What pytest says of the arguments the bench would add to every run, asked once now with
    --collect-only (the suite's options are checked there, nothing is built): a bad one found
    before the first build, not after it."""
    try:
        done = standing.collect(["--provider", provider, *args], ROOT)
    except subprocess.TimeoutExpired:
        return f"pytest {shlex.join(args)} --collect-only did not finish in 300 s"
    if done.returncode != 4:
        return None
    said = [line for line in done.stderr.splitlines() if "error" in line.lower()] or done.stderr.splitlines()[-1:]
    return f"the pytest arguments after -- ({shlex.join(args)}): {said[-1].removeprefix('ERROR: ') if said else 'refused'}"


def _main(a: argparse.Namespace) -> int:
    forms = _checked(a)
    if not forms and not a.baseline_only:
        raise cli.UsageError(f"--patches {a.patches}: no *.patch in it")
    if a.blind and not any(f.name in blind.OWN_TESTS for f in forms):
        raise cli.UsageError("--blind: none of these mutants has tests of its own (bench/mutants/blind.py OWN_TESTS)")
    if a.build_only:
        return build_ahead(a, forms)
    suite = model.suite_hash(ROOT)
    runs = a.results_dir / "mutants"  # each run's junit.xml, report and pytest.log
    keep = a.kept or runs
    if a.provider == "kind" and not os.environ.get("DOCKER_HOST"):
        # Asked before anything boots; a bench whose every result is kept (writing --docs again)
        # runs nothing and needs no host.
        todo = builds(a, forms, suite, keep)
        if todo:
            raise cli.NotReady(f"--provider kind needs the kind host's DOCKER_HOST for {len(todo)} run(s)"
                               f" ({', '.join(name for name, _ in todo[:3])}{', ...' if len(todo) > 3 else ''}):"
                               " eval \"$(python -m clusters.vm kind-host up)\"")
    shared = SharedVm(a.state_dir, a.release)
    refused = claim(shared.state_dir) if a.provider == "vm" else None
    if refused:
        raise cli.NotReady(refused)
    for d in (runs, keep):
        d.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    today = dt.date.today().isoformat()
    numbered = list(enumerate(forms, 1))
    # A mutant not applicable to the release is a row of the table, never a run.
    results: dict[int, model.Outcome] = {}
    for i, f in [] if a.baseline_only else numbered:
        if isinstance(f, releases.NotApplicable):
            _say(f"[{i}/{len(forms)}] {f.name}: not applicable to {a.release}: {f.reason}")
            results[i] = model.Outcome(f.name, a.release, model.NOT_APPLICABLE, detail=f.reason)
    runnable = [(i, f) for i, f in numbered if isinstance(f, model.Mutant)]
    # vm: kubelet-only mutants share one VM per base (the release, a prototype); each base's
    # unmodified build runs first on it, before any mutant's kubelet has touched the node (a
    # fresh VM of that build; unless the matrix's run is the baseline, and the first mutant boots
    # it), then that base's mutants, so the VM boots once per base. No
    # mutant at all (--baseline-only on an empty directory): the release's baseline alone.
    if a.blind:
        try:
            return _blind(a, forms, suite, keep, runs, shared)
        finally:
            if a.provider == "vm":
                shared.down()
    baselines: list[model.Outcome] = []
    bases = list(dict.fromkeys(m.base for _, m in runnable)) or ([None] if not forms else [])

    def text() -> str:
        return model.table([results[i] for i in sorted(results)], baselines, today, a.release)

    try:
        for base in bases:
            group = [m for _, m in runnable if m.base == base]
            share_all = a.provider == "vm" and not a.fresh_vm and all(m.binaries == ["kubelet"] for m in group)
            if not a.no_baseline:
                baselines.append(_baseline(a, group, base, suite, keep, runs, share_all, shared))
            for i, m in [] if a.baseline_only else [(i, m) for i, m in runnable if m.base == base]:
                results[i] = _run_mutant(a, i, m, len(forms), suite, keep, runs, shared)
                (a.results_dir / "mutants.md").write_text(text())
    finally:  # finished or interrupted: the shared VM this bench booted goes (never another)
        if a.provider == "vm":
            shared.down()
    table = text()
    (a.results_dir / "mutants.md").write_text(table)
    if a.docs is not None:
        docs.write(a.docs, a.release, table, suite, len(results), len(model.load(a.patches)), a.provider)
    print(table, end="")
    _say(f"bench took {(time.monotonic() - started) / 60:.1f} min; table in {a.results_dir / 'mutants.md'}")
    alarms = any(b.failed or b.errors for b in baselines)
    return cli.Exit.FAILED if alarms else cli.Exit.OK


if __name__ == "__main__":
    raise SystemExit(main())
