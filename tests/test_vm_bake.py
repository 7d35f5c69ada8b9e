"""The vm disk's bake boot: a disk is kept only when its guest imported the images and powered
off by itself (clusters/vm/image.py _bake)."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusters import waits
from clusters.vm import image, qemu


class Agent:
    def __init__(self, *a, **k) -> None:  # noqa: ANN002, ANN003
        self.commands: list[list[str]] = []

    def ping(self, timeout: float) -> bool:
        return True

    def exec(self, argv: list[str], timeout: float = 60) -> tuple[int, str, str]:
        self.commands.append(argv)
        return 0, "active\n" if argv[:2] == ["systemctl", "is-active"] else "", ""

    def spawn(self, argv: list[str]) -> None:
        Guest.powered_off = Guest.powers_off


class Guest:
    powers_off = True
    powered_off = False
    stopped = 0


@pytest.fixture
def guest(monkeypatch: pytest.MonkeyPatch) -> type[Guest]:
    Guest.powered_off, Guest.stopped = False, 0
    monkeypatch.setattr(qemu, "start_qemu", lambda *a, **k: None)
    monkeypatch.setattr(qemu, "check_guest", lambda paths: None)
    monkeypatch.setattr(qemu, "GuestAgent", Agent)
    monkeypatch.setattr(qemu, "read_pid", lambda paths: None if Guest.powered_off else 4242)
    monkeypatch.setattr(qemu, "wait_gone", lambda pid, secs: Guest.powered_off)

    def stop(paths: qemu.VmPaths, timeout: float = 20) -> bool:
        Guest.stopped += 1
        return True

    monkeypatch.setattr(qemu, "stop_qemu", stop)
    monkeypatch.setattr(waits, "VM_BAKE_POWEROFF", waits.Wait(0, clock=1.5))
    monkeypatch.setattr(image.time, "sleep", lambda s: None)
    return Guest


def test_a_guest_that_powers_off_leaves_its_disk_baked(guest: type[Guest], tmp_path: Path) -> None:
    guest.powers_off = True
    image._bake(tmp_path, tmp_path, lambda message: None)
    assert guest.powered_off


def test_a_guest_killed_after_the_poweroff_wait_leaves_no_disk(guest: type[Guest], tmp_path: Path) -> None:
    guest.powers_off = False
    with pytest.raises(image.ImageError, match="did not power off within 2s after its sync; the disk is not kept"):
        image._bake(tmp_path, tmp_path, lambda message: None)
    assert guest.stopped == 2  # once before the boot, once to kill it


class SlowAgent(Agent):
    """An agent whose first answer about the import unit is lost: its command timed out in a busy
    guest (decision 0037: a look lost, not the wait)."""

    lost = 0

    def exec(self, argv: list[str], timeout: float = 60) -> tuple[int, str, str]:
        if argv[:2] == ["systemctl", "is-active"] and SlowAgent.lost < 1:
            SlowAgent.lost += 1
            raise qemu.AgentNoAnswer(f"guest command timed out after {timeout:.0f}s: {' '.join(argv)}")
        return super().exec(argv, timeout)


def test_an_answer_lost_while_waiting_for_the_import_is_a_look_lost(guest: type[Guest], tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    SlowAgent.lost = 0
    monkeypatch.setattr(qemu, "GuestAgent", SlowAgent)
    guest.powers_off = True
    image._bake(tmp_path, tmp_path, lambda message: None)
    assert guest.powered_off and SlowAgent.lost == 1
