"""A kubelet started with a config it must refuse: the oracle's rules (which config refuses it,
and the error it logs, per version), the reading of what the node shows (`systemctl show`,
`journalctl -o json`), and NodeKubelet.attempt_start against a stand-in node: refused, started
instead, neither, and the node's own file put back however it ends."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Sequence
from typing import Any

import pytest
import yaml

from clusters import kubelet_config, kubelet_refusal, waits
from clusters.kubelet_config import KubeletConfigError, NodeKubelet
from e2e import oracle

PINS = ("v1.34.12", "v1.35.8", "v1.36.5", "v1.37.1", "v1.37.2", "v1.37.1+patch.d95d893d74da")
SWAPS = "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n/swapfile                               file\t\t2097148\t\t0\t\t-2\n"
NO_SWAPS = "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n"
NODE_FILE = {"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration", "cgroupDriver": "systemd",
             "failSwapOn": False, "memorySwap": {"swapBehavior": "NoSwap"}}


# --- the oracle ------------------------------------------------------------------------------------

def test_the_node_s_own_file_starts_on_every_pin() -> None:
    for pin in PINS:
        for behavior in ("", "NoSwap", "LimitedSwap"):
            config = {**NODE_FILE, "memorySwap": {"swapBehavior": behavior}}
            assert oracle.kubelet_start_refusal(config, True, pin) is None, (pin, behavior)


@pytest.mark.parametrize("pin", PINS)
def test_fail_swap_on_left_out_refuses_only_with_swap(pin: str) -> None:
    config = {k: v for k, v in NODE_FILE.items() if k != "failSwapOn"}
    refusal = oracle.kubelet_start_refusal(config, True, pin)
    assert refusal is not None and refusal.message == oracle.FAIL_SWAP_ON_MESSAGE
    assert refusal.message == ("running with swap on is not supported, please disable swap or set --fail-swap-on flag"
                               " to false")
    assert "NewContainerManager" in refusal.rule and "defaults it to true" in refusal.rule
    assert oracle.kubelet_start_refusal(config, False, pin) is None  # no swap: the default is harmless
    assert oracle.kubelet_start_refusal({**config, "failSwapOn": True}, True, pin).message == oracle.FAIL_SWAP_ON_MESSAGE
    assert oracle.kubelet_start_refusal({**config, "failSwapOn": False}, True, pin) is None


@pytest.mark.parametrize("pin", PINS)
@pytest.mark.parametrize("value", ["UnlimitedSwap", "limitedswap", "WorkloadControlledSwap", "No Swap"])
def test_a_swap_behavior_other_than_the_three_refuses(pin: str, value: str) -> None:
    refusal = oracle.kubelet_start_refusal({**NODE_FILE, "memorySwap": {"swapBehavior": value}}, True, pin)
    assert refusal is not None and "ValidateKubeletConfiguration" in refusal.rule
    assert refusal.message == (f'invalid configuration: memorySwap.swapBehavior "{value}" must be one of:'
                               ' "", "LimitedSwap" or "NoSwap"')


@pytest.mark.parametrize("pin", PINS)
def test_node_swap_off_is_refused_from_1_34_whatever_else_the_file_says(pin: str) -> None:
    locked = "cannot set feature gate NodeSwap to false, feature is locked to true"
    for config in ({"failSwapOn": False, "featureGates": {"NodeSwap": False}},
                   {**NODE_FILE, "featureGates": {"NodeSwap": False, "Other": True}},
                   {"featureGates": {"NodeSwap": False}, "memorySwap": {"swapBehavior": "UnlimitedSwap"}}):
        refusal = oracle.kubelet_start_refusal(config, True, pin)
        assert refusal is not None and refusal.message == locked, config  # the gates are set before validation
        assert "LockToDefault" in refusal.rule
    assert oracle.kubelet_start_refusal({**NODE_FILE, "featureGates": {"NodeSwap": True}}, True, pin) is None


def test_the_prototype_accepts_workload_controlled_swap_only_with_its_gate() -> None:
    wcs = {**NODE_FILE, "memorySwap": {"swapBehavior": "WorkloadControlledSwap"}}
    on = {**wcs, "featureGates": {"WorkloadControlledSwap": True}}
    assert oracle.kubelet_start_refusal(on, True, "v1.37.2", workload_controlled_swap=True) is None
    for config in (wcs, {**wcs, "featureGates": {"WorkloadControlledSwap": False}}):
        refusal = oracle.kubelet_start_refusal(config, True, "v1.37.2", workload_controlled_swap=True)
        assert refusal is not None and refusal.message == ('invalid configuration: memorySwap.swapBehavior'
                                                           ' "WorkloadControlledSwap" requires the WorkloadControlledSwap'
                                                           ' feature gate')
        assert "KEP-5359 prototype" in refusal.rule and refusal.inputs["prototype"] is True
    # the prototype's kubelet refuses what a released one does, and starts on the node's own file
    unknown = {**NODE_FILE, "memorySwap": {"swapBehavior": "UnlimitedSwap"}}
    assert "must be one of" in oracle.kubelet_start_refusal(unknown, True, "v1.37.2", workload_controlled_swap=True).message
    assert oracle.kubelet_start_refusal(NODE_FILE, True, "v1.37.2", workload_controlled_swap=True) is None
    # a released kubelet: WorkloadControlledSwap is one more unknown value, gate or not
    assert "must be one of" in oracle.kubelet_start_refusal(on, True, "v1.37.2").message


def test_before_1_34_node_swap_off_refuses_only_a_swap_behavior() -> None:
    assert oracle.kubelet_start_refusal({"failSwapOn": False, "featureGates": {"NodeSwap": False}}, True, "v1.33.5") is None
    refusal = oracle.kubelet_start_refusal({**NODE_FILE, "featureGates": {"NodeSwap": False}}, True, "v1.33.5")
    assert refusal is not None and refusal.message == ("invalid configuration: memorySwap.swapBehavior cannot be set when"
                                                       " NodeSwap feature flag is disabled")
    with pytest.raises(ValueError, match="from 1.30 on"):
        oracle.kubelet_start_refusal(NODE_FILE, True, "v1.29.4")


def test_swap_is_on_when_proc_swaps_has_a_line_below_its_header() -> None:
    assert oracle.swap_on_according_to_proc_swaps(SWAPS)
    assert not oracle.swap_on_according_to_proc_swaps(NO_SWAPS)
    assert not oracle.swap_on_according_to_proc_swaps("")


def test_go_quoting() -> None:
    assert oracle.go_quoted('a "b" \\ c\n\t\x01') == '"a \\"b\\" \\\\ c\\n\\t\\x01"'


def test_the_message_is_found_as_klog_quotes_it() -> None:
    message = oracle.kubelet_start_refusal({**NODE_FILE, "memorySwap": {"swapBehavior": "UnlimitedSwap"}}, True,
                                           "v1.37.1").message
    line = ('E0101 10:00:00.123456    1234 run.go:72] "command failed" err="failed to validate kubelet configuration,'
            ' error: invalid configuration: memorySwap.swapBehavior \\"UnlimitedSwap\\" must be one of: \\"\\",'
            ' \\"LimitedSwap\\" or \\"NoSwap\\", path: &TypeMeta{Kind:KubeletConfiguration,}"')
    assert oracle.logged(message, ["I0101 starting", line]) == line
    assert oracle.logged(message, [f"Error: {message}"]) == f"Error: {message}"  # before klog is set up: as it is
    assert oracle.logged(message, ['"command failed" err="failed to run Kubelet: something else"']) is None


# --- what the node shows ----------------------------------------------------------------------------

def entry(seconds: float, pid: int | str, source: str, message: Any) -> str:
    return json.dumps({"__REALTIME_TIMESTAMP": str(int(seconds * 1_000_000)), "_PID": str(pid),
                       "SYSLOG_IDENTIFIER": source, "MESSAGE": message})


def test_the_journal_since_the_restart() -> None:
    text = "\n".join([entry(99.9, 7, "kubelet", "before"), entry(100.0, 8, "kubelet", "Swap is on"),
                      "-- No entries --", entry(100.5, 1, "systemd", "kubelet.service: Main process exited"),
                      entry(101, 9, "kubelet", list(b"bytes \xff"))])
    lines = kubelet_refusal.journal_lines(text, 100.0)
    assert [str(line) for line in lines] == ["kubelet[8]: Swap is on", "systemd[1]: kubelet.service: Main process exited",
                                             "kubelet[9]: bytes \ufffd"]
    assert kubelet_refusal.kubelet_processes(lines) == ["8", "9"]
    assert kubelet_refusal.journal_command(100.7)[-4:] == ["--since", "@100", "--output", "json"]


def test_the_unit_s_exit() -> None:
    running = kubelet_refusal.unit_state("ActiveState=active\nSubState=running\nNRestarts=0\nMainPID=42\n")
    assert running["MainPID"] == "42" and not kubelet_refusal.has_exited(running, 0)
    assert kubelet_refusal.has_exited({"ActiveState": "activating", "SubState": "auto-restart", "NRestarts": "0"}, 0)
    assert kubelet_refusal.has_exited({"ActiveState": "active", "SubState": "running", "NRestarts": "3"}, 2)
    assert kubelet_refusal.has_exited({"ActiveState": "failed", "SubState": "failed", "NRestarts": ""}, 0)


# --- the changes ------------------------------------------------------------------------------------

def test_the_changes_and_how_each_is_seen_undone() -> None:
    before = json.loads(json.dumps(NODE_FILE))
    unset = kubelet_config.fail_swap_on_unset()
    config = json.loads(json.dumps(NODE_FILE))
    unset.apply(config)
    assert "failSwapOn" not in config and unset.live({})
    assert unset.restored({"failSwapOn": False}, before) and not unset.restored({"failSwapOn": True}, before)

    unknown = kubelet_config.swap_behavior_set("UnlimitedSwap")
    config = {"failSwapOn": False, "memorySwap": None}
    unknown.apply(config)
    assert config == {"failSwapOn": False, "memorySwap": {"swapBehavior": "UnlimitedSwap"}}
    assert unknown.restored({"memorySwap": {"swapBehavior": "NoSwap"}}, before)
    assert not unknown.restored({"memorySwap": {"swapBehavior": "UnlimitedSwap"}}, before)

    off = kubelet_config.node_swap_gate_off()
    config = json.loads(json.dumps(NODE_FILE))
    off.apply(config)
    assert config["featureGates"] == {"NodeSwap": False} and "memorySwap" not in config
    assert off.restored({"memorySwap": {"swapBehavior": "NoSwap"}, "featureGates": {}}, before)
    assert not off.restored({"featureGates": {"NodeSwap": False}}, before)

    wcs_file = {**NODE_FILE, "memorySwap": {"swapBehavior": "WorkloadControlledSwap"},
                "featureGates": {"WorkloadControlledSwap": True}}
    gate_off = kubelet_config.workload_controlled_swap_gate_off()
    config = json.loads(json.dumps(wcs_file))
    gate_off.apply(config)
    assert config["featureGates"] == {"WorkloadControlledSwap": False}
    assert config["memorySwap"] == {"swapBehavior": "WorkloadControlledSwap"}
    assert gate_off.restored(wcs_file, wcs_file) and not gate_off.restored(config, wcs_file)


# --- attempt_start on a stand-in node ------------------------------------------------------------------

class StandInNode(NodeKubelet):
    """A node whose kubelet refuses its file when `refuses(config)` says so: systemd shows it
    running, then in auto-restart, and its journal two kubelet processes that logged. Otherwise
    it starts and /configz answers with the file."""

    poll_seconds = 0

    def __init__(self, refuses: Any, hangs: bool = False, broken: str = ""):
        self.file = yaml.safe_dump(NODE_FILE)
        self.refuses = refuses
        self.hangs = hangs  # neither exits nor answers
        self.broken = broken  # a node command that fails
        self.written: list[dict[str, Any]] = []
        self.restarts = 0
        self.looks = 0
        self.ready = 0
        self.flags_file = "KUBELET_EXTRA_ARGS=--runtime-cgroups=/system.slice/containerd.service\n"
        self.flags_written: list[str] = []

    def _refusing(self) -> bool:
        config = yaml.safe_load(self.file)
        if "--fail-swap-on=true" in self.flags_file:
            config["failSwapOn"] = True  # the flag over the file
        return bool(self.refuses(config))

    def read_config(self) -> str:
        return self.file

    def write_config(self, text: str) -> None:
        self.file = text
        self.written.append(yaml.safe_load(text))

    def restart(self) -> None:
        self.restarts += 1
        self.looks = 0

    def configz(self) -> dict[str, Any]:
        if self._refusing() or self.hangs and self.restarts == 1:
            raise ConnectionError("dial tcp 10.0.2.15:10250: connect: connection refused")
        return yaml.safe_load(self.file)

    def wait_ready(self, deadline: float, since: float | None = None, kubelet_version: str | None = None) -> None:
        self.ready += 1

    def node_status(self) -> dict[str, Any]:
        return {}

    def node_command(self, argv: Sequence[str]) -> str:
        if argv[0] == self.broken:
            raise KubeletConfigError(f"{argv[0]} failed")
        if list(argv) == list(kubelet_refusal.PROC_SWAPS_COMMAND):
            return SWAPS
        if list(argv) == list(kubelet_refusal.CLOCK_COMMAND):
            return "1700000000.250000000\n"
        if list(argv) == kubelet_refusal.read_flags_command():
            return self.flags_file
        if list(argv[:-1]) == kubelet_refusal.write_flags_command("")[:-1]:
            self.flags_file = argv[-1]
            self.flags_written.append(argv[-1])
            return ""
        if argv[0] == "systemctl":
            self.looks += 1
            if self.restarts and self._refusing() and self.looks >= 2:
                return "ActiveState=activating\nSubState=auto-restart\nNRestarts=0\nMainPID=0\n"
            return f"ActiveState=active\nSubState=running\nNRestarts=0\nMainPID={100 + self.restarts}\n"
        if argv[0] == "journalctl":
            lines = [entry(1699999999.9, 99, "kubelet", "long before"),
                     entry(1700000000.3, 100, "kubelet", "the old kubelet shutting down"),
                     entry(1700000000.4, 1, "systemd", "Started kubelet.service")]
            if self._refusing():
                lines += [entry(1700000000.6, 201, "kubelet", '"Swap is on" /proc/swaps contents=<'),
                          entry(1700000000.7, 201, "kubelet", f'"command failed" err="failed to run Kubelet:'
                                                              f' {oracle.FAIL_SWAP_ON_MESSAGE}"'),
                          entry(1700000000.8, 1, "systemd", "kubelet.service: Main process exited, status=1/FAILURE"),
                          entry(1700000003.9, 202, "kubelet", '"Kubelet version" kubeletVersion="v1.37.1"')]
            return "\n".join(lines)
        raise AssertionError(f"unexpected command {argv}")


def without_fail_swap_on(config: dict[str, Any]) -> bool:
    return "failSwapOn" not in config


def test_a_refused_start_is_read_and_the_file_put_back() -> None:
    node = StandInNode(without_fail_swap_on)
    attempt = node.attempt_start(kubelet_config.fail_swap_on_unset())
    assert attempt.refused and attempt.configz is None and attempt.proc_swaps == SWAPS
    assert "failSwapOn" not in attempt.config and attempt.config["memorySwap"] == {"swapBehavior": "NoSwap"}
    assert [str(line) for line in attempt.log] == [  # nothing older than the restart, nor of the old kubelet
        "systemd[1]: Started kubelet.service", 'kubelet[201]: "Swap is on" /proc/swaps contents=<',
        f'kubelet[201]: "command failed" err="failed to run Kubelet: {oracle.FAIL_SWAP_ON_MESSAGE}"',
        "systemd[1]: kubelet.service: Main process exited, status=1/FAILURE",
        'kubelet[202]: "Kubelet version" kubeletVersion="v1.37.1"']
    assert oracle.logged(oracle.FAIL_SWAP_ON_MESSAGE, attempt.kubelet_lines())
    assert attempt.outcome().startswith("refused: it exited (kubelet.service activating/auto-restart")
    assert "journal of kubelet.service since the restart (5 lines)" in attempt.describe()
    assert node.written == [attempt.config, NODE_FILE] and node.restarts == 2 and node.ready == 1
    assert yaml.safe_load(node.file) == NODE_FILE


def test_a_kubelet_that_starts_instead_is_the_finding() -> None:
    node = StandInNode(lambda config: False)
    attempt = node.attempt_start(kubelet_config.fail_swap_on_unset())
    assert not attempt.refused and attempt.configz == attempt.config
    assert attempt.outcome() == "it started: /configz answered (failSwapOn left out of the config file)"
    assert yaml.safe_load(node.file) == NODE_FILE and node.restarts == 2 and node.ready == 1


def test_a_kubelet_that_neither_exits_nor_answers_fails_the_wait_and_is_put_back(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(waits, "KUBELET_REFUSAL", waits.Wait(0, clock=0.05))
    node = StandInNode(lambda config: False, hangs=True)
    with pytest.raises(KubeletConfigError, match="neither exited nor answered /configz within 0s; last: /configz:"
                                                  " ConnectionError"):
        node.attempt_start(kubelet_config.swap_behavior_set("UnlimitedSwap"))
    assert yaml.safe_load(node.file) == NODE_FILE and node.restarts == 2 and node.ready == 1


def test_a_node_command_that_fails_midway_still_puts_the_file_back() -> None:
    node = StandInNode(without_fail_swap_on, broken="journalctl")  # the node answered: an error ends the wait
    with pytest.raises(KubeletConfigError, match="^journalctl failed$"):
        node.attempt_start(kubelet_config.fail_swap_on_unset())
    assert yaml.safe_load(node.file) == NODE_FILE and node.restarts == 2 and node.ready == 1


class LosingNode(StandInNode):
    """A node whose reads of one command fail `times` times after the restart (an exec timed out
    on a loaded node), then answer."""

    def __init__(self, refuses: Any, command: str, times: int = 1) -> None:
        super().__init__(refuses)
        self.command, self.times = command, times

    def node_command(self, argv: Sequence[str]) -> str:
        if argv[0] == self.command and self.restarts == 1 and self.times > 0:
            self.times -= 1
            raise subprocess.TimeoutExpired(list(argv), 120)
        return super().node_command(argv)


@pytest.mark.parametrize("command", ["systemctl", "journalctl"])
def test_a_read_of_the_node_lost_during_the_wait_loses_a_look_not_the_wait(command: str) -> None:
    # decision 0037: the unit read while waiting for the exit, the journal read while waiting for it to settle
    node = LosingNode(without_fail_swap_on, command, times=2)
    attempt = node.attempt_start(kubelet_config.fail_swap_on_unset())
    assert attempt.refused and node.times == 0
    assert oracle.logged(oracle.FAIL_SWAP_ON_MESSAGE, attempt.kubelet_lines())
    assert attempt.outcome().startswith("refused: it exited (kubelet.service activating/auto-restart")
    assert yaml.safe_load(node.file) == NODE_FILE and node.restarts == 2


@pytest.mark.parametrize("command, wait, message", [
    ("systemctl", "KUBELET_REFUSAL", r"neither exited nor answered /configz within 0s; last: /configz: ConnectionError: .*;"
                                     r" kubelet.service unread: TimeoutExpired: Command .*systemctl.* timed out"),
    ("journalctl", "KUBELET_LOG_SETTLED", r"the kubelet exited, and its journal could not be read within 0s:"
                                          r" TimeoutExpired: Command .*journalctl.* timed out"),
])
def test_a_read_never_answered_fails_the_wait_once_it_is_over_naming_the_read(
        monkeypatch: pytest.MonkeyPatch, command: str, wait: str, message: str) -> None:
    # the unit read's wait is the refusal's; the journal's, once the kubelet exited, its time to settle
    monkeypatch.setattr(waits, wait, waits.Wait(0, clock=0.05))
    node = LosingNode(without_fail_swap_on, command, times=10**9)
    with pytest.raises(KubeletConfigError, match=message):
        node.attempt_start(kubelet_config.fail_swap_on_unset())
    assert yaml.safe_load(node.file) == NODE_FILE and node.restarts == 2


def test_a_node_that_cannot_be_read_is_not_restarted() -> None:
    node = StandInNode(without_fail_swap_on, broken="cat")
    with pytest.raises(KubeletConfigError, match="cat failed"):
        node.attempt_start(kubelet_config.fail_swap_on_unset())
    assert node.restarts == 0 and node.written == []


class StartingNode(StandInNode):
    """A kubelet that starts with any file, and says so when the file names no swapBehavior."""

    def __init__(self) -> None:
        super().__init__(lambda config: False)

    def node_command(self, argv: Sequence[str]) -> str:
        text = super().node_command(argv)
        if argv[0] == "journalctl" and not (yaml.safe_load(self.file).get("memorySwap") or {}).get("swapBehavior"):
            text += "\n" + entry(1700000000.6, 101, "kubelet", f'"{oracle.NO_BEHAVIOR_LOGGED}" memorySwapBehavior=""')
        return text


def test_a_reconfigured_kubelet_s_journal_is_the_new_process_s() -> None:
    node = StartingNode()
    with node.reconfigured(kubelet_config.swap_behavior_unset()) as restarted:
        lines = restarted.kubelet_lines()
    # the old kubelet's shutdown (pid 100) and systemd's own lines are not the new kubelet's
    assert lines == [f'"{oracle.NO_BEHAVIOR_LOGGED}" memorySwapBehavior=""']
    assert oracle.logged(oracle.NO_BEHAVIOR_LOGGED, lines)
    assert yaml.safe_load(node.file) == NODE_FILE and node.restarts == 2


def fails_swap_on(config: dict[str, Any]) -> bool:
    return config.get("failSwapOn", True) is True


def test_a_flag_is_added_for_the_attempt_and_the_flags_file_put_back() -> None:
    node = StandInNode(fails_swap_on)
    original = node.flags_file
    attempt = node.attempt_start(kubelet_config.fail_swap_on_flag())
    assert attempt.refused and attempt.flags == ("--fail-swap-on=true",) and attempt.config["failSwapOn"] is False
    assert node.flags_written == [
        "KUBELET_EXTRA_ARGS=--runtime-cgroups=/system.slice/containerd.service --fail-swap-on=true\n", original]
    assert node.flags_file == original and yaml.safe_load(node.file) == NODE_FILE and node.restarts == 2
    assert "flags added: --fail-swap-on=true" in attempt.describe()
    refusal = oracle.kubelet_start_refusal(attempt.config, True, "v1.37.2", flags=attempt.flags)
    assert refusal is not None and refusal.message == oracle.FAIL_SWAP_ON_MESSAGE and "--fail-swap-on flag" in refusal.rule


def test_a_change_without_flags_leaves_the_flags_file_alone() -> None:
    node = StandInNode(without_fail_swap_on)
    node.attempt_start(kubelet_config.fail_swap_on_unset())
    assert node.flags_written == []


@pytest.mark.parametrize("flags, refused", [
    (("--fail-swap-on=true",), True), (("--fail-swap-on",), True), (("--fail-swap-on=t",), True),
    (("--fail-swap-on=false",), False), (("--fail-swap-on=true", "--fail-swap-on=0"), False), (("--v=2",), False),
])
def test_the_fail_swap_on_flag_overrides_the_file(flags: tuple[str, ...], refused: bool) -> None:
    refusal = oracle.kubelet_start_refusal(NODE_FILE, True, "v1.37.2", flags=flags)
    assert (refusal is not None) == refused
    assert oracle.kubelet_start_refusal(NODE_FILE, False, "v1.37.2", flags=flags) is None  # no swap, nothing to refuse


@pytest.mark.parametrize("text, expected", [
    ("", "KUBELET_EXTRA_ARGS=--x\n"),
    ("KUBELET_EXTRA_ARGS=--a=1\n", "KUBELET_EXTRA_ARGS=--a=1 --x\n"),
    ('# kept\nKUBELET_EXTRA_ARGS="--a=1 --b"\n', "# kept\nKUBELET_EXTRA_ARGS=--a=1 --b --x\n"),
    ("OTHER=1\n", "OTHER=1\nKUBELET_EXTRA_ARGS=--x\n"),
])
def test_flags_are_added_to_kubelet_extra_args(text: str, expected: str) -> None:
    assert kubelet_refusal.with_flags(text, ["--x"]) == expected
