"""Reconfigure one node's kubelet for one test and restart it, confirmed through /configz.

The steps are the same wherever the node's files can be reached (vm: the guest agent; kind:
`docker exec` into the node container); a provider supplies a `NodeKubelet` that knows how to
read and write the config file, restart the kubelet, read /configz and wait for Ready."""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import yaml

from clusters.behaviors import WORKLOAD_CONTROLLED_SWAP
from clusters.behaviors import normalize as normalize_behavior

KUBELET_CONFIG = "/var/lib/kubelet/config.yaml"  # kubeadm's, on the vm node and on kind nodes
TRANSITION_PERIOD = "30s"  # evictionPressureTransitionPeriod while a test sets thresholds


class KubeletConfigError(RuntimeError):
    pass


class NodeKubelet(ABC):
    progress: Callable[[str], None] = staticmethod(lambda message: None)

    @abstractmethod
    def read_config(self) -> str: ...

    @abstractmethod
    def write_config(self, text: str) -> None: ...

    @abstractmethod
    def restart(self) -> None:
        """Restart the kubelet service; returns once the old process is gone."""

    @abstractmethod
    def configz(self) -> dict[str, Any]: ...

    @abstractmethod
    def wait_ready(self, deadline: float) -> None: ...

    def check(self) -> None:
        """Raise if the node will never answer (the vm node's QEMU stopped it): the wait for
        /configz below swallows every other error while the kubelet restarts."""

    # --- built on the above ----------------------------------------------------------------------

    def swap_behavior(self) -> str:
        return normalize_behavior(self.configz().get("memorySwap", {}).get("swapBehavior", ""))

    def change(self, change: Callable[[dict[str, Any]], Any], live: Callable[[dict[str, Any]], bool], what: str,
               timeout: float = 600) -> str:
        """Apply `change` to the config file, restart, wait until /configz satisfies `live` and the
        node is Ready. Returns the file as it was before."""
        before = self.read_config()
        cfg = yaml.safe_load(before)
        change(cfg)
        self.restart_with(yaml.safe_dump(cfg, sort_keys=False), live, what, timeout)
        return before

    def restart_with(self, text: str, live: Callable[[dict[str, Any]], bool], what: str, timeout: float = 600) -> None:
        self.write_config(text)
        self.restart()
        self.progress(f"{what}: kubelet restarted, waiting for /configz and Ready")
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            self.check()
            try:
                config = self.configz()
                if live(config):
                    break
                last = f"configz: {str(config)[:300]}"
            except Exception as e:  # noqa: BLE001 - kubelet restarting
                last = f"{type(e).__name__}: {str(e)[:160]}"
            time.sleep(2)
        else:
            raise KubeletConfigError(f"{what}: timed out waiting for /configz to show it; last: {last}")
        self.wait_ready(deadline)

    def restart_unchanged(self, timeout: float = 600) -> None:
        self.restart_with(self.read_config(), lambda live: True, "kubelet restart", timeout)

    def restart_as(self, behavior: str | None = None) -> None:
        """Restart the kubelet, its swapBehavior switched to `behavior` if given and different."""
        if behavior is None or normalize_behavior(behavior) == self.swap_behavior():
            self.restart_unchanged()
        else:
            self.set_swap_behavior(behavior)

    def set_swap_behavior(self, behavior: str, timeout: float = 600) -> None:
        behavior = normalize_behavior(behavior)
        t0 = time.monotonic()
        self.change(lambda cfg: switch_behavior(cfg, behavior),
                    lambda live: normalize_behavior(live.get("memorySwap", {}).get("swapBehavior", "")) == behavior,
                    f"swapBehavior -> {behavior}", timeout)
        self.progress(f"swapBehavior {behavior} live after {time.monotonic() - t0:.0f}s")

    @contextmanager
    def reconfigured(self, change: KubeletChange) -> Iterator[None]:
        """Run the block with `change` made to the config file, live (confirmed by /configz); the
        file is put back and that confirmed too, however the block ends."""
        original = self.change(change.apply, change.live, change.what)
        try:
            yield
        finally:
            before = yaml.safe_load(original)
            self.restart_with(original, lambda live: change.restored(live, before), f"{change.what}: restored")


@dataclass(frozen=True)
class KubeletChange:
    """A change to a kubelet's config file for one test: how it is made, how /configz shows it
    live, and how /configz shows it undone (given the file as it was before)."""

    what: str
    apply: Callable[[dict[str, Any]], None]
    live: Callable[[Mapping[str, Any]], bool]
    restored: Callable[[Mapping[str, Any], Mapping[str, Any]], bool]


def settings(values: Mapping[str, Any], what: str) -> KubeletChange:
    """Top-level fields set to these values."""
    return KubeletChange(what, lambda cfg: cfg.update(values), lambda live: shows(live, values),
                         lambda live, before: restored(live, before, values))


def eviction_thresholds(soft: Mapping[str, str], grace: str) -> KubeletChange:
    """Soft thresholds, each with this grace period. Soft, not hard: the kubelet evicts only
    once a threshold has been met for the grace period, and the restart that sets it loses the
    pods' stats for a while (the eviction manager ranks a pod without stats first: seen on kind,
    the first ranking came before two pods had any); a hard threshold would also be taken off
    the node's allocatable memory. evictionMaxPodGracePeriod 1: a pod is killed as under a hard
    threshold (the suite's pods ask for terminationGracePeriodSeconds 1)."""
    # MemoryPressure stays 30 s after the signal clears (not the default 5 min): long enough
    # for the node status and the controller's taint to show a short episode, short enough
    # for the next test.
    return settings({"evictionSoft": dict(soft), "evictionSoftGracePeriod": {k: grace for k in soft},
                     "evictionMaxPodGracePeriod": 1, "evictionPressureTransitionPeriod": TRANSITION_PERIOD},
                    f"evictionSoft {dict(soft)} grace {grace}")


def swap_behavior_unset() -> KubeletChange:
    """memorySwap.swapBehavior removed from the file (failSwapOn stays false): the kubelet then
    runs its own default, which the test reads from /configz and from a new container. So
    "live" is any answer of the restarted kubelet (restart() returns once the old one is gone):
    what it says is the test's to judge, not a condition to wait for."""
    def apply(cfg: dict[str, Any]) -> None:
        (cfg.get("memorySwap") or {}).pop("swapBehavior", None)

    def behavior(config: Mapping[str, Any]) -> str:
        return (config.get("memorySwap") or {}).get("swapBehavior") or ""

    return KubeletChange("memorySwap.swapBehavior unset", apply, lambda live: True,
                         lambda live, before: behavior(live) == behavior(before))


def switch_behavior(cfg: dict[str, Any], behavior: str) -> None:
    """Set the config's swapBehavior. WorkloadControlledSwap (KEP-5359) also needs its feature
    gate on the kubelet, which a released kubelet does not know: it is turned on only for that
    behavior and left on when switching away (the build knows it then, and with it on a NoSwap or
    LimitedSwap kubelet says in a Pod event that limits.swap has no effect there)."""
    cfg.setdefault("memorySwap", {})["swapBehavior"] = behavior
    if behavior == WORKLOAD_CONTROLLED_SWAP:
        cfg.setdefault("featureGates", {})[WORKLOAD_CONTROLLED_SWAP] = True


def shows(live: Mapping[str, Any], settings: Mapping[str, Any]) -> bool:
    """Does the kubelet's /configz show these settings? (A duration reads back as Go prints it:
    "5s"; eviction thresholds as given.)"""
    return all(live.get(key) == value for key, value in settings.items())


def restored(live: Mapping[str, Any], before: Mapping[str, Any], settings: Mapping[str, Any]) -> bool:
    """The restarted kubelet no longer runs the test's values (the file's own values may read
    back defaulted: kubeadm writes evictionPressureTransitionPeriod: 0s, /configz says 5m0s).
    A key the file already had at the test's value cannot tell, and is not asked."""
    return all(live.get(key) != value for key, value in settings.items() if before.get(key) != value)
