"""The mutant bench's model: mutants read from patch files, what a run of the suite on one says
(caught by which tests, survived, or could not tell), and the table. Pure functions of files,
self-tested in tests/test_mutants.py; running them is ``python -m bench.mutants``.

A mutant is a patch against a Kubernetes release (``NN-name.patch`` in this directory) whose
header says what the broken build gets wrong and which tests can see it:

    # mutant: limitedswap-uses-limit
    # wrong: the LimitedSwap share is computed from the memory limit, not the request
    # area: formula
    # binaries: kubelet
    # tests: test_cgroup_limits or test_metrics
    # behaviors: LimitedSwap
    # expect: caught
    diff --git a/pkg/kubelet/... b/pkg/kubelet/...

A mutant of a prototype (clusters/prototypes/) names it as its base; the build is then the
release, the base patch, then the mutant, in that order, and the bench's "unmodified build" for
it is the release with the base alone:

    # base: clusters/prototypes/kep-5359.patch

On a minor where the code differs, a mutant runs as its variant rebased there, or not at all
where its header declares it not applicable (``# not-applicable: 1.34, 1.35: <why>``):
bench/mutants/releases.py.
"""
from __future__ import annotations

import ast
import functools
import hashlib
import json
from collections.abc import Collection
from dataclasses import asdict, dataclass, field
from pathlib import Path

from pydantic import ConfigDict

from bench import cells
from clusters import inputs
from clusters.vm.k8s_source import BUILD_KEYS, Patch, read_patch

HERE = Path(__file__).resolve().parent
PROJECT = HERE.parents[1]  # a `# base:` path is relative to the project root
SUITE_INPUTS = ("e2e", "workloads", "conftest.py")  # what decides the tests' verdicts

# The header lines that choose what a run of a mutant does (its tests and behaviors; `binaries`: a
# kubelet-only mutant shares a VM and has only its kubelet swapped in) and what it is expected to
# be; its other lines are prose. `not-applicable` says where a mutant runs, never what a run does:
# a not-applicable row is made from the header each time and never kept, so a corrected reason, or
# a minor added or dropped, leaves every kept run standing for the releases it still runs on.
RUN_KEYS = ("tests", "behaviors", "binaries", "expect")

CAUGHT, SURVIVED, NOT_RUN = "caught", "SURVIVED", "NOT RUN"
NOT_APPLICABLE = "n/a"  # not run on this release: its header says why (bench/mutants/releases.py)


@dataclass(frozen=True)
class Mutant:
    patch: Patch

    @property
    def name(self) -> str:
        return self.patch.header().get("mutant") or self.patch.path.stem

    @property
    def wrong(self) -> str:
        return self.patch.header().get("wrong", "")

    @property
    def area(self) -> str:
        return self.patch.header().get("area", "")

    @property
    def tests(self) -> str | None:
        """The -k expression of the tests that can see it; None: the full suite."""
        return self.patch.header().get("tests") or None

    @property
    def binaries(self) -> list[str]:
        """The Kubernetes commands the patch changes (``# binaries:``); empty: not said."""
        return [b.strip() for b in self.patch.header().get("binaries", "").split(",") if b.strip()]

    @property
    def behaviors(self) -> str | None:
        return self.patch.header().get("behaviors") or None

    @property
    def base(self) -> Path | None:
        """The patch this mutant applies on top of (``# base:``), None: the release itself."""
        name = self.patch.header().get("base")
        return (PROJECT / name) if name else None

    @property
    def patches(self) -> list[Path]:
        """What the build applies to the release, in order: the base, then the mutant."""
        return [p for p in (self.base, self.patch.path) if p is not None]

    @property
    def content_hash(self) -> str:
        """Of what decides the mutant's result: its build (diff and base, as the build id hashes
        them) and the header lines that choose its run and its expected verdict (RUN_KEYS). Its
        prose (`mutant`, `wrong`, `area`, comments) and where it does not apply are not in it, so
        correcting what a header says of the bug keeps its kept results and its build."""
        h = hashlib.sha256(self.patch.text_of(BUILD_KEYS + RUN_KEYS).encode())
        if self.base is not None:
            h.update(read_patch(self.base).build_text.encode())
        return h.hexdigest()[:12]


def load(directory: Path = HERE) -> list[Mutant]:
    return [Mutant(read_patch(p)) for p in sorted(Path(directory).glob("*.patch"))]


def suite_hash(root: Path, only_tests: Collection[str] | None = None) -> str:
    """Hash of what decides the verdicts: a mutant's result, and a matrix cell, is kept only while
    it is unchanged. A Python file counts by its code (see `_code_of`), any other file by its
    bytes. With ``only_tests`` (test modules' file names, e2e/test_*.py): of what a run of only
    those modules took in, every other test module counted by its name alone (a test module
    imports no other, and nothing else imports one: tests/test_e2e_layout.py)."""
    h = hashlib.sha256()
    for name in SUITE_INPUTS:
        base = root / name
        files = sorted(p for p in base.rglob("*") if p.is_file() and "__pycache__" not in p.parts) \
            if base.is_dir() else [base]
        for p in files:
            left_out = only_tests is not None and is_test_module(p, root) and p.name not in only_tests
            h.update(str(p.relative_to(root)).encode() + b"\0" + (b"" if left_out else _code_of(p)) + b"\0")
    return h.hexdigest()[:12]


def is_test_module(path: Path, root: Path) -> bool:
    return path.parent == root / "e2e" and path.name.startswith("test_") and path.suffix == ".py"


def _code_of(path: Path) -> bytes:
    """A Python file's syntax tree without its comments and docstrings, so that correcting the
    prose of a test (its claim, a comment's why) keeps the hours of kept results on a software-
    emulated node; any change to what runs, a string literal included, changes it. A file that
    does not parse counts by its bytes."""
    raw = path.read_bytes()
    return _python_code(raw) if path.suffix == ".py" else raw


@functools.lru_cache(maxsize=1024)
def _python_code(raw: bytes) -> bytes:
    """Kept per content: judging many kept results, each scoped on its own modules, parses each
    file once, not once per result."""
    try:
        tree = ast.parse(raw)
    except (SyntaxError, ValueError):
        return raw
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) \
                and body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str):
            node.body = body[1:] or [ast.Pass()]
    return _canonical(tree).encode()


def _canonical(node: object) -> str:
    """The tree as text, the same on every Python the project supports: ``ast.dump`` is not (3.12
    added fields such as ``type_params``, always present and mostly empty), so a field left empty
    is left out, and an f-string's empty pieces too."""
    if isinstance(node, ast.JoinedStr):  # 3.12.0-3.12.x put an empty Constant in some f-strings
        node = ast.JoinedStr(values=[v for v in node.values if not (isinstance(v, ast.Constant) and v.value == "")])
    if isinstance(node, ast.AST):
        fields = [f"{name}={_canonical(value)}" for name, value in ast.iter_fields(node)
                  if value is not None and value != []]
        return f"{type(node).__name__}({', '.join(fields)})"
    if isinstance(node, list):
        return "[" + ", ".join(_canonical(item) for item in node) + "]"
    return repr(node)


@dataclass
class Outcome:
    """What one run of the suite on one build said."""

    name: str
    build: str
    verdict: str  # caught / SURVIVED / NOT RUN (build failed, no test ran, everything skipped) / n/a
    failed: list[str] = field(default_factory=list)  # tests that failed (a call-phase assertion)
    errors: list[str] = field(default_factory=list)  # tests whose setup/teardown failed
    # of those, the ones that never reached the node's verdict (bench/cells.py never_judged): no
    # sight of the mutant, whatever it broke
    unjudged: list[str] = field(default_factory=list)
    passed: int = 0
    skipped: int = 0
    seconds: float = 0.0
    selection: str = ""  # "-k …" or "full suite"
    detail: str = ""  # why NOT RUN; the first failure message otherwise
    suite: str = ""
    exit_code: int | None = None
    # What the run took in, so that a change to a test module it did not run leaves it standing
    # (bench/mutants/standing.py stands): pytest's selection arguments, the test modules they
    # collected, and suite_hash of those alone.
    collect_args: list[str] = field(default_factory=list)
    modules: list[str] = field(default_factory=list)
    scoped: str = ""

    # read back strictly (clusters/inputs.py): a kept file of another shape is refused, by name
    __pydantic_config__ = ConfigDict(strict=True, extra="forbid")

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)

    @classmethod
    def from_json(cls, text: str, source: str = "kept result") -> "Outcome":
        return inputs.load_json(text, cls, source)


def _short(nodeid: str) -> str:
    return nodeid.rsplit("::", 1)[-1]


def read_junit(path: Path) -> tuple[list[str], list[str], int, int, str, list[str]]:
    """(failed, errored, passed, skipped, first failure message, unjudged) from a JUnit XML report
    (a typed record: clusters/inputs.py refuses a file that is not one, by name); ``unjudged``
    names the failed and errored tests that never reached the node's verdict, and the first
    message is a judged one's where there is one."""
    failed: list[str] = []
    errors: list[str] = []
    unjudged: list[str] = []
    passed = skipped = 0
    first = other = ""
    for case in inputs.read_junit(path, "the run's JUnit report").cases:
        bad = case.failure or case.error
        if bad is None:
            if case.skipped is not None:
                skipped += 1
            else:
                passed += 1
            continue
        (failed if case.failure is not None else errors).append(case.name)
        if cells.never_judged(case):
            unjudged.append(case.name)
            other = other or bad.message
        else:
            first = first or bad.message
    return failed, errors, passed, skipped, first or other, unjudged


def judge(name: str, build: str, junit: Path | None, exit_code: int | None, output_tail: str = "") -> Outcome:
    """A mutant is caught when a test of the suite failed on it, having reached the node's verdict
    (a failure in the test itself, or a setup that failed where others passed). A run that could not
    test it (the build failed, the node never came up: every test errored in setup, nothing ran;
    or every failure was one the node had no say in: the API server lost in setup, or refusing
    the suite's credentials) is NOT RUN, never caught; a run where every selected test passed (or
    skipped) SURVIVED."""
    if junit is None or not junit.exists():
        return Outcome(name, build, NOT_RUN, exit_code=exit_code,
                       detail=output_tail.strip().splitlines()[-1] if output_tail.strip() else "no report")
    try:
        failed, errors, passed, skipped, first, unjudged = read_junit(junit)
    except inputs.UsageError as error:  # a report cut short: the run was killed while writing it
        return Outcome(name, build, NOT_RUN, exit_code=exit_code, detail=str(error))
    out = Outcome(name, build, SURVIVED, failed=failed, errors=errors, unjudged=unjudged, passed=passed,
                  skipped=skipped, exit_code=exit_code, detail=first)
    if any(t not in unjudged for t in failed):
        out.verdict = CAUGHT
    elif any(t not in unjudged for t in errors) and passed:
        out.verdict = CAUGHT  # some tests ran and passed, others failed in setup on this build
    elif failed or errors or not passed:
        # the node or the run broke before any test could say anything
        out.verdict = NOT_RUN
        if unjudged and len(unjudged) == len(failed) + len(errors):
            said = first.partition("\n")[0]
            out.detail = f"every failure never reached the node's verdict ({', '.join(unjudged)}): {said}"[:500]
        out.detail = out.detail or "every selected test skipped"
    return out


def seen(o: Outcome) -> list[str]:
    """The tests that failed on a build having reached the node's verdict: what saw it."""
    return [t for t in o.failed + o.errors if t not in o.unjudged]


def table(outcomes: list[Outcome], baseline: "Outcome | list[Outcome] | None", date: str = "",
          release: str = "") -> str:
    """The Markdown table of one release's run, then the baseline(s) (one per base: the release, a
    prototype), then ``caught N/M mutants on RELEASE, K not applicable, F false alarms``: M counts
    the mutants that ran there, never those not applicable to it."""
    rows = ["| mutant | verdict | tests that failed | wall time | selection |", "|---|---|---|---|---|"]
    for o in outcomes:
        caught_by = ", ".join(sorted({_short(t) for t in seen(o)})) or "—"
        if o.verdict == NOT_RUN:
            caught_by = f"could not test: {o.detail}"[:200]
        if o.verdict == NOT_APPLICABLE:
            rows.append(f"| {o.name} | {o.verdict} | not applicable: {o.detail} | — | — |")
            continue
        rows.append(f"| {o.name} | {o.verdict} | {caught_by} | {o.seconds / 60:.1f} min | {o.selection} |")
    on = f" on {release}" if release else ""
    lines = [f"Mutant bench{on}{f' ({date})' if date else ''}", "", *rows, ""]
    alarms = 0
    baselines = [baseline] if isinstance(baseline, Outcome) else list(baseline or [])
    for b in baselines:
        failed = len(b.failed) + len(b.errors)
        alarms += failed
        lines.append(f"unmodified build {b.build}: {b.passed} passed, {failed} failed,"
                     f" {b.skipped} skipped in {b.seconds / 60:.1f} min ({b.selection})"
                     + (f": {', '.join(b.failed + b.errors)}" if failed else ""))
    if not baselines:
        lines.append("unmodified build: not run")
    ran = [o for o in outcomes if o.verdict != NOT_APPLICABLE]
    caught = sum(o.verdict == CAUGHT for o in ran)
    lines.append(f"caught {caught}/{len(ran)} mutants{on}, {len(outcomes) - len(ran)} not applicable, {alarms} false alarms"
                 + ("" if baselines else " (no baseline run)"))
    return "\n".join(lines) + "\n"
