"""The `existing` provider: a cluster someone else runs, reached through a kubeconfig.

Nothing is created or changed: the suite discovers what each node's kubelet really runs
(/configz) and offers tests the nodes that match the behavior they need.
"""

from __future__ import annotations

from collections.abc import Sequence

from clusters import versions
from clusters.checks import Check, PreflightError
from clusters.discovery import DiscoveryError, discover, summary
from clusters.provider import NotCoveredError, Provider, SwapNode


class ExistingProvider(Provider):
    name = "existing"

    def __init__(self, kubeconfig: str, context_name: str = "existing", stress_image: str | None = None):
        self.kubeconfig = kubeconfig
        self._stress_image = stress_image
        self.context_name = context_name
        self._nodes: list[SwapNode] | None = None

    def nodes(self) -> list[SwapNode]:
        if self._nodes is None:
            self._nodes = discover(self.kubeconfig, self.name, self.context_name)
        return self._nodes

    def preflight(self, behaviors: Sequence[str]) -> None:
        try:
            self._nodes = discover(self.kubeconfig, self.name, self.context_name, seconds=15)
        except DiscoveryError as error:
            raise PreflightError([
                Check("cluster", False, str(error), f"check that {self.kubeconfig} points at a running cluster (kubectl --kubeconfig {self.kubeconfig} get nodes)")
            ]) from error
        # The release is the node's, not a name the user gave: each kubelet is asked. One outside
        # the range would be judged by rules no release of it was read for.
        outside = [refused for node in self._nodes if (refused := _unsupported(node))]
        if outside:
            raise PreflightError([Check("Kubernetes version", False, "; ".join(outside),
                                        "run the suite on a cluster whose nodes run a supported release: "
                                        + versions.PICK_A_RELEASE)])

    def coverage(self, behaviors: Sequence[str]) -> dict[str, str | None]:
        try:
            nodes = self.nodes()
        except DiscoveryError as error:
            return {b: f"cluster unreachable: {error}" for b in behaviors}
        present = {n.behavior for n in nodes}
        return {
            b: None if b in present else f"no Ready schedulable node runs it (found: {summary(nodes)})"
            for b in behaviors
        }

    def stress_image(self, node: SwapNode) -> str:
        if not self._stress_image:
            raise NotCoveredError(
                node.behavior,
                "the existing provider needs the workload image on its nodes: build it with"
                " `python -m workloads.image.build OUT_DIR`, import it on every node"
                " (ctr -n k8s.io images import OUT_DIR/stress-*.tar) and pass --stress-image REF",
            )
        return self._stress_image

    def node_for(self, behavior: str) -> SwapNode:
        for node in self.nodes():
            if node.behavior == behavior:
                return node
        raise NotCoveredError(behavior, f"no Ready schedulable node runs it (found: {summary(self.nodes())})")


def _unsupported(node: SwapNode) -> str | None:
    if versions.minor_of(node.kubelet_version) is None:
        return f"node {node.name} reports no kubelet version ({node.kubelet_version!r})"
    return versions.out_of_range(f"node {node.name}'s kubelet {node.kubelet_version}", node.kubelet_version)
