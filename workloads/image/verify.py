"""Read image archives back and check them with a real importer (a throwaway containerd).

Used by the self-tests and by hand before loading an archive onto a node:
``python -m workloads.image.verify ARCHIVE...`` prints each archive's name and digest and,
with ``--containerd``, imports it into a private containerd (own root, state and socket, so
the host's images are untouched) and shows what containerd registered.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from workloads.image import args as args_

__all__ = ["ImageArchive", "LayerTar", "PrivateContainerd", "private_containerd", "read_image_archive", "read_tar"]


@dataclass(frozen=True)
class LayerTar:
    """A tar read into memory: members by name (no trailing slash), file contents, order."""

    members: dict[str, tarfile.TarInfo]
    contents: dict[str, bytes]
    order: list[str]


def read_tar(data: bytes) -> LayerTar:
    members: dict[str, tarfile.TarInfo] = {}
    contents: dict[str, bytes] = {}
    order: list[str] = []
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        for info in tar:
            name = info.name.rstrip("/")
            members[name] = info
            order.append(name)
            if info.isfile():
                contents[name] = tar.extractfile(info).read()  # type: ignore[union-attr]
    return LayerTar(members, contents, order)


@dataclass(frozen=True)
class ImageArchive:
    """An image archive as written by workloads.image.oci (first image of the index)."""

    files: dict[str, bytes]

    def json(self, name: str) -> object:
        return json.loads(self.files[name])

    def blob(self, digest: str) -> bytes:
        algo, hexdigest = digest.split(":", 1)
        if algo != "sha256":
            raise ValueError(f"unsupported digest {digest}")
        return self.files[f"blobs/sha256/{hexdigest}"]

    @property
    def index_entry(self) -> dict:
        return self.json("index.json")["manifests"][0]  # type: ignore[index]

    @property
    def ref(self) -> str:
        return self.index_entry["annotations"]["io.containerd.image.name"]

    @property
    def digest(self) -> str:
        return self.index_entry["digest"]

    @property
    def manifest(self) -> dict:
        return json.loads(self.blob(self.digest))

    @property
    def config(self) -> dict:
        return json.loads(self.blob(self.manifest["config"]["digest"]))

    def layer_bytes(self) -> bytes:
        """The (single) layer, uncompressed."""
        desc = self.manifest["layers"][0]
        raw = self.blob(desc["digest"])
        return gzip.decompress(raw) if desc["mediaType"].endswith("+gzip") else raw

    def layer(self) -> LayerTar:
        return read_tar(self.layer_bytes())


def read_image_archive(path: Path) -> ImageArchive:
    return ImageArchive(read_tar(Path(path).read_bytes()).contents)


def sha256_digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class PrivateContainerd:
    ctr: str
    address: str
    namespace: str = "k8s.io"

    def run(self, *args: str, timeout: float = 120) -> str:
        """Run ctr against this containerd; raise with ctr's stderr on failure."""
        cmd = [self.ctr, "-a", self.address, "-n", self.namespace, *args]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr.strip()}")
        return proc.stdout

    def images(self) -> dict[str, str]:
        """Image name -> target digest."""
        rows = [line.split() for line in self.run("images", "ls").splitlines()[1:]]
        return {row[0]: row[2] for row in rows if len(row) >= 3}


def _wait_for_socket(proc: subprocess.Popen[bytes], socket: Path, log: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not socket.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            state = f"exited with {proc.returncode}" if proc.poll() is not None else f"not ready after {timeout}s"
            raise RuntimeError(f"containerd {state}, socket {socket} missing; log:\n{log.read_text()[-3000:]}")
        time.sleep(0.05)


@contextmanager
def private_containerd(containerd: str = "containerd", ctr: str = "ctr", timeout: float = 30) -> Iterator[PrivateContainerd]:
    """Start a containerd of our own (root needed) and stop it, and remove its files, on exit."""
    binary, ctr_path = shutil.which(containerd), shutil.which(ctr)
    if not binary or not ctr_path:
        raise FileNotFoundError(f"{containerd} and {ctr} are needed")
    # A short directory: unix socket paths must fit in 108 bytes.
    base = Path(tempfile.mkdtemp(prefix="ksc-ctrd-"))
    socket = base / "sock"
    config = base / "config.toml"
    # Version 2 config: containerd 1.6 reads it, 2.x migrates it. CRI is not needed to import.
    config.write_text(
        f'version = 2\nroot = "{base}/root"\nstate = "{base}/state"\n'
        'disabled_plugins = ["io.containerd.grpc.v1.cri"]\n'
        f'[grpc]\n  address = "{socket}"\n[ttrpc]\n  address = "{socket}.ttrpc"\n'
    )
    log_path = base / "containerd.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([binary, "--config", str(config)], stdout=log, stderr=log)
    try:
        _wait_for_socket(proc, socket, log_path, timeout)
        yield PrivateContainerd(ctr_path, str(socket))
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(base, ignore_errors=True)


def parser() -> args_.Parser:
    p = args_.Parser(prog="python -m workloads.image.verify", description=__doc__.splitlines()[0])
    p.add_argument("archives", nargs="+", type=args_.archive)
    p.add_argument("--containerd", action="store_true", help="also import into a private containerd")
    return p


def main(argv: list[str] | None = None) -> int:
    parser_ = parser()
    args = parser_.parse_args(argv)
    for path in args.archives:
        try:
            archive = read_image_archive(path)
        except (tarfile.TarError, OSError, ValueError, KeyError, UnicodeDecodeError) as error:
            parser_.error(f"argument archives: {path} is not an image archive the suite builds"
                          f" ({type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''})")
        print(f"{path}: {archive.ref} {archive.digest}")
    if args.containerd:
        if os.geteuid() != 0:
            parser_.error("--containerd needs root")
        with private_containerd() as ctrd:
            for path in args.archives:
                ctrd.run("images", "import", "--no-unpack", str(path))
            for name, digest in sorted(ctrd.images().items()):
                print(f"containerd: {name} {digest}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
