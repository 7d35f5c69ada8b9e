"""Every write the suite (and its benchmarks) sends to the API server goes through e2e.observe.sent (or once, built
on it), which resends while an overloaded API server answers 5xx or 429: a bare write fails a run
on the first slow etcd, as the node-status patch of the swapoff test did. Checked in the source,
so a new write cannot be added without it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
WRITE = re.compile(r"^(create|patch|delete|replace)_")
# the client objects the suite writes through (CoreV1Api as self.core / ws.observer.core, other
# groups' APIs as api); the observer's own create_namespace and delete_namespace are not writes
CLIENT = re.compile(r"(^|\.)(core|api)$")
SENDERS = {"sent", "once"}


def _sender_call(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and (
        (isinstance(node.func, ast.Name) and node.func.id in SENDERS)
        or (isinstance(node.func, ast.Attribute) and node.func.attr in SENDERS))


def bare_writes(source: str) -> list[str]:
    """The client writes in `source` not sent through sent/once: each must be the body of a lambda
    that is an argument of sent(...) or once(...), or is assigned to a name that is."""
    tree = ast.parse(source)
    parents = {child: parent for parent in ast.walk(tree) for child in ast.iter_child_nodes(parent)}
    passed = {arg.id for node in ast.walk(tree) if _sender_call(node)
              for arg in [*node.args, *(k.value for k in node.keywords)] if isinstance(arg, ast.Name)}
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and WRITE.match(node.func.attr)
                and CLIENT.search(ast.unparse(node.func.value))):
            continue
        lam = node
        while lam in parents and not isinstance(lam, (ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef)):
            lam = parents[lam]
        holder = parents.get(lam)
        ok = isinstance(lam, ast.Lambda) and (
            _sender_call(holder)
            or (isinstance(holder, ast.Assign) and all(isinstance(t, ast.Name) and t.id in passed for t in holder.targets)))
        if not ok:
            found.append(f"line {node.lineno}: {ast.unparse(node.func)}")
    return found


def sources() -> list[Path]:
    return sorted([*REPO.glob("e2e/**/*.py"), *REPO.glob("workloads/**/*.py"), *REPO.glob("bench/**/*.py"),
                   REPO / "conftest.py"])


@pytest.mark.parametrize("path", sources(), ids=lambda p: str(p.relative_to(REPO)))
def test_every_write_is_resent_while_the_api_server_is_overloaded(path: Path) -> None:
    assert bare_writes(path.read_text()) == [], f"{path.relative_to(REPO)}: send these through e2e.observe.sent"


def test_the_check_finds_a_bare_write_and_accepts_the_sent_ones() -> None:
    source = """
def f(self, api, ws, observer):
    self.core.patch_node_status("n", [])
    api.delete_priority_class("p")
    observer.create_namespace("x", {})
    sent("w", lambda: ws.observer.core.create_namespaced_pod("ns", {}))
    once("c", lambda: api.create_priority_class({}))
    send = lambda: self.core.create_namespaced_secret("ns", {})
    once("s", send)
    later = lambda: self.core.delete_namespace("x")
    later()
"""
    assert bare_writes(source) == ["line 3: self.core.patch_node_status", "line 4: api.delete_priority_class",
                                   "line 10: self.core.delete_namespace"]
