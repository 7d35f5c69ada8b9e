"""The real Kubernetes source of each supported pin, for self-tests that check what a page says
of the kubelet's code: downloaded through the Go module proxy, as the mutant self-tests do."""
from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from clusters import versions
from clusters.vm import build as vbuild
from clusters.vm import k8s_source


def source(release: str) -> Path:
    """The release's source; fails the test when the proxy cannot serve it."""
    if not shutil.which("go"):
        pytest.fail("go is not on PATH: a release's source comes through the Go module proxy")
    try:
        return k8s_source.module_dir("k8s.io/kubernetes", release, vbuild.go_env())
    except k8s_source.SourceError as error:
        pytest.fail(str(error))


def sources() -> dict[str, Path]:
    """Each supported pin -> its source."""
    return {pin: source(pin) for pin in versions.SUPPORTED.values()}


def defines(text: str, name: str) -> bool:
    """Whether Go source text declares ``name`` at package level: a function or method (``Type.Method``
    for one type's), a var, const or type, or a name of a ``var (...)`` block."""
    kind, _, method = name.rpartition(".")
    if kind:
        return re.search(rf"^func \(\w* ?\*?{re.escape(kind)}\) {re.escape(method)}[\[(]", text, re.M) is not None
    return re.search(rf"^(?:func (?:\([^)]*\) )?{re.escape(name)}[\[(]|(?:var|const|type) {re.escape(name)}\b"
                     rf"|\t{re.escape(name)}\s+=)", text, re.M) is not None


def has(tree: Path, file: str, name: str) -> bool:
    path = tree / file
    return path.is_file() and defines(path.read_text(encoding="utf-8", errors="replace"), name)
