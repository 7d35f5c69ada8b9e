"""docs/coverage.md stays true: every test it names is a test function of e2e/ (and every pod
shape it names is one of workloads/pods.py), every mutant it names is a patch of bench/mutants/,
every mutant of the bench is in a row, every row names a test or says `not covered:` and why,
every gap names a proposal that exists, and its counts are its table's. And every file:function
of its table is defined in the real source of each supported pin, or its "On the older minors"
line says where it is before the release that moved it, or from which release it exists."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from clusters import versions
from tests import k8s_pins
from workloads.pods import QOS_SHAPES

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "coverage.md"
E2E = ROOT / "e2e"
MUTANTS = ROOT / "bench" / "mutants"

TEST_REF = re.compile(r"\b(test_\w+\.py)::(test_\w+)(?:\[([^\]]+)\])?")
MUTANT_REF = re.compile(r"\b(\d{2}-[a-z](?:[a-z0-9-]*[a-z0-9])?)\b")
CODE_PATH = re.compile(r"(\.go|\bklc):[A-Za-z_]")
# out of scope: what the suite does not run (its nodes are cgroup v2 Linux with a rootful
# containerd); not observable: a rule no end-to-end observation can tell held (its result equals
# the result without it, or its input never reaches a kubelet), with why; gap: in scope, no test.
REASONS = ("out of scope: cgroup v1", "out of scope: Windows", "out of scope: CRI-O", "out of scope: rootless",
           "not observable:", "gap")
NOT_OBSERVABLE_WHY = 30  # characters, at least: the reason is the claim that nothing could see it
PROPOSAL_REF = re.compile(r"\bG(\d+)\b")
PROPOSAL_HEADING = re.compile(r"^### G(\d+):", re.MULTILINE)
COUNTS = re.compile(r"\*\*(\d+) rows: (\d+) covered, (\d+) out of scope, (\d+) not observable, (\d+) gaps?\.\*\*")


@dataclass(frozen=True)
class Row:
    id: str
    code: str
    rule: str
    claims: str
    mutants: str

    @property
    def tests(self) -> list[tuple[str, str, str | None]]:
        """(module, function, pod shape or None) of every test the claims cell names."""
        return [(m, f, p or None) for m, f, p in TEST_REF.findall(self.claims)]

    @property
    def reason(self) -> str | None:
        """What follows `not covered:` in the claims cell, None where the row claims tests."""
        text = self.claims.strip()
        return text[len("not covered:"):].strip() if text.startswith("not covered:") else None


def rows(text: str) -> list[Row]:
    """The rows of every table whose first cell is a row id (S1, K10, ...)."""
    out = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("| ") else []
        if cells and re.fullmatch(r"[A-Z]\d+", cells[0]):
            assert len(cells) == 5, f"row {cells[0]} has {len(cells)} cells, not 5: {line}"
            out.append(Row(*cells))
    return out


def e2e_test_functions() -> dict[str, set[str]]:
    """module file name -> the test functions it defines (module level, as pytest collects them)."""
    return {path.name: {node.name for node in ast.parse(path.read_text()).body
                        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")}
            for path in sorted(E2E.glob("test_*.py"))}


def problems(text: str, tests: dict[str, set[str]], mutants: set[str], shapes: set[str]) -> list[str]:
    """Everything in the page that is not true of the project (empty: the page is true)."""
    found = rows(text)
    out: list[str] = []
    if not found:
        return ["no rows"]
    ids = [r.id for r in found]
    out += [f"row id {i} is used twice" for i in sorted({i for i in ids if ids.count(i) > 1})]
    headings = {int(n) for n in PROPOSAL_HEADING.findall(text)}
    cited: set[int] = set()
    for row in found:
        if not CODE_PATH.search(row.code):
            out.append(f"{row.id}: the code path names no file:function ({row.code!r})")
        if not row.rule:
            out.append(f"{row.id}: no rule")
        refs, reason = row.tests, row.reason
        if refs and reason is not None:
            out.append(f"{row.id}: both tests and 'not covered'")
        if not refs and reason is None:
            out.append(f"{row.id}: neither a test nor 'not covered: <reason>'")
        if reason is not None and not reason.startswith(REASONS):
            out.append(f"{row.id}: 'not covered: {reason[:40]}...' gives none of the reasons {REASONS}")
        if reason is not None and reason.startswith("not observable:") and \
                len(reason[len("not observable:"):].strip()) < NOT_OBSERVABLE_WHY:
            out.append(f"{row.id}: 'not observable' without saying why nothing could see it")
        if reason is not None and reason.startswith("gap"):
            numbers = {int(n) for n in PROPOSAL_REF.findall(reason)}
            if not numbers:
                out.append(f"{row.id}: a gap without a proposal (G<n>)")
            out += [f"{row.id}: proposal G{n} does not exist" for n in sorted(numbers - headings)]
            cited |= numbers
        for module, function, param in refs:
            if module not in tests:
                out.append(f"{row.id}: {module} is no test module of e2e/")
            elif function not in tests[module]:
                out.append(f"{row.id}: {module}::{function} is no test function")
            if param is not None and (module != "test_cgroup_limits.py" or param not in shapes):
                out.append(f"{row.id}: {module}::{function}[{param}]: {param!r} is no pod shape of a shape test")
    out += [f"proposal G{n} is cited by no row" for n in sorted(headings - cited)]
    named = set(MUTANT_REF.findall(text))
    out += [f"mutant {name} does not exist in bench/mutants/" for name in sorted(named - mutants)]
    in_rows = {name for r in found for name in MUTANT_REF.findall(r.mutants)}
    out += [f"mutant {name} is in no row" for name in sorted(mutants - in_rows)]
    counts = COUNTS.search(text)
    if counts is None:
        out.append("no '**N rows: C covered, O out of scope, U not observable, G gaps.**' line")
    else:
        covered = sum(1 for r in found if r.reason is None)
        scoped = sum(1 for r in found if (r.reason or "").startswith("out of scope"))
        unseen = sum(1 for r in found if (r.reason or "").startswith("not observable"))
        gaps = sum(1 for r in found if (r.reason or "").startswith("gap"))
        actual = (len(found), covered, scoped, unseen, gaps)
        said = tuple(int(n) for n in counts.groups())
        if said != actual:
            out.append(f"the page says {said} (rows, covered, out of scope, not observable, gaps); its table has {actual}")
    return out


def _project() -> tuple[dict[str, set[str]], set[str], set[str]]:
    return e2e_test_functions(), {p.stem for p in MUTANTS.glob("*.patch")}, {s.id for s in QOS_SHAPES}


def test_the_coverage_map_is_true() -> None:
    found = problems(DOC.read_text(encoding="utf-8"), *_project())
    assert not found, "docs/coverage.md:\n" + "\n".join(found)


def test_the_map_covers_the_dimensions_of_the_issue() -> None:
    groups = {r.id[0] for r in rows(DOC.read_text(encoding="utf-8"))}
    assert {"S", "K", "C", "L", "M", "R", "E", "V"} <= groups, groups


HEAD = """**4 rows: 1 covered, 1 out of scope, 1 not observable, 1 gaps.**

| id | code path | swap rule | claims (test: check) | mutants |
|---|---|---|---|---|
"""


def _page(*lines: str, tail: str = "\n### G1: a proposal\n") -> str:
    return HEAD + "\n".join(lines) + "\n" + tail


CLAIM = "`test_cgroup_limits.py::test_x[shape-a]` (check)"
GOOD = (f"| K1 | `klc:GetContainerSwapBehavior` | NoSwap for all | {CLAIM} | 01-m |",
        "| K2 | `a/b.go:F` | v1 | not covered: out of scope: cgroup v1 | — |",
        "| K3 | `a/b.go:G` | r | not covered: gap (G1) | — |",
        "| K4 | `a/b.go:H` | r | not covered: not observable: the result is the same without the rule | — |")
PROJECT = ({"test_cgroup_limits.py": {"test_x"}, "test_a.py": {"test_y"}}, {"01-m"}, {"shape-a"})


def test_a_true_page_passes() -> None:
    assert problems(_page(*GOOD), *PROJECT) == []


@pytest.mark.parametrize("change, expected", [
    (("test_cgroup_limits.py::test_x[", "test_cgroup_limits.py::test_gone["), "::test_gone is no test function"),
    (("test_cgroup_limits.py::test_x[", "test_b.py::test_x["), "test_b.py is no test module"),
    (("test_cgroup_limits.py::test_x[", "test_a.py::test_y["), "'shape-a' is no pod shape"),
    (("[shape-a]", "[shape-z]"), "'shape-z' is no pod shape"),
    (("| 01-m |", "| 02-gone |"), "mutant 02-gone does not exist"),
    (("| 01-m |", "| — |"), "mutant 01-m is in no row"),
    ((CLAIM, "ran it by hand"), "K1: neither a test nor 'not covered: <reason>'"),
    (("not covered: out of scope: cgroup v1", "not covered: too hard"), "gives none of the reasons"),
    (("not covered: gap (G1)", "not covered: gap"), "K3: a gap without a proposal"),
    (("not covered: gap (G1)", "not covered: gap (G7)"), "proposal G7 does not exist"),
    (("`a/b.go:F`", "somewhere"), "K2: the code path names no file:function"),
    (("not observable: the result is the same without the rule", "not observable: hard"),
     "K4: 'not observable' without saying why"),
    (("| K3 |", "| K2 |"), "row id K2 is used twice"),
])
def test_an_untrue_page_fails(change: tuple[str, str], expected: str) -> None:
    page = _page(*GOOD).replace(*change)
    found = problems(page, *PROJECT)
    assert any(expected in p for p in found), found


def test_wrong_counts_fail() -> None:
    page = _page(*GOOD).replace("1 covered, 1 out of scope, 1 not observable", "2 covered, 0 out of scope, 1 not observable")
    assert any("the page says (4, 2, 0, 1, 1)" in p for p in problems(page, *PROJECT))


# --- the map on every supported pin -------------------------------------------------------------

PROTOTYPE = ROOT / "clusters" / "prototypes" / "kep-5359.patch"
CODE_REF = re.compile(r"`((?:klr/)?[\w/.-]+\.go|klc):([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)?)`")
READ_AT = re.compile(r"kubelet and the emptyDir volume plugin at \*\*(v[\d.]+)\*\*")
# - `file:Name` (R2-R7): before 1.36 in `other.go` ...   |   - `file:Name` (R1): new in 1.36; ...
OLDER = re.compile(r"^- `([^`]+)` \(([^)]+)\): (?:before (1\.\d+) in `([^`]+)`|new in (1\.\d+))", re.MULTILINE)


def _path(file: str) -> str:
    if file == "klc":
        return "pkg/kubelet/kuberuntime/kuberuntime_container_linux.go"
    return file.replace("klr/", "pkg/kubelet/kuberuntime/", 1)


def code_refs(text: str, prototype: bool = False) -> dict[tuple[str, str], list[str]]:
    """(file, name) -> the ids of the rows whose code path names it: the upstream rows, or the
    prototype's (P)."""
    out: dict[tuple[str, str], list[str]] = {}
    for row in rows(text):
        if (row.id[0] == "P") == prototype:
            for file, name in CODE_REF.findall(row.code):
                out.setdefault((_path(file), name), []).append(row.id)
    return out


def _ids(spec: str) -> list[str]:
    """"R2-R7, E2" -> R2 ... R7, E2."""
    out = []
    for part in (p.strip() for p in spec.split(",")):
        a, _, b = part.partition("-")
        out += [f"{a[0]}{n}" for n in range(int(a[1:]), int(b[1:]) + 1)] if b else [a]
    return out


def patch_adds(patch: str, file: str, name: str) -> bool:
    """Whether the patch adds a declaration of ``name`` to ``file``."""
    for section in patch.split("diff --git ")[1:]:
        if f"+++ b/{file}\n" in section:
            added = "\n".join(line[1:] for line in section.splitlines() if line.startswith("+"))
            if k8s_pins.defines(added, name):
                return True
    return False


def version_problems(text: str, trees: dict[str, Path], prototype: str) -> list[str]:
    """What the page says of the code that is not so in the pins' source (``trees``: release ->
    its source, every supported pin; ``prototype``: the KEP-5359 patch, which the P rows read)."""
    pins = sorted(trees, key=lambda r: versions.minor_of(r) or (0, 0))
    newest = pins[-1]

    def has(release: str, file: str, name: str) -> bool:
        return k8s_pins.has(trees[release], file, name)

    out: list[str] = []
    read_at = READ_AT.search(text)
    if read_at is None or read_at.group(1) != newest:
        out.append(f"the page says it was read at {read_at and read_at.group(1)}, not the newest pin {newest}")
    listed = {m.group(1): m for m in OLDER.finditer(text)}
    for (file, name), ids in sorted(code_refs(text).items()):
        ref = f"{file}:{name}"
        absent = [r for r in pins if not has(r, file, name)]
        line = listed.pop(ref, None)
        if newest in absent:
            out.append(f"{'/'.join(ids)}: {ref} is not defined in {newest}")
        elif line is None:
            if absent:
                out.append(f"{'/'.join(ids)}: {ref} is not defined in {', '.join(absent)}, and no line of the"
                           " older minors says so")
        else:
            if _ids(line.group(2)) != ids:
                out.append(f"{ref}: the older minors' line names rows {line.group(2)}, the table {', '.join(ids)}")
            since = line.group(3) or line.group(5)
            before = [r for r in pins if (versions.minor_of(r) or (0, 0)) < (versions.minor_of(since) or (0, 0))]
            if absent != before:
                out.append(f"{ref}: said to be in {since}+ only, but not defined in {', '.join(absent) or 'no pin'}")
            if line.group(4):  # `file.go` (the same name) or `file.go:Other`
                other, _, moved = line.group(4).partition(":")
                out += [f"{ref}: said to be in {line.group(4)} on {r}, which does not define it there"
                        for r in before if not has(r, other, moved or name)]
    out += [f"{ref}: the older minors list it, and no upstream row names it" for ref in sorted(listed)]
    for (file, name), ids in sorted(code_refs(text, prototype=True).items()):
        if not has(newest, file, name) and not patch_adds(prototype, file, name):
            out.append(f"{'/'.join(ids)}: {file}:{name} is neither in {newest} nor added by the prototype")
    return out


@pytest.fixture(scope="module")
def pin_sources() -> dict[str, Path]:
    return k8s_pins.sources()


def test_every_code_path_of_the_map_is_in_each_pin_s_source(pin_sources: dict[str, Path]) -> None:
    found = version_problems(DOC.read_text(encoding="utf-8"), pin_sources, PROTOTYPE.read_text(encoding="utf-8"))
    assert not found, "docs/coverage.md against the pins' source:\n" + "\n".join(found)


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, body in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(body)
    return root


OLD_GO = {"a/old.go": "package a\n\nfunc check(x int) bool {\n\treturn true\n}\n",
          "a/b.go": "package a\n\nvar gates = map[string]bool{}\n"}
NEW_GO = {"a/new.go": "package a\n\nfunc check(x int) bool {\n\treturn true\n}\n\n"
                      "func (h *handler) Admit(p int) bool {\n\treturn false\n}\n",
          "a/b.go": "package a\n\nvar gates = map[string]bool{}\n"}
PAGE = ("Every swap-related code path of the kubelet and the emptyDir volume plugin at **v1.37.2**\n\n"
        "| id | code path | swap rule | claims (test: check) | mutants |\n|---|---|---|---|---|\n"
        "| R1 | `a/new.go:check` | r | c | — |\n| R2 | `a/new.go:check` | r | c | — |\n"
        "| R3 | `a/new.go:handler.Admit` | r | c | — |\n| S1 | `a/b.go:gates` | r | c | — |\n"
        "| P1 | `a/new.go:added` (prototype) | r | c | — |\n\n"
        "- `a/new.go:check` (R1-R2): before 1.37 in `a/old.go`, the same.\n"
        "- `a/new.go:handler.Admit` (R3): new in 1.37.\n")
PATCH = "diff --git a/a/new.go b/a/new.go\n--- a/a/new.go\n+++ b/a/new.go\n@@ -1 +1,2 @@\n+func added() {}\n"


@pytest.fixture
def two_pins(tmp_path: Path) -> dict[str, Path]:
    return {"v1.36.5": _tree(tmp_path / "old", OLD_GO), "v1.37.2": _tree(tmp_path / "new", NEW_GO)}


def test_a_page_true_of_the_pins_passes(two_pins: dict[str, Path]) -> None:
    assert version_problems(PAGE, two_pins, PATCH) == []


@pytest.mark.parametrize("change, expected", [
    (("**v1.37.2**", "**v1.37.1**"), "read at v1.37.1, not the newest pin v1.37.2"),
    (("- `a/new.go:handler.Admit` (R3): new in 1.37.\n", ""), "R3: a/new.go:handler.Admit is not defined in v1.36.5,"),
    (("`a/new.go:handler.Admit` (R3): new in 1.37", "`a/new.go:handler.Admit` (R3): new in 1.36"),
     "said to be in 1.36+ only, but not defined in v1.36.5"),
    (("before 1.37 in `a/old.go`", "before 1.37 in `a/b.go`"), "said to be in a/b.go on v1.36.5, which does not"),
    (("(R1-R2)", "(R1)"), "names rows R1, the table R1, R2"),
    (("| S1 | `a/b.go:gates`", "| S1 | `a/b.go:gone`"), "S1: a/b.go:gone is not defined in v1.37.2"),
    (("| R3 | `a/new.go:handler.Admit`", "| R3 | `a/new.go:other.Admit`"), "R3: a/new.go:other.Admit is not defined"),
    (("`a/new.go:added` (prototype)", "`a/new.go:missing` (prototype)"), "P1: a/new.go:missing is neither in v1.37.2"),
    (("| R1 | `a/new.go:check` | r | c | — |\n| R2 | `a/new.go:check` | r | c | — |\n", ""),
     "a/new.go:check: the older minors list it, and no upstream row names it"),
])
def test_a_page_untrue_of_the_pins_fails(two_pins: dict[str, Path], change: tuple[str, str], expected: str) -> None:
    found = version_problems(PAGE.replace(*change), two_pins, PATCH)
    assert any(expected in p for p in found), found
