"""Bad option values are refused before anything starts: one usage error (exit 4) that names the
option and the fix, the same with and without pytest-xdist, and nothing left behind (no run
directory, no results directory)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.suite_project import the_suite

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parent.parent
GIT = shutil.which("git") or "git"  # found before a test empties PATH


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.Pytester:
    the_suite(pytester, monkeypatch, test_swap="def test_any(swap_node):\n    pass\n")
    (tmp_path / "tmp").mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))  # where the run directory would be
    # Should a value get past the options, nothing real may start: no tool on PATH (preflight
    # fails before anything is built or booted) and a cache of the test's own.
    (tmp_path / "no-tools").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "no-tools"))
    monkeypatch.setenv("KSC_CACHE_DIR", str(tmp_path / "cache"))
    return pytester


def refused(suite: pytest.Pytester, tmp_path: Path, *args: str) -> str:
    """Run with and without -n 2: both exit 4 with the same one error line; return it."""
    lines = []
    for workers in ([], ["-n", "2"]):
        result = suite.runpytest_subprocess("-p", "no:cacheprovider", *args, *workers)
        output = result.stdout.str() + result.stderr.str()
        assert result.ret == pytest.ExitCode.USAGE_ERROR, output
        # pytest's own form: "ERROR: <message>", or for a value its option type refuses
        # "ERROR: usage: ..." and then "<prog>: error: argument ...: <message>"
        errors = [line for line in result.stderr.lines
                  if line.startswith("ERROR: ") and not line.startswith("ERROR: usage:") or ": error: " in line]
        assert len(errors) == 1 and "Traceback" not in output, output
        lines.append(errors[0])
    assert lines[0] == lines[1], f"without -n: {lines[0]}\nwith -n 2: {lines[1]}"
    assert not list((tmp_path / "tmp").iterdir()), "the refused run left its run directory"
    return lines[0]


def test_a_results_dir_that_is_a_file(suite: pytest.Pytester, tmp_path: Path) -> None:
    (suite.path / "results").write_text("not a directory\n")
    line = refused(suite, tmp_path, "--results-dir=results")
    assert line == f"ERROR: --results-dir {suite.path / 'results'} is a file, not a directory: name a directory" \
                   " (it is created if missing)"


def test_a_results_dir_whose_parent_does_not_exist(suite: pytest.Pytester, tmp_path: Path) -> None:
    line = refused(suite, tmp_path, "--results-dir=typo/results")
    assert line == (f"ERROR: --results-dir {suite.path / 'typo/results'}: its parent {suite.path / 'typo'} does not"
                    f" exist: create it first (mkdir -p {suite.path / 'typo'}) or name another")
    assert not (suite.path / "typo").exists()


def test_a_results_dir_in_an_unwritable_directory(suite: pytest.Pytester, tmp_path: Path) -> None:
    # /proc takes no new files, whoever asks (root too)
    line = refused(suite, tmp_path, "--results-dir=/proc/ksc-results")
    assert line.startswith("ERROR: --results-dir /proc/ksc-results: /proc is not writable (")
    assert line.endswith("): name a directory you can write to")


def test_a_junitxml_in_an_unwritable_directory(suite: pytest.Pytester, tmp_path: Path) -> None:
    line = refused(suite, tmp_path, "--junitxml=/proc/ksc/junit.xml")
    assert line.startswith("ERROR: --junitxml's directory /proc/ksc: /proc is not writable (")


def test_gate_behaviors_outside_the_selected_behaviors(suite: pytest.Pytester, tmp_path: Path) -> None:
    line = refused(suite, tmp_path, "--gate", "--behaviors=NoSwap", "--gate-behaviors=NoSwap,LimitedSwap")
    assert line == ("ERROR: --gate-behaviors requires LimitedSwap, which --behaviors NoSwap does not select: the gate"
                    " would fail without testing it. Add LimitedSwap to --behaviors (or leave --behaviors out: every"
                    " behavior runs)")


def test_gate_behaviors_without_the_gate(suite: pytest.Pytester, tmp_path: Path) -> None:
    line = refused(suite, tmp_path, "--gate-behaviors=NoSwap")
    assert line == ("ERROR: --gate-behaviors names what the release gate requires, and --gate is not given: add --gate"
                    " (or drop --gate-behaviors)")


@pytest.mark.parametrize(("args", "message"), [
    (["--provider=vm", "--k8s-version=1.37.1"],
     "ERROR: --k8s-version '1.37.1' is not a Kubernetes release (want v1.MINOR.PATCH, e.g. v1.37.1)"),
    (["--provider=vm", "--k8s-version=v1.33.9"],
     "ERROR: --k8s-version v1.33.9 is Kubernetes 1.33: the suite supports Kubernetes 1.34 to 1.37 only"
     " (clusters/versions.py SUPPORTED); pick a supported release, the newest patch of each supported minor:"
     " v1.34.12, v1.35.8, v1.36.5, v1.37.2"),
    (["--provider=vm", "--k8s-version=v1.38.0"],
     "ERROR: --k8s-version v1.38.0 is Kubernetes 1.38: the suite supports Kubernetes 1.34 to 1.37 only"
     " (clusters/versions.py SUPPORTED); pick a supported release, the newest patch of each supported minor:"
     " v1.34.12, v1.35.8, v1.36.5, v1.37.2"),
    (["--provider=kind", "--k8s-version=v1.37.1"],
     "ERROR: --k8s-version builds the vm provider's node (--provider vm); the kind provider runs what its nodes run."
     " For kind build a node image instead (`python -m clusters.vm node-image --k8s-version V [--k8s-patch FILE]` or"
     " `kind-host up ...`) and pass it with --node-image"),
], ids=["not-a-version", "older-than-the-suite", "newer-than-the-suite", "not-the-vm-provider"])
def test_a_k8s_version_the_run_cannot_use(suite: pytest.Pytester, tmp_path: Path, args: list[str], message: str) -> None:
    assert refused(suite, tmp_path, *args) == message


def test_a_checkout_outside_the_supported_minors(suite: pytest.Pytester, tmp_path: Path) -> None:
    """A --k8s-source checkout's version is known only from git describe: still one usage error."""
    import subprocess

    checkout = tmp_path / "kubernetes"
    (checkout / "staging" / "src" / "k8s.io").mkdir(parents=True)
    (checkout / "go.mod").write_text("module k8s.io/kubernetes\n\ngo 1.26.0\n")
    git = [GIT, "-C", str(checkout), "-c", "user.name=t", "-c", "user.email=t@t"]
    for args in (["init", "-q"], ["add", "go.mod"], ["commit", "-qm", "x"], ["tag", "v1.38.0-alpha.1"]):
        subprocess.run([*git, *args], check=True, capture_output=True)
    (tmp_path / "no-tools" / "git").symlink_to(GIT)  # git describe, and no other tool
    line = refused(suite, tmp_path, "--provider=vm", f"--k8s-source={checkout}")
    assert line == (f"ERROR: --k8s-source {checkout} (v1.38.0-alpha.1, from git describe) is Kubernetes 1.38: the suite"
                    " supports Kubernetes 1.34 to 1.37 only (clusters/versions.py SUPPORTED); check out a release of"
                    " Kubernetes 1.34 to 1.37 (a release-1.MINOR branch or tag), or build a supported release with"
                    " --k8s-version instead of --k8s-source")


@pytest.mark.parametrize("image", ["kindest/node:v1.33.1", "kindest/node:v1.38.0@sha256:" + "a" * 64])
def test_a_node_image_outside_the_supported_minors(suite: pytest.Pytester, tmp_path: Path, image: str) -> None:
    minor = image.split(":v", 1)[1][:4]
    line = refused(suite, tmp_path, "--provider=kind", f"--node-image={image}")
    assert line == (f"ERROR: --node-image: {image} is Kubernetes {minor}: the suite supports Kubernetes 1.34 to 1.37"
                    " only (clusters/versions.py SUPPORTED): use a node image of Kubernetes 1.34 to 1.37"
                    " (clusters/kind/node-images.yaml pins kind's, one per supported minor), or build one of a"
                    " supported release: python -m clusters.vm node-image --k8s-version v1.37.2")


def test_vm_memory_below_what_a_node_needs(suite: pytest.Pytester, tmp_path: Path) -> None:
    line = refused(suite, tmp_path, "--provider=vm", "--vm-memory=1")
    assert line.endswith("argument --vm-memory: 1 MiB is too small: at least 2048 MiB (what a kubeadm control"
                         " plane needs)"), line


@pytest.mark.parametrize("image", ["kindest/node:v1.37.0:extra", "Kindest/Node", "kindest/node@sha256:abc"])
def test_a_malformed_node_image(suite: pytest.Pytester, tmp_path: Path, image: str) -> None:
    line = refused(suite, tmp_path, "--provider=kind", f"--node-image={image}")
    assert line == (f"ERROR: --node-image: {image!r} is not an image reference: pass --node-image REPOSITORY:TAG,"
                    " e.g. kindest/node:v1.37.0")


def test_a_vm_state_dir_that_is_a_file(suite: pytest.Pytester, tmp_path: Path) -> None:
    (suite.path / "state").write_text("not a directory\n")
    line = refused(suite, tmp_path, "--provider=vm", f"--vm-state-dir={suite.path / 'state'}")
    assert line == f"ERROR: --vm-state-dir {suite.path / 'state'} is a file, not a directory: name a directory" \
                   " (it is created if missing)"


def test_the_vm_state_dir_is_the_vm_providers(pytester: pytest.Pytester, tmp_path: Path) -> None:
    from clusters.vm_provider import VmProvider

    config = pytester.parseconfig("-p", "e2e.plugin", "--provider=vm", f"--vm-state-dir={tmp_path / 'state'}")
    provider = VmProvider.from_pytest_config(config, tmp_path / "run")
    assert provider.vm().state_dir == tmp_path / "state"
