"""`python -m clusters.vm` and `python -m clusters.versions` as a user meets them: one argument
style, one error path (a message and the suite's exit code, no traceback), the host's tools
checked before anything is built, and a second `up` stopped while the first is starting.

Every command runs with no tool on PATH, a cache and state directory of the test's own and a
module proxy that refuses connections: nothing real can be built, booted or downloaded."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from clusters import cli, versions
from clusters.vm import hostcheck
from clusters.vm.k8s_source import KubernetesSource

REPO = Path(__file__).resolve().parent.parent
DEAD_PROXY = "http://127.0.0.1:9"  # nothing listens on the discard port: refused at once


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "no-tools").mkdir()
    return {**os.environ, "PATH": str(tmp_path / "no-tools"), "KSC_CACHE_DIR": str(tmp_path / "cache"),
            "GOPROXY": DEAD_PROXY, "PYTHONPATH": str(REPO)}


def run(env: dict[str, str], *args: str, module: str = "clusters.vm") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", module, *args], env=env, cwd=REPO, capture_output=True, text=True,
                          timeout=120)


def one_error(done: subprocess.CompletedProcess, code: int) -> str:
    """The command exited ``code`` with one error line on stderr and no traceback; that line."""
    output = done.stdout + done.stderr
    assert done.returncode == code, output
    assert "Traceback" not in output, output
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ") or ": error: " in line]
    assert len(errors) == 1, output
    return errors[0]


@pytest.mark.parametrize(("args", "message"), [
    (["up", "--k8s-version", "foo"], "argument --k8s-version: 'foo' is not a Kubernetes release"),
    (["up", "--k8s-version", "v1.20.0"], "argument --k8s-version: v1.20.0 is Kubernetes 1.20: the suite supports"
                                         " Kubernetes 1.34 to 1.37 only (clusters/versions.py SUPPORTED); pick a"
                                         " supported release"),
    (["build", "--k8s-version", "v1.38.0"], "argument --k8s-version: v1.38.0 is Kubernetes 1.38: the suite supports"
                                            " Kubernetes 1.34 to 1.37 only"),
    (["node-image", "--k8s-version", "v1.33.12"], "argument --k8s-version: v1.33.12 is Kubernetes 1.33"),
    (["kind-host", "up", "--no-node-image", "--k8s-version", "1.37"], "argument --k8s-version: '1.37' is not a"),
    (["up", "--behavior", "Foo"], "argument --behavior: unknown swap behavior 'Foo': choose from NoSwap"),
    (["set-behavior", "limitedswap"], "argument behavior: unknown swap behavior 'limitedswap'"),
    (["up", "--memory", "0", "--swap", "-5", "--cpus", "0"], "argument --memory: must be a positive number of MiB, got 0"),
    (["up", "--swap", "-5"], "argument --swap: must be a positive number of MiB, got -5"),
    (["up", "--cpus", "0"], "argument --cpus: must be at least 1, got 0"),
    (["up", "--memory", "1"], "argument --memory: 1 MiB is too small: at least 2048 MiB (what a kubeadm control plane"),
    (["kind-host", "up", "--memory", "4G"], "argument --memory: '4G' is not a number of MiB"),
    (["kind-host", "up", "--memory", "2048"], "argument --memory: 2048 MiB is too small: at least 4096 MiB"),
    (["up", "--k8s-patch", "clusters/prototypes/kep-5359.patch", "--k8s-source", "."],
     "argument --k8s-source: not allowed with argument --k8s-patch"),
    (["up", "--k8s-patch", "no-such.patch"], "argument --k8s-patch: no-such.patch does not exist"),
    (["kind-host", "up", "--no-node-image", "--k8s-version", "v1.37.1"], "--no-node-image and --k8s-version together"),
], ids=lambda value: " ".join(value) if isinstance(value, list) else "")
def test_bad_arguments_are_one_usage_error(env: dict[str, str], tmp_path: Path, args: list[str], message: str) -> None:
    line = one_error(run(env, "--state-dir", str(tmp_path / "state"), *args), cli.Exit.USAGE)
    assert message in line, line
    assert not (tmp_path / "state").exists() and not (tmp_path / "cache").exists(), "a refused command made files"


@pytest.mark.parametrize("args", [["status", "--state-dir", "{state}"], ["--state-dir", "{state}", "status"],
                                  ["kind-host", "status", "--state-dir", "{state}"],
                                  ["kind-host", "--state-dir", "{state}", "status", "--debug"]],
                         ids=["after", "before", "kind-host-after", "kind-host-between"])
def test_state_dir_goes_before_or_after_the_subcommand(env: dict[str, str], tmp_path: Path, args: list[str]) -> None:
    done = run(env, *(a.format(state=tmp_path / "state") for a in args))
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stdout + done.stderr  # 1: not running
    assert f'"state_dir": "{tmp_path / "state"}"' in done.stdout and '"running": false' in done.stdout


def test_missing_host_tools_are_one_preflight_message_before_anything_is_built(env: dict[str, str],
                                                                               tmp_path: Path) -> None:
    done = run(env, "up", "--state-dir", str(tmp_path / "state"))
    output = done.stdout + done.stderr
    assert done.returncode == cli.Exit.PREFLIGHT and "Traceback" not in output, output
    assert output.count("preflight failed (") == 1, output
    for line in ("[FAIL] qemu-system-x86_64: not on PATH (boots the guest)", "fix: install qemu-system-x86 (the apt-get",
                 "[FAIL] qemu-img: not on PATH", "fix: install qemu-utils (the apt-get line below)",
                 "[FAIL] debootstrap: not on PATH", "fix: install debootstrap (the apt-get line below)",
                 "[FAIL] mkfs.ext4: not on PATH", "fix: install e2fsprogs (the apt-get line below)",
                 "[FAIL] go: not on PATH (builds kubernetes, containerd, runc, cni-plugins (not in the cache yet))",
                 "[FAIL] gcc: not on PATH (runc is built with cgo)",
                 f"[FAIL] Go module proxy: the Go module proxy {DEAD_PROXY} cannot be reached"):
        assert line in output, output
    # every missing package in one line, none elsewhere
    assert output.count("apt-get install") == 1, output
    assert ("missing packages, in one line (as root): apt-get install -y qemu-system-x86 qemu-utils debootstrap"
            " e2fsprogs gcc (or run again with --install-host-packages)") in output, output
    assert not (tmp_path / "state").exists(), "up started something"
    assert not (tmp_path / "cache" / "bin").exists() and not (tmp_path / "cache" / "vm").exists()


def test_a_go_older_than_the_kubernetes_go_directive(env: dict[str, str], tmp_path: Path) -> None:
    checkout = tmp_path / "kubernetes"
    (checkout / "staging" / "src" / "k8s.io").mkdir(parents=True)
    (checkout / "go.mod").write_text("module k8s.io/kubernetes\n\ngo 1.26.0\n")
    go = tmp_path / "no-tools" / "go"
    go.write_text("#!/bin/sh\n[ \"$1 $2\" = 'env GOVERSION' ] && echo go1.20.1\n")
    go.chmod(0o755)
    done = run(env, "build", "--k8s-source", str(checkout), "--k8s-version", "v1.37.0")
    output = done.stdout + done.stderr
    assert done.returncode == cli.Exit.PREFLIGHT, output
    assert ("[FAIL] go: go 1.20.1 is older than go 1.26.0, which Kubernetes v1.37.0 needs (its go.mod); builds use"
            " the local toolchain (GOTOOLCHAIN=local)") in output, output


def test_a_checkout_outside_the_supported_minors_is_refused_before_a_build(env: dict[str, str], tmp_path: Path) -> None:
    """Its version is known only from git describe, after the arguments are parsed: still one
    usage error, and nothing built."""
    checkout = tmp_path / "kubernetes"
    (checkout / "staging" / "src" / "k8s.io").mkdir(parents=True)
    (checkout / "go.mod").write_text("module k8s.io/kubernetes\n\ngo 1.24.0\n")
    git = ["git", "-C", str(checkout), "-c", "user.name=t", "-c", "user.email=t@t"]
    for args in (["init", "-q"], ["add", "go.mod"], ["commit", "-qm", "x"], ["tag", "v1.33.4"]):
        subprocess.run([*git, *args], check=True, capture_output=True)
    (tmp_path / "no-tools" / "git").symlink_to(shutil.which("git"))  # git describe, and no other tool
    line = one_error(run(env, "build", "--k8s-source", str(checkout), "--state-dir", str(tmp_path / "state")),
                     cli.Exit.USAGE)
    assert line == (f"error: --k8s-source {checkout} (v1.33.4, from git describe) is Kubernetes 1.33: the suite supports"
                    " Kubernetes 1.34 to 1.37 only (clusters/versions.py SUPPORTED); check out a release of Kubernetes"
                    " 1.34 to 1.37 (a release-1.MINOR branch or tag), or build a supported release with --k8s-version"
                    " instead of --k8s-source"), line
    assert not (tmp_path / "cache").exists() and not (tmp_path / "state").exists()


def test_libseccomp_missing_is_named_with_its_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_pkg_config(command: str) -> str | None:
        return None if command == "pkg-config" else f"/usr/bin/{command}"

    def go_1_26(argv: list[str], **kwargs: object) -> subprocess.CompletedProcess:
        return subprocess.CompletedProcess(argv, 0, "go1.26.1\n", "")

    # without pkg-config, its headers tell
    assert not hostcheck.has_libseccomp(no_pkg_config, go_1_26, include_dirs=(str(tmp_path),))
    (tmp_path / "seccomp.h").write_text("")
    assert hostcheck.has_libseccomp(no_pkg_config, go_1_26, include_dirs=(str(tmp_path),))

    checkout = tmp_path / "k"
    checkout.mkdir()
    (checkout / "go.mod").write_text("module k8s.io/kubernetes\n\ngo 1.26.0\n")
    source = KubernetesSource("v1.38.0", checkout=checkout, checkout_hash="0" * 64)
    monkeypatch.setattr(hostcheck, "has_libseccomp", lambda which, run: False)
    found = {c.name: c for c in hostcheck.checks(source, root=tmp_path / "cache", guest_image=False, boot=False,
                                                 which=no_pkg_config, run=go_1_26)}
    assert not found["libseccomp"].ok
    assert found["libseccomp"].packages == ("libseccomp-dev", "pkg-config")
    assert found["go"].ok and found["go"].detail == "go 1.26.1 (Kubernetes v1.38.0 needs 1.26.0)"
    assert found["gcc"].ok


@pytest.mark.parametrize(("args", "what"), [(["kind-host", "up", "--no-node-image"], "kind host"),
                                            (["up"], "vm node")])
def test_a_second_up_while_one_is_starting(env: dict[str, str], tmp_path: Path, args: list[str], what: str) -> None:
    from clusters.vm.cluster import VmCluster
    from clusters.vm.kindhost import KindHost

    state = tmp_path / "state"
    guest = KindHost(state) if what == "kind host" else VmCluster(state)
    with guest.starting():  # this test process is "the first up"
        line = one_error(run(env, *args, "--state-dir", str(state)), cli.Exit.PREFLIGHT)
    assert line.startswith(f"error: a {what} is already starting (pid {os.getpid()}) in {state}: wait for it"), line


def test_an_unreachable_proxy_is_one_message(env: dict[str, str], tmp_path: Path) -> None:
    line = one_error(run(env, "up", "--k8s-version", "latest", "--state-dir", str(tmp_path / "state")), cli.Exit.PREFLIGHT)
    assert line == (f"error: the Go module proxy {DEAD_PROXY} cannot be reached ([Errno 111] Connection refused): check"
                    " the network, or set GOPROXY to a proxy that can be (https://proxy.golang.org)"), line
    line = one_error(run(env, module="clusters.versions"), cli.Exit.PREFLIGHT)
    assert line.startswith(f"error: the Go module proxy {DEAD_PROXY} cannot be reached"), line


def test_versions_reads_its_arguments(env: dict[str, str]) -> None:
    done = run(env, "--help", module="clusters.versions")
    assert done.returncode == 0 and "usage: python -m clusters.versions" in done.stdout, done.stderr  # no probe
    assert "error: unrecognized arguments: --bogus" in one_error(run(env, "--bogus", module="clusters.versions"),
                                                                 cli.Exit.USAGE)
    pins = run(env, "--pins-only", module="clusters.versions")
    assert pins.returncode == 0 and f"kubernetes   {versions.KUBERNETES}" in pins.stdout, pins.stderr


@pytest.mark.parametrize("value", ["off", "direct", "off,https://proxy.golang.org"])
def test_a_goproxy_that_names_no_proxy_is_a_usage_error(env: dict[str, str], value: str) -> None:
    line = one_error(run({**env, "GOPROXY": value}, module="clusters.versions"), cli.Exit.USAGE)
    assert line.startswith(f"error: GOPROXY={value} "), line
    assert "set GOPROXY to a proxy (https://proxy.golang.org, or your mirror)" in line


@pytest.mark.parametrize(("value", "proxy"), [("https://goproxy.example/,direct", "https://goproxy.example"),
                                              ("https://a.example|https://b.example", "https://a.example"),
                                              ("", "https://proxy.golang.org")])
def test_the_module_proxy_is_the_first_url_in_goproxy(value: str, proxy: str) -> None:
    assert versions.module_proxy(value) == proxy


def test_an_up_that_fails_before_making_anything_leaves_no_state_directory(env: dict[str, str], tmp_path: Path) -> None:
    state = tmp_path / "state"
    one_error(run(env, "up", "--k8s-version", "latest", "--state-dir", str(state)), cli.Exit.PREFLIGHT)
    assert not state.exists(), sorted(p.name for p in state.iterdir())


def test_a_state_directory_that_existed_is_kept(tmp_path: Path) -> None:
    from clusters.vm.cluster import VmCluster

    state = tmp_path / "state"
    state.mkdir()
    with VmCluster(state).starting():
        pass
    assert state.is_dir()
    made = tmp_path / "made"
    with VmCluster(made).starting():
        (made / "console.log").write_text("kept: the failure points at it\n")
    assert (made / "console.log").exists()
