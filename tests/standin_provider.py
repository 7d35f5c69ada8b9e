"""A provider for the suite's own wiring under pytester: every behavior offered, each on a node
with fixed figures. A test's plugin subclasses it for the one thing it checks (a preflight mark,
a progress line, a node view) and offers it through pytest_ksc_make_provider."""

from __future__ import annotations

from collections.abc import Sequence

from clusters.provider import Provider, SwapNode


class StandInProvider(Provider):
    name = "stand-in"

    def coverage(self, behaviors: Sequence[str]) -> dict[str, str | None]:
        return dict.fromkeys(behaviors)

    def node_name(self, behavior: str) -> str:
        return "n"

    def node_for(self, behavior: str) -> SwapNode:
        return SwapNode(behavior, self.name, "c", "kc", self.node_name(behavior), "v1.37.1", "6.12.0", 4 << 30, 4 << 30,
                        2 << 30, True)
