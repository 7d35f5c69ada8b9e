"""After a kubelet restart the node is looked for until it is Ready and schedulable again, within
a bound (kind run 16: a correct kubelet's first status after its restart said NotReady)."""

from __future__ import annotations

import pytest

from clusters import discovery
from clusters.discovery import NotReadyAfterRestart, ready_after_restart
from clusters.provider import SwapNode


def node(name: str, behavior: str) -> SwapNode:
    return SwapNode(behavior, "kind", "c", "kc", name, "v1.37.1", "6.12.0", 1 << 33, 1 << 33, 1 << 32, True)


@pytest.fixture(autouse=True)
def quick(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(discovery, "AFTER_RESTART_POLL", 0.01)


def test_a_node_not_ready_at_first_is_waited_for(monkeypatch: pytest.MonkeyPatch) -> None:
    # discover lists Ready, schedulable nodes only: the restarted one is missing twice, then back
    answers = [[node("w", "NoSwap")], [node("w", "NoSwap")], [node("w", "NoSwap"), node("cp", "LimitedSwap")]]
    monkeypatch.setattr(discovery, "discover", lambda *a, **k: answers.pop(0))
    found = ready_after_restart("kc", "kind", "c", lambda n: n.name == "cp", "node cp of c", seconds=5)
    assert (found.name, found.behavior) == ("cp", "LimitedSwap")
    assert answers == []


def test_a_node_that_never_comes_back_fails_naming_what_was_found(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(discovery, "discover", lambda *a, **k: [node("w", "NoSwap")])
    with pytest.raises(NotReadyAfterRestart, match=r"node cp of c: not Ready and schedulable 0s after its kubelet"
                                                   r" restarted \(found: w=NoSwap\)"):
        ready_after_restart("kc", "kind", "c", lambda n: n.name == "cp", "node cp of c", seconds=0.1)
