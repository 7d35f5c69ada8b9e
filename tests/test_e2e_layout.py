"""How the conformance tests are laid out (e2e/test_*.py): a test module imports helpers, never
another test module (what two modules share lives in a helper module named for its job); and
every test says what it proves: its docstring's first paragraph is its claim, one sentence (the
README's claims list is made from them)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TEST_MODULES = sorted((REPO / "e2e").glob("test_*.py"))


def imported_test_modules(source: str) -> list[str]:
    """The e2e test modules a module's source imports, anywhere in it (a function's own imports too)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = ("." * node.level) + (node.module or "")
            names = [base]
            if base in ("e2e", "."):  # from the package: each name is a module of it
                names += [f"e2e.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            parts = name.lstrip(".").split(".")
            in_e2e = parts[0] == "e2e" or name.startswith(".")
            if in_e2e and parts[-1].startswith("test_"):
                found.append(name)
    return sorted(set(found))


def test_the_check_sees_every_form_of_import() -> None:
    for source in ("import e2e.test_metrics", "from e2e.test_metrics import meminfo", "from e2e import test_metrics",
                   "from e2e import oracle, test_metrics as m", "from .test_metrics import meminfo",
                   "from . import test_metrics", "def f():\n    from e2e.test_metrics import meminfo\n"):
        assert imported_test_modules(source), source
    for source in ("from e2e import oracle", "from e2e.oom import OOM_KILLED", "import pytest",
                   "from tests.test_report import x", "from e2e.wcs import test_probe_constant"):
        assert not imported_test_modules(source), source


def test_no_test_module_imports_another() -> None:
    assert len(TEST_MODULES) >= 9, TEST_MODULES
    offenders = {path.name: imported_test_modules(path.read_text()) for path in TEST_MODULES}
    assert not {name: found for name, found in offenders.items() if found}, offenders


def test_nothing_else_of_the_suite_imports_a_test_module() -> None:
    """What a test module's verdicts depend on is it and the suite's shared code: the mutant
    bench keeps a result while those are unchanged (bench/mutants suite_hash with only_tests)."""
    others = [p for d in ("e2e", "workloads") for p in sorted((REPO / d).rglob("*.py"))
              if p not in TEST_MODULES] + [REPO / "conftest.py"]
    assert len(others) >= 20, others
    offenders = {str(p.relative_to(REPO)): imported_test_modules(p.read_text()) for p in others}
    assert not {name: found for name, found in offenders.items() if found}, offenders


CLAIM_CHARS = 250


def claim_of(function: ast.FunctionDef) -> str:
    """A test's claim: the first paragraph of its docstring, its lines joined ("" without one)."""
    return " ".join((ast.get_docstring(function) or "").split("\n\n")[0].split())


def test_every_test_states_its_claim_in_one_sentence() -> None:
    problems = []
    tests = 0
    for path in TEST_MODULES:
        for node in ast.parse(path.read_text()).body:
            if not (isinstance(node, ast.FunctionDef) and node.name.startswith("test_")):
                continue
            tests += 1
            claim = claim_of(node)
            where = f"{path.name}::{node.name}"
            if not claim:
                problems.append(f"{where}: no docstring")
            elif not claim.endswith(".") or re.search(r"[.?!]\s+[A-Z]", claim):  # a second sentence begins
                problems.append(f"{where}: the first paragraph is not one sentence: {claim!r}")
            elif len(claim) > CLAIM_CHARS:
                problems.append(f"{where}: the claim is {len(claim)} characters (at most {CLAIM_CHARS}): {claim!r}")
    assert tests >= 20, tests
    assert not problems, "\n".join(problems)
