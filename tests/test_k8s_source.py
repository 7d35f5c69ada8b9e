"""--k8s-patch / --k8s-source: build ids, patch parsing, and one clear message for a patch
that does not apply (real patch(1) on a small tree laid out like the kubernetes repository)."""
from __future__ import annotations

import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

from clusters.vm import k8s_source
from clusters.vm.k8s_source import KubernetesSource, SourceError

ORIGINAL = textwrap.dedent("""\
    package kuberuntime

    func swapLimit(request, nodeMemory, swapCapacity int64) int64 {
    \tproportion := float64(request) / float64(nodeMemory)
    \treturn int64(proportion * float64(swapCapacity))
    }
    """)
STAGING = "package v1\n\nconst ResourceMemory = \"memory\"\n"


def _diff(tmp: Path, rel: str, before: str, after: str, header: str = "", name: str = "") -> Path:
    a, b = tmp / "a" / rel, tmp / "b" / rel
    for p, text in ((a, before), (b, after)):
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    out = subprocess.run(["diff", "-u", f"a/{rel}", f"b/{rel}"], cwd=tmp, capture_output=True, text=True)
    shutil.rmtree(tmp / "a"), shutil.rmtree(tmp / "b")
    patch = tmp / (name or f"{rel.replace('/', '_')}.patch")
    patch.write_text(header + f"diff --git a/{rel} b/{rel}\n" + out.stdout)
    return patch


@pytest.fixture
def modules(tmp_path: Path):
    """A read-only k8s.io/kubernetes and k8s.io/api as the Go module cache holds them."""
    root = tmp_path / "modcache"
    main = root / "k8s.io" / "kubernetes@v1.37.1"
    (main / "pkg" / "kubelet" / "kuberuntime").mkdir(parents=True)
    (main / "pkg" / "kubelet" / "kuberuntime" / "swap.go").write_text(ORIGINAL)
    (main / "go.mod").write_text("module k8s.io/kubernetes\n")
    api = root / "k8s.io" / "api@v0.37.1"
    (api / "core" / "v1").mkdir(parents=True)
    (api / "core" / "v1" / "types.go").write_text(STAGING)
    for p in sorted(root.rglob("*"), reverse=True):
        p.chmod(0o555 if p.is_dir() else 0o444)
    seen: list[tuple[str, str]] = []

    def find(module: str, version: str, env: dict) -> Path:
        seen.append((module, version))
        return root / f"{module}@{version}"

    yield find, seen
    for p in root.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)


def test_build_ids_name_the_build() -> None:
    assert KubernetesSource("v1.37.1").build_id == "v1.37.1"
    src = KubernetesSource("v1.37.1", checkout=Path("/k"), checkout_hash="ab" * 32)
    assert src.build_id == "v1.37.1+src.abababababab"


def test_a_patch_changes_the_build_id_by_its_content(tmp_path: Path) -> None:
    p1 = _diff(tmp_path, "pkg/kubelet/kuberuntime/swap.go", ORIGINAL, ORIGINAL.replace("request)", "request+1)"))
    one = k8s_source.release("v1.37.1", [p1])
    assert one.build_id.startswith("v1.37.1+patch.") and len(one.build_id) == len("v1.37.1+patch.") + 12
    assert k8s_source.release("v1.37.1", [p1]).build_id == one.build_id
    p1.write_text(p1.read_text().replace("request+1", "request+2"))
    assert k8s_source.release("v1.37.1", [p1]).build_id != one.build_id


def test_patch_metadata_and_files(tmp_path: Path) -> None:
    p = _diff(tmp_path, "staging/src/k8s.io/api/core/v1/types.go", STAGING, STAGING.replace("memory", "mem"),
              header="# mutant: api-renames-memory\n# tests: test_cgroup_limits\n\n")
    patch = k8s_source.read_patch(p)
    assert patch.header() == {"mutant": "api-renames-memory", "tests": "test_cgroup_limits"}
    assert patch.files == ["staging/src/k8s.io/api/core/v1/types.go"]
    assert patch.staging_modules == ["k8s.io/api"]


@pytest.mark.parametrize("text, words", [
    ("just some text\n", "not a unified diff"),
    ("--- a/../etc/passwd\n+++ b/../etc/passwd\n@@ -1 +1 @@\n-a\n+b\n", "not relative"),
])
def test_bad_patch_files_are_refused_by_name(tmp_path: Path, text: str, words: str) -> None:
    p = tmp_path / "bad.patch"
    p.write_text(text)
    with pytest.raises(SourceError, match=words) as error:
        k8s_source.release("v1.37.1", [p])
    assert str(p) in str(error.value)


def test_unreadable_patch_and_bad_version() -> None:
    with pytest.raises(SourceError, match="--k8s-patch /nonexistent/x.patch does not exist"):
        k8s_source.release("v1.37.1", [Path("/nonexistent/x.patch")])
    with pytest.raises(SourceError, match="not a Kubernetes release"):
        k8s_source.release("1.37", [])


def test_patches_apply_in_order_to_main_and_staging_modules(tmp_path: Path, modules) -> None:
    find, seen = modules
    rel = "pkg/kubelet/kuberuntime/swap.go"
    first = _diff(tmp_path, rel, ORIGINAL, ORIGINAL.replace("request)", "request+1)"))
    second = _diff(tmp_path, rel, ORIGINAL.replace("request)", "request+1)"),
                   ORIGINAL.replace("request)", "request+2)"), name="second.patch")
    api = _diff(tmp_path, "staging/src/k8s.io/api/core/v1/types.go", STAGING, STAGING.replace("memory", "mem"))
    tree = tmp_path / "tree"
    staged = k8s_source.apply_patches(k8s_source.release("v1.37.1", [first, second, api]), tree, {}, find)
    assert staged == ["k8s.io/api"]
    assert "request+2)" in (tree / rel).read_text()
    assert '"mem"' in (tree / "staging/src/k8s.io/api/core/v1/types.go").read_text()
    assert seen == [("k8s.io/kubernetes", "v1.37.1"), ("k8s.io/api", "v0.37.1")]


def test_a_patch_that_does_not_apply_names_the_patch_file_and_hunk(tmp_path: Path, modules) -> None:
    find, _ = modules
    rel = "pkg/kubelet/kuberuntime/swap.go"
    stale = _diff(tmp_path, rel, ORIGINAL.replace("proportion", "share"), ORIGINAL.replace("proportion", "part"))
    tree = tmp_path / "tree"
    with pytest.raises(SourceError) as error:
        k8s_source.apply_patches(k8s_source.release("v1.37.1", [stale]), tree, {}, find)
    message = str(error.value)
    assert str(stale) in message and "v1.37.1" in message
    assert f"{rel}: Hunk #1 FAILED" in message, message
    assert "\n" not in message
    assert not tree.exists()  # nothing half-patched is left to build from


def test_a_patch_for_a_missing_file_says_so(tmp_path: Path, modules) -> None:
    find, _ = modules
    p = _diff(tmp_path, "pkg/kubelet/nope.go", "a\n", "b\n")
    with pytest.raises(SourceError, match="can't find file|No file to patch"):
        k8s_source.apply_patches(k8s_source.release("v1.37.1", [p]), tmp_path / "tree", {}, find)


def test_first_compiler_error_is_found_in_go_build_output() -> None:
    log = ("# k8s.io/kubernetes/pkg/kubelet/kuberuntime\n"
           "pkg/kubelet/kuberuntime/swap.go:5:9: undefined: proportionx\n"
           "pkg/kubelet/kuberuntime/swap.go:6:2: missing return\n")
    assert k8s_source.first_compiler_error(log) == "pkg/kubelet/kuberuntime/swap.go:5:9: undefined: proportionx"
    assert k8s_source.first_compiler_error("go: downloading x\n") is None


def test_a_checkout_must_be_a_kubernetes_repository_root(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="not a kubernetes repository root"):
        k8s_source.checkout(tmp_path, "v1.37.1")
    (tmp_path / "go.mod").write_text("module k8s.io/kubernetes\n\ngo 1.26\n")
    (tmp_path / "staging" / "src" / "k8s.io").mkdir(parents=True)
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.go").write_text("package pkg\n")
    src = k8s_source.checkout(tmp_path, "v1.38.0-alpha.1")
    assert src.build_id.startswith("v1.38.0-alpha.1+src.")
    (tmp_path / "pkg" / "a.go").write_text("package pkg // changed\n")
    assert k8s_source.checkout(tmp_path, "v1.38.0-alpha.1").build_id != src.build_id
    with pytest.raises(SourceError, match="cannot tell its version"):
        k8s_source.checkout(tmp_path, "main")


def test_a_prototype_patch_is_named_so_and_declares_its_gates(tmp_path: Path) -> None:
    rel = "pkg/kubelet/kuberuntime/swap.go"
    proto = _diff(tmp_path, rel, ORIGINAL, ORIGINAL.replace("request)", "request+1)"), name="proto.patch",
                  header="# prototype: KEP-5359 WorkloadControlledSwap\n# feature-gates: WorkloadControlledSwap, Other\n")
    plain = _diff(tmp_path, rel, ORIGINAL, ORIGINAL.replace("request)", "request+2)"), name="plain.patch")
    src = k8s_source.release("v1.37.1", [proto])
    assert src.feature_gates == ("WorkloadControlledSwap", "Other")
    assert src.prototype_note == "KEP-5359 WorkloadControlledSwap prototype (proto.patch), not upstream Kubernetes"
    assert src.describe().endswith("(v1.37.1 with proto.patch; KEP-5359 WorkloadControlledSwap prototype"
                                   " (proto.patch), not upstream Kubernetes)")
    other = k8s_source.release("v1.37.1", [plain])
    assert other.prototype_note == "" and other.feature_gates == () and "prototype" not in other.describe()


def test_a_checkout_that_defines_the_kep_5359_gate_gets_it_on(tmp_path: Path) -> None:
    (tmp_path / "go.mod").write_text("module k8s.io/kubernetes\n")
    (tmp_path / "staging" / "src" / "k8s.io").mkdir(parents=True)
    features = tmp_path / "pkg" / "features"
    features.mkdir(parents=True)
    (features / "kube_features.go").write_text("package features\n\nconst (\n\tNodeSwap featuregate.Feature = \"NodeSwap\"\n)\n")
    assert k8s_source.checkout(tmp_path, "v1.38.0-alpha.1").feature_gates == ()
    (features / "kube_features.go").write_text(
        "package features\n\nconst (\n\tWorkloadControlledSwap featuregate.Feature = \"WorkloadControlledSwap\"\n)\n")
    src = k8s_source.checkout(tmp_path, "v1.38.0-alpha.1")
    assert src.feature_gates == ("WorkloadControlledSwap",) and src.prototype_note == ""
