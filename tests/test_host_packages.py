"""Missing Debian packages: every preflight names them in one `apt-get install -y` line, and
--install-host-packages runs apt-get itself (update first) before checking again, only when given,
refused on a host without apt-get or for a user who is not root (clusters/hostpackages.py). A fake
apt-get on PATH records its argv; nothing is installed for real."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from clusters import cli, hostpackages
from clusters.checks import Check, PreflightError
from tests.test_vm_cli import env, one_error, run  # noqa: F401 - env is a fixture

FAKE_APT = '#!/bin/sh\necho "$*" >> "$FAKE_APT_LOG"\n[ -z "${FAKE_APT_FAIL:-}" ] || { echo "E: $FAKE_APT_FAIL" >&2; exit 100; }\n'


@pytest.fixture
def apt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fake apt-get first on PATH; its log."""
    bin_dir = tmp_path / "apt-bin"
    bin_dir.mkdir()
    (bin_dir / "apt-get").write_text(FAKE_APT)
    (bin_dir / "apt-get").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.setenv("FAKE_APT_LOG", str(tmp_path / "apt.log"))
    return tmp_path / "apt.log"


def lacking(log: Path) -> list[Check]:
    """QEMU and debootstrap missing until the (fake) apt-get was asked to install them; root present."""
    installed = set(log.read_text().split()) if log.exists() else set()
    return [Check("qemu-system-x86_64", "qemu-system-x86" in installed, "not on PATH", packages=("qemu-system-x86",)),
            Check("debootstrap", "debootstrap" in installed, "not on PATH", packages=("debootstrap",)),
            Check("root", True, "running as root")]


def test_one_install_line_for_every_missing_package() -> None:
    message = str(PreflightError([
        Check("qemu-img", False, "not on PATH", packages=("qemu-utils",)),
        Check("libseccomp", False, "no headers", packages=("libseccomp-dev", "pkg-config")),
        Check("gcc", False, "not on PATH", packages=("gcc",)),
        Check("other gcc check", False, "again", packages=("gcc",)),
        Check("go", False, "not on PATH", "install Go from https://go.dev/dl/"),
        Check("mkfs.ext4", True, "/usr/sbin/mkfs.ext4", packages=("e2fsprogs",)),
    ]))
    assert message.count("apt-get install") == 1, message
    assert message.endswith("apt-get install -y qemu-utils libseccomp-dev pkg-config gcc (or run again with"
                            " --install-host-packages)"), message
    assert "fix: install libseccomp-dev, pkg-config (the apt-get line below)" in message
    assert "fix: install Go from https://go.dev/dl/" in message  # not a Debian package: its own fix
    assert "e2fsprogs" not in message  # present


def test_without_the_option_nothing_is_installed(apt: Path) -> None:
    found = hostpackages.checked(lambda: lacking(apt), False, lambda message: None)
    assert [c.ok for c in found] == [False, False, True] and not apt.exists()


def test_with_the_option_apt_get_updates_installs_and_the_checks_run_again(apt: Path) -> None:
    said: list[str] = []
    found = hostpackages.checked(lambda: lacking(apt), True, said.append)
    assert apt.read_text().splitlines() == ["update", "install -y qemu-system-x86 debootstrap"]
    assert all(c.ok for c in found), found
    assert said == [("--install-host-packages: installing qemu-system-x86, debootstrap: apt-get update, then"
                     " apt-get install -y qemu-system-x86 debootstrap"),
                    "--install-host-packages: installed qemu-system-x86, debootstrap"]


def test_nothing_missing_runs_no_apt_get(apt: Path) -> None:
    assert hostpackages.checked(lambda: [Check("root", True, "root")], True, lambda message: None)[0].ok
    assert not apt.exists()


def test_apt_get_that_fails_is_a_failing_check(apt: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_APT_FAIL", "Unable to locate package qemu-system-x86")
    found = hostpackages.checked(lambda: lacking(apt), True, lambda message: None)
    assert apt.read_text().splitlines() == ["update"]  # stopped at the first failure
    failed = found[-1]
    assert failed.name == "host packages" and not failed.ok
    assert "`apt-get update` exited 100: E: Unable to locate package qemu-system-x86" in failed.detail
    assert "apt-get install -y qemu-system-x86 debootstrap" in str(PreflightError(found))


def test_refused_without_apt_get_or_root() -> None:
    no_apt = hostpackages.refusal(which=lambda command: None, euid=lambda: 0)
    assert no_apt and "no apt-get on PATH (not Debian or a derivative)" in no_apt
    not_root = hostpackages.refusal(which=lambda command: "/usr/bin/apt-get", euid=lambda: 1000)
    assert not_root and "needs root" in not_root
    assert hostpackages.refusal(which=lambda command: "/usr/bin/apt-get", euid=lambda: 0) is None


@pytest.mark.parametrize("args", [["up"], ["build"], ["node-image"], ["kind-host", "up"]], ids=" ".join)
def test_the_vm_command_refuses_the_option_without_apt_get(env: dict[str, str], tmp_path: Path,  # noqa: F811
                                                           args: list[str]) -> None:
    line = one_error(run(env, *args, "--install-host-packages", "--state-dir", str(tmp_path / "state")), cli.Exit.USAGE)
    assert "--install-host-packages installs Debian packages with apt-get, and this host has no apt-get" in line, line
    assert not (tmp_path / "state").exists() and not (tmp_path / "cache").exists(), "a refused command made files"


@pytest.mark.skipif(os.geteuid() != 0, reason="--install-host-packages needs root")
def test_the_vm_command_runs_apt_get_first(env: dict[str, str], tmp_path: Path) -> None:  # noqa: F811
    (tmp_path / "no-tools" / "apt-get").write_text(FAKE_APT)
    (tmp_path / "no-tools" / "apt-get").chmod(0o755)
    env = {**env, "FAKE_APT_LOG": str(tmp_path / "apt.log")}
    done = run(env, "up", "--install-host-packages", "--state-dir", str(tmp_path / "state"))
    output = done.stdout + done.stderr
    # the fake installs nothing: the checks made again still fail, naming the same packages
    assert done.returncode == cli.Exit.PREFLIGHT, output
    assert (tmp_path / "apt.log").read_text().splitlines() == [
        "update", "install -y qemu-system-x86 qemu-utils debootstrap e2fsprogs gcc"], output
    assert "--install-host-packages: installing qemu-system-x86, qemu-utils, debootstrap, e2fsprogs, gcc" in output
