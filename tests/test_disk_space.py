"""Room on the cache's disk is said before anything is written (clusters/diskspace.py): a run's
preflight refuses a cache without it, a build refuses to start without it; and a patched build
takes little room (the release's binaries it does not rebuild are hard links, its patched source
tree goes once the build ends)."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from clusters import diskspace, preflight
from clusters.vm import build

GiB = diskspace.GiB


def test_a_cache_without_room_fails_the_preflight_saying_how_much_and_what_to_free(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KSC_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(diskspace, "free_bytes", lambda path: 2 * GiB)
    low = preflight.check_cache_dir()
    assert not low.ok
    assert f"2.0 GiB free on the disk of {tmp_path}, 8 GiB wanted" == low.detail
    assert "go clean -cache" in low.remedy and "bin/kubernetes-*+patch.*" in low.remedy
    assert "KSC_CACHE_DIR" in low.remedy
    monkeypatch.setattr(diskspace, "free_bytes", lambda path: 40 * GiB)
    roomy = preflight.check_cache_dir()
    assert roomy.ok and roomy.detail == f"{tmp_path} (40 GiB free)"


def test_a_build_wants_room_on_the_disk_of_gos_build_cache_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """KSC_CACHE_DIR moves the suite's cache, not Go's: where Go's build cache is on another disk,
    a build checks that disk too (a not yet made cache: the disk it will be made on)."""
    cache, go = tmp_path / "cache", tmp_path / "elsewhere" / "go-build"
    cache.mkdir()
    (tmp_path / "elsewhere").mkdir()
    devices = {cache: 1, tmp_path / "elsewhere": 2}
    monkeypatch.setattr(diskspace, "device", lambda path: devices[path])
    monkeypatch.setattr(diskspace, "free_bytes", lambda path: 1 * GiB if Path(path) != cache else 50 * GiB)
    said = diskspace.build_problem(cache, go)
    assert said is not None and said[0] == f"1.0 GiB free on the disk of {tmp_path / 'elsewhere'}, 3 GiB wanted"
    devices[tmp_path / "elsewhere"] = 1  # the same disk: the cache's room is all there is to check
    assert diskspace.build_problem(cache, go) is None


def test_gos_build_cache_is_gos_own_answer() -> None:
    go = build.go_build_cache()
    assert go is not None and go.is_absolute()
    done = subprocess.run(["go", "env", "GOCACHE"], capture_output=True, text=True, check=True)
    assert str(go) == done.stdout.strip()


def _component(tmp_path: Path, package: str = ".") -> build.Component:
    origin = tmp_path / "release" / "kubectl"
    origin.parent.mkdir()
    origin.write_bytes(b"a release binary")

    def prepare(src: Path, env) -> None:
        (src / "tree").mkdir()
        (src / "tree" / "patched.go").write_text("// the patched source\n")

    return build.Component(name="t", version="v1", binaries=("hello", "kubectl"),
                           files={"go.mod": "module example.com/t\n\ngo 1.21\n",
                                  "main.go": "package main\n\nfunc main() {}\n"},
                           targets=(("hello", package),), copies={"kubectl": origin}, prepare=prepare,
                           scratch=("tree",))


def test_a_patched_build_links_what_it_does_not_rebuild_and_drops_its_source_tree(tmp_path: Path) -> None:
    c = _component(tmp_path)
    out = c.build(tmp_path / "cache", lambda line: None)
    assert (out / "hello").is_file()
    assert os.stat(out / "kubectl").st_ino == os.stat(tmp_path / "release" / "kubectl").st_ino
    src = tmp_path / "cache" / "src" / c.key
    assert (src / "go.mod").is_file() and not (src / "tree").exists()


def test_a_failed_build_drops_its_source_tree_too(tmp_path: Path) -> None:
    c = _component(tmp_path, package="./no/such/package")
    with pytest.raises(build.BuildError):
        c.build(tmp_path / "cache", lambda line: None)
    assert not (tmp_path / "cache" / "src" / c.key / "tree").exists()
    assert not c.is_cached(tmp_path / "cache")


def test_a_build_without_room_does_not_start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(diskspace, "free_bytes", lambda path: 1 * GiB)
    c = _component(tmp_path)
    with pytest.raises(build.BuildError, match=r"not building t-v1: 1\.0 GiB free on the disk of .*, 3 GiB wanted"):
        c.build(tmp_path / "cache", lambda line: None)
    assert not (tmp_path / "cache" / "src" / c.key).exists()
