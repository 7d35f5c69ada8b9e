"""Self-tests of workloads/image/oci.py: archive structure, digests, determinism, file modes.

No cluster needed. Independent readers (skopeo, umoci, a private containerd) check the archive
when they are installed and skip, saying which tool is missing, when they are not.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from workloads.image.oci import (
    ANNOTATION_CONTAINERD_NAME,
    ANNOTATION_REF_NAME,
    MEDIA_TYPE_MANIFEST,
    write_image_archive,
)
from workloads.image.verify import (
    PrivateContainerd,
    private_containerd,
    read_image_archive,
)
from workloads.image.verify import sha256_digest as sha256

REF = "localhost/kube-swap-conformance/oci-test:v1"


@pytest.fixture
def host_exec(tmp_path: Path) -> Path:
    exe = tmp_path / "prog"
    exe.write_bytes(b"#!/bin/true\n")
    exe.chmod(0o755)
    return exe


@pytest.fixture
def host_plain(tmp_path: Path) -> Path:
    plain = tmp_path / "data.txt"
    plain.write_bytes(b"plain host file\n")
    plain.chmod(0o600)
    return plain


def write_sample(path: Path, host_exec: Path, host_plain: Path, **kwargs) -> str:
    files = {"/usr/bin/prog": host_exec, "/data/host.txt": host_plain, "/data/inline": b"inline bytes"}
    return write_image_archive(path, REF, files, **kwargs)


def test_oci_layout_and_index_name_the_image(tmp_path: Path, host_exec: Path, host_plain: Path) -> None:
    digest = write_sample(tmp_path / "img.tar", host_exec, host_plain)
    archive = read_image_archive(tmp_path / "img.tar")

    assert archive.json("oci-layout") == {"imageLayoutVersion": "1.0.0"}
    index = archive.json("index.json")
    assert index["schemaVersion"] == 2
    (entry,) = index["manifests"]
    assert entry["digest"] == digest
    assert entry["mediaType"] == MEDIA_TYPE_MANIFEST
    assert entry["annotations"] == {ANNOTATION_CONTAINERD_NAME: REF, ANNOTATION_REF_NAME: REF}
    assert entry["platform"] == {"architecture": "amd64", "os": "linux"}


def test_every_blob_is_named_by_its_digest(tmp_path: Path, host_exec: Path, host_plain: Path) -> None:
    digest = write_sample(tmp_path / "img.tar", host_exec, host_plain)
    archive = read_image_archive(tmp_path / "img.tar")

    blobs = {n: d for n, d in archive.files.items() if n.startswith("blobs/sha256/")}
    assert len(blobs) == 3  # config, layer, manifest
    for name, data in blobs.items():
        assert sha256(data) == "sha256:" + name.rsplit("/", 1)[1], name
    manifest_bytes = archive.blob(digest)
    assert sha256(manifest_bytes) == digest
    entry = archive.json("index.json")["manifests"][0]
    assert entry["size"] == len(manifest_bytes)
    for desc in [archive.manifest["config"], *archive.manifest["layers"]]:
        assert len(archive.blob(desc["digest"])) == desc["size"]


def test_docker_manifest_points_at_the_same_blobs(tmp_path: Path, host_exec: Path, host_plain: Path) -> None:
    write_sample(tmp_path / "img.tar", host_exec, host_plain)
    archive = read_image_archive(tmp_path / "img.tar")

    (docker,) = archive.json("manifest.json")
    assert docker["RepoTags"] == [REF]
    assert docker["Config"] == "blobs/sha256/" + archive.manifest["config"]["digest"].split(":")[1]
    assert docker["Layers"] == ["blobs/sha256/" + archive.manifest["layers"][0]["digest"].split(":")[1]]
    for name in [docker["Config"], *docker["Layers"]]:
        assert name in archive.files


@pytest.mark.parametrize("compress", [False, True], ids=["plain-layer", "gzip-layer"])
def test_config_diff_id_is_digest_of_uncompressed_layer(
    tmp_path: Path, host_exec: Path, host_plain: Path, compress: bool
) -> None:
    write_sample(
        tmp_path / "img.tar", host_exec, host_plain,
        entrypoint=["/usr/bin/prog"], cmd=["--flag"], env={"A": "1", "B": "two"}, compress=compress,
    )
    archive = read_image_archive(tmp_path / "img.tar")
    config = archive.config
    layer_desc = archive.manifest["layers"][0]

    assert layer_desc["mediaType"].endswith("+gzip") == compress
    assert config["rootfs"] == {"type": "layers", "diff_ids": [sha256(archive.layer_bytes())]}
    if compress:
        assert config["rootfs"]["diff_ids"][0] != layer_desc["digest"]
    assert (config["architecture"], config["os"]) == ("amd64", "linux")
    assert config["config"]["Entrypoint"] == ["/usr/bin/prog"]
    assert config["config"]["Cmd"] == ["--flag"]
    assert config["config"]["Env"][0].startswith("PATH=/")
    assert config["config"]["Env"][1:] == ["A=1", "B=two"]
    assert len(config["history"]) == len(config["rootfs"]["diff_ids"])


def test_arch_and_explicit_path_env(tmp_path: Path) -> None:
    write_image_archive(tmp_path / "img.tar", REF, {"/f": b"x"}, arch="arm64", env={"PATH": "/bin"})
    archive = read_image_archive(tmp_path / "img.tar")
    assert archive.config["architecture"] == "arm64"
    assert archive.json("index.json")["manifests"][0]["platform"]["architecture"] == "arm64"
    assert archive.config["config"]["Env"] == ["PATH=/bin"]
    assert "Entrypoint" not in archive.config["config"]


def test_layer_modes_owners_and_parents(tmp_path: Path, host_exec: Path, host_plain: Path) -> None:
    write_sample(tmp_path / "img.tar", host_exec, host_plain, mode_overrides={"/data/inline": 0o4711, "/data": 0o700})
    layer = read_image_archive(tmp_path / "img.tar").layer()
    members, contents, order = layer.members, layer.contents, layer.order

    expected_modes = {
        "usr": 0o755, "usr/bin": 0o755, "usr/bin/prog": 0o755,  # host executable stays executable
        "data": 0o700, "data/host.txt": 0o644,  # host 0600 file: normalised, not leaked
        "data/inline": 0o4711,
        "tmp": 0o1777, "etc": 0o755, "etc/passwd": 0o644, "etc/group": 0o644,
    }
    assert {n: m.mode for n, m in members.items()} == expected_modes
    assert all(m.isdir() for n, m in members.items() if n in ("usr", "usr/bin", "data", "tmp", "etc"))
    assert {(m.uid, m.gid, m.mtime, m.uname, m.gname) for m in members.values()} == {(0, 0, 0, "", "")}
    assert contents["usr/bin/prog"] == host_exec.read_bytes()
    assert contents["data/host.txt"] == host_plain.read_bytes()
    assert contents["data/inline"] == b"inline bytes"
    assert contents["etc/passwd"].startswith(b"root:x:0:0:")
    for name in order:  # every parent precedes its children, as extractors expect
        parent = name.rsplit("/", 1)[0] if "/" in name else None
        assert parent is None or order.index(parent) < order.index(name), name


def test_given_passwd_wins_and_defaults_can_be_dropped(tmp_path: Path) -> None:
    write_image_archive(tmp_path / "a.tar", REF, {"/etc/passwd": b"me:x:7:7::/:/x\n"})
    contents = read_image_archive(tmp_path / "a.tar").layer().contents
    assert contents["etc/passwd"] == b"me:x:7:7::/:/x\n"

    write_image_archive(tmp_path / "b.tar", REF, {"/only": b"1"}, add_defaults=False)
    members = read_image_archive(tmp_path / "b.tar").layer().members
    assert set(members) == {"only"}


def test_same_inputs_give_same_digest_and_bytes(tmp_path: Path, host_exec: Path, host_plain: Path) -> None:
    first = write_sample(tmp_path / "1.tar", host_exec, host_plain, entrypoint=["/usr/bin/prog"])
    os.utime(host_exec, (time.time() + 3600, time.time() + 3600))  # host mtimes must not leak in
    second = write_sample(tmp_path / "2.tar", host_exec, host_plain, entrypoint=["/usr/bin/prog"])
    assert first == second
    assert (tmp_path / "1.tar").read_bytes() == (tmp_path / "2.tar").read_bytes()

    reordered = write_image_archive(
        tmp_path / "3.tar", REF,
        {"/data/inline": b"inline bytes", "/data/host.txt": host_plain, "/usr/bin/prog": host_exec},
        entrypoint=["/usr/bin/prog"],
    )
    assert reordered == first


@pytest.mark.parametrize(
    "change",
    [
        {"files": {"/f": b"y"}},
        {"files": {"/g": b"x"}},
        {"entrypoint": ["/f"]},
        {"mode_overrides": {"/f": 0o755}},
        {"arch": "arm64"},
    ],
    ids=lambda c: next(iter(c)),
)
def test_any_input_change_changes_the_digest(tmp_path: Path, change: dict) -> None:
    base: dict = {"ref": REF, "files": {"/f": b"x"}}
    digest = write_image_archive(tmp_path / "a.tar", **base)
    other = write_image_archive(tmp_path / "b.tar", **{**base, **change})
    assert digest != other


def test_ref_names_the_image_without_changing_its_digest(tmp_path: Path) -> None:
    # Like a registry: the manifest digest identifies content; the name lives in the index.
    digest = write_image_archive(tmp_path / "a.tar", REF, {"/f": b"x"})
    other = write_image_archive(tmp_path / "b.tar", "localhost/other:v2", {"/f": b"x"})
    assert digest == other
    entry = read_image_archive(tmp_path / "b.tar").json("index.json")["manifests"][0]
    assert entry["annotations"][ANNOTATION_CONTAINERD_NAME] == "localhost/other:v2"
    assert read_image_archive(tmp_path / "b.tar").json("manifest.json")[0]["RepoTags"] == ["localhost/other:v2"]


@pytest.mark.parametrize(
    ("ref", "files", "overrides"),
    [
        (REF, {"/../etc/x": b""}, None),
        (REF, {"/": b""}, None),
        (REF, {"/a": b"", "/a/b": b""}, None),  # a path cannot be both file and directory
        (REF, {"/a": b""}, {"/missing": 0o755}),
        ("localhost/no-tag", {"/a": b""}, None),
        ("localhost:5000/no-tag", {"/a": b""}, None),
        (REF + "@sha256:" + "0" * 64, {"/a": b""}, None),
    ],
)
def test_rejects_bad_input(tmp_path: Path, ref: str, files: dict, overrides: dict | None) -> None:
    with pytest.raises(ValueError):
        write_image_archive(tmp_path / "x.tar", ref, files, mode_overrides=overrides)
    assert not (tmp_path / "x.tar").exists()


# --- independent readers ---------------------------------------------------------------------


def require_tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} is not installed (Debian: apt-get install {name}); archive not cross-checked")
    return path


def test_skopeo_reads_both_formats(tmp_path: Path, host_exec: Path, host_plain: Path) -> None:
    skopeo = require_tool("skopeo")
    path = tmp_path / "img.tar"
    digest = write_sample(path, host_exec, host_plain, entrypoint=["/usr/bin/prog"])
    diff_id = read_image_archive(path).config["rootfs"]["diff_ids"][0]

    def inspect(*args: str) -> bytes:
        return subprocess.run([skopeo, "inspect", *args], check=True, capture_output=True, timeout=60).stdout

    # Selecting by the ref.name annotation proves the name is where skopeo looks for it.
    raw = inspect("--raw", f"oci-archive:{path}:{REF}")
    assert sha256(raw) == digest
    config = json.loads(inspect("--config", f"oci-archive:{path}"))
    assert config["config"]["Entrypoint"] == ["/usr/bin/prog"]
    # docker-archive reads manifest.json; an uncompressed layer's digest is its diff_id.
    docker = json.loads(inspect(f"docker-archive:{path}"))
    assert docker["Layers"] == [diff_id]


def test_umoci_unpacks_the_rootfs(tmp_path: Path, host_exec: Path, host_plain: Path) -> None:
    umoci = require_tool("umoci")
    path = tmp_path / "img.tar"
    write_sample(path, host_exec, host_plain)
    layout = tmp_path / "layout"
    layout.mkdir()
    with tarfile.open(path) as tar:
        tar.extractall(layout, filter="tar")
    bundle = tmp_path / "bundle"
    rootless = [] if os.geteuid() == 0 else ["--rootless"]
    subprocess.run([umoci, "unpack", *rootless, "--image", f"{layout}:{REF}", str(bundle)],
                   check=True, capture_output=True, timeout=60)
    rootfs = bundle / "rootfs"
    assert (rootfs / "usr/bin/prog").read_bytes() == host_exec.read_bytes()
    assert (rootfs / "usr/bin/prog").stat().st_mode & 0o7777 == 0o755
    assert (rootfs / "tmp").stat().st_mode & 0o7777 == 0o1777
    assert (rootfs / "data/inline").read_bytes() == b"inline bytes"


@pytest.fixture(scope="module")
def containerd() -> Iterator[PrivateContainerd]:
    require_tool("containerd")
    require_tool("ctr")
    if os.geteuid() != 0:
        pytest.skip("a private containerd needs root")
    with private_containerd() as ctrd:
        yield ctrd


def test_containerd_imports_under_the_full_name(tmp_path: Path, containerd: PrivateContainerd) -> None:
    ref = "registry.k8s.io/pause:3.10.1-oci-test"
    path = tmp_path / "img.tar"
    digest = write_image_archive(path, ref, {"/f": b"x"}, entrypoint=["/f"])
    containerd.run("images", "import", "--no-unpack", str(path))
    images = containerd.images()
    assert images.get(ref) == digest, f"{ref} not imported as {digest}; containerd has {images}"
