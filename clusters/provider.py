"""The one interface every provider offers: a node running a given swapBehavior, or the reason why not."""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from clusters.kubelet_config import KubeletChange, Restarted
    from clusters.kubelet_refusal import StartAttempt


def version_tuple(text: str) -> tuple[int, int, int]:
    """(major, minor, patch) from "v1.36.3", "1.34" or a kernel release like "6.12.95+deb12-amd64"."""
    match = re.match(r"v?(\d+)\.(\d+)(?:\.(\d+))?", text)
    if not match:
        raise ValueError(f"cannot read a version from {text!r}")
    return int(match.group(1)), int(match.group(2)), int(match.group(3) or 0)


@dataclass(frozen=True)
class SwapNode:
    """A schedulable node whose live kubelet configuration runs `behavior`, with its real figures."""

    behavior: str
    provider: str
    cluster: str
    kubeconfig: str
    name: str
    kubelet_version: str
    kernel: str
    memory_capacity: int  # status.capacity.memory (= MemTotal, the kubelet's nodeMemory)
    memory_allocatable: int
    swap_capacity: int  # status.nodeInfo.swap.capacity; before 1.33, /stats/summary's node swap limit
    cgroup_v2: bool | None  # None: not known without probing the node
    kubelet_config: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    # what the build is when it is not a Kubernetes release or branch, e.g. "KEP-5359 ... prototype
    # (kep-5359.patch), not upstream Kubernetes": every report and summary line names it
    build_note: str = ""
    # True under software emulation (TCG), False on hardware or KVM, None where the provider
    # cannot tell: clusters/waits.py scales its bounds by it
    emulated: bool | None = field(default=None, compare=False)
    # status.nodeInfo.containerRuntimeVersion ("containerd://2.4.2"): which stats provider the
    # kubelet uses, which some oracle rules depend on
    container_runtime: str = field(default="", compare=False)

    def kubelet_at_least(self, version: str) -> bool:
        return version_tuple(self.kubelet_version) >= version_tuple(version)

    def kernel_at_least(self, version: str) -> bool:
        return version_tuple(self.kernel) >= version_tuple(version)

    def describe(self) -> str:
        return (
            f"{self.provider}:{self.cluster}/{self.name} ({self.behavior}, kubelet {self.kubelet_version},"
            f" kernel {self.kernel}, memory {self.memory_capacity}, swap {self.swap_capacity})"
            + (f" [{self.build_note}]" if self.build_note else "")
        )


class NotCoveredError(RuntimeError):
    """The environment cannot offer this behavior; the message says why and what would help."""

    def __init__(self, behavior: str, reason: str):
        self.behavior = behavior
        self.reason = reason
        super().__init__(f"{behavior} not covered: {reason}")


class SharedSwapError(NotCoveredError):
    """The node's swap is not its own (kind: its host's, shared by every node on that host), so
    it cannot be turned off for one node."""


class Provider(ABC):
    name: str
    reconfigures_kubelets: bool = False  # implements reconfigured_kubelet (and so eviction_thresholds)
    restarts_kubelets: bool = False  # implements restart_kubelet
    # One node switches from behavior to behavior (vm); otherwise each behavior has a node of
    # its own, and a test that runs alone on one leaves the others' tests running (e2e/alone.py).
    one_node_for_every_behavior: bool = False

    @abstractmethod
    def coverage(self, behaviors: Sequence[str]) -> dict[str, str | None]:
        """Cheaply, before creating anything: for each behavior, None if it can be offered,
        otherwise the reason it cannot."""

    @abstractmethod
    def node_for(self, behavior: str) -> SwapNode:
        """A node running `behavior`, creating or reconfiguring what is needed.
        Raises NotCoveredError when it cannot."""

    def stress_image(self, node: SwapNode) -> str:
        """The ref of the suite's workload image, present on `node` (never pulled)."""
        raise NotImplementedError(f"the {self.name} provider cannot place the workload image on a node")

    def reconfigured_kubelet(self, node: SwapNode, change: KubeletChange) -> AbstractContextManager[Restarted]:
        """Run the block with the node's kubelet reconfigured by `change`, confirmed through
        /configz, given the restarted kubelet's journal; the kubelet's own configuration is
        restored, and confirmed, afterwards.
        Raises NotCoveredError where the provider cannot reconfigure a kubelet for one test."""
        raise NotCoveredError(node.behavior, f"the {self.name} provider cannot reconfigure a kubelet for one test"
                                             f" ({change.what})")

    def attempt_kubelet_start(self, node: SwapNode, change: KubeletChange) -> StartAttempt:
        """Restart the node's kubelet with `change` made to its config file, one it is expected
        to refuse, and say what it did: refused (with its journal since that restart) or started
        (with its /configz). The kubelet's own configuration is restored, and confirmed,
        afterwards. Raises NotCoveredError where the provider cannot reconfigure a kubelet for one
        test."""
        raise NotCoveredError(node.behavior, f"the {self.name} provider cannot reconfigure a kubelet for one test"
                                             f" ({change.what})")

    def eviction_thresholds(self, node: SwapNode, soft: Mapping[str, str], grace: str) -> AbstractContextManager[Restarted]:
        """The node's kubelet with these evictionSoft thresholds, each with grace period `grace`
        (and a short evictionPressureTransitionPeriod), for the block."""
        from clusters.kubelet_config import eviction_thresholds

        return self.reconfigured_kubelet(node, eviction_thresholds(soft, grace))

    def restart_kubelet(self, node: SwapNode, behavior: str | None = None) -> SwapNode:
        """Restart the node's kubelet, its swapBehavior switched to `behavior` if given, and
        wait until /configz shows it and the node is Ready; return the node as it now is.
        Running pods stay. Raises NotCoveredError where the provider cannot restart a kubelet
        for one test."""
        raise NotCoveredError(node.behavior, f"the {self.name} provider cannot restart a kubelet for one test")

    def kubelet_without_swap(self, node: SwapNode) -> AbstractContextManager[None]:
        """Run the block with the node's swap off and its kubelet restarted without it; swap on
        again and the kubelet restarted, Ready, afterwards. Raises NotCoveredError where the
        provider cannot (SharedSwapError where the node's swap is shared with other nodes)."""
        raise NotCoveredError(node.behavior, f"the {self.name} provider cannot turn a node's swap off for one test")

    def node_view(self, node: SwapNode | None) -> str:
        """The node as it shows itself, read without the API server (its load, services,
        control-plane restarts, the kubelet's last lines): said in a failure where the API server
        stopped answering. `node` None: the provider's only node, where it has one. "" where the
        provider cannot reach a node but through the API server."""
        return ""

    def preflight(self, behaviors: Sequence[str]) -> dict[str, Any] | None:
        """Raise clusters.checks.PreflightError listing every missing prerequisite. It runs once,
        in one process of the run; what it returns (JSON) every process is given (adopt)."""

    def adopt(self, decided: dict[str, Any]) -> None:
        """What the run's preflight decided and returned (the kind provider's kind host, say),
        taken up by this process before it creates or reaches anything."""

    def prepare(self, behaviors: Sequence[str]) -> None:
        """Once per run, before the first test: create what the behaviors need up front, if the
        provider benefits from it. A failure is recorded for the behavior's tests, not raised."""

    def teardown(self, created: Sequence[dict[str, Any]]) -> list[str]:
        """Remove what this run created (entries recorded by clusters.shared); return messages."""
        return []

    def kept(self, entry: Mapping[str, Any]) -> str:
        """What the run says, under --keep-clusters, of something it created and leaves up: how to
        reuse it and how to remove it. An entry may carry its own line (`kept`)."""
        return entry.get("kept") or (f"kept {entry['provider']} {entry['cluster']} (--keep-clusters; reuse it with"
                                     f" --reuse-clusters{self.removal_hint(entry)})")

    def removal_hint(self, entry: Mapping[str, Any]) -> str:
        """", <how to remove it>" for `kept`, where the provider knows a command."""
        return ""
