"""Build the suite's workload images (stress and pause) locally, without Docker or a registry.

The stress program (``workloads/stress``: Go, standard library only, plus one static C helper)
is compiled with the local toolchains and packed by :mod:`workloads.image.oci` into an archive
that ``ctr -n k8s.io images import`` and ``kind load image-archive`` accept.

Binaries are cached under ``~/.cache/kube-swap-conformance/images/stress-<hash>/`` (override
with ``$KSC_CACHE_DIR``, as every cache of the suite), keyed by the sources, the build flags, the toolchain
versions and the archive writer, so a second run compiles nothing. The stress image tag is the
first 12 hex digits of that key: a changed program can never hide behind an image the node
already has under the same name.

Command line: ``python -m workloads.image.build OUT_DIR [--pause-ref REF]``.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from workloads.cache import cache_root  # one root for every cache of the suite
from workloads.image import args as args_
from workloads.image.oci import write_image_archive

__all__ = [
    "BuildError",
    "StressBinaries",
    "build_pause_image",
    "build_stress_binaries",
    "build_stress_image",
    "default_cache_dir",
    "source_hash",
    "DEFAULT_PAUSE_REF",
    "STRESS_REPOSITORY",
]

STRESS_SRC = Path(__file__).resolve().parent.parent / "stress"
STRESS_REPOSITORY = "localhost/kube-swap-conformance/stress"
DEFAULT_PAUSE_REF = "registry.k8s.io/pause:3.10.1"
# -buildid= and -trimpath make the Go binary depend only on sources and toolchain.
GO_BUILD_ARGS = ("build", "-trimpath", "-ldflags=-s -w -buildid=")
CC_ARGS = ("-static", "-O2", "-s", "-Wall", "-Wextra")
_OCI_WRITER = Path(__file__).resolve().parent / "oci.py"


class BuildError(RuntimeError):
    """A compiler failed; the message carries its command and output."""


@dataclass(frozen=True)
class StressBinaries:
    swapstress: Path
    forkspike: Path
    content_hash: str  # full sha256 hex of everything that determines the binaries

    @property
    def tag(self) -> str:
        return self.content_hash[:12]


def default_cache_dir() -> Path:
    return cache_root() / "images"


def _source_files(src: Path) -> list[Path]:
    """Files that end up in the binaries. Tests are left out: editing them changes nothing."""
    files = [src / "go.mod", *src.glob("go.sum"), *src.glob("*.go"), *src.glob("csrc/*.[ch]")]
    return sorted(f for f in files if not f.name.endswith("_test.go"))


def _tool_version(*cmd: str) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        raise BuildError(f"{cmd[0]} is needed to build the stress image: {exc}") from exc
    return out.splitlines()[0] if out else ""


def source_hash(src: Path = STRESS_SRC) -> str:
    """sha256 over sources, build flags, toolchain versions and the archive writer."""
    h = hashlib.sha256()

    def add(label: str, data: bytes) -> None:
        # Length-prefixed so that moving bytes between fields changes the hash.
        h.update(f"{label}\0{len(data)}\0".encode())
        h.update(data)

    for f in _source_files(src):
        add(f.relative_to(src).as_posix(), f.read_bytes())
    add("go-args", "\0".join(GO_BUILD_ARGS).encode())
    add("cc-args", "\0".join(CC_ARGS).encode())
    add("go", _tool_version("go", "version").encode())
    add("cc", _tool_version("gcc", "--version").encode())
    add("oci.py", _OCI_WRITER.read_bytes())
    return h.hexdigest()


def _run(cmd: list[str], *, cwd: Path, env: dict[str, str] | None = None) -> None:
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise BuildError(
            f"{' '.join(cmd)} failed with exit status {proc.returncode}:\n{proc.stdout}{proc.stderr}"
        )


def _compile(src: Path, out: Path) -> None:
    go_env = {
        **os.environ,
        "CGO_ENABLED": "0",  # a static binary that runs in an image without libc
        "GOOS": "linux",
        "GOARCH": "amd64",
        "GOFLAGS": "-mod=mod",
        "GOPROXY": "off",  # standard library only: never reach the network
        "GOTOOLCHAIN": "local",  # never download another Go
    }
    _run(["go", *GO_BUILD_ARGS, "-o", str(out / "swapstress"), "."], cwd=src, env=go_env)
    _run(["gcc", *CC_ARGS, "-o", str(out / "forkspike"), str(src / "csrc" / "forkspike.c")], cwd=src)


def build_stress_binaries(*, cache_dir: Path | None = None, src: Path = STRESS_SRC) -> StressBinaries:
    """Compile swapstress and forkspike, or return the cached build for the same content."""
    digest = source_hash(src)
    final = (cache_dir or default_cache_dir()) / f"stress-{digest}"
    if not final.is_dir():
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=final.parent, prefix=".build-"))
        try:
            tmp.chmod(0o755)  # mkdtemp makes it private; the cache is shared like ~/.cache/go-build
            _compile(src, tmp)
            # The rename publishes a complete build atomically; if a parallel worker won the
            # race, its identical result stays and ours is dropped.
            try:
                tmp.rename(final)
            except OSError:
                if not final.is_dir():
                    raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return StressBinaries(final / "swapstress", final / "forkspike", digest)


def build_stress_image(out_dir: Path, *, cache_dir: Path | None = None) -> tuple[Path, str]:
    """Write the stress image archive into out_dir and return (archive path, image ref).

    The image holds /swapstress (entrypoint) and /forkspike (its fork-exec helper); pods pass
    the subcommand as args, e.g. ``["alloc", "--target", "256Mi"]``; without args it pauses.
    """
    bins = build_stress_binaries(cache_dir=cache_dir)
    ref = f"{STRESS_REPOSITORY}:{bins.tag}"
    archive = Path(out_dir) / f"stress-{bins.tag}.tar"
    write_image_archive(
        archive,
        ref,
        {"/swapstress": bins.swapstress, "/forkspike": bins.forkspike},
        entrypoint=["/swapstress"],
        cmd=["pause"],
    )
    return archive, ref


def build_pause_image(
    out_dir: Path, ref: str = DEFAULT_PAUSE_REF, *, cache_dir: Path | None = None
) -> tuple[Path, str]:
    """Write a pod-sandbox (pause) image named ``ref`` from the same swapstress binary.

    ``ref`` is the name the kubelet/containerd is configured to use for sandboxes (e.g.
    ``registry.k8s.io/pause:3.10.1``), so no registry is ever asked for it.
    """
    bins = build_stress_binaries(cache_dir=cache_dir)
    safe = ref.replace("/", "_").replace(":", "_")
    archive = Path(out_dir) / f"pause-{safe}-{bins.tag}.tar"
    write_image_archive(
        archive,
        ref,
        {"/swapstress": bins.swapstress},
        entrypoint=["/swapstress", "pause"],
    )
    return archive, ref


def parser() -> args_.Parser:
    p = args_.Parser(prog="python -m workloads.image.build", description=__doc__.splitlines()[0])
    p.add_argument("out_dir", type=args_.output_directory)
    p.add_argument("--pause-ref", type=args_.image, default=DEFAULT_PAUSE_REF)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    for archive, ref in (build_stress_image(args.out_dir), build_pause_image(args.out_dir, args.pause_ref)):
        print(f"{ref}\t{archive}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
