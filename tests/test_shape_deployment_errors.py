"""When the pod shapes cannot be deployed, the error every shape test quotes is the deployment's
own, not that of the namespace deletion after it (which an overloaded API server refuses too)."""

from __future__ import annotations

from typing import Any

import pytest

from clusters.provider import SwapNode
from e2e import shapes


class RefusingObserver:
    """An API server that takes the namespace, then refuses the first pod and the deletion."""

    def __init__(self, delete_error: Exception | None) -> None:
        self.delete_error = delete_error
        self.deleted: list[str] = []

    def create_namespace(self, name: str, labels: dict[str, str]) -> str:
        return name

    def create(self, manifest: dict[str, Any]) -> None:
        raise TimeoutError("the pod create timed out")

    def delete_namespace(self, name: str) -> None:
        self.deleted.append(name)
        if self.delete_error:
            raise self.delete_error


NODE = SwapNode("LimitedSwap", "kind", "c", "kc", "node-1", "v1.37.1", "6.12.0", 8 << 30, 8 << 30, 4 << 30, True)


@pytest.mark.parametrize("delete_error", [None, ConnectionError("the handshake operation timed out")])
def test_the_deployments_error_is_the_one_raised_and_the_namespace_is_deleted(monkeypatch: pytest.MonkeyPatch,
                                                                             delete_error: Exception | None) -> None:
    observer = RefusingObserver(delete_error)
    monkeypatch.setattr(shapes, "observer_of", lambda node: observer)
    with pytest.raises(TimeoutError, match="the pod create timed out") as raised:
        shapes.deploy_and_read(NODE, "image")
    assert len(observer.deleted) == 1 and observer.deleted[0].startswith("ksc-shapes-limitedswap-")
    notes = getattr(raised.value, "__notes__", [])
    if delete_error:
        assert notes == [f"deleting namespace {observer.deleted[0]} afterwards failed too: ConnectionError: {delete_error}"]
    else:
        assert notes == []
