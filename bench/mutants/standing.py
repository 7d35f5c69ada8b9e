"""Where the mutant bench stands on a release, read from the results it kept (``--kept``): the
unmodified build's baseline and each mutant's verdict on the current suite. The version matrix's
page shows it per minor (bench/matrix.py)."""
from __future__ import annotations

import functools
import re
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from bench import mutants as model
from bench.cells import PASSED, read_json, read_kept
from bench.mutants import releases
from clusters.vm import k8s_source

KEPT = model.HERE.parents[1] / "docs" / "measurements" / "mutant-results"  # the bench's --kept in the checkout
MATRIX_CELLS = model.HERE.parents[1] / "docs" / "measurements" / "matrix-cells"  # bench.matrix's --kept in the checkout
BOTH = "NoSwap,LimitedSwap"
_FULL = re.compile(r"full suite on ([\w,]+)")


def collect(args: Sequence[str], root: Path = model.PROJECT) -> subprocess.CompletedProcess[str]:
    """pytest's --collect-only of the suite with these arguments (nothing is built or booted);
    raises OSError or subprocess.TimeoutExpired (300 s)."""
    argv = [sys.executable, "-m", "pytest", "e2e", "--collect-only", "-q", "-p", "no:cacheprovider", *args]
    return subprocess.run(argv, cwd=root, capture_output=True, text=True, timeout=300)


def collected_modules(args: Sequence[str], root: Path = model.PROJECT) -> list[str] | None:
    """The test modules (e2e/test_*.py names) pytest collects with these selection arguments in
    the checkout at ``root``; None where it cannot say (collection failed or timed out)."""
    try:
        done = collect(args, root)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode not in (0, 5):  # 5: nothing collected
        return None
    return sorted({line.split("::", 1)[0].rsplit("/", 1)[-1] for line in done.stdout.splitlines() if "::" in line})


@dataclass(frozen=True)
class Taken:
    """What a run is about to take in, read before it starts: the whole suite's hash and, where
    collection can say, the run's scope (``stands`` reads it back)."""

    suite: str
    args: tuple[str, ...] = ()
    modules: tuple[str, ...] = ()
    scoped: str = ""


def before_run(args: Sequence[str], root: Path = model.PROJECT) -> Taken:
    modules = collected_modules(args, root)
    return Taken(model.suite_hash(root), tuple(args), tuple(modules or ()),
                 model.suite_hash(root, modules) if modules else "")


def keep(o: model.Outcome, path: Path, taken: Taken, root: Path = model.PROJECT,
         say: Callable[[str], None] | None = None) -> model.Outcome:
    """Write a fresh result with what its run took in. Read before the run, and kept only if the
    suite is the same after it: a tree edited while a run went on (hours, under emulation) may
    have had any of its versions run, so that result is written for the record but stands for no
    suite."""
    if model.suite_hash(root) == taken.suite:
        o.suite = taken.suite
        o.collect_args, o.modules, o.scoped = list(taken.args), list(taken.modules), taken.scoped
    else:
        o.suite, o.collect_args, o.modules, o.scoped = "", [], [], ""
        if say is not None:
            say(f"{o.name}: the suite changed while it ran: its result is written to {path.name}, not kept as"
                " standing (it runs again)")
    path.write_text(o.to_json())
    return o


def stands(o: model.Outcome, suite: str, root: Path = model.PROJECT) -> bool:
    """A kept result is of this suite: the same whole suite, or, where it recorded its scope, the
    same code in everything its run took in, which its selection still collects exactly. A change
    to a test module the run did not take in leaves it standing; one that the selection now also
    reaches (a new test its -k names) does not."""
    if o.suite == suite:
        return True
    if not (o.modules and o.scoped) or o.scoped != model.suite_hash(root, o.modules):
        return False
    return _collected(tuple(o.collect_args), root) == o.modules


@functools.lru_cache(maxsize=None)
def _collected(args: tuple[str, ...], root: Path) -> list[str] | None:
    return collected_modules(args, root)


def holds(o: model.Outcome | None, suite: str) -> bool:
    """A kept result counts: it ran (not NOT RUN) and stands for this suite."""
    return o is not None and o.verdict != model.NOT_RUN and stands(o, suite)


def kept_baseline(path: Path, suite: str, label: str, behaviors: str | None,
                  say: Callable[[str], None] | None = None) -> model.Outcome | None:
    """A kept baseline that holds for this suite and covers a run labelled ``label`` on ``behaviors``."""
    o = read(path, say)
    return o if o is not None and holds(o, suite) and covers(o, label, behaviors) else None


def read(path: Path, say: Callable[[str], None] | None = None) -> model.Outcome | None:
    """A kept result (an unreadable one is run again, not trusted)."""
    return read_json(path, model.Outcome, "kept result", say, "running it again")


def mutant_path(keep: Path, m: model.Mutant, release: str, provider: str) -> Path:
    return keep / f"{m.name}-{m.content_hash}-{release}-{provider}.json"


def baseline_path(keep: Path, release: str, provider: str) -> Path:
    return keep / f"baseline-{release}-{provider}.json"


def kept_result(keep: Path, m: model.Mutant, release: str, provider: str, suite: str,
                say: Callable[[str], None] | None = None) -> model.Outcome | None:
    """The mutant's kept result while its build (release, base and patch) and the suite are the
    ones it records, and it ran. Results kept before they were kept per release are named without
    the release: one still counts when the build it records is this one."""
    build = k8s_source.release(release, m.patches).build_id
    for path in (mutant_path(keep, m, release, provider), keep / f"{m.name}-{m.content_hash}-{provider}.json"):
        o = read(path, say)
        if o is not None and o.build == build and holds(o, suite):
            return o
    return None


def selection(k: str | None, mutant_tests: str | None) -> tuple[list[str], str]:
    """pytest's arguments for a run of these tests (a mutant's ``# tests:``, and the bench's -k),
    and how its result names them."""
    exprs = [e for e in (mutant_tests, k) if e]
    if not exprs:
        return [], "full suite"
    expr = " and ".join(f"({e})" for e in exprs)
    return ["-k", expr], f"-k {expr}"


def baseline_selection(mutants: list[model.Mutant], k: str | None) -> tuple[list[str], str, str | None]:
    """The unmodified build's run for these mutants: every test any of them runs (the full suite if
    one of them names none), on every behavior any of them runs on (None: both, where one of them
    names none); pytest's arguments, the label its kept result starts with, the behaviors."""
    exprs = [m.tests for m in mutants]
    expr = None if (not exprs or any(e is None for e in exprs)) else " or ".join(f"({e})" for e in sorted(set(exprs)))
    args, label = selection(k, expr)
    named = [m.behaviors for m in mutants]
    behaviors = None if (not named or any(b is None for b in named)) else \
        ",".join(sorted({b.strip() for n in named for b in n.split(",")}))
    return args, f"{label} on {behaviors or BOTH}", behaviors


def covers(o: model.Outcome, label: str, behaviors: str | None) -> bool:
    """A kept baseline stands for a run labelled ``label`` on ``behaviors`` (None: both): it ran
    that selection, or the full suite on every one of those behaviors."""
    if o.selection.startswith(label):
        return True
    full = _FULL.match(o.selection)
    return full is not None and set((behaviors or BOTH).split(",")) <= set(full.group(1).split(","))


# pytest arguments that spread a run over processes (pytest-xdist) without changing what it runs:
# the kind matrix runs with -n 2
_SPREAD_FLAGS = ("-n", "--numprocesses", "--dist")
_SPREAD_JOINED = re.compile(r"-n\S+|--numprocesses=\S+|--dist=\S+")


def narrowed(pytest_args: Sequence[str]) -> bool:
    """Whether a matrix run's extra pytest arguments may have changed what it ran (anything but
    pytest-xdist's process count and distribution)."""
    args = list(pytest_args)
    while args:
        arg = args.pop(0)
        if arg in _SPREAD_FLAGS and args:
            args.pop(0)
        elif not _SPREAD_JOINED.fullmatch(arg):
            return True
    return False


def from_matrix(cells: Path | None, release: str, provider: str, behaviors: str | None, suite: str,
                say: Callable[[str], None] | None = None) -> model.Outcome | None:
    """The release's baseline as the version matrix already ran it (decision 0026): a kept cell per
    behavior, each the full suite with --gate on the unmodified release on this provider (no pytest
    arguments narrowed it; -n does not), of this suite, whose node reported the release, gate passed, nothing
    failed and nothing it could not test. None where any behavior lacks such a cell."""
    if cells is None:
        return None
    wanted = (behaviors or BOTH).split(",")
    found = [read_kept(cells / release / provider / f"{behavior}.json", say, "not taken as the baseline")
             for behavior in wanted]
    good = [c for c in found if c is not None and c.version == c.build == release and c.suite == suite
            and c.gate == PASSED and c.failed == 0 and c.could_not_test == 0 and not narrowed(c.pytest_args)]
    if len(good) != len(wanted):
        return None
    runs = {c.results_dir or c.behavior: c.seconds for c in good}  # one run of the suite may cover both
    where = ", ".join(f"{c.behavior} {c.date}" for c in good)
    return model.Outcome("baseline", release, model.SURVIVED, passed=sum(c.passed for c in good),
                         skipped=sum(c.skipped for c in good), seconds=sum(runs.values()),
                         selection=f"full suite on {','.join(wanted)}: from the version matrix's gate-passed"
                                   f" cells ({where}, {cells.name}/{release}/{provider}/)",
                         suite=suite, exit_code=0)


@dataclass(frozen=True)
class Standing:
    release: str
    provider: str
    baseline: str  # "green", "N false alarms", or "not run" (on this suite)
    caught: int
    survived: int
    pending: int  # applicable, with no result kept on this suite and build
    not_applicable: int

    @property
    def applicable(self) -> int:
        return self.caught + self.survived + self.pending


def standing(keep: Path, release: str, provider: str, suite: str, patches: Path = model.HERE,
             cells: Path | None = None) -> Standing:
    """The bench on ``release`` as its kept results say, and the version matrix's kept cells
    (``cells``) for its baseline, by the rules the bench reuses them by. Mutants of a prototype
    (``# base:``) are the prototype's, not the release's, and are left out, as their baselines are."""
    verdicts = {model.CAUGHT: 0, model.SURVIVED: 0, None: 0}
    forms = [releases.on(m, release, provider) for m in model.load(patches) if m.base is None]
    runnable = [f for f in forms if isinstance(f, model.Mutant)]
    for form in runnable:
        o = kept_result(keep, form, release, provider, suite)
        verdicts[o.verdict if o is not None and o.verdict in verdicts else None] += 1
    _, label, behaviors = baseline_selection(runnable, None)
    # the baseline the whole bench would take: of this suite and every test these mutants name
    b = kept_baseline(baseline_path(keep, release, provider), suite, label, behaviors) \
        or from_matrix(cells, release, provider, behaviors, suite)
    if b is None:
        baseline = "not run"
    else:
        alarms = len(b.failed) + len(b.errors)
        baseline = f"{alarms} false alarm{'s' * (alarms != 1)}" if alarms else "green"
    return Standing(release, provider, baseline, verdicts[model.CAUGHT], verdicts[model.SURVIVED], verdicts[None],
                    len(forms) - len(runnable))
