"""Reconfigure one node's kubelet for one test and restart it, confirmed through /configz; or
restart it with a config it must refuse (`attempt_start`) and see what it did.

The steps are the same wherever the node's files can be reached (vm: the guest agent; kind:
`docker exec` into the node container); a provider supplies a `NodeKubelet` that knows how to
read and write the config file, restart the kubelet, read /configz, wait for Ready and run a
command on the node."""

from __future__ import annotations

import re
import subprocess
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import yaml

from clusters import kubelet_refusal as refusal
from clusters import waits
from clusters.behaviors import WORKLOAD_CONTROLLED_SWAP
from clusters.behaviors import normalize as normalize_behavior
from clusters.kubelet_refusal import StartAttempt

KUBELET_CONFIG = "/var/lib/kubelet/config.yaml"  # kubeadm's, on the vm node and on kind nodes
TRANSITION_PERIOD = "30s"  # evictionPressureTransitionPeriod while a test sets thresholds


class KubeletConfigError(RuntimeError):
    pass


# What a node shows of itself, read beside the kubelet and not through the API server: when the
# API server stops answering a test, this tells a control plane that stopped or restarted (its
# pods' log files are numbered by restart) or a starved node from a broken path to it.
INSIDE_VIEW = r"""
echo "## load, memory, pressure (the kernel's: on kind, the host's, shared by every node)"; uptime; free -m
for f in /proc/pressure/cpu /proc/pressure/memory; do echo "$f: $(head -n 1 "$f" 2>&1)"; done
echo "## the busiest processes (%CPU over each one's life, resident KiB)"
ps -eo pcpu,rss,etime,comm --sort=-pcpu 2>&1 | head -n 9
echo "## services"; for u in kubelet containerd; do echo "$u: $(systemctl is-active "$u" 2>&1)"; done
echo "## listening on the API server's port"; ss -Htln 'sport = :6443' 2>&1
echo "## control-plane containers' logs (N.log: its Nth restart)"
ls -l /var/log/pods/kube-system_kube-apiserver-*/*/ /var/log/pods/kube-system_etcd-*/*/ 2>&1
echo "## kube-apiserver, last lines of each instance (the one before a restart says why it ended)"
tail -n 12 /var/log/pods/kube-system_kube-apiserver-*/kube-apiserver/*.log 2>&1 | cut -c1-300
echo "## kubelet, last lines"; journalctl -u kubelet -n 25 --no-pager -o short-precise 2>&1 | cut -c1-300
"""


def ready_after(status: Mapping[str, Any], since: float | None, kubelet_version: str | None = None) -> str | None:
    """None when the node status says Ready in a status the kubelet posted at or after `since`
    (the node's clock, seconds since the epoch); otherwise what it says instead.

    A restarted kubelet patches the node status at once (it has never reported, so
    tryUpdateNodeStatus sends it whatever changed), its Ready condition's lastHeartbeatTime then
    on the node's clock. Until then the Ready the API server holds is the old kubelet's: taken
    for the new one's, a test would go on before the kubelet it restarted has said anything. The
    heartbeat has whole seconds, so `since` is floored: a status the old kubelet posted in that
    second before the restart, or while it shut down, passes for the new one's (it reports every
    5 minutes unless its status changes, so rarely)."""
    conditions = status.get("conditions") or []
    ready = next((c for c in conditions if c.get("type") == "Ready"), None)
    if ready is None:
        return "no Ready condition"
    said = f"Ready={ready.get('status')} ({ready.get('reason') or ''}: {(ready.get('message') or '')[:120]})"
    if since is not None:
        heartbeat = ready.get("lastHeartbeatTime") or ""
        try:
            posted = datetime.fromisoformat(heartbeat.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return f"{said}, heartbeat {heartbeat!r} unreadable"
        if posted < int(since):
            return f"{said}, heartbeat {heartbeat} is the kubelet's before the restart"
    version = (status.get("nodeInfo") or {}).get("kubeletVersion")
    if kubelet_version is not None and version != kubelet_version:
        return f"{said}, kubelet {version} (not yet {kubelet_version})"
    return None if ready.get("status") == "True" else said


class NodeKubelet(ABC):
    progress: Callable[[str], None] = staticmethod(lambda message: None)
    poll_seconds: float = 2  # between looks at a restarting kubelet
    ready_poll_seconds: float = 3  # between looks at the node status

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
    def node_status(self) -> Mapping[str, Any]:
        """The node's status as the API server holds it (the Node's `status`, its JSON fields)."""

    @abstractmethod
    def node_command(self, argv: Sequence[str]) -> str:
        """Run a command on the node, as root, beside the kubelet; its standard output. Raises
        when it exits non-zero."""

    def check(self) -> None:
        """Raise if the node will never answer (the vm node's QEMU stopped it): the wait for
        /configz below swallows every other error while the kubelet restarts."""

    def no_answer(self, error: BaseException) -> bool:
        """Whether a `node_command` that failed got no answer from the node (its exec timed out,
        the connection dropped): a look lost inside a wait (decision 0037). Anything the node
        answered, such as a non-zero exit, is not."""
        return isinstance(error, (subprocess.TimeoutExpired, TimeoutError, ConnectionError))

    # --- built on the above ----------------------------------------------------------------------

    def node_clock(self) -> float:
        """The node's own clock (seconds since the epoch), the one its kubelet stamps with."""
        return float(self.node_command(refusal.CLOCK_COMMAND))

    def wait_ready(self, deadline: float, since: float | None = None, kubelet_version: str | None = None) -> None:
        """Until the node is Ready in a status posted at or after `since` (node clock; None:
        any), by a kubelet of `kubelet_version` if given (ready_after); raises at `deadline`."""
        last = "no answer yet"
        while True:
            self.check()
            try:
                last = ready_after(self.node_status(), since, kubelet_version) or ""
                if not last:
                    return
            except Exception as e:  # noqa: BLE001 - the API server busy while the kubelet restarts
                last = f"{type(e).__name__}: {str(e)[:200]}"
            if time.monotonic() >= deadline:
                posted = " in a status its restarted kubelet posted" if since is not None else ""
                raise KubeletConfigError(f"timed out waiting for the node to be Ready{posted}; last seen: {last}")
            time.sleep(self.ready_poll_seconds)

    def inside_view(self) -> str:
        """The node as it shows itself (INSIDE_VIEW)."""
        return self.node_command(["sh", "-c", INSIDE_VIEW])

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
        since = self.node_clock()
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
        try:
            self.wait_ready(deadline, since)
        except KubeletConfigError as error:
            raise KubeletConfigError(f"{what}: {error}") from None

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
    def reconfigured(self, change: KubeletChange) -> Iterator[Restarted]:
        """Run the block with `change` made to the config file, live (confirmed by /configz); the
        file is put back and that confirmed too, however the block ends. The block is given the
        restarted kubelet's journal."""
        since, running = self._restart_marks()
        original = self.change(change.apply, change.live, change.what)
        try:
            yield Restarted(change.what, lambda: self._journal_since(since, running))
        finally:
            before = yaml.safe_load(original)
            self.restart_with(original, lambda live: change.restored(live, before), f"{change.what}: restored")

    def attempt_start(self, change: KubeletChange) -> StartAttempt:
        """Restart the kubelet with `change` made to its config file, expecting it to refuse it,
        and say what it did: refused (systemd saw its process exit, with its journal since the
        restart) or started (/configz answered: any answer, since restart() returns once the old
        process is gone). The file as it was is put back, the kubelet restarted, and that
        confirmed through /configz and Ready as `reconfigured` does, however this ends."""
        before = self.read_config()
        config = yaml.safe_load(before)
        change.apply(config)
        flags_before = self.node_command(refusal.read_flags_command()) if change.flags else ""
        proc_swaps = self.node_command(refusal.PROC_SWAPS_COMMAND)
        since, running = self._restart_marks()
        try:
            self.write_config(yaml.safe_dump(config, sort_keys=False))
            if change.flags:
                self.node_command(refusal.write_flags_command(refusal.with_flags(flags_before, change.flags)))
            self.restart()
            self.progress(f"{change.what}: kubelet restarted, waiting for it to exit (or to answer /configz)")
            return self._started_or_refused(change.what, config, proc_swaps, since, running, change.flags)
        finally:
            if change.flags:
                self.node_command(refusal.write_flags_command(flags_before))
            original = yaml.safe_load(before)
            self.restart_with(before, lambda live: change.restored(live, original), f"{change.what}: restored")

    @contextmanager
    def without_swap(self, timeout: float = 600) -> Iterator[None]:
        """Run the block with the node's swap areas off and its kubelet restarted on a machine
        without swap (the kubelet reads its machine's swap once, at start). However the block
        ends, the areas turned off are turned on again and the kubelet restarted, Ready."""
        areas = swap_areas(self.node_command(refusal.PROC_SWAPS_COMMAND))
        if not areas:
            raise KubeletConfigError("the node has no swap to turn off (/proc/swaps lists none)")
        try:
            # swapoff brings every swapped page back into memory first: seconds on an idle node
            self.node_command(["swapoff", *areas])
            self.restart_with(self.read_config(), lambda live: True, "swap off: kubelet restart", timeout)
            yield
        finally:
            self._swap_back_on(areas, timeout)

    def _swap_back_on(self, areas: Sequence[str], timeout: float) -> None:
        """Each area on again, on its own (one that fails keeps no other off; one already on is
        left), then the kubelet restarted whatever happened, so that it reads its machine's swap
        again. What failed is raised after: a node left without swap would fail later tests."""
        problems: list[str] = []
        try:
            on = set(swap_areas(self.node_command(refusal.PROC_SWAPS_COMMAND)))
        except Exception as error:  # noqa: BLE001 - swapon every area then; "busy" means it is on
            on = set()
            problems.append(f"reading /proc/swaps: {error}")
        for area in areas:
            if area in on:
                continue
            try:
                self.node_command(["swapon", area])
            except Exception as error:  # noqa: BLE001 - the others and the restart still go ahead
                if "busy" not in str(error).lower():
                    problems.append(f"swapon {area}: {error}")
        try:
            self.restart_with(self.read_config(), lambda live: True, "swap back on: kubelet restart", timeout)
        except Exception as error:  # noqa: BLE001 - said below with the rest
            problems.append(f"kubelet restart: {error}")
        if problems:
            raise KubeletConfigError("the node's swap could not be put back as it was: " + "; ".join(problems))

    def _restart_marks(self) -> tuple[float, str]:
        """Read before a restart: the node's clock, and the running kubelet's pid, whose lines
        after that (its shutdown) are not the new kubelet's."""
        return self.node_clock(), refusal.unit_state(self.node_command(refusal.unit_command())).get("MainPID", "")

    def _journal_since(self, since: float, old_pid: str) -> list[refusal.JournalLine]:
        """The unit's journal since `since`, without the lines of the process `old_pid`."""
        lines = refusal.journal_lines(self.node_command(refusal.journal_command(since)), since)
        return [line for line in lines if not (old_pid and line.pid == old_pid)]

    def _started_or_refused(self, what: str, config: dict[str, Any], proc_swaps: str, since: float,
                            old_pid: str, flags: tuple[str, ...] = ()) -> StartAttempt:
        """Until systemd has seen the kubelet exit, or /configz answers (waits.KUBELET_REFUSAL).
        Once it exited, the journal is read until a second kubelet process has logged (systemd
        restarts it every RestartSec: by then the first one's last lines are in), at most
        waits.KUBELET_LOG_SETTLED more. A read of the node that got no answer (`no_answer`: an
        exec timed out on a loaded node) loses that look, not the wait (decision 0037): its error
        is raised only when the wait is over. What the node answered, an error too, ends it."""

        def journal() -> tuple[refusal.JournalLine, ...]:
            return tuple(self._journal_since(since, old_pid))

        deadline = time.monotonic() + waits.bound(waits.KUBELET_REFUSAL)
        restarts_before: int | None = None
        exited_at: float | None = None
        state: dict[str, str] = {}  # the unit as last read
        last = "no look yet"
        while True:
            self.check()  # raises where the node will never answer (a vm guest QEMU stopped)
            try:
                state = refusal.unit_state(self.node_command(refusal.unit_command()))
                unit = f"kubelet.service {state}"
            except Exception as e:
                if not self.no_answer(e):
                    raise
                unit = f"kubelet.service unread: {type(e).__name__}: {str(e)[:160]}"
            else:
                if restarts_before is None:
                    restarts_before = refusal.restarts(state)
                if exited_at is None and refusal.has_exited(state, restarts_before):
                    exited_at = time.monotonic()
            if exited_at is None:
                try:
                    live = self.configz()
                except Exception as e:  # noqa: BLE001 - not serving: still starting, or refusing
                    last = f"/configz: {type(e).__name__}: {str(e)[:160]}; {unit}"
                else:
                    return StartAttempt(what, config, proc_swaps, False, journal(), state, live, flags)
            else:
                settled = time.monotonic() - exited_at >= waits.bound(waits.KUBELET_LOG_SETTLED)
                try:
                    log = journal()
                except Exception as e:
                    if not self.no_answer(e):
                        raise
                    if settled:  # a look lost, until the journal has had its time
                        raise KubeletConfigError(f"{what}: the kubelet exited, and its journal could not be read"
                                                 f" within {waits.bound(waits.KUBELET_LOG_SETTLED):.0f}s:"
                                                 f" {type(e).__name__}: {str(e)[:300]}") from None
                else:
                    if len(refusal.kubelet_processes(log)) >= 2 or settled:
                        return StartAttempt(what, config, proc_swaps, True, log, state, flags=flags)
            if exited_at is None and time.monotonic() >= deadline:
                raise KubeletConfigError(f"{what}: the restarted kubelet neither exited nor answered /configz within"
                                         f" {waits.bound(waits.KUBELET_REFUSAL):.0f}s; last: {last}")
            time.sleep(self.poll_seconds)


def swap_areas(proc_swaps: str) -> list[str]:
    """The file or device of each active swap area in /proc/swaps (which escapes a blank, a tab,
    a newline and a backslash in a path as octal, like /proc/mounts)."""
    names = [line.split()[0] for line in proc_swaps.splitlines()[1:] if line.strip()]
    return [re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), name) for name in names]


@dataclass(frozen=True)
class Restarted:
    """A kubelet restarted with a changed config file: what it logged since, read when asked."""

    what: str
    journal: Callable[[], list[refusal.JournalLine]]

    def kubelet_lines(self) -> list[str]:
        """What the new kubelet process logged (systemd's lines about the unit left out)."""
        return refusal.kubelet_lines(self.journal())


@dataclass(frozen=True)
class KubeletChange:
    """A change to a kubelet's config file for one test: how it is made, how /configz shows it
    live, and how /configz shows it undone (given the file as it was before)."""

    what: str
    apply: Callable[[dict[str, Any]], None]
    live: Callable[[Mapping[str, Any]], bool]
    restored: Callable[[Mapping[str, Any], Mapping[str, Any]], bool]
    flags: tuple[str, ...] = ()  # command-line flags added for the restart (attempt_start only)


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


def hard_memory_threshold(system_reserved: int, available: int) -> KubeletChange:
    """Memory reserved for the system and a hard memory.available threshold, the file's only
    hard threshold. A hard memory.available threshold also becomes one on the pods' own signal,
    their cgroup's limit (capacity minus the reservations) minus their working set
    (eviction/helpers.go addAllocatableThresholds), which the reservation brings close to the
    pods' usage."""
    values = {"systemReserved": {"memory": str(system_reserved)}, "evictionHard": {"memory.available": str(available)},
              "evictionPressureTransitionPeriod": TRANSITION_PERIOD}

    def live(cfg: Mapping[str, Any]) -> bool:
        # the threshold as written: a kubelet that merges its default thresholds shows more keys
        return ((cfg.get("systemReserved") or {}).get("memory") == str(system_reserved)
                and (cfg.get("evictionHard") or {}).get("memory.available") == str(available)
                and cfg.get("evictionPressureTransitionPeriod") == TRANSITION_PERIOD)

    return KubeletChange(f"systemReserved memory {system_reserved}, evictionHard memory.available {available}",
                         lambda cfg: cfg.update(values), live, lambda live_, before: restored(live_, before, values))


def swap_behavior_unset() -> KubeletChange:
    """memorySwap.swapBehavior removed from the file (failSwapOn stays false): the kubelet then
    runs its own default, which the test reads from /configz and from a new container. So
    "live" is any answer of the restarted kubelet (restart() returns once the old one is gone):
    what it says is the test's to judge, not a condition to wait for."""
    def apply(cfg: dict[str, Any]) -> None:
        (cfg.get("memorySwap") or {}).pop("swapBehavior", None)

    return KubeletChange("memorySwap.swapBehavior unset", apply, lambda live: True,
                         lambda live, before: file_behavior(live) == file_behavior(before))


def file_behavior(config: Mapping[str, Any]) -> str:
    """memorySwap.swapBehavior as a config file or /configz has it ("" where it has none)."""
    return (config.get("memorySwap") or {}).get("swapBehavior") or ""


# Changes a kubelet must refuse (NodeKubelet.attempt_start). "live" is any answer of /configz: a
# kubelet that answers came up with the changed file, which is the finding; restored is the
# file's own value read back.

def _fail_swap_on_restored(live: Mapping[str, Any], before: Mapping[str, Any]) -> bool:
    return live.get("failSwapOn", True) == before.get("failSwapOn", True)


def fail_swap_on_unset() -> KubeletChange:
    """failSwapOn left out of the file (every provider writes false): the kubelet's default, true."""
    return KubeletChange("failSwapOn left out of the config file", lambda cfg: cfg.pop("failSwapOn", None),
                         lambda live: True, _fail_swap_on_restored)


def fail_swap_on_flag() -> KubeletChange:
    """The config file as the node has it (failSwapOn: false), and `--fail-swap-on=true` on the
    kubelet's command line: the flag must win over the file."""
    return KubeletChange("--fail-swap-on=true on the command line, failSwapOn: false in the file",
                         lambda cfg: None, lambda live: True, _fail_swap_on_restored, flags=("--fail-swap-on=true",))


def swap_behavior_set(value: str) -> KubeletChange:
    """memorySwap.swapBehavior written as `value`, as it is: a value the kubelet must refuse."""
    def apply(cfg: dict[str, Any]) -> None:
        cfg["memorySwap"] = {**(cfg.get("memorySwap") or {}), "swapBehavior": value}

    return KubeletChange(f"memorySwap.swapBehavior: {value}", apply, lambda live: True,
                         lambda live, before: file_behavior(live) == file_behavior(before))


def node_swap_gate_off() -> KubeletChange:
    """featureGates NodeSwap: false, and memorySwap left out of the file (with the gate off the
    kubelet refuses a memorySwap section too): only the gate itself can be refused."""
    def apply(cfg: dict[str, Any]) -> None:
        cfg["featureGates"] = {**(cfg.get("featureGates") or {}), "NodeSwap": False}
        cfg.pop("memorySwap", None)

    def gate(config: Mapping[str, Any]) -> Any:
        return (config.get("featureGates") or {}).get("NodeSwap")

    return KubeletChange("featureGates NodeSwap: false, no memorySwap", apply, lambda live: True,
                         lambda live, before: gate(live) == gate(before) and file_behavior(live) == file_behavior(before))


def workload_controlled_swap_gate_off() -> KubeletChange:
    """featureGates WorkloadControlledSwap: false, the file's swapBehavior (WorkloadControlledSwap,
    on that node) kept: a KEP-5359 kubelet must refuse the behavior without its gate."""
    def apply(cfg: dict[str, Any]) -> None:
        cfg["featureGates"] = {**(cfg.get("featureGates") or {}), WORKLOAD_CONTROLLED_SWAP: False}

    def gate(config: Mapping[str, Any]) -> Any:
        return (config.get("featureGates") or {}).get(WORKLOAD_CONTROLLED_SWAP)

    return KubeletChange(f"featureGates {WORKLOAD_CONTROLLED_SWAP}: false", apply, lambda live: True,
                         lambda live, before: gate(live) == gate(before) and file_behavior(live) == file_behavior(before))


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
