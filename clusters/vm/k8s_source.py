"""Which Kubernetes the node runs: a Go-proxy release, that release with patches, or a local
checkout. Every build has an id that the binaries report as their version, so no result can be
mistaken for the release's:

* ``v1.37.1``                       the release as the Go module proxy serves it
* ``v1.37.1+patch.<12 hex>``        the release with ``--k8s-patch`` files applied (hash of
                                    what builds them, in order: `Patch.build_text`)
* ``<tag>+src.<12 hex>``            ``--k8s-source DIR`` (hash of the tree's Go sources)

A patch is a unified diff in ``git diff`` form, paths relative to the kubernetes repository
root, applied with ``patch -p1``. Files under ``staging/src/k8s.io/<module>/`` patch that
staging module (a separate module on the proxy): its source is copied beside the main one and
the build replaces it. Text before the first ``diff``/``---`` line is ignored by patch(1) and
by the build's id (the mutant bench keeps its metadata there), but for two header lines that
mean something to the node as well:

* ``# prototype: <what>``       the patch is a prototype written for this suite (e.g. of
                                KEP-5359): every report names the build so, never as upstream
* ``# feature-gates: A, B``     gates the patch adds; the node turns them on for the API server,
                                the controller manager, the scheduler and the kubelet
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

RELEASE = re.compile(r"v1\.(\d+)\.(\d+)")
# What a checkout's `git describe` may say: v1.38.0, v1.38.0-alpha.1, v1.38.0-alpha.1.123+abcdef
CHECKOUT_TAG = re.compile(r"v1\.(\d+)\.(\d+)(-[0-9A-Za-z.-]+)?")
STAGING = re.compile(r"staging/src/(k8s\.io/[\w.-]+)/")
_SOURCE_SUFFIXES = (".go", ".mod", ".sum", ".s", ".c", ".h")
# Opt-in gates of unmerged KEPs the suite tests: a checkout that defines one gets it turned on
# (a patch says so in its `# feature-gates:` line instead).
OPT_IN_GATES = ("WorkloadControlledSwap",)


class SourceError(ValueError):
    """A patch or checkout that cannot be built from: the message names the file and why."""


@dataclass(frozen=True)
class Patch:
    path: Path
    text: str

    @property
    def files(self) -> list[str]:
        """Repository-relative paths the patch touches (from its ``+++``/``---`` lines)."""
        out: list[str] = []
        for line in self.text.splitlines():
            if line.startswith(("+++ ", "--- ")):
                name = line[4:].split("\t", 1)[0].strip()
                if name == "/dev/null":
                    continue
                name = name.split("/", 1)[1] if name.startswith(("a/", "b/")) else name
                if name not in out:
                    out.append(name)
        return out

    @property
    def staging_modules(self) -> list[str]:
        return sorted({m.group(1) for f in self.files if (m := STAGING.match(f))})

    def header(self) -> dict[str, str]:
        """``# key: value`` lines before the diff (the mutant bench's metadata)."""
        out: dict[str, str] = {}
        for line in self.text[:len(self.text) - len(self.diff)].splitlines():
            m = re.match(r"#\s*([\w-]+):\s*(.*)", line)
            if m:
                out[m.group(1).lower()] = m.group(2).strip()
        return out

    @property
    def diff(self) -> str:
        """The patch from its first ``diff``/``---`` line: what patch(1) applies."""
        m = re.search(r"^(diff |--- )", self.text, re.M)
        return self.text[m.start():] if m else ""

    def text_of(self, keys: tuple[str, ...]) -> str:
        """The diff, after the header lines of these keys in a canonical form (`key: value`, as
        they come, every one of a repeated key): what a hash of the patch is to change with.
        Prose around them, a comment reworded, the header's other lines, change nothing."""
        lines = []
        for line in self.text[:len(self.text) - len(self.diff)].splitlines():
            m = re.match(r"#\s*([\w-]+):\s*(.*)", line)
            if m and m.group(1).lower() in keys:
                lines.append(f"{m.group(1).lower()}: {m.group(2).strip()}\n")
        return "".join(lines) + "\n" + self.diff

    @property
    def build_text(self) -> str:
        """What decides the build and the node it runs on (its id hashes this)."""
        return self.text_of(BUILD_KEYS)


    @property
    def prototype(self) -> str | None:
        """What the patch prototypes (``# prototype:``), None for any other patch."""
        return self.header().get("prototype") or None

    @property
    def feature_gates(self) -> list[str]:
        return [g.strip() for g in self.header().get("feature-gates", "").split(",") if g.strip()]


def read_patch(path: Path) -> Patch:
    from clusters import inputs

    path = Path(path)
    try:  # one reader for every input file: a directory, a FIFO, non-UTF-8 or binary text refused by name
        text = inputs.read_text(path, "--k8s-patch", "make one with `git diff` in a kubernetes checkout")
    except inputs.UsageError as error:
        raise SourceError(str(error)) from None
    patch = Patch(path, text)
    files = patch.files
    if not files or not re.search(r"^@@ ", text, re.M):
        raise SourceError(f"--k8s-patch {path}: not a unified diff (no '--- a/…', '+++ b/…' and '@@' hunks);"
                          " make one with `git diff` in a kubernetes checkout")
    for f in files:
        if f.startswith("/") or ".." in Path(f).parts:
            raise SourceError(f"--k8s-patch {path}: path {f!r} is not relative to the kubernetes repository root")
    return patch


@dataclass(frozen=True)
class KubernetesSource:
    release: str
    patches: tuple[Patch, ...] = ()
    checkout: Path | None = None
    checkout_hash: str = ""

    @property
    def build_id(self) -> str:
        if self.checkout is not None:
            return f"{self.release}+src.{self.checkout_hash[:12]}"
        if self.patches:
            h = hashlib.sha256()
            for p in self.patches:
                h.update(hashlib.sha256(p.build_text.encode()).digest())
            return f"{self.release}+patch.{h.hexdigest()[:12]}"
        return self.release

    @property
    def feature_gates(self) -> tuple[str, ...]:
        """The gates the node must turn on: the patches' ``# feature-gates:`` lines, or the
        OPT_IN_GATES a checkout defines in pkg/features/kube_features.go."""
        if self.checkout is not None:
            features = self.checkout / "pkg" / "features" / "kube_features.go"
            text = features.read_text() if features.is_file() else ""
            return tuple(g for g in OPT_IN_GATES if re.search(rf"^\s*{g}\s+featuregate\.Feature\s*=", text, re.M))
        return tuple(dict.fromkeys(g for p in self.patches for g in p.feature_gates))

    @property
    def prototype_note(self) -> str:
        """"" for a release, a checkout, or patches of which none is a prototype; else the mark
        every report carries, so no result on this build reads as upstream conformance."""
        protos = [p for p in self.patches if p.prototype]
        if not protos:
            return ""
        return "; ".join(f"{p.prototype} prototype ({p.path.name})" for p in protos) + ", not upstream Kubernetes"

    @property
    def is_release(self) -> bool:
        return self.checkout is None and not self.patches

    @property
    def minor(self) -> int:
        return int(self.release.split(".")[1])

    def describe(self) -> str:
        if self.checkout is not None:
            return f"{self.build_id} (local checkout {self.checkout})"
        if self.patches:
            note = f"; {self.prototype_note}" if self.prototype_note else ""
            return f"{self.build_id} ({self.release} with {', '.join(p.path.name for p in self.patches)}{note})"
        return f"{self.release} (Go proxy release)"


def release(version: str, patches: list[Path] | tuple[Path, ...] = ()) -> KubernetesSource:
    if not RELEASE.fullmatch(version):
        raise SourceError(f"--k8s-version {version!r} is not a Kubernetes release (want v1.MINOR.PATCH, e.g. v1.37.1)")
    seen: dict[str, Path] = {}
    for p in patches:  # the second application of a patch fails, and only in the build
        key = os.path.realpath(p)
        if key in seen:
            first = "" if str(seen[key]) == str(p) else f" (as {seen[key]} before)"
            raise SourceError(f"--k8s-patch {p} is given twice{first}: a patch applies once")
        seen[key] = Path(p)
    return KubernetesSource(version, tuple(read_patch(p) for p in patches))


def checkout(directory: Path, version: str | None = None) -> KubernetesSource:
    """A local kubernetes checkout (repository root: go.mod of k8s.io/kubernetes, staging/)."""
    from clusters import inputs

    problem = inputs.existing_directory_problem(Path(directory))
    if problem:  # a symlink loop too, which resolve() would raise on
        raise SourceError(f"--k8s-source {problem}: name the root of a kubernetes checkout")
    d = Path(directory).resolve()
    gomod = d / "go.mod"
    if not gomod.is_file() or not re.search(r"^module k8s\.io/kubernetes\s*$", gomod.read_text(), re.M):
        raise SourceError(f"--k8s-source {directory}: not a kubernetes repository root (no go.mod of module"
                          " k8s.io/kubernetes there)")
    if not (d / "staging" / "src" / "k8s.io").is_dir():
        raise SourceError(f"--k8s-source {directory}: has no staging/src/k8s.io (a full kubernetes checkout is needed)")
    tag = version or _describe(d)
    if not tag or not CHECKOUT_TAG.fullmatch(tag):
        raise SourceError(f"--k8s-source {directory}: cannot tell its version (git describe said {tag!r});"
                          " say it with --k8s-version v1.MINOR.PATCH")
    return KubernetesSource(tag, checkout=d, checkout_hash=tree_hash(d))


def unsupported(source: KubernetesSource, given: str | None = None) -> str | None:
    """The one refusal of a build outside the supported minors (clusters/versions.py SUPPORTED),
    naming what was given, the range and the fix; None inside the range. A checkout's version is
    ``given`` (--k8s-version) or its `git describe`."""
    from clusters import versions

    if source.checkout is None:
        refused = versions.out_of_range(f"--k8s-version {source.release}", source.release)
        return refused and f"{refused}; {versions.PICK_A_RELEASE}"
    named = f"--k8s-source {source.checkout} ({source.release}, {'as --k8s-version says' if given else 'from git describe'})"
    refused = versions.out_of_range(named, source.release)
    return refused and (f"{refused}; check out a release of Kubernetes {versions.SUPPORTED_RANGE} (a release-1.MINOR"
                        " branch or tag), or build a supported release with --k8s-version instead of --k8s-source")


def _describe(d: Path) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(d), "describe", "--tags", "--abbrev=0"], capture_output=True,
                             text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None


def tree_hash(d: Path) -> str:
    """Content hash of a checkout's build inputs (Go sources, go.mod/go.sum, assembly, cgo)."""
    h = hashlib.sha256()
    for root, dirs, files in os.walk(d):
        dirs[:] = sorted(x for x in dirs if x not in (".git", "_output", "vendor", "node_modules", "testdata"))
        for name in sorted(files):
            if name.endswith(_SOURCE_SUFFIXES) and not name.endswith("_test.go"):
                p = Path(root, name)
                h.update(str(p.relative_to(d)).encode() + b"\0")
                h.update(hashlib.sha256(p.read_bytes()).digest())
    return h.hexdigest()


# --- building a patched tree --------------------------------------------------------------------

def module_dir(module: str, version: str, env: dict[str, str]) -> Path:
    """The module's source in the Go module cache (downloaded through the proxy if needed)."""
    out = subprocess.run(["go", "mod", "download", "-json", f"{module}@{version}"], capture_output=True, text=True,
                         env=env, cwd="/")
    try:
        info = json.loads(out.stdout)
    except ValueError:
        info = {}
    if out.returncode != 0 or not info.get("Dir"):
        raise SourceError(f"cannot download {module}@{version} from the Go proxy: "
                          f"{info.get('Error') or out.stderr.strip() or out.stdout.strip()}")
    return Path(info["Dir"])


def _copy_writable(src: Path, dst: Path) -> None:
    shutil.copytree(src, dst, symlinks=True)
    for root, dirs, files in os.walk(dst):
        for name in dirs + files:
            p = Path(root, name)
            if not p.is_symlink():
                p.chmod(p.stat().st_mode | 0o200)
    dst.chmod(dst.stat().st_mode | 0o200)


# The header lines that change a build or its node (the rest is the mutant bench's, or prose).
BUILD_KEYS = ("prototype", "feature-gates")

# How a build applies each patch; whoever asks "does this apply?" asks it the same way.
PATCH = ("patch", "-p1", "--batch", "--forward", "--no-backup-if-mismatch", "-r", "-")


def apply_patches(source: KubernetesSource, tree: Path, env: dict[str, str],
                  find_module: "Callable[[str, str, dict[str, str]], Path] | None" = None) -> list[str]:
    """Lay out ``tree`` as the kubernetes repository (the release's module, plus every staging
    module a patch touches under staging/src/) and apply the patches in order with ``patch -p1``.
    Returns the staging modules copied. A patch that does not apply raises SourceError naming
    the patch, the file and the hunk; ``tree`` is then removed."""
    find_module = find_module or module_dir
    shutil.rmtree(tree, ignore_errors=True)
    tree.parent.mkdir(parents=True, exist_ok=True)
    _copy_writable(find_module("k8s.io/kubernetes", source.release, env), tree)
    staging = sorted({m for p in source.patches for m in p.staging_modules})
    staging_version = "v0." + ".".join(source.release[1:].split(".")[1:])
    for mod in staging:
        _copy_writable(find_module(mod, staging_version, env), tree / "staging" / "src" / mod)
    try:
        for p in source.patches:
            out = subprocess.run([*PATCH, "-d", str(tree), "-i", str(p.path.resolve())], capture_output=True,
                                 text=True)
            if out.returncode != 0:
                raise SourceError(patch_failure(p, source.release, out.stdout + out.stderr))
    except BaseException:
        shutil.rmtree(tree, ignore_errors=True)
        raise
    return staging


def patch_failure(p: Patch, release: str, output: str) -> str:
    """One message from patch(1)'s output: the file and the hunks that failed."""
    lines = output.splitlines()
    failed: list[str] = []
    current = ""
    for line in lines:
        m = re.match(r"patching file (.+)", line)
        if m:
            current = m.group(1).strip()
        if "FAILED" in line or "can't find file" in line or "No file to patch" in line \
                or "Reversed (or previously applied)" in line or "malformed patch" in line \
                or "Only garbage" in line:
            failed.append(f"{current}: {line.strip()}" if current and "FAILED" in line else line.strip())
    detail = "; ".join(failed) or (lines[-1].strip() if lines else "patch(1) failed")
    return f"--k8s-patch {p.path}: does not apply to k8s.io/kubernetes {release}: {detail}"


GO_ERROR = re.compile(r"^(\S+\.go:\d+(?::\d+)?: .+)$", re.M)


def first_compiler_error(log_text: str) -> str | None:
    m = GO_ERROR.search(log_text)
    return m.group(1) if m else None
