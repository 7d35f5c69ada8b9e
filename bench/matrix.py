"""The version matrix: the release gate on every supported Kubernetes minor × swap behavior ×
provider (not a test).

    python -m bench.matrix [--minors 1.34,1.37] [--providers vm,kind] [--behaviors NoSwap,LimitedSwap]
                           [--kind-images build|published] [--store DIR] [--kept DIR] [--table FILE]
                           [--dry-run] [--rerun] [-- MORE PYTEST ARGUMENTS]

The minors are clusters/versions.py's SUPPORTED, each built at its pinned patch. For each minor ×
provider the build comes first, through the suite's own command line:

* vm:   ``python -m clusters.vm build --k8s-version V`` (binaries and the node's disk, cached);
* kind: ``python -m clusters.vm node-image --k8s-version V``, then loaded into the Docker host
  DOCKER_HOST names (or the local one); ``--kind-images published`` takes kind's own image of
  that minor from clusters/kind/node-images.yaml instead (its patch is kind's, not the pin).

Then one run of the suite covers that minor × provider's behaviors together (a vm node switches
behavior in place, a kind cluster has a worker per behavior, so one run is cheaper than one per
behavior):

    python -m pytest e2e --provider P (--k8s-version V | --node-image I) --behaviors B --gate
                         --gate-behaviors B --results-dir <store>/<build>/<provider>/<behaviors>

and each cell (minor × provider × behavior) is read from that run's results: its tests from
``junit.xml`` (their behavior is the ``swap_behavior`` property every node fixture records),
judged per behavior by e2e/verdict.py's gate rules, and the kubelet version its node reported
from ``matrix.md`` (e2e/report.py). A cell's result is kept as
``<kept>/<build>/<provider>/<behavior>.json`` (``--kept``, default the store, ``<cache
root>/matrix``; each run's results directory stays in the store): a second run
skips the cells kept for the same suite (bench.mutants' suite hash of e2e/, workloads/,
conftest.py) unless ``--rerun``; a cell that could not run (the build failed, the run stopped
before its tests) is never kept as done. The table of every kept cell goes to
docs/measurements/matrix.md (``--table``), and after it where the mutant bench stands on each pin
(bench/mutants/standing.py, from the bench's results kept in docs/measurements/mutant-results).

Exit code (clusters/cli.py Exit): 0 every selected cell passed the gate (or --dry-run); 1 one
failed it or could not run; 2 interrupted; 4 bad arguments.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.cells import COULD_NOT_RUN, FAILED, PASSED, Cell, read_junit, read_kept
from bench.mutants import releases, standing
from clusters import behaviors as swap_behaviors
from clusters import cli, commands, inputs, versions
from clusters.vm.k8s_source import SourceError

ROOT = Path(__file__).resolve().parents[1]
TABLE = ROOT / "docs" / "measurements" / "matrix.md"
NODE_IMAGES = ROOT / "clusters" / "kind" / "node-images.yaml"
MUTANT_RESULTS = standing.KEPT
PROVIDERS = releases.PROVIDERS  # the providers that build a given release
# The released behaviors: WorkloadControlledSwap needs a build with KEP-5359, which no supported
# release has.
BEHAVIORS = (swap_behaviors.NO_SWAP, swap_behaviors.LIMITED_SWAP)
# pytest's exit codes of a run that stopped before its verdict: interrupted, preflight (or an
# internal error), usage, no tests collected. Its cells could not run, whatever its report says.
STOPPED = (cli.Exit.INTERRUPTED, cli.Exit.PREFLIGHT, cli.Exit.USAGE, 5)


def _say(line: str) -> None:
    print(f"[matrix {time.strftime('%H:%M:%S')}] {line}", file=sys.stderr, flush=True)


# --- the plan ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Run:
    """One build and one run of the suite: a minor × provider, on the behaviors not kept yet."""

    minor: str
    provider: str
    behaviors: tuple[str, ...]
    version: str  # the release built, or the published node image's
    image: str | None = None  # kind --kind-images published: kind's node image of the minor

    @property
    def build_key(self) -> str:
        """The directory of this build's results: the release, or the published image by name and digest."""
        if self.image is None:
            return self.version
        name, _, digest = self.image.partition("@sha256:")
        return re.sub(r"[^A-Za-z0-9.]+", "-", name) + (f"-{digest[:12]}" if digest else "")

    def directory(self, store: Path) -> Path:
        return store / self.build_key / self.provider

    def results_dir(self, store: Path) -> Path:
        return self.directory(store) / "+".join(self.behaviors)

    def build_argv(self) -> list[str] | None:
        """The suite's own build command; None: nothing to build (a published image)."""
        if self.image is not None:
            return None
        command = "build" if self.provider == "vm" else "node-image"
        return [sys.executable, "-m", "clusters.vm", command, "--k8s-version", self.version]

    def pytest_argv(self, store: Path, node_image: str | None, extra: Sequence[str] = ()) -> list[str]:
        behaviors = ",".join(self.behaviors)
        where = ["--k8s-version", self.version] if self.provider == "vm" else ["--node-image", node_image or "?"]
        return [sys.executable, "-m", "pytest", "e2e", "-p", "no:cacheprovider", "--provider", self.provider, *where,
                "--behaviors", behaviors, "--gate", "--gate-behaviors", behaviors,
                "--results-dir", str(self.results_dir(store)), *extra]


def kept_path(store: Path, run: Run, behavior: str) -> Path:
    return run.directory(store) / f"{behavior}.json"


def kept(store: Path, run: Run, behavior: str) -> Cell | None:
    return read_kept(kept_path(store, run, behavior), _say, "left out, run again")


def is_done(cell: Cell | None, suite: str) -> bool:
    """A kept cell stands while the suite is the same; one that could not run is tried again."""
    return cell is not None and cell.suite == suite and cell.gate != COULD_NOT_RUN


def published_images(path: Path = NODE_IMAGES) -> dict[str, str]:
    import yaml

    return {str(minor): image for minor, image in yaml.safe_load(path.read_text())["images"].items()}


def plan(minors: Sequence[str], providers: Sequence[str], behaviors: Sequence[str], store: Path, suite: str,
         rerun: bool = False, kind_images: str = "build",
         images: Callable[[], dict[str, str]] = published_images) -> tuple[list[Run], list[Cell]]:
    """(the runs still to do, each on its cells not kept; the kept cells of the selection)."""
    runs: list[Run] = []
    done: list[Cell] = []
    for minor in minors:
        for provider in providers:
            version, image = versions.SUPPORTED[minor], None
            if provider == "kind" and kind_images == "published":
                found = images()
                if minor not in found:
                    raise cli.UsageError(f"{NODE_IMAGES.relative_to(ROOT)} has no kind node image of Kubernetes {minor}:"
                                         " add kind's, or build one (--kind-images build)")
                image = found[minor]
                tag = image.split("@", 1)[0].rsplit(":", 1)[-1]
                version = tag if versions.minor_of(tag) == versions.minor_of(minor) else version
            probe = Run(minor, provider, tuple(behaviors), version, image)
            todo = []
            for behavior in behaviors:
                cell = None if rerun else kept(store, probe, behavior)
                if is_done(cell, suite):
                    done.append(cell)  # type: ignore[arg-type]
                else:
                    todo.append(behavior)
            if todo:
                runs.append(dataclasses.replace(probe, behaviors=tuple(todo)))
    return runs, done


# --- a run's results ---------------------------------------------------------------------------

_SECTION = re.compile(r"^## (?P<behavior>\w+)\n\n(?P<what>Node|Not covered): (?P<text>.*)$", re.M)
_KUBELET = re.compile(r"\bkubelet (?P<version>[^\s,]+),")


def nodes_in_report(matrix_md: Path) -> dict[str, str]:
    """behavior -> the kubelet version its node reported, from the run's matrix.md (its "Node:"
    line is SwapNode.describe()); absent where the behavior had no node."""
    try:
        text = matrix_md.read_text()
    except OSError:
        return {}
    found = {}
    for match in _SECTION.finditer(text):
        kubelet = _KUBELET.search(match["text"]) if match["what"] == "Node" else None
        if kubelet:
            found[match["behavior"]] = kubelet["version"]
    return found


def judge(run: Run, results_dir: Path, exit_code: int | None, why_not: str = "") -> list[Cell]:
    """The run's cells, one per behavior it covered. No JUnit report, or a run that stopped before
    its verdict (interrupted, preflight, usage: exit 2, 3, 4): every cell could not run."""
    from e2e import report, verdict

    cells = [Cell(run.minor, run.provider, b, run.version, exit_code=exit_code, results_dir=str(results_dir),
                  behaviors_in_run=list(run.behaviors)) for b in run.behaviors]
    junit = results_dir / "junit.xml"
    if why_not or exit_code in STOPPED or not junit.is_file():
        reason = why_not or (f"the suite stopped before its verdict (exit {exit_code}); see"
                             f" {results_dir / 'pytest.log'}")
        for cell in cells:
            cell.problems = [reason]
        return cells
    try:
        tests = read_junit(junit)
    except inputs.UsageError as error:  # a report cut short (a run killed while writing it)
        for cell in cells:
            cell.problems = [str(error)]
        return cells
    kubelets = nodes_in_report(results_dir / report.MATRIX_MD)
    for cell in cells:
        mine = [(r, marked) for r, marked in tests if r.behavior == cell.behavior]
        for result, marked in mine:
            if result.outcome == "passed":
                cell.passed += 1
            elif marked or (result.outcome == "skipped"
                            and not verdict.accepted_skip(cell.behavior, result.module, result.reason,
                                                          result.function)):
                cell.could_not_test += 1
            elif result.outcome == "failed":
                cell.failed += 1
            else:
                cell.skipped += 1
                cell.skips.setdefault(result.reason, []).append(result.nodeid.split("::", 1)[-1])
        cell.problems = verdict.gate_problems([r for r, _ in mine], [cell.behavior])
        cell.gate = FAILED if cell.problems else PASSED
        cell.build = kubelets.get(cell.behavior, "")
    return cells


# --- running -----------------------------------------------------------------------------------

class Runner:
    """Runs a command in the project root, its output into ``log``: a build's stderr (its
    stdout, what it made, is returned), or the suite's whole output, with each test's verdict said
    on stderr as it comes."""

    def __call__(self, argv: list[str], log: Path, *, suite: bool = False) -> subprocess.CompletedProcess[str]:
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "a") as f:
            grace = commands.OWN_COMMAND_GRACE  # interrupted: the run removes its VM or clusters first
            if not suite:
                return commands.run(argv, timeout=None, cwd=ROOT, stdout=subprocess.PIPE, stderr=f, grace=grace)
            with commands.started(argv, grace, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, drained=f.write,
                                  text=True) as proc:
                assert proc.stdout is not None  # noqa: S101 - narrows the type: stdout=PIPE
                for line in proc.stdout:
                    f.write(line)
                    f.flush()  # the log is read while the run goes on
                    words = line.split()
                    if len(words) > 1 and "::" in words[0] and words[1] in ("PASSED", "FAILED", "ERROR", "SKIPPED"):
                        _say(f"{words[0].rsplit('::', 1)[-1]} {words[1]}")
                return subprocess.CompletedProcess(argv, proc.wait(), "", "")


def _display(argv: Sequence[str]) -> str:
    return shlex.join(["python" if a == sys.executable else a for a in argv])


def _last_line(log: Path) -> str:
    try:
        lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    return lines[-1].strip()[:300] if lines else ""


def build(run: Run, store: Path, runner: Runner) -> tuple[str | None, str, str]:
    """(node image for kind or None, artifact, why it failed or ""): the build, through the suite's CLI."""
    argv = run.build_argv()
    if argv is None:
        return run.image, run.image or "", ""
    log = run.directory(store) / "build.log"
    _say(f"{run.minor} {run.provider}: {_display(argv)}")
    done = runner(argv, log)
    made = [line.strip() for line in (done.stdout or "").splitlines() if line.strip()]
    if done.returncode != 0 or not made:
        return None, "", f"the build failed (exit {done.returncode}): {_last_line(log)} (log {log})"
    if run.provider == "vm":
        return None, made[-1], ""
    if len(made) < 2:
        return None, "", f"node-image printed no archive and ref: {made} (log {log})"
    archive, ref = Path(made[-2]), made[-1]
    try:
        load_node_image(archive, ref, run.version, runner, log)
    except Exception as error:  # noqa: BLE001 - a load that fails is this run's result
        return None, ref, f"loading {ref} into the Docker host failed: {error} (log {log})"
    return ref, ref, ""


def load_node_image(archive: Path, ref: str, version: str, runner: Runner, log: Path) -> None:
    """The built archive into the Docker host DOCKER_HOST names, baked (clusters.vm.nodeimage)."""
    from clusters.vm import nodeimage

    def docker(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        done = runner(["docker", *args], log)  # its stderr went to the log: the last line of it says why
        return subprocess.CompletedProcess(done.args, done.returncode, done.stdout or "",
                                           "" if done.returncode == 0 else _last_line(log))

    image = nodeimage.NodeImage(archive, ref, version, archive.parent.name)
    nodeimage.load_and_bake(image, docker, progress=_say)


def execute(run: Run, store: Path, runner: Runner, extra: Sequence[str], suite: str,
            today: Callable[[], str] = lambda: dt.date.today().isoformat(), keep: Path | None = None) -> list[Cell]:
    """Build, run the suite, judge and keep the run's cells (in ``keep``, default the store)."""
    # The runner appends (a kind build's log gains the image load); each run starts its logs
    # fresh, so a rerun's log holds that run alone.
    for log in (run.directory(store) / "build.log", run.results_dir(store) / "pytest.log"):
        log.unlink(missing_ok=True)
    t0 = time.monotonic()
    node_image, artifact, why_not = build(run, store, runner)
    built = time.monotonic() - t0
    results = run.results_dir(store)
    code: int | None = None
    t1 = time.monotonic()
    if not why_not:
        results.mkdir(parents=True, exist_ok=True)
        (results / "junit.xml").unlink(missing_ok=True)  # a report of an earlier run is not this one's
        argv = run.pytest_argv(store, node_image, extra)
        _say(f"{run.minor} {run.provider} {'+'.join(run.behaviors)}: {_display(argv)}")
        code = runner(argv, results / "pytest.log", suite=True).returncode
    cells = judge(run, results, code, why_not)
    for cell in cells:
        cell.artifact, cell.build_seconds, cell.seconds = artifact, round(built, 1), round(time.monotonic() - t1, 1)
        cell.date, cell.suite, cell.pytest_args = today(), suite, list(extra)
        path = kept_path(keep or store, run, cell.behavior)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(cell.to_json())
        _say(f"{run.minor} {run.provider} {cell.behavior}: gate {cell.gate}, {cell.passed} passed, {cell.failed}"
             f" failed, {cell.skipped} skipped, {cell.could_not_test} could not test"
             + (f" ({cell.problems[0]})" if cell.problems else ""))
    return cells


# --- the table ---------------------------------------------------------------------------------

def current_builds(images: Callable[[], dict[str, str]] = published_images) -> set[str]:
    """The build keys of the table's pins and of kind's published images: what the table shows
    (cells of an earlier pin stay in the store, out of the table)."""
    keys = set(versions.SUPPORTED.values())
    try:
        keys |= {Run(minor, "kind", (), "", image).build_key for minor, image in images().items()}
    except (OSError, KeyError, ValueError):
        pass
    return keys


def every_kept(store: Path, builds: set[str]) -> list[Cell]:
    """Every kept cell of a current build (``builds``) of a supported minor in the store."""
    cells = []
    for path in sorted(store.glob("*/*/*.json")):
        if path.parents[1].name not in builds:
            continue
        cell = read_kept(path, _say)
        if cell is not None and cell.minor in versions.SUPPORTED:
            cells.append(cell)
    return cells


def _order(cell: Cell) -> tuple:
    minor = versions.minor_of(cell.minor) or (0, 0)
    provider = PROVIDERS.index(cell.provider) if cell.provider in PROVIDERS else len(PROVIDERS)
    behavior = BEHAVIORS.index(cell.behavior) if cell.behavior in BEHAVIORS else len(BEHAVIORS)
    return minor, provider, behavior, cell.version


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.0f} s" if seconds else "—"


def table(cells: Sequence[Cell], suite: str, kept_in: str = "") -> str:
    """The Markdown table of the cells: one row per minor × provider × behavior (and version);
    ``kept_in``: where the cells are, as the reader can find them."""
    rows = sorted(cells, key=_order)
    lines = [
        "# Kubernetes version matrix",
        "",
        f"The release gate (`--gate`) on each supported Kubernetes minor ({versions.SUPPORTED_RANGE},"
        " `SUPPORTED` in `clusters/versions.py`) × swap behavior × provider, as `python -m bench.matrix`"
        " last ran it. One run of the suite covers a minor × provider's behaviors together: its wall time"
        " is theirs. *build time*: building the node (a disk image or a node image) before that run, seconds"
        " when the build was kept from an earlier run. *skipped*: skips the gate accepts, each reason below the table; *could not"
        " test*: skips it does not accept, gate-mode \"could not test\" failures, setup errors that lost"
        " the API server, and tests the API server refused (401, 403). *build*: the kubelet version the node reported." + (f" The cells: `{kept_in}`." if kept_in else ""),
        "",
        "| minor | provider | behavior | passed | failed | skipped | could not test | gate | wall time | build time"
        " | build | date |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for cell in rows:
        ran = cell.gate != COULD_NOT_RUN
        counts = [str(n) if ran else "—" for n in (cell.passed, cell.failed, cell.skipped, cell.could_not_test)]
        gate = cell.gate if ran else f"could not run: {cell.problems[0] if cell.problems else ''}"
        date = cell.date + ("" if cell.suite == suite else f" (suite {cell.suite}, changed since)")
        build_id = cell.build or f"{cell.version} (asked; no node reported)"
        lines.append("| " + " | ".join([cell.minor, cell.provider, cell.behavior, *counts,
                                         gate.replace("|", "\\|"), _minutes(cell.seconds), _minutes(cell.build_seconds),
                                         build_id, date]) + " |")
    if not rows:
        lines += ["", "No cell has run yet: `python -m bench.matrix` (`--dry-run` shows what it would run)."]
    problems = [(c, p) for c in rows if c.gate == FAILED for p in c.problems]
    if problems:
        lines += ["", "Why the gate failed:", ""]
        lines += [f"- {c.minor} {c.provider} {c.behavior}: {p}" for c, p in problems]
    return "\n".join(lines + _skip_table(rows)) + "\n"


def _short(reason: str) -> str:
    """A skip reason up to the detail it quotes (an API server's whole reply, a node's pods):
    the table names the reason, the run's log has the rest."""
    head, sep, _ = " ".join(reason.split()).partition(": ")
    return head + (": …" if sep else "")


def _skip_table(rows: Sequence[Cell]) -> list[str]:
    """Why each cell's skips were skipped, per minor: a test that cannot run on a release says so
    here, with the release the node ran."""
    skipped = [(cell, reason, tests) for cell in rows if cell.gate != COULD_NOT_RUN
               for reason, tests in sorted(cell.skips.items())]
    if not skipped:
        return []
    lines = ["", "## Why tests skipped", "",
             "Each reason a skip the gate accepted gave, per cell, with the tests it skipped (the reason is cut at"
             " the detail it quotes; the run's `pytest.log` has it whole).", "",
             "| minor | provider | behavior | skipped | reason | tests |", "|---|---|---|---|---|---|"]
    for cell, reason, tests in skipped:
        names = ", ".join(f"`{t}`" for t in sorted({t.split("[", 1)[0] for t in tests}))
        lines.append("| " + " | ".join([cell.minor, cell.provider, cell.behavior, str(len(tests)),
                                         _short(reason).replace("|", "\\|"), names]) + " |")
    missing = [cell for cell in rows if cell.gate != COULD_NOT_RUN and cell.skipped and not cell.skips]
    if missing:  # kept by a bench.matrix that did not keep reasons yet
        lines += ["", *(f"- {c.minor} {c.provider} {c.behavior}: {c.skipped} skipped, their reasons not kept"
                        for c in missing)]
    return lines


# --- the command -------------------------------------------------------------------------------

def _listed(choices: Sequence[str], what: str, why: str) -> Callable[[str], list[str]]:
    @inputs.typed("choice", what)
    def parse(text: str) -> list[str]:
        items = list(dict.fromkeys(i.strip() for i in text.split(",") if i.strip()))
        unknown = [i for i in items if i not in choices]
        if unknown or not items:
            raise ValueError(f"{', '.join(unknown) or repr(text)}: not {what}; choose from {', '.join(choices)} ({why})")
        return items

    return parse


def parser() -> cli.Parser:
    p = cli.Parser(prog="python -m bench.matrix", description=__doc__.split("\n\n")[0])
    p.add_argument("--minors", type=_listed(list(versions.SUPPORTED), "a supported minor",
                                            f"Kubernetes {versions.SUPPORTED_RANGE}, clusters/versions.py SUPPORTED"),
                   default=list(versions.SUPPORTED), help="comma-separated (default: every supported minor)")
    p.add_argument("--providers", type=_listed(PROVIDERS, "a provider", "the ones that build a given release"),
                   default=list(PROVIDERS), help="comma-separated: vm, kind (default: both)")
    p.add_argument("--behaviors", type=_listed(BEHAVIORS, "a released swap behavior",
                                               "WorkloadControlledSwap needs a KEP-5359 build"),
                   default=list(BEHAVIORS), help="comma-separated (default: NoSwap,LimitedSwap)")
    p.add_argument("--kind-images", choices=("build", "published"), default="build",
                   help="kind: build each minor's pinned release into a node image (default), or run kind's"
                        " published image of the minor (clusters/kind/node-images.yaml)")
    p.add_argument("--store", type=inputs.state_directory, default=None,
                   help="where each cell's result and each run's results directory are kept (default: <cache"
                        " root>/matrix, e.g. ~/.cache/kube-swap-conformance/matrix)")
    p.add_argument("--kept", type=inputs.state_directory, default=None, metavar="DIR",
                   help="where each cell's result is kept, read back and resumed from, and the table made from"
                        " (default: the store); a directory in the checkout, committed (docs/measurements/"
                        "matrix-cells), keeps the matrix across machines, as the mutant bench's --kept does")
    p.add_argument("--table", type=inputs.output_file, default=TABLE,
                   help="the Markdown table (default: docs/measurements/matrix.md)")
    p.add_argument("--dry-run", action="store_true", help="print the plan and its commands, run nothing")
    p.add_argument("--rerun", action="store_true", help="run every selected cell, kept or not")
    p.add_argument("--debug", action="store_true", help="a failure's traceback too")
    p.add_argument("pytest_args", nargs="*", type=inputs.pytest_arg,
                   help="after --: more arguments for every run of the suite")
    return p


def main(argv: list[str] | None = None, runner: Runner | None = None) -> int:
    args = parser().parse_args(argv)
    return cli.run(lambda a: _main(a, runner or Runner()), args, command="bench.matrix")


def _main(a: argparse.Namespace, runner: Runner) -> int:
    from bench.mutants import suite_hash
    from workloads.cache import cache_root

    from bench.mutants.__main__ import pytest_args_problem

    if a.pytest_args and not a.dry_run:
        for provider in a.providers:  # what pytest says of them, before the first build
            problem = pytest_args_problem(provider, a.pytest_args)
            if problem:
                raise cli.UsageError(problem)
    store = (a.store or cache_root() / "matrix").resolve()
    keep = a.kept.resolve() if a.kept else store
    suite = suite_hash(ROOT)
    minors = [m for m in versions.SUPPORTED if m in a.minors]  # the table's order
    behaviors = [b for b in BEHAVIORS if b in a.behaviors]
    runs, done = plan(minors, a.providers, behaviors, keep, suite, a.rerun, a.kind_images)
    total = len(minors) * len(a.providers) * len(behaviors)
    print(f"matrix: {len(minors)} minor(s) × {len(a.providers)} provider(s) × {len(behaviors)} behavior(s) ="
          f" {total} cells, {len(done)} kept, {total - len(done)} to run; suite {suite}; store {store}"
          + (f"; cells kept in {keep}" if keep != store else ""))
    for cell in done:
        print(f"{cell.minor} {cell.provider} {cell.behavior}: kept (gate {cell.gate}, {cell.date})")
    for run in runs:
        what = f"{run.version}" + (f", {run.image}" if run.image else "")
        print(f"{run.minor} {run.provider} ({what}): run {', '.join(run.behaviors)}")
        build_argv = run.build_argv()
        if build_argv:
            print(f"  build: {_display(build_argv)}")
            if run.provider == "kind":
                print("  load:  docker load -i <the archive it prints>, baked into <the ref it prints>"
                      " (clusters.vm.nodeimage.load_and_bake)")
        image = run.image or "<the ref node-image prints>"
        print(f"  suite: {_display(run.pytest_argv(store, image, a.pytest_args))}")
    print(f"table: {a.table}")
    if a.dry_run:
        return cli.Exit.OK
    if any(run.provider == "vm" for run in runs):
        _vm_free(vm_state_dir(a.pytest_args))
    cells = list(done)
    for run in runs:
        cells += execute(run, store, runner, a.pytest_args, suite, keep=keep)
        _write_table(a.table, keep, suite)
    _write_table(a.table, keep, suite)
    failed = [c for c in cells if c.gate != PASSED]
    for cell in failed:
        _say(f"{cell.minor} {cell.provider} {cell.behavior}: {cell.gate}"
             + (f": {cell.problems[0]}" if cell.problems else ""))
    _say(f"{len(cells) - len(failed)}/{len(cells)} cells passed the gate; table in {a.table}")
    return cli.Exit.FAILED if failed else cli.Exit.OK


def vm_state_dir(pytest_args: Sequence[str]) -> Path:
    """The state directory the suite's vm runs use: --vm-state-dir among the arguments after --, or
    the default."""
    from clusters.vm import paths

    for i, arg in enumerate(pytest_args):
        if arg == "--vm-state-dir" and i + 1 < len(pytest_args):
            return Path(pytest_args[i + 1])
        if arg.startswith("--vm-state-dir="):
            return Path(arg.split("=", 1)[1])
    return paths.default_state_dir()


def _vm_free(state_dir: Path) -> None:
    """NotReady, before the first build, when a vm run could not use its node: another of the
    suite's guests runs under emulation, or another run of the suite holds that state directory."""
    from clusters import pidlock
    from clusters.vm import qemu
    from clusters.vm_provider import IN_USE, take_node

    qemu.ensure_alone(qemu.VmPaths(state_dir))
    if (state_dir / IN_USE).exists():  # absent: no run has held it, and a check makes no directory
        pidlock.release(take_node(state_dir))


def bench_standings(keep: Path, suite: str, cells: Path) -> list[standing.Standing]:
    """The mutant bench on each supported pin as its kept results (and the matrix's ``cells``, for
    its baseline) say: on vm always, on kind where it kept any result."""
    out = []
    for release in versions.SUPPORTED.values():
        for provider in PROVIDERS:
            if provider == "vm" or any(keep.glob(f"*-{release}-{provider}.json")):
                out.append(standing.standing(keep, release, provider, suite, cells=cells))
    return out


def bench_table(standings: Sequence[standing.Standing], suite: str, kept_in: str) -> str:
    lines = [
        "## The mutant bench on each minor",
        "",
        "`python -m bench.mutants --k8s-version RELEASE` on each pin, as the results it kept"
        f" (`{kept_in}`) on this suite (`{suite}`) say. *baseline*: the unmodified release on every test"
        " the release's mutants name, green or its false alarms (*not run*: no result of this suite"
        " covers them all; the matrix's gate-passed run above of every behavior it needs is one). *caught*: of the"
        " mutants that apply to the minor; *not run on this suite*: those with no result of this suite"
        " and build yet; *not applicable*: their headers say why. The KEP-5359 prototype's mutants are"
        " in `docs/mutants.md`, not here.",
        "",
        "| minor | provider | release | baseline | caught | survived | not run on this suite | not applicable |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for s in standings:
        lines.append(f"| {releases.minor_of(s.release)} | {s.provider} | {s.release} | {s.baseline} |"
                     f" {s.caught}/{s.applicable} | {s.survived} | {s.pending} | {s.not_applicable} |")
    return "\n".join(lines) + "\n"


def _write_table(path: Path, store: Path, suite: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    def in_checkout(path: Path) -> str:
        return path.relative_to(ROOT).as_posix() + "/" if path.is_relative_to(ROOT) else ""

    text = table(every_kept(store, current_builds()), suite, in_checkout(store))  # a checkout's, not a cache's
    try:
        bench = bench_table(bench_standings(MUTANT_RESULTS, suite, store), suite,
                            in_checkout(MUTANT_RESULTS) or str(MUTANT_RESULTS))
    except SourceError as error:  # a mutant's header or variant the bench would refuse: the matrix's cells stand
        bench = f"## The mutant bench on each minor\n\nNot shown: {error}\n"
    path.write_text(text + "\n" + bench)


if __name__ == "__main__":
    raise SystemExit(main())
