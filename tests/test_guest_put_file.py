"""How a file reaches a guest (clusters/vm/guest.py Guest.put_file): whole, with its mode, or not
at all. The guest's side is the real script run by this machine's sh, gzip and sha256sum (the
guest's are Debian's too); only the agent's transport is left out: each call's argv and input
go to a local process, as qemu-guest-agent hands them to one in the guest."""

from __future__ import annotations

import gzip
import os
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

from clusters.vm import guest


class LocalGuest(guest.Guest):
    """A guest whose commands run here; records what each agent call carried."""

    error = RuntimeError
    what = "test guest"

    def __init__(self, state_dir: Path, corrupt: bool = False):
        super().__init__(state_dir)
        self.sent: list[int] = []
        self.corrupt = corrupt

    def guest_exec(self, argv: Sequence[str], *, input: bytes | None = None,
                   timeout: float = 300) -> tuple[int, str, str]:
        if input is not None:
            self.sent.append(len(input))
            if self.corrupt:  # the transport flips a byte of what it carries
                input = gzip.compress(gzip.decompress(input)[:-1] + b"?") if input[:2] == b"\x1f\x8b" else input
        done = subprocess.run(list(argv), input=input, capture_output=True, timeout=timeout, check=False)
        return done.returncode, done.stdout.decode(errors="replace"), done.stderr.decode(errors="replace")


def test_a_binary_arrives_whole_with_its_mode_in_compressed_pieces(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(guest, "PUT_PIECE", 1 << 16)
    data = (b"\x7fELF" + bytes(range(256)) * 64) * 40 + os.urandom(200_000)  # compressible, with a random tail
    target = tmp_path / "usr" / "local" / "bin" / "kubelet.new"
    g = LocalGuest(tmp_path / "state")
    g.put_file(str(target), data, "0755")
    assert target.read_bytes() == data
    assert oct(target.stat().st_mode & 0o777) == "0o755"
    assert sum(g.sent) < len(data), f"sent {sum(g.sent)} bytes for {len(data)}: not compressed"
    assert len(g.sent) > 1 and max(g.sent) <= 1 << 16, g.sent
    assert sorted(p.name for p in target.parent.iterdir()) == ["kubelet.new"], "a partial file was left"


def test_a_file_is_replaced_whole_and_an_empty_one_is_written(tmp_path: Path) -> None:
    target = tmp_path / "config.yaml"
    target.write_text("old: a much longer text than the new one\n")
    g = LocalGuest(tmp_path / "state")
    g.put_file(str(target), b"new: 1\n")
    assert target.read_bytes() == b"new: 1\n"
    assert oct(target.stat().st_mode & 0o777) == "0o644"
    g.put_file(str(target), b"")
    assert target.read_bytes() == b""


def test_what_arrives_changed_is_refused_and_the_old_file_kept(tmp_path: Path) -> None:
    target = tmp_path / "kubelet"
    target.write_bytes(b"the running kubelet")
    with pytest.raises(RuntimeError, match=r"test guest: writing .*kubelet failed \(1\): what the guest unpacked is not"
                                           r" what was sent \(sha256\)"):
        LocalGuest(tmp_path / "state", corrupt=True).put_file(str(target), b"a new kubelet" * 1000, "0755")
    assert target.read_bytes() == b"the running kubelet"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kubelet"], "a partial file was left"


def test_a_piece_the_guest_fails_to_store_without_a_word_is_named(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(guest, "PUT_PIECE", 1 << 10)

    class Mute(LocalGuest):
        def guest_exec(self, argv: Sequence[str], *, input: bytes | None = None,
                       timeout: float = 300) -> tuple[int, str, str]:
            if self.sent:  # the second piece: the guest's command ends 1 and says nothing
                return 1, "", ""
            return super().guest_exec(argv, input=input, timeout=timeout)

    target = tmp_path / "kubelet"
    with pytest.raises(RuntimeError, match=r"writing .*kubelet failed \(1\): the guest could not store the piece"
                                           r" at byte 1024 of \d+ sent"):
        Mute(tmp_path / "state").put_file(str(target), os.urandom(5000), "0755")
    assert not target.exists()
