"""A node's swap turned off for one test (NodeKubelet.without_swap) against a stand-in node whose
/proc/swaps follows swapoff and swapon: swap is off and the kubelet restarted in the block, and
back on, the kubelet restarted again, however the block ends; and what the suite expects of
status.nodeInfo.swap with and without swap."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from clusters import kubelet_refusal
from clusters.kind_provider import KindProvider
from clusters.kubelet_config import KubeletConfigError, NodeKubelet, swap_areas
from clusters.provider import NotCoveredError, SharedSwapError, SwapNode
from e2e import oracle, verdict

HEADER = "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n"


def proc_swaps(*areas: str) -> str:
    return HEADER + "".join(f"{area}                               file\t\t2097148\t\t0\t\t-2\n" for area in areas)


class SwapNodeStandIn(NodeKubelet):
    poll_seconds = 0

    def __init__(self, areas: Sequence[str], refuse_swapon: str = "", reads: int | None = None):
        self.on = list(areas)
        self.refuse_swapon = refuse_swapon  # the area whose swapon fails
        self.reads = reads  # /proc/swaps answers this many reads, then the node command fails
        self.events: list[str] = []

    def read_config(self) -> str:
        return yaml.safe_dump({"failSwapOn": False, "memorySwap": {"swapBehavior": "LimitedSwap"}})

    def write_config(self, text: str) -> None:
        pass

    def restart(self) -> None:
        self.events.append(f"restart (swap {','.join(self.on) or 'off'})")

    def configz(self) -> dict[str, Any]:
        return yaml.safe_load(self.read_config())

    def wait_ready(self, deadline: float, since: float | None = None, kubelet_version: str | None = None) -> None:
        pass

    def node_status(self) -> dict[str, Any]:
        return {}

    def node_command(self, argv: Sequence[str]) -> str:
        if list(argv) == list(kubelet_refusal.CLOCK_COMMAND):
            return "1700000000.5\n"
        if list(argv) == list(kubelet_refusal.PROC_SWAPS_COMMAND):
            if self.reads is not None:
                if self.reads == 0:
                    raise KubeletConfigError("guest command cat /proc/swaps failed: timed out")
                self.reads -= 1
            return proc_swaps(*(a.replace(" ", "\\040") for a in self.on))
        if argv[0] == "swapoff":
            self.events.append(f"swapoff {' '.join(argv[1:])}")
            self.on = [a for a in self.on if a not in argv[1:]]
            return ""
        if argv[0] == "swapon":
            self.events.append(f"swapon {' '.join(argv[1:])}")
            area = argv[1]
            if area == self.refuse_swapon:
                raise KubeletConfigError(f"swapon: {area}: swapon failed: Invalid argument")
            if area in self.on:
                raise KubeletConfigError(f"swapon: {area}: swapon failed: Device or resource busy")
            self.on.append(area)
            return ""
        raise AssertionError(f"unexpected command {argv}")


def test_proc_swaps_paths_are_unescaped() -> None:
    assert swap_areas(proc_swaps("/swapfile", "/dev/vdb2")) == ["/swapfile", "/dev/vdb2"]
    assert swap_areas(proc_swaps("/var/swap\\040file", "/a\\134b")) == ["/var/swap file", "/a\\b"]
    assert swap_areas(HEADER) == [] and swap_areas("") == []


def test_swap_is_off_in_the_block_and_back_on_after_with_a_restart_each() -> None:
    node = SwapNodeStandIn(["/swapfile", "/extra swap"])
    with node.without_swap():
        assert node.on == []
        assert node.events == ["swapoff /swapfile /extra swap", "restart (swap off)"]
    assert node.on == ["/swapfile", "/extra swap"]
    assert node.events[2:] == ["swapon /swapfile", "swapon /extra swap", "restart (swap /swapfile,/extra swap)"]


def test_swap_comes_back_when_the_block_fails_and_only_what_is_off_is_turned_on() -> None:
    node = SwapNodeStandIn(["/swapfile", "/dev/vdb2"])
    with pytest.raises(RuntimeError, match="the test failed"), node.without_swap():
        node.on.append("/dev/vdb2")  # something turned one area on again meanwhile
        raise RuntimeError("the test failed")
    assert sorted(node.on) == ["/dev/vdb2", "/swapfile"]
    assert node.events[-2:] == ["swapon /swapfile", "restart (swap /dev/vdb2,/swapfile)"]


def test_a_node_without_swap_is_refused() -> None:
    node = SwapNodeStandIn([])
    with pytest.raises(KubeletConfigError, match="no swap to turn off"), node.without_swap():
        pass
    assert node.events == []


def test_a_failed_swapon_keeps_no_other_area_off_nor_the_kubelet_unrestarted() -> None:
    node = SwapNodeStandIn(["/swapfile", "/dev/vdb2"], refuse_swapon="/swapfile")
    with pytest.raises(KubeletConfigError, match="could not be put back.*swapon /swapfile: .*Invalid argument"), \
            node.without_swap():
        pass
    assert node.on == ["/dev/vdb2"]
    assert node.events[-1] == "restart (swap /dev/vdb2)"


def test_an_unreadable_proc_swaps_at_the_end_turns_every_area_on_anyway() -> None:
    node = SwapNodeStandIn(["/swapfile", "/dev/vdb2"], reads=1)  # the first read only
    with pytest.raises(KubeletConfigError, match="reading /proc/swaps: .*timed out") as raised, node.without_swap():
        node.on.append("/dev/vdb2")  # one is on again: its swapon says busy, which is no problem
    assert sorted(node.on) == ["/dev/vdb2", "/swapfile"]
    assert node.events[-1].startswith("restart")
    assert "vdb2" not in str(raised.value)


def test_kind_says_its_nodes_share_their_hosts_swap_and_the_gate_accepts_only_that(tmp_path: Path) -> None:
    node = SwapNode("LimitedSwap", "kind", "ksc-mixed", "", "w1", "v1.37.2", "6.12.95", 4 << 30, 3 << 30, 2 << 30, True)
    with pytest.raises(SharedSwapError) as raised:
        KindProvider("kind", None, tmp_path, reuse=False).kubelet_without_swap(node)
    assert isinstance(raised.value, NotCoveredError) and "kind host" in raised.value.reason
    reason = f"{verdict.SWAP_SHARED_BY_NODES}: {raised.value.reason}"
    test = "test_a_kubelet_started_without_swap_reports_no_node_swap"
    assert verdict.accepted_skip("LimitedSwap", "test_kubelet_restart", reason, test)
    assert not verdict.accepted_skip("LimitedSwap", "test_kubelet_restart", reason,
                                     "test_swap_limits_across_a_kubelet_restart_and_a_behavior_switch")
    assert not verdict.accepted_skip("LimitedSwap", "test_metrics", reason, test)
    assert not verdict.accepted_skip("LimitedSwap", "test_kubelet_restart",
                                     "the kind provider cannot turn a node's swap off for one test", test)


def test_node_swap_status_is_left_out_without_swap() -> None:
    assert oracle.node_swap_status(0) is None
    assert oracle.node_swap_status(2147479552) == {"capacity": 2147479552}
