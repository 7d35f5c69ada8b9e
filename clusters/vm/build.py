"""Build the node's binaries from the Go module proxy, cached by component and version.

Every component is built from a small scratch "wrapper" main module under
``CACHE/src/<component>-<version>/`` and installed into
``CACHE/bin/<component>-<version>/`` together with a ``.complete`` marker, so a
second run finds everything and builds nothing.

* kubernetes: a main module requiring k8s.io/kubernetes vX.Y.Z with a ``replace`` for
  every staging module (``go install k8s.io/kubernetes/cmd/kubelet@v`` does not work:
  k8s.io/kubernetes replaces its staging modules with local paths). Version ldflags are
  set for both k8s.io/component-base/version and k8s.io/client-go/pkg/version.
* containerd 2.x (tags no_btrfs no_devmapper no_zfs), runc (cgo + libseccomp), CNI
  plugins, etcd (a wrapper main calling etcdmain.Main).
"""
from __future__ import annotations

import contextlib
import datetime as _dt
import fcntl
import json
import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

from clusters import diskspace, versions
from workloads.cache import cache_root

from . import k8s_source
from .k8s_source import KubernetesSource

Progress = Callable[[str], None]

DEFAULT_K8S_VERSION = versions.KUBERNETES
DEFAULT_CONTAINERD_VERSION = versions.CONTAINERD
DEFAULT_RUNC_VERSION = versions.RUNC
DEFAULT_CNI_VERSION = versions.CNI_PLUGINS
DEFAULT_ETCD_VERSION = versions.ETCD
DEFAULT_CRICTL_VERSION = versions.CRICTL

K8S_COMMANDS = (
    "kubelet",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kube-proxy",  # the kind node image runs it (kubeadm's addon); the vm node skips that addon
    "kubectl",
    "kubeadm",
)

CNI_PLUGINS = {
    "bridge": "plugins/main/bridge",
    "host-local": "plugins/ipam/host-local",
    "loopback": "plugins/main/loopback",
    "portmap": "plugins/meta/portmap",
}


class BuildError(RuntimeError):
    pass


@contextlib.contextmanager
def cache_lock(root: Path, name: str, progress: Progress | None = None):
    """Exclusive lock so two processes never build the same cache entry at once."""
    d = root / "locks"
    d.mkdir(parents=True, exist_ok=True)
    with open(d / f"{name}.lock", "w") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if progress:
                progress(f"waiting for another process building {name}")
            fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _proxy_get(path: str, timeout: float = 60) -> str:
    status, body = versions.proxy_get(path, timeout)
    if status != 200:
        raise BuildError(f"the Go module proxy {versions.module_proxy()} answered {status} for {path}")
    return body.decode()


def latest_kubernetes_version() -> str:
    """'latest': the newest buildable patch of the newest supported minor, probed by name (the
    proxy's list omits some releases, and a newer minor is outside what the suite supports)."""
    minor = max(versions.SUPPORTED, key=versions.minor_of)
    newest = versions.newest_patch(minor)
    if newest is None:
        raise BuildError(f"the Go module proxy {versions.module_proxy()} serves no buildable k8s.io/kubernetes {minor}"
                         f" release; choose one with --k8s-version, e.g. {versions.SUPPORTED[minor]}")
    return newest


def go_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("GOTOOLCHAIN", "local")
    env["GOFLAGS"] = "-buildvcs=false -mod=mod"
    env.update(extra or {})
    return env


def go_build_cache() -> Path | None:
    """Where Go's build cache is (Go's own answer), None where go cannot say: the build's own
    go command will then say why."""
    try:
        done = subprocess.run(["go", "env", "GOCACHE"], env=go_env(), capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    said = done.stdout.strip()
    return Path(said) if done.returncode == 0 and said.startswith("/") else None


def _run_logged(argv: Sequence[str], cwd: Path, log: Path, env: Mapping[str, str], what: str) -> None:
    with open(log, "ab") as f:
        f.write(f"\n$ {' '.join(argv)}\n".encode())
        f.flush()
        start = f.tell()
        rc = subprocess.call(list(argv), cwd=cwd, stdout=f, stderr=subprocess.STDOUT, env=dict(env))
    if rc != 0:
        with open(log, "rb") as f:
            f.seek(start)
            output = f.read().decode(errors="replace")
        first = k8s_source.first_compiler_error(output)
        tail = output.splitlines()[-25:]
        head = f"{what} failed (exit {rc})" + (f": {first}" if first else "")
        raise BuildError(f"{head}\nlog {log}, last lines:\n" + "\n".join(tail))


@dataclass
class Component:
    """One cached build: a wrapper module plus the binaries it produces."""

    name: str
    version: str
    binaries: tuple[str, ...]
    files: dict[str, str] = field(default_factory=dict)  # wrapper module files
    # (output binary, package path) pairs
    targets: tuple[tuple[str, str], ...] = ()
    cgo: bool = False
    tags: tuple[str, ...] = ()
    ldflags: str = "-s -w"
    extra_dirs: dict[str, dict[str, str]] = field(default_factory=dict)
    # runs in the wrapper module's directory before the first `go build` (a patched source tree)
    prepare: Callable[[Path, Mapping[str, str]], None] | None = None
    # binaries taken as they are from another build (a patch cannot change them), not rebuilt:
    # hard links where the disk allows (a patched build is then its rebuilt binaries alone)
    copies: dict[str, Path] = field(default_factory=dict)
    # what ``prepare`` lays out in the wrapper module's directory for the build alone (a patched
    # source tree, about 120 MB): removed once the build ends, done or failed
    scratch: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return f"{self.name}-{self.version}"

    def bin_dir(self, root: Path) -> Path:
        return root / "bin" / self.key

    def is_cached(self, root: Path) -> bool:
        d = self.bin_dir(root)
        return (d / ".complete").exists() and all((d / b).exists() for b in self.binaries)

    def build(self, root: Path, progress: Progress) -> Path:
        if self.is_cached(root):
            progress(f"building: {self.key} cached in {self.bin_dir(root)}")
            return self.bin_dir(root)
        with cache_lock(root, self.key, progress):
            return self._build_locked(root, progress)

    def _build_locked(self, root: Path, progress: Progress) -> Path:
        out = self.bin_dir(root)
        if self.is_cached(root):
            progress(f"building: {self.key} cached in {out}")
            return out
        lack = diskspace.build_problem(root, go_build_cache())
        if lack:
            raise BuildError(f"not building {self.key}: {'; '.join(lack)}")
        src = root / "src" / self.key
        src.mkdir(parents=True, exist_ok=True)
        try:
            return self._build_in(src, out, root, progress)
        finally:
            for name in self.scratch:
                shutil.rmtree(src / name, ignore_errors=True)

    def _build_in(self, src: Path, out: Path, root: Path, progress: Progress) -> Path:
        for rel, text in self.files.items():
            p = src / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text)
        tmp = out.with_name(out.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        log = root / "logs" / f"build-{self.key}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(f"build {self.key} {_dt.datetime.now(_dt.timezone.utc).isoformat()}\n")
        env = go_env({"CGO_ENABLED": "1" if self.cgo else "0"})
        t0 = time.monotonic()
        if self.prepare is not None:
            try:
                self.prepare(src, env)
            except k8s_source.SourceError as error:
                raise BuildError(str(error)) from None
        progress(f"building: {self.key} ({len(self.targets)} targets; log {log})")
        for binary, pkg in self.targets:
            t1 = time.monotonic()
            argv = ["go", "build", "-trimpath", "-ldflags", self.ldflags, "-o", str(tmp / binary)]
            if self.tags:
                argv += ["-tags", ",".join(self.tags)]
            argv.append(pkg)
            _run_logged(argv, src, log, env, f"go build {pkg}")
            progress(f"building: {self.key}: {binary} done in {time.monotonic() - t1:.0f}s")
        for binary, origin in self.copies.items():
            _link_or_copy(origin, tmp / binary)
        if self.copies:
            progress(f"building: {self.key}: {', '.join(self.copies)} unchanged by the patches, taken from {origin.parent.name}")
        (tmp / ".complete").write_text(f"built in {time.monotonic() - t0:.0f}s\n")
        shutil.rmtree(out, ignore_errors=True)
        tmp.rename(out)
        progress(f"building: {self.key} built in {time.monotonic() - t0:.0f}s")
        return out


def _link_or_copy(origin: Path, to: Path) -> None:
    """A built binary is never written again, so a second name for it is as good as a copy."""
    try:
        os.link(origin, to)
    except OSError:  # another filesystem, or one without hard links
        shutil.copy2(origin, to)


def _staging_modules(k8s_version: str) -> list[str]:
    gomod = _proxy_get(f"k8s.io/kubernetes/@v/{k8s_version}.mod")
    return _staging_in(gomod)


def _staging_in(gomod: str) -> list[str]:
    return re.findall(r"^\s*(k8s\.io/[\w.-]+)\s+=>\s+\./staging/", gomod, re.M)


def _check_kubernetes_served(version: str) -> None:
    # .info, .mod and .zip: the proxy serves some releases only in part, and `go` needs all three.
    refused = versions.unbuildable(version)
    if refused:
        raise BuildError(
            f"the Go proxy does not serve all of k8s.io/kubernetes {version} ({refused}; it may list the version"
            f" and still not serve it); choose another with --k8s-version, e.g. {versions.KUBERNETES}")


def _version_ldflags(build_id: str, minor: int, commit: str) -> str:
    build_date = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    xs = []
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        for k, v in (("gitVersion", build_id), ("gitMajor", "1"), ("gitMinor", str(minor)),
                     ("gitCommit", commit), ("gitTreeState", "clean" if "+" not in build_id else "dirty"),
                     ("buildDate", build_date)):
            xs.append(f"-X {pkg}.{k}={v}")
    return "-s -w " + " ".join(xs)


PATCHED_TREE = "tree"  # in the wrapper module's directory: the release's source with the patches applied


def kubernetes_component(source: KubernetesSource | str) -> Component:
    """The Kubernetes commands, from a Go-proxy release, the release with patches applied, or a
    local checkout. The binaries report ``source.build_id`` as their version."""
    if isinstance(source, str):
        if not k8s_source.RELEASE.fullmatch(source):
            raise BuildError(f"unsupported Kubernetes version {source!r} (want v1.MINOR.PATCH)")
        source = KubernetesSource(source)
    version = source.release
    lines = ["module ksc.local/kubernetes-build", "", "go 1.26", ""]
    extra_dirs: dict[str, str] = {}
    prepare = None
    if source.checkout is not None:
        checkout = source.checkout
        lines += ["require k8s.io/kubernetes v0.0.0", "", "replace (", f"\tk8s.io/kubernetes => {checkout}"]
        for mod in _staging_in((checkout / "go.mod").read_text()):
            lines.append(f"\t{mod} => {checkout}/staging/src/{mod}")
        commit = f"local-{source.checkout_hash[:12]}"
    else:
        _check_kubernetes_served(version)
        patched: set[str] = {m for p in source.patches for m in p.staging_modules}
        staging_version = "v0." + ".".join(version[1:].split(".")[1:])
        lines += [f"require k8s.io/kubernetes {version}", "", "replace ("]
        if source.patches:
            lines.append(f"\tk8s.io/kubernetes => ./{PATCHED_TREE}")

            def prepare(src: Path, env: Mapping[str, str]) -> None:
                k8s_source.apply_patches(source, src / PATCHED_TREE, dict(env))
        for mod in _staging_modules(version):
            if mod in patched:
                lines.append(f"\t{mod} => ./{PATCHED_TREE}/staging/src/{mod}")
            # The zip, not the .mod: the proxy serves some versions' .mod but refuses their zip. A
            # proxy that cannot be asked, or answers 5xx, is ProxyUnreachable, not "not published":
            # a stub in place of a module the build needs fails `go build` minutes later, on a
            # missing package instead of the proxy.
            elif versions.module_zip_served(mod, staging_version):
                lines.append(f"\t{mod} => {mod} {staging_version}")
            else:
                # not published for this version (e.g. k8s.io/sample-cli-plugin): an empty stub
                # module; nothing we build imports it.
                stub = "stubs/" + mod.split("/", 1)[1]
                extra_dirs[f"{stub}/go.mod"] = f"module {mod}\n\ngo 1.24\n"
                lines.append(f"\t{mod} => ./{stub}")
        commit = f"goproxy-{version}" + (f"-{source.build_id.rsplit('.', 1)[1]}" if source.patches else "")
    lines.append(")")
    files = {"go.mod": "\n".join(lines) + "\n", **extra_dirs}
    return Component(
        name="kubernetes",
        version=source.build_id,
        binaries=K8S_COMMANDS,
        files=files,
        targets=tuple((c, f"k8s.io/kubernetes/cmd/{c}") for c in K8S_COMMANDS),
        ldflags=_version_ldflags(source.build_id, source.minor, commit),
        prepare=prepare,
        scratch=(PATCHED_TREE,) if prepare is not None else (),
    )


def containerd_component(version: str = DEFAULT_CONTAINERD_VERSION) -> Component:
    mod = "github.com/containerd/containerd/v2"
    ver_pkg = f"{mod}/version"
    return Component(
        name="containerd",
        version=version,
        binaries=("containerd", "containerd-shim-runc-v2", "ctr"),
        files={"go.mod": f"module ksc.local/containerd-build\n\ngo 1.26\n\nrequire {mod} {version}\n"},
        targets=(("containerd", f"{mod}/cmd/containerd"),
                 ("containerd-shim-runc-v2", f"{mod}/cmd/containerd-shim-runc-v2"),
                 ("ctr", f"{mod}/cmd/ctr")),
        tags=("no_btrfs", "no_devmapper", "no_zfs", "urfave_cli_no_docs"),
        ldflags=f"-s -w -X {ver_pkg}.Version={version} -X {ver_pkg}.Revision=goproxy",
    )


def runc_component(version: str = DEFAULT_RUNC_VERSION) -> Component:
    mod = "github.com/opencontainers/runc"
    return Component(
        name="runc",
        version=version,
        binaries=("runc",),
        files={"go.mod": f"module ksc.local/runc-build\n\ngo 1.25\n\nrequire {mod} {version}\n"},
        targets=(("runc", mod),),
        cgo=True,
        tags=("seccomp", "urfave_cli_no_docs"),
        ldflags=f"-s -w -X main.version={version.lstrip('v')} -X main.gitCommit=goproxy",
    )


def cni_component(version: str = DEFAULT_CNI_VERSION) -> Component:
    mod = "github.com/containernetworking/plugins"
    return Component(
        name="cni-plugins",
        version=version,
        binaries=tuple(CNI_PLUGINS),
        files={"go.mod": f"module ksc.local/cni-build\n\ngo 1.24\n\nrequire {mod} {version}\n"},
        targets=tuple((b, f"{mod}/{p}") for b, p in CNI_PLUGINS.items()),
    )


def crictl_component(version: str = DEFAULT_CRICTL_VERSION) -> Component:
    mod = "sigs.k8s.io/cri-tools"
    return Component(
        name="crictl",
        version=version,
        binaries=("crictl",),
        files={"go.mod": f"module ksc.local/crictl-build\n\ngo 1.26\n\nrequire {mod} {version}\n"},
        targets=(("crictl", f"{mod}/cmd/crictl"),),
        ldflags=f"-s -w -X {mod}/pkg/version.Version={version.lstrip('v')}",
    )


def etcd_component(version: str = DEFAULT_ETCD_VERSION) -> Component:
    main = (
        "package main\n\nimport (\n\t\"os\"\n\n\t\"go.etcd.io/etcd/server/v3/etcdmain\"\n)\n\n"
        "func main() { etcdmain.Main(os.Args) }\n"
    )
    return Component(
        name="etcd",
        version=version,
        binaries=("etcd",),
        files={
            "go.mod": f"module ksc.local/etcd-build\n\ngo 1.24\n\nrequire go.etcd.io/etcd/server/v3 {version}\n",
            "main.go": main,
        },
        targets=(("etcd", "."),),
    )


@dataclass
class Binaries:
    kubernetes: Path
    containerd: Path
    runc: Path
    cni: Path
    etcd: Path
    k8s_version: str
    etcd_version: str

    def all_files(self) -> dict[str, Path]:
        """Destination path in the guest -> host file."""
        out: dict[str, Path] = {}
        for b in K8S_COMMANDS:
            out[f"usr/local/bin/{b}"] = self.kubernetes / b
        for b in ("containerd", "containerd-shim-runc-v2", "ctr"):
            out[f"usr/local/bin/{b}"] = self.containerd / b
        out["usr/local/sbin/runc"] = self.runc / "runc"
        for b in CNI_PLUGINS:
            out[f"opt/cni/bin/{b}"] = self.cni / b
        out["usr/local/bin/etcd"] = self.etcd / "etcd"
        return out


def _packages_of(source: KubernetesSource) -> set[str]:
    """Import paths of the packages the patches change."""
    out = set()
    for p in source.patches:
        for f in p.files:
            d = f.rsplit("/", 1)[0] if "/" in f else ""
            m = k8s_source.STAGING.match(f + ("" if "/" in f else "/"))
            if m:
                out.add(m.group(1) + d[len("staging/src/" + m.group(1)):])
            else:
                out.add("k8s.io/kubernetes" + (f"/{d}" if d else ""))
    return out


def affected_commands(release_src: Path, source: KubernetesSource, env: Mapping[str, str]) -> set[str]:
    """The Kubernetes commands whose dependency graph (of the release; cached beside its wrapper
    module) contains a package the patches change."""
    cache = release_src / "deps.json"
    try:
        deps = json.loads(cache.read_text())
    except (OSError, ValueError):
        deps = {}
        for c in K8S_COMMANDS:
            out = subprocess.run(["go", "list", "-deps", "-f", "{{.ImportPath}}", f"k8s.io/kubernetes/cmd/{c}"],
                                 cwd=release_src, capture_output=True, text=True, env=dict(env))
            if out.returncode != 0:
                raise BuildError(f"go list -deps k8s.io/kubernetes/cmd/{c} failed: {out.stderr.strip()[-2000:]}")
            deps[c] = out.stdout.split()
        cache.write_text(json.dumps(deps))
    if any(not f.endswith(".go") for p in source.patches for f in p.files):
        return set(K8S_COMMANDS)  # go.mod, assembly, generated data...: rebuild everything
    changed = _packages_of(source)
    return {c for c, pkgs in deps.items() if changed & set(pkgs)} or set(K8S_COMMANDS)


def kubeadm_etcd_version(kubeadm: Path, k8s_version: str) -> str | None:
    """The etcd release kubeadm deploys (from its image tag, e.g. etcd:3.7.0-0 -> v3.7.0)."""
    out = subprocess.run([str(kubeadm), "config", "images", "list", "--kubernetes-version", k8s_version],
                         capture_output=True, text=True)
    match = re.search(r"/etcd:(\d+\.\d+\.\d+)", out.stdout)
    return f"v{match.group(1)}" if match else None


def _etcd_for(wanted: str | None, root: Path, progress: Progress) -> str:
    """The etcd release to build under kubeadm's image tag: the one kubeadm deploys when it is
    cached or the proxy serves it, else the pinned one. A proxy that cannot be asked is said,
    not taken for "not published" in silence; the pinned etcd runs every supported release, so an
    offline machine whose cache has it still builds."""
    if not wanted or etcd_component(wanted).is_cached(root):
        return wanted or DEFAULT_ETCD_VERSION
    try:
        if versions.module_zip_served("go.etcd.io/etcd/server/v3", wanted):
            return wanted
    except versions.ProxyUnreachable as error:
        progress(f"building: etcd {wanted} (kubeadm's) could not be asked of the proxy ({error}): the pinned"
                 f" {DEFAULT_ETCD_VERSION} instead")
    return DEFAULT_ETCD_VERSION


def build_all(
    k8s_version: str | KubernetesSource = DEFAULT_K8S_VERSION,
    *,
    etcd_version: str | None = None,
    root: Path | None = None,
    progress: Progress = print,
) -> Binaries:
    """Build everything a node runs. etcd is the release kubeadm deploys for ``k8s_version``
    when the proxy serves it (kubeadm names its image after it), else the pinned one.
    ``k8s_version`` may be a KubernetesSource (patched release, local checkout): the
    Kubernetes binaries then report its build id, which is also ``Binaries.k8s_version``."""
    root = root or cache_root()
    source = k8s_version if isinstance(k8s_version, KubernetesSource) else KubernetesSource(k8s_version)
    k8s_version = source.build_id
    comps = {
        "containerd": containerd_component(),
        "runc": runc_component(),
        "cni": cni_component(),
    }
    # kubernetes last-but-not-least: the biggest; resolve its module only when needed
    k8s = Component(name="kubernetes", version=k8s_version, binaries=K8S_COMMANDS)
    if not k8s.is_cached(root):
        k8s = kubernetes_component(source)
        if source.patches:
            # Only the commands a patched package is linked into are rebuilt; the others are the
            # release's (built first, cached), so a kubelet-only patch costs one link.
            release = Component(name="kubernetes", version=source.release, binaries=K8S_COMMANDS)
            if not release.is_cached(root):
                release = kubernetes_component(source.release)
            release_dir = release.build(root, progress)
            reached = affected_commands(root / "src" / release.key, source, go_env())
            k8s.copies = {c: release_dir / c for c in K8S_COMMANDS if c not in reached}
            k8s.targets = tuple(t for t in k8s.targets if t[0] in reached)
    out = {name: c.build(root, progress) for name, c in comps.items()}
    kdir = k8s.build(root, progress)
    if etcd_version is None:
        etcd_version = _etcd_for(kubeadm_etcd_version(kdir / "kubeadm", k8s_version), root, progress)
    etcd = etcd_component(etcd_version).build(root, progress)
    return Binaries(kubernetes=kdir, containerd=out["containerd"], runc=out["runc"], cni=out["cni"],
                    etcd=etcd, k8s_version=k8s_version, etcd_version=etcd_version)


if __name__ == "__main__":  # pragma: no cover - manual use
    import sys

    from .progress import stderr_progress

    v = sys.argv[1] if len(sys.argv) > 1 else DEFAULT_K8S_VERSION
    b = build_all(v, progress=stderr_progress())
    print(b)
