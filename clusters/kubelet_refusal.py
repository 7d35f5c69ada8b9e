"""A kubelet started with a configuration it must refuse, as the node shows it: the unit's state
and the unit's journal since that start.

The vm node and kind's node image both run the kubelet as systemd's kubelet.service with
Restart=always (RestartSec 3 s on the vm node, clusters/vm/guestfiles.py; 1 s on kind's node
image): a kubelet that refuses its configuration exits 1, having logged why, and systemd starts
it again, and again, until the file is fixed. So "it refused" is the unit's own record that its
process exited since the restart, and what it said is in the journal. These are pure functions of
what `systemctl show` and `journalctl -o json` print, so they are self-tested;
`NodeKubelet.attempt_start` (clusters/kubelet_config.py) runs the commands on the node."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

UNIT = "kubelet"
UNIT_PROPERTIES = ("ActiveState", "SubState", "NRestarts", "MainPID", "ExecMainCode", "ExecMainStatus")
CLOCK_COMMAND = ("date", "+%s.%N")  # the node's own clock: the journal's timestamps are the node's
PROC_SWAPS_COMMAND = ("cat", "/proc/swaps")
SHOWN_LINES = 40  # of the journal, in a failure message


def unit_command() -> list[str]:
    return ["systemctl", "show", UNIT, "--property=" + ",".join(UNIT_PROPERTIES)]


def journal_command(since: float) -> list[str]:
    """The unit's journal from the whole second `since` falls in (journal_lines drops what is older)."""
    return ["journalctl", "--no-pager", "--unit", UNIT, "--since", f"@{int(since)}", "--output", "json"]


# Extra command-line flags: both providers' kubeadm drop-in reads this file (EnvironmentFile=-)
# and passes $KUBELET_EXTRA_ARGS, split on whitespace, after the kubelet's other flags.
FLAGS_FILE = "/etc/default/kubelet"
FLAGS_VARIABLE = "KUBELET_EXTRA_ARGS"


def read_flags_command() -> list[str]:
    """FLAGS_FILE's content ("" where it does not exist)."""
    return ["sh", "-c", 'if [ -e "$1" ]; then cat "$1"; fi', "sh", FLAGS_FILE]


def write_flags_command(text: str) -> list[str]:
    """FLAGS_FILE with this content, replaced in one rename; removed where `text` is ""."""
    return ["sh", "-c", 'if [ -z "$2" ]; then rm -f "$1"; else printf "%s" "$2" > "$1.tmp" && mv "$1.tmp" "$1"; fi',
            "sh", FLAGS_FILE, text]


def with_flags(text: str, flags: Sequence[str]) -> str:
    """FLAGS_FILE's content with `flags` added to KUBELET_EXTRA_ARGS (the line made if missing).
    systemd takes the rest of the line as the value, quotes removed."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        key, sep, value = line.partition("=")
        if sep and key.strip() == FLAGS_VARIABLE:
            value = value.strip()
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
                value = value[1:-1]
            lines[i] = f"{FLAGS_VARIABLE}={' '.join([value, *flags]).strip()}"
            return "\n".join(lines) + "\n"
    return "\n".join([*lines, f"{FLAGS_VARIABLE}={' '.join(flags)}"]) + "\n"


def unit_state(text: str) -> dict[str, str]:
    """`systemctl show`'s Key=Value lines."""
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


def restarts(state: Mapping[str, str]) -> int:
    try:
        return int(state.get("NRestarts") or 0)
    except ValueError:
        return 0


def has_exited(state: Mapping[str, str], restarts_before: int) -> bool:
    """Whether the unit's process exited since `restarts_before` was read: systemd restarted it
    since (NRestarts grew), is waiting to (SubState auto-restart for RestartSec; newer systemd
    also says auto-restart-queued), or gave up (failed, where a unit has no Restart=)."""
    return (restarts(state) > restarts_before or state.get("SubState", "").startswith("auto-restart")
            or state.get("ActiveState") == "failed")


@dataclass(frozen=True)
class JournalLine:
    pid: str
    source: str  # SYSLOG_IDENTIFIER: "kubelet" for the kubelet's own lines, "systemd" for the unit's
    message: str

    def __str__(self) -> str:
        return f"{self.source}[{self.pid}]: {self.message}"


def _message(value: Any) -> str:
    # journalctl's JSON gives a field that is not valid UTF-8 text as an array of its bytes
    if isinstance(value, list):
        return bytes(b for b in value if isinstance(b, int)).decode(errors="replace")
    return "" if value is None else str(value)


def journal_lines(text: str, since: float) -> list[JournalLine]:
    """The entries of `journalctl --output json` logged at or after `since` (seconds of the
    node's clock), in order. A line that is not JSON (a journalctl warning) is skipped."""
    since_us = int(since * 1_000_000)
    lines = []
    for raw in text.splitlines():
        try:
            entry = json.loads(raw)
        except ValueError:
            continue
        if not isinstance(entry, dict) or int(entry.get("__REALTIME_TIMESTAMP") or 0) < since_us:
            continue
        lines.append(JournalLine(str(entry.get("_PID") or ""), str(entry.get("SYSLOG_IDENTIFIER") or entry.get("_COMM") or ""),
                                 _message(entry.get("MESSAGE"))))
    return lines


def kubelet_lines(lines: Sequence[JournalLine]) -> list[str]:
    """What the kubelet processes logged, systemd's own lines about the unit left out."""
    return [line.message for line in lines if line.source == UNIT]


def kubelet_processes(lines: Sequence[JournalLine]) -> list[str]:
    """The kubelet processes that logged, in order (systemd's own lines about the unit left out)."""
    pids: list[str] = []
    for line in lines:
        if line.source == UNIT and line.pid and line.pid not in pids:
            pids.append(line.pid)
    return pids


@dataclass(frozen=True)
class StartAttempt:
    """What a kubelet restarted with a changed config file did, before its own file was put back."""

    what: str  # the change, as KubeletChange.what says it
    config: dict[str, Any]  # the config file as written for the attempt
    proc_swaps: str  # /proc/swaps on the node when the kubelet started: what its swap check reads
    refused: bool  # systemd saw it exit, and it never answered /configz
    log: tuple[JournalLine, ...]  # the unit's journal since the restart: the kubelet's lines and systemd's
    unit: dict[str, str] = field(default_factory=dict)  # systemctl show, when it was decided
    configz: dict[str, Any] | None = None  # what /configz said, where the kubelet came up instead
    flags: tuple[str, ...] = ()  # command-line flags added to the kubelet's for the attempt

    def kubelet_lines(self) -> list[str]:
        """What the kubelet processes themselves logged (systemd's lines about the unit left out)."""
        return kubelet_lines(self.log)

    def outcome(self) -> str:
        if not self.refused:
            return f"it started: /configz answered ({self.what})"
        return (f"refused: it exited (kubelet.service {self.unit.get('ActiveState')}/{self.unit.get('SubState')},"
                f" restarts {self.unit.get('NRestarts')}, last exit status {self.unit.get('ExecMainStatus')})")

    def describe(self) -> str:
        """The attempt for a failure message: the outcome, the end of the journal, /configz."""
        shown = [str(line) for line in self.log[-SHOWN_LINES:]]
        lines = [f"kubelet start with {self.what}: {self.outcome()}",
                 *([f"flags added: {' '.join(self.flags)}"] if self.flags else []),
                 f"/proc/swaps: {self.proc_swaps.strip()!r}",
                 f"journal of kubelet.service since the restart ({len(self.log)} lines"
                 f"{f', the last {SHOWN_LINES}' if len(self.log) > SHOWN_LINES else ''}):",
                 *(f"  {line[:400]}" for line in shown)]
        if self.configz is not None:
            lines.append(f"/configz: {json.dumps(self.configz)[:1500]}")
        return "\n".join(lines)
