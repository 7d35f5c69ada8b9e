"""The suite as a pytester project: the repository's conftest and pyproject in pytester's
directory, so a self-test runs the suite's own plugin (options, preflight, gate, reports) on test
files of its own, with the repository importable in the child."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def the_suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, *, conftest_extra: str = "",
              pyproject: bool = True, **test_files: str) -> pytest.Pytester:
    """``test_files`` are written as pytester modules (name -> source); ``conftest_extra`` is
    appended to the suite's conftest (a fake's plugin). pytester's directory is on PYTHONPATH too,
    so a module written there can be loaded with ``-p name`` before the conftest."""
    pytester.makeconftest((REPO / "conftest.py").read_text() + conftest_extra)
    if pyproject:
        # the suite's settings without its testpaths, which name the repository's tests/
        pytester.makepyprojecttoml((REPO / "pyproject.toml").read_text().replace('testpaths = ["tests"]', ""))
    if test_files:
        pytester.makepyfile(**test_files)
    monkeypatch.setenv("PYTHONPATH", f"{REPO}{os.pathsep}{pytester.path}")
    return pytester
