"""How the conformance tests are laid out (e2e/test_*.py): a test module imports helpers, never
another test module (what two modules share lives in a helper module named for its job)."""

from __future__ import annotations

import ast
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
