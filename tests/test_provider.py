"""SwapNode's version checks, which the min_kubernetes / min_kernel markers rely on."""

from __future__ import annotations

import pytest

from clusters.provider import SwapNode, version_tuple


def node(kubelet: str, kernel: str) -> SwapNode:
    return SwapNode("LimitedSwap", "vm", "c", "kc", "n", kubelet, kernel, 1, 1, 1, True)


@pytest.mark.parametrize(
    ("text", "parsed"),
    [("v1.36.3", (1, 36, 3)), ("1.34", (1, 34, 0)), ("6.12.95+deb12-amd64", (6, 12, 95)), ("v1.37.0-alpha.1", (1, 37, 0))],
)
def test_version_tuple(text: str, parsed: tuple[int, int, int]) -> None:
    assert version_tuple(text) == parsed


def test_version_tuple_rejects_garbage() -> None:
    with pytest.raises(ValueError, match="cannot read a version"):
        version_tuple("latest")


def test_at_least() -> None:
    n = node("v1.34.0", "6.1.0-40-amd64")
    assert n.kubelet_at_least("1.34") and n.kubelet_at_least("1.33.9") and not n.kubelet_at_least("1.34.1")
    assert n.kernel_at_least("6.1") and not n.kernel_at_least("6.4")
