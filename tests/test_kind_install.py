"""kind at the pinned release, installed into the suite's cache with Go when --kind-bin is left at
its default and kind on PATH is missing or older (clusters/kind_install.py): a fake ``go`` on PATH
writes a fake kind where GOBIN says; a --kind-bin given is never replaced."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusters import kind_install, versions
from tests import fake_kind

OLD_KIND = '#!/bin/sh\necho "kind v0.20.0 go1.20.4 linux/amd64"\n'


@pytest.fixture
def machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A PATH of a fake go and the system's tools (no kind); the go log in tmp_path/state/go."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (tmp_path / "state").mkdir()
    fake_kind.install_go(bin_dir)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.setenv("FAKE_KIND_STATE", str(tmp_path / "state"))
    return tmp_path


def go_calls(machine: Path) -> list[str]:
    log = machine / "state" / "go"
    return log.read_text().splitlines() if log.exists() else []


def resolve(machine: Path, kind_bin: str = "kind") -> tuple[str, object, list[str]]:
    said: list[str] = []
    path, problem = kind_install.resolve(kind_bin, None, said.append, machine / "cache")
    return path, problem, said


def test_no_kind_on_path_is_installed_with_go_and_used(machine: Path) -> None:
    path, problem, said = resolve(machine)
    installed = machine / "cache" / "bin" / f"kind-{versions.KIND}" / "kind"
    assert (path, problem) == (str(installed), None)
    assert go_calls(machine) == [f"GOBIN={installed.parent} install sigs.k8s.io/kind@{versions.KIND}"]
    assert said[0] == (f"kind is not on PATH: installing kind {versions.KIND} with Go (GOBIN={installed.parent}"
                       f" go install sigs.k8s.io/kind@{versions.KIND}; a few minutes)"), said
    # the next run finds it in the cache: no second install
    again, problem, said = resolve(machine)
    assert (again, problem) == (str(installed), None) and len(go_calls(machine)) == 1
    assert "using kind" in said[0] and "from the suite's cache" in said[0], said


def test_a_kind_on_path_older_than_the_pin_is_not_used(machine: Path) -> None:
    (machine / "bin" / "kind").write_text(OLD_KIND)
    (machine / "bin" / "kind").chmod(0o755)
    path, problem, said = resolve(machine)
    assert problem is None and path.endswith(f"kind-{versions.KIND}/kind"), (path, problem)
    assert said[0].startswith(f"kind v0.20.0 at {machine / 'bin' / 'kind'} is older than {versions.KIND}"), said


def test_a_good_kind_on_path_is_used_as_it_is(machine: Path) -> None:
    (machine / "bin" / "kind").write_text(f'#!/bin/sh\necho "kind {versions.KIND} go1.26.1 linux/amd64"\n')
    (machine / "bin" / "kind").chmod(0o755)
    assert resolve(machine) == ("kind", None, [])
    assert go_calls(machine) == []


def test_a_kind_bin_given_is_never_replaced(machine: Path) -> None:
    given = machine / "elsewhere" / "kind"  # not even there: the preflight says so, nothing is installed
    assert resolve(machine, str(given)) == (str(given), None, [])
    old = machine / "bin" / "kind"
    old.write_text(OLD_KIND)
    old.chmod(0o755)
    assert resolve(machine, str(old)) == (str(old), None, [])
    assert go_calls(machine) == []


def test_without_go_the_preflight_says_so_with_the_install_line(machine: Path) -> None:
    (machine / "bin" / "go").unlink()
    path, problem, said = resolve(machine)
    assert path == "kind" and said == [] and not problem.ok
    assert problem.detail == f"kind is not on PATH, and Go is not on PATH to install kind {versions.KIND} with"
    assert "install Go (https://go.dev/dl/)" in problem.remedy
    assert f"go install sigs.k8s.io/kind@{versions.KIND}" in problem.remedy


def test_a_go_install_that_fails_is_a_failing_check(machine: Path) -> None:
    (machine / "bin" / "go").write_text("#!/bin/sh\necho 'proxy.golang.org: connection refused' >&2\nexit 1\n")
    path, problem, _ = resolve(machine)
    assert path == "kind" and not problem.ok
    assert f"installing kind {versions.KIND} with Go failed" in problem.detail
    assert "exited 1: proxy.golang.org: connection refused" in problem.detail
