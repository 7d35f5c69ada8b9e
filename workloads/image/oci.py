"""Write a single-layer container image archive without Docker (standard library only).

The archive is one tar that is at the same time:

* an OCI image layout (``oci-layout``, ``index.json``, ``blobs/sha256/...``) whose index entry
  carries both ``io.containerd.image.name`` and ``org.opencontainers.image.ref.name`` set to the
  full reference, so ``ctr -n k8s.io images import`` (containerd 1.6 and 2.x prefer the OCI
  layout when ``oci-layout`` is present) and ``kind load image-archive`` (which runs that same
  import on each node) register the image under the right name, and ``skopeo``/``umoci`` can
  read it as ``oci-archive:``;
* a ``docker save`` archive: ``manifest.json`` (Config, RepoTags, Layers) points at the same
  blobs, the way Docker 25+ writes its own archives, for tools that only read that format.

Everything is deterministic (sorted entries, mtime 0, uid/gid 0, canonical JSON, no timestamps),
so the same inputs always give the same manifest digest: the image reference can be derived
from the content and re-importing an unchanged image is a no-op.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import stat
import tarfile
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

__all__ = ["write_image_archive", "write_tree_image_archive", "MEDIA_TYPE_MANIFEST", "MEDIA_TYPE_INDEX"]

MEDIA_TYPE_INDEX = "application/vnd.oci.image.index.v1+json"
MEDIA_TYPE_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MEDIA_TYPE_CONFIG = "application/vnd.oci.image.config.v1+json"
MEDIA_TYPE_LAYER = "application/vnd.oci.image.layer.v1.tar"
MEDIA_TYPE_LAYER_GZIP = "application/vnd.oci.image.layer.v1.tar+gzip"
ANNOTATION_REF_NAME = "org.opencontainers.image.ref.name"
ANNOTATION_CONTAINERD_NAME = "io.containerd.image.name"

DEFAULT_PATH = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# Minimal account files: runtimes and kubectl exec resolve uid 0 / 65534 by name through them.
DEFAULT_PASSWD = (
    b"root:x:0:0:root:/root:/sbin/nologin\n"
    b"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n"
)
DEFAULT_GROUP = b"root:x:0:\nnogroup:x:65534:\n"
# A fixed timestamp instead of "now" keeps the config blob (and so the digest) reproducible.
EPOCH = "1970-01-01T00:00:00Z"

_DIR_MODE = 0o755
_FILE_MODE = 0o644
_EXEC_MODE = 0o755


@dataclass(frozen=True)
class _Entry:
    """One member of the layer tar: a directory (data is None) or a regular file."""

    path: str  # relative, no leading slash, e.g. "etc/passwd"
    mode: int
    data: bytes | None


@dataclass(frozen=True)
class _Blob:
    digest: str  # "sha256:<hex>"
    data: bytes

    @property
    def hex(self) -> str:
        return self.digest.split(":", 1)[1]

    @property
    def archive_path(self) -> str:
        return f"blobs/sha256/{self.hex}"

    def descriptor(self, media_type: str, **extra: object) -> dict[str, object]:
        return {"mediaType": media_type, "digest": self.digest, "size": len(self.data), **extra}


def _blob(data: bytes) -> _Blob:
    return _Blob("sha256:" + hashlib.sha256(data).hexdigest(), data)


def _canonical_json(obj: object) -> bytes:
    # Sorted keys and no whitespace: the digest depends only on content, not dict order.
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def _normalize(path: str) -> str:
    """Turn an in-image absolute path into a tar member name, rejecting escapes."""
    pure = PurePosixPath("/" + path.lstrip("/"))
    parts = [p for p in pure.parts[1:] if p not in ("", ".")]
    if not parts or ".." in parts:
        raise ValueError(f"invalid in-image path: {path!r}")
    return "/".join(parts)


def _read_source(source: Path | bytes) -> tuple[bytes, int]:
    """Return the content and default mode: host executables stay executable."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        return bytes(source), _FILE_MODE
    st = os.stat(source)
    if not stat.S_ISREG(st.st_mode):
        raise ValueError(f"not a regular file: {source}")
    mode = _EXEC_MODE if st.st_mode & 0o111 else _FILE_MODE
    return Path(source).read_bytes(), mode


def _layer_entries(
    files: Mapping[str, Path | bytes],
    mode_overrides: Mapping[str, int],
    add_defaults: bool,
) -> list[_Entry]:
    contents: dict[str, tuple[bytes, int]] = {}
    for path, source in files.items():
        name = _normalize(path)
        if name in contents:
            raise ValueError(f"duplicate in-image path: {path!r}")
        contents[name] = _read_source(source)

    dirs: dict[str, int] = {}
    if add_defaults:
        contents.setdefault("etc/passwd", (DEFAULT_PASSWD, _FILE_MODE))
        contents.setdefault("etc/group", (DEFAULT_GROUP, _FILE_MODE))
        dirs["tmp"] = 0o1777  # sticky, world-writable: programs expect a usable /tmp
    for name in contents:
        parts = name.split("/")
        for i in range(1, len(parts)):
            dirs.setdefault("/".join(parts[:i]), _DIR_MODE)
    clash = set(dirs) & set(contents)
    if clash:
        raise ValueError(f"paths used both as file and directory: {sorted(clash)}")

    overrides = {_normalize(p): m for p, m in mode_overrides.items()}
    unknown = set(overrides) - set(dirs) - set(contents)
    if unknown:
        raise ValueError(f"mode_overrides for paths not in the image: {sorted(unknown)}")

    entries = [_Entry(d, overrides.get(d, m), None) for d, m in dirs.items()]
    entries += [_Entry(f, overrides.get(f, m), data) for f, (data, m) in contents.items()]
    # Component-wise order puts every parent directory before its children.
    return sorted(entries, key=lambda e: e.path.split("/"))


def _tar_info(name: str, *, mode: int, size: int = 0, directory: bool = False) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = tarfile.DIRTYPE if directory else tarfile.REGTYPE
    info.mode = mode
    info.size = size
    info.mtime = 0
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def _build_tar(members: Iterable[tuple[tarfile.TarInfo, bytes | None]]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


def _build_layer(entries: list[_Entry]) -> bytes:
    return _build_tar(
        (
            _tar_info(e.path, mode=e.mode, directory=True)
            if e.data is None
            else _tar_info(e.path, mode=e.mode, size=len(e.data)),
            e.data,
        )
        for e in entries
    )


def _config(
    diff_id: str,
    *,
    arch: str,
    entrypoint: list[str] | None,
    cmd: list[str] | None,
    env: Mapping[str, str] | None,
    stop_signal: str | None = None,
    labels: Mapping[str, str] | None = None,
) -> dict[str, object]:
    env = dict(env or {})
    env_list = [] if "PATH" in env else [DEFAULT_PATH]
    env_list += [f"{k}={v}" for k, v in env.items()]
    run_config: dict[str, object] = {"Env": env_list, "WorkingDir": "/"}
    if entrypoint is not None:
        run_config["Entrypoint"] = list(entrypoint)
    if cmd is not None:
        run_config["Cmd"] = list(cmd)
    if stop_signal is not None:
        run_config["StopSignal"] = stop_signal
    if labels:
        run_config["Labels"] = dict(labels)
    return {
        "architecture": arch,
        "os": "linux",
        "created": EPOCH,
        "config": run_config,
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        # Docker checks that non-empty history entries match the layers one to one.
        "history": [{"created": EPOCH, "created_by": "kube-swap-conformance workloads/image/oci.py"}],
    }


def _outer_members(
    blobs: list[_Blob], index: bytes, docker_manifest: bytes
) -> list[tuple[tarfile.TarInfo, bytes | None]]:
    files: dict[str, bytes] = {
        "oci-layout": _canonical_json({"imageLayoutVersion": "1.0.0"}),
        "index.json": index,
        "manifest.json": docker_manifest,
    }
    for blob in blobs:
        files[blob.archive_path] = blob.data
    members: list[tuple[tarfile.TarInfo, bytes | None]] = [
        (_tar_info(d, mode=_DIR_MODE, directory=True), None) for d in ("blobs", "blobs/sha256")
    ]
    members += [(_tar_info(n, mode=_FILE_MODE, size=len(files[n])), files[n]) for n in sorted(files)]
    return members


def _write_atomically(path: Path, data: bytes) -> None:
    # A reader (or a cache check) never sees a half-written archive.
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _index_and_docker_manifest(manifest: _Blob, config: _Blob, layer_path: str, ref: str, arch: str) -> tuple[bytes, bytes]:
    """index.json (OCI, the ref as containerd and OCI name it) and manifest.json (Docker's
    `docker load` format) of a one-layer image."""
    index = _canonical_json({
        "schemaVersion": 2,
        "mediaType": MEDIA_TYPE_INDEX,
        "manifests": [manifest.descriptor(
            MEDIA_TYPE_MANIFEST,
            annotations={ANNOTATION_CONTAINERD_NAME: ref, ANNOTATION_REF_NAME: ref},
            platform={"architecture": arch, "os": "linux"},
        )],
    })
    docker_manifest = _canonical_json([{"Config": config.archive_path, "RepoTags": [ref], "Layers": [layer_path]}])
    return index, docker_manifest


def write_image_archive(
    archive_path: Path,
    ref: str,
    files: Mapping[str, Path | bytes],
    *,
    entrypoint: list[str] | None = None,
    cmd: list[str] | None = None,
    env: Mapping[str, str] | None = None,
    mode_overrides: Mapping[str, int] | None = None,
    arch: str = "amd64",
    compress: bool = False,
    add_defaults: bool = True,
) -> str:
    """Write a one-layer image archive to ``archive_path`` and return its manifest digest.

    The digest identifies the content (files, modes, config, arch), not the name: the same
    content under another ``ref`` has the same digest, as in a registry.

    ``files`` maps in-image absolute paths to host files (executables keep mode 0755, others
    0644) or to bytes (0644); ``mode_overrides`` sets the mode of any file or directory.
    Parent directories are created (0755). With ``add_defaults`` the image also gets ``/tmp``
    (1777), ``/etc/passwd`` and ``/etc/group`` unless ``files`` provides them.
    ``ref`` must be a full reference, e.g. ``registry.k8s.io/pause:3.10.1`` or
    ``localhost/kube-swap-conformance/stress:v1``. ``compress`` gzips the layer (still
    deterministic for a given zlib); the default leaves it uncompressed, which every importer
    accepts and which keeps the digest independent of the zlib version.
    """
    if "@" in ref or ":" not in ref.rsplit("/", 1)[-1]:
        # RepoTags and the CRI image name both need name:tag; a digest alone names nothing.
        raise ValueError(f"ref must be name:tag without a digest, got {ref!r}")
    layer_tar = _build_layer(_layer_entries(files, mode_overrides or {}, add_defaults))
    diff_id = "sha256:" + hashlib.sha256(layer_tar).hexdigest()
    if compress:
        layer = _blob(gzip.compress(layer_tar, compresslevel=9, mtime=0))
        layer_media_type = MEDIA_TYPE_LAYER_GZIP
    else:
        layer = _blob(layer_tar)
        layer_media_type = MEDIA_TYPE_LAYER

    config = _blob(_canonical_json(
        _config(diff_id, arch=arch, entrypoint=entrypoint, cmd=cmd, env=env)
    ))
    manifest = _blob(_canonical_json({
        "schemaVersion": 2,
        "mediaType": MEDIA_TYPE_MANIFEST,
        "config": config.descriptor(MEDIA_TYPE_CONFIG),
        "layers": [layer.descriptor(layer_media_type)],
    }))
    index, docker_manifest = _index_and_docker_manifest(manifest, config, layer.archive_path, ref, arch)
    archive = _build_tar(_outer_members([config, layer, manifest], index, docker_manifest))
    _write_atomically(Path(archive_path), archive)
    return manifest.digest


# --- an image from a directory tree (a whole rootfs), streamed through temporary files --------

class _HashingWriter(io.RawIOBase):
    """A write-only file that hashes and counts what passes through it to ``target``."""

    def __init__(self, target: io.BufferedWriter):
        self.target = target
        self.sha = hashlib.sha256()
        self.size = 0

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:  # type: ignore[override]
        self.target.write(data)
        self.sha.update(data)
        self.size += len(data)
        return len(data)


# Mount points the runtime provides: their contents never belong in an image.
_RUNTIME_DIRS = ("dev", "proc", "sys", "run", "tmp")


def _tree_filter(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
    top, _, rest = info.name.partition("/")
    if top in _RUNTIME_DIRS and rest:
        return None
    if info.isdev() or info.isfifo():
        return None
    info.mtime = 0  # the same tree gives the same layer digest
    info.uname = info.gname = ""
    return info


def write_tree_image_archive(
    archive_path: Path,
    ref: str,
    tree: Path,
    *,
    entrypoint: list[str] | None = None,
    cmd: list[str] | None = None,
    env: Mapping[str, str] | None = None,
    stop_signal: str | None = None,
    labels: Mapping[str, str] | None = None,
    arch: str = "amd64",
) -> str:
    """Write a one-layer image archive whose layer is the directory ``tree`` as it is on disk
    (modes, owners, symlinks and hardlinks kept; device nodes and the contents of /dev, /proc,
    /sys, /run and /tmp left out); return the manifest digest.

    The archive has the same two faces as :func:`write_image_archive` (OCI layout and
    ``docker save``), so ``docker load`` and ``ctr images import`` both take it. Nothing is
    held in memory: the layer is streamed to a temporary file next to ``archive_path``.
    """
    if "@" in ref or ":" not in ref.rsplit("/", 1)[-1]:
        raise ValueError(f"ref must be name:tag without a digest, got {ref!r}")
    archive_path = Path(archive_path)
    archive_path.parent.mkdir(parents=True, exist_ok=True)
    layer_fd, layer_tmp = tempfile.mkstemp(dir=archive_path.parent, prefix=".layer.", suffix=".tmp")
    out_fd, out_tmp = tempfile.mkstemp(dir=archive_path.parent, prefix=f".{archive_path.name}.", suffix=".tmp")
    try:
        with os.fdopen(layer_fd, "wb") as raw:
            hashing = _HashingWriter(raw)
            with tarfile.open(fileobj=hashing, mode="w|", format=tarfile.PAX_FORMAT) as tar:
                for child in sorted(Path(tree).iterdir()):
                    tar.add(child, arcname=child.name, filter=_tree_filter)
        layer_digest, layer_size = "sha256:" + hashing.sha.hexdigest(), hashing.size
        config = _blob(_canonical_json(_config(layer_digest, arch=arch, entrypoint=entrypoint, cmd=cmd, env=env,
                                               stop_signal=stop_signal, labels=labels)))
        layer_descriptor = {"mediaType": MEDIA_TYPE_LAYER, "digest": layer_digest, "size": layer_size}
        manifest = _blob(_canonical_json({
            "schemaVersion": 2,
            "mediaType": MEDIA_TYPE_MANIFEST,
            "config": config.descriptor(MEDIA_TYPE_CONFIG),
            "layers": [layer_descriptor],
        }))
        layer_path = f"blobs/sha256/{layer_digest.split(':', 1)[1]}"
        index, docker_manifest = _index_and_docker_manifest(manifest, config, layer_path, ref, arch)
        small = {config.archive_path: config.data, manifest.archive_path: manifest.data, "index.json": index,
                 "manifest.json": docker_manifest, "oci-layout": _canonical_json({"imageLayoutVersion": "1.0.0"})}
        with os.fdopen(out_fd, "wb") as out, tarfile.open(fileobj=out, mode="w|", format=tarfile.PAX_FORMAT) as tar:
            for d in ("blobs", "blobs/sha256"):
                tar.addfile(_tar_info(d, mode=_DIR_MODE, directory=True))
            for name in sorted([*small, layer_path]):
                if name == layer_path:
                    with open(layer_tmp, "rb") as layer:
                        tar.addfile(_tar_info(name, mode=_FILE_MODE, size=layer_size), layer)
                else:
                    tar.addfile(_tar_info(name, mode=_FILE_MODE, size=len(small[name])), io.BytesIO(small[name]))
        os.chmod(out_tmp, 0o644)
        os.replace(out_tmp, archive_path)
    finally:
        Path(layer_tmp).unlink(missing_ok=True)
        Path(out_tmp).unlink(missing_ok=True)
    return manifest.digest

