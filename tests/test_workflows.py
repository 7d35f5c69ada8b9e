"""The CI definitions agree with the repository: the nightly's kind matrix is the supported
minors of clusters/versions.py (run by bench.matrix on kind's images of them in
clusters/kind/node-images.yaml), every kind version is clusters/versions.py's KIND, every action
is pinned by commit, the release gate is a reusable workflow whose inputs docs/ci.md's example
uses. Pure Python (PyYAML): no GitHub, no network. actionlint and shellcheck (.ci/run) check the
rest: expression syntax, action inputs, the shell in every `run:`.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import yaml

from clusters import behaviors, kind_config, versions

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = ROOT / ".github" / "workflows"
NIGHTLY = WORKFLOWS / "nightly.yml"
GATE = WORKFLOWS / "release-gate.yml"
NODE_IMAGES = ROOT / "clusters" / "kind" / "node-images.yaml"
CI_DOC = ROOT / "docs" / "ci.md"  # the release gate's example caller
CI_RUN = ROOT / ".ci" / "run"

SUITE_CLUSTERS = (kind_config.MIXED_CLUSTER,)  # the one cluster the kind provider creates
USES = re.compile(r"^\s*(?:-\s+)?uses:\s*(?P<ref>[^\s#]+)\s*(?:#\s*(?P<comment>.*))?$")
PINNED = re.compile(r"(?P<action>[\w.-]+/[\w./-]+)@(?P<sha>[0-9a-f]{40})")
NODE_IMAGE = re.compile(r"kindest/node:v(?P<minor>1\.\d+)\.\d+@sha256:[0-9a-f]{64}")


def load(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


def triggers(workflow: dict) -> dict:
    """`on:` (PyYAML reads the bare key `on` as the boolean True)."""
    on = workflow.get("on", workflow.get(True))
    return {on: None} if isinstance(on, str) else dict(on)


def steps(job: dict) -> list[dict]:
    return job.get("steps", [])


def scripts(job: dict) -> str:
    return "\n".join(step.get("run", "") for step in steps(job))


def node_images() -> dict:
    return load(NODE_IMAGES)


# --- clusters/kind/node-images.yaml ------------------------------------------------------------

def test_node_images_are_kinds_images_of_the_supported_minors_pinned_by_digest() -> None:
    doc = node_images()
    assert doc["kind"] == versions.KIND, "node-images.yaml must list the node images of the pinned kind"
    images = doc["images"]
    assert list(images) == sorted(versions.SUPPORTED, key=versions.minor_of, reverse=True), \
        "one image per supported minor (clusters/versions.py SUPPORTED), newest first"
    for minor, image in images.items():
        match = NODE_IMAGE.fullmatch(image)
        assert match, f"{minor}: {image!r} is not kindest/node:vX.Y.Z@sha256:<64 hex>"
        assert match["minor"] == minor, f"{image} is filed under {minor}"
    assert len(set(images.values())) == len(images)


# --- nightly -----------------------------------------------------------------------------------

def test_nightly_runs_on_schedule_and_by_hand_only() -> None:
    nightly = load(NIGHTLY)
    assert set(triggers(nightly)) == {"schedule", "workflow_dispatch"}


def test_nightly_kind_matrix_is_the_supported_minors_times_released_behaviors() -> None:
    jobs = load(NIGHTLY)["jobs"]
    plan, kind = jobs["plan"], jobs["kind"]
    # The plan job reads the minors and the kind pin from versions.py, checked against node-images.yaml.
    assert "versions.SUPPORTED" in scripts(plan) and "versions.KIND" in scripts(plan)
    assert "clusters/kind/node-images.yaml" in scripts(plan)
    assert kind["needs"] == "plan"
    strategy = kind["strategy"]
    assert strategy["fail-fast"] is False
    assert strategy["matrix"]["minor"] == "${{ fromJSON(needs.plan.outputs.minors) }}"
    assert strategy["matrix"]["behavior"] == [behaviors.NO_SWAP, behaviors.LIMITED_SWAP]
    assert kind["env"]["MINOR"] == "${{ matrix.minor }}"
    assert kind["env"]["KIND_VERSION"] == "${{ needs.plan.outputs.kind-version }}"
    assert plan["outputs"]["minors"] == "${{ steps.plan.outputs.minors }}"


def test_nightly_plan_puts_out_exactly_the_table_s_minors(tmp_path: Path) -> None:
    """The plan job's script, run here as the runner would run it: its outputs are the version
    table's minors and the kind pin."""
    import json
    import os
    import subprocess

    step = next(s for s in steps(load(NIGHTLY)["jobs"]["plan"]) if s.get("id") == "plan")
    output = tmp_path / "github-output"
    env = {**os.environ, "GITHUB_OUTPUT": str(output), "PYTHONPATH": str(ROOT)}
    done = subprocess.run(["bash", "-eo", "pipefail", "-c", step["run"]], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    outputs = dict(line.split("=", 1) for line in output.read_text().splitlines())
    assert json.loads(outputs["minors"]) == list(versions.SUPPORTED)
    assert outputs["newest"] == max(versions.SUPPORTED, key=versions.minor_of)
    assert outputs["kind-version"] == versions.KIND


def test_nightly_kind_lane_runs_the_suite_exports_logs_and_always_deletes() -> None:
    kind = load(NIGHTLY)["jobs"]["kind"]
    run = scripts(kind)
    assert 'go install "sigs.k8s.io/kind@$KIND_VERSION"' in run
    assert '$(go env GOPATH)/bin" >> "$GITHUB_PATH"' in run  # first on PATH from the next step on
    assert "swapon" in run and "mkswap" in run
    suite = " ".join(next(s["run"] for s in steps(kind) if "bench.matrix" in s.get("run", "")).replace("\\\n", " ").split())
    command = suite[suite.index("python -m bench.matrix"):]
    for flag in ('--minors "$MINOR"', "--providers kind", '--behaviors "$BEHAVIOR"', "--kind-images published",
                 "--store results", "-- --keep-clusters"):
        assert flag in command
    # ... which bench.matrix accepts, and turns into one gate-mode run of the suite on kind's image
    import shlex

    from bench import matrix

    argv = shlex.split(command.replace('"$MINOR"', "1.36").replace('"$BEHAVIOR"', "NoSwap"))[3:]
    args = matrix.parser().parse_args(argv)
    assert (args.minors, args.providers, args.behaviors, args.pytest_args) == (["1.36"], ["kind"], ["NoSwap"],
                                                                              ["--keep-clusters"])
    (run,), _ = matrix.plan(args.minors, args.providers, args.behaviors, ROOT / "results", "", True, args.kind_images)
    pytest_argv = run.pytest_argv(ROOT / "results", run.image, args.pytest_args)
    assert run.image == node_images()["images"]["1.36"] and "--gate" in pytest_argv and "--keep-clusters" in pytest_argv
    export = next(s for s in steps(kind) if "kind export logs" in s.get("run", ""))
    delete = next(s for s in steps(kind) if "kind delete cluster" in s.get("run", ""))
    assert export["if"] == "failure()" and delete["if"] == "always()"
    for cluster in SUITE_CLUSTERS:
        assert cluster in export["run"] and cluster in delete["run"]
    names = [s.get("uses", "").split("@")[0] for s in steps(kind)]
    assert "actions/upload-artifact" in names
    assert any("GITHUB_STEP_SUMMARY" in s.get("run", "") and "junit.xml" in s.get("run", "") for s in steps(kind))


def expand(grid: dict, outputs: dict[str, str]) -> list[dict[str, str]]:
    """A job's matrix as GitHub Actions expands it, with the plan job's outputs put in: every
    combination of the lists, then each `include` entry added to the combinations none of whose
    original values it would overwrite, or as a combination of its own."""
    import itertools
    import json

    def value(v):
        for name, out in outputs.items():
            v = v.replace(f"${{{{ fromJSON(needs.plan.outputs.{name}) }}}}", out) if isinstance(v, str) else v
            v = v.replace(f"${{{{ needs.plan.outputs.{name} }}}}", out) if isinstance(v, str) else v
        return json.loads(v) if isinstance(v, str) and v.startswith("[") else v

    axes = {k: value(v) for k, v in grid.items() if k not in ("include", "exclude")}
    jobs = [dict(zip(axes, combo)) for combo in itertools.product(*axes.values())]
    originals = [dict(j) for j in jobs]
    for entry in grid.get("include", []):
        entry = {k: value(v) for k, v in entry.items()}
        fits = [j for j, o in zip(jobs, originals) if all(o.get(k, v) == v for k, v in entry.items() if k in axes)]
        if fits:
            for j in fits:
                j.update(entry)
        else:
            jobs.append(entry)
    return jobs


def run_vm_step(tmp_path: Path, minor: str, kernel: str) -> list[str]:
    """The vm lane's suite step, run by bash as the runner would, `sudo` standing in for the
    command it is given: the command line it would run."""
    import os
    import shlex
    import subprocess

    vm = load(NIGHTLY)["jobs"]["vm-kvm"]
    step = next(s for s in steps(vm) if s.get("name", "").startswith("Conformance suite"))
    fake = tmp_path / "bin"
    fake.mkdir(exist_ok=True)
    said = tmp_path / "sudo-argv"
    (fake / "sudo").write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {shlex.quote(str(said))}\n')
    (fake / "sudo").chmod(0o755)
    env = {**os.environ, "PATH": f"{fake}:{os.environ['PATH']}", "PYTHONPATH": str(ROOT), "MINOR": minor,
           "KERNEL": kernel, "KSC_CACHE_DIR": str(tmp_path / "cache")}
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    script = step["run"].replace("python -c", f"{shlex.quote(sys.executable)} -c")
    done = subprocess.run(["bash", "-eo", "pipefail", "-c", script], cwd=work, env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    return said.read_text().splitlines()


def test_nightly_vm_lane_runs_every_minor_s_matrix_cells_with_kvm_and_the_newest_on_kernel_6_1(
        tmp_path: Path) -> None:
    """What the vm lane runs is what `python -m bench.matrix` runs here: every supported minor at
    its pin, in gate mode, through the same command; kernel 6.1 once more, on the newest minor."""
    import json

    from bench import matrix

    jobs = load(NIGHTLY)["jobs"]
    vm = jobs["vm-kvm"]
    assert vm["needs"] == "plan" and vm["strategy"]["fail-fast"] is False
    assert jobs["plan"]["outputs"]["newest"] == "${{ steps.plan.outputs.newest }}"
    newest = max(versions.SUPPORTED, key=versions.minor_of)
    expanded = expand(vm["strategy"]["matrix"], {"minors": json.dumps(list(versions.SUPPORTED)), "newest": newest})
    assert sorted((j["minor"], j["kernel"]) for j in expanded) == sorted(
        [(minor, "6.12") for minor in versions.SUPPORTED] + [(newest, "6.1")])
    assert vm["env"]["MINOR"] == "${{ matrix.minor }}" and vm["env"]["KERNEL"] == "${{ matrix.kernel }}"
    assert vm["env"]["KSC_VM_ACCEL"] == "kvm"
    run = scripts(vm)
    assert "/dev/kvm" in run
    for package in ("qemu-system-x86", "qemu-utils", "debootstrap", "libseccomp-dev", "e2fsprogs"):
        assert package in run
    cache = next(s for s in steps(vm) if s.get("uses", "").startswith("actions/cache@"))
    assert "${{ matrix.minor }}" in cache["with"]["key"]  # one minor's build does not evict another's

    for minor in versions.SUPPORTED:  # kernel 6.12: bench.matrix's cells of the minor, in gate mode
        argv = run_vm_step(tmp_path, minor, "6.12")
        assert argv[:2] == ["-E", "env"] and argv[2].startswith("PATH=") and argv[3:6] == ["python", "-m", "bench.matrix"]
        args = matrix.parser().parse_args(argv[6:])
        assert (args.minors, args.providers, args.behaviors) == ([minor], ["vm"], list(matrix.BEHAVIORS))
        (cells,), _ = matrix.plan(args.minors, args.providers, args.behaviors, ROOT / "results", "", True,
                                  args.kind_images)
        pytest_argv = cells.pytest_argv(ROOT / "results", cells.image, args.pytest_args)
        assert "--gate" in pytest_argv and pytest_argv[pytest_argv.index("--k8s-version") + 1] == versions.SUPPORTED[minor]
        assert pytest_argv[pytest_argv.index("--vm-kernel") + 1] == "6.12"
    # kernel 6.1: the suite at the newest minor's pin on that kernel, outside the gate
    argv = run_vm_step(tmp_path, newest, "6.1")
    assert argv[3:6] == ["python", "-m", "pytest"] and "--gate" not in argv
    assert argv[argv.index("--k8s-version") + 1] == versions.SUPPORTED[newest]
    assert argv[argv.index("--vm-kernel") + 1] == "6.1"


# --- the release gate --------------------------------------------------------------------------

def gate_interface() -> tuple[dict, dict, dict, dict]:
    on = triggers(load(GATE))
    call, dispatch = on["workflow_call"], on["workflow_dispatch"]
    return call["inputs"], call.get("secrets", {}), call["outputs"], dispatch["inputs"]


def test_release_gate_is_a_reusable_workflow_without_a_tag_trigger() -> None:
    on = triggers(load(GATE))
    assert set(on) == {"workflow_call", "workflow_dispatch"}
    inputs, secrets, outputs, dispatch_inputs = gate_interface()
    assert {"node-image", "kind-version", "behaviors"} <= set(inputs)
    def shape(declared: dict) -> dict:
        return {name: (i.get("type"), i.get("required", False), i.get("default")) for name, i in declared.items()}

    assert shape(inputs) == shape(dispatch_inputs), "workflow_dispatch takes the same inputs as workflow_call"
    assert inputs["kind-version"]["default"] == versions.KIND
    assert inputs["behaviors"]["default"] == "NoSwap,LimitedSwap"
    assert secrets["kubeconfig"]["required"] is False
    assert set(outputs) == {"verdict", "report-artifact"}


def test_release_gate_runs_the_suite_in_gate_mode_on_kind_or_an_existing_cluster() -> None:
    gate = load(GATE)["jobs"]["gate"]
    run = scripts(gate)
    assert '--gate --gate-behaviors "$BEHAVIORS" --behaviors "$BEHAVIORS"' in run
    assert '--provider existing --kubeconfig "$RUNNER_TEMP/gate-kubeconfig"' in run
    assert "--provider kind" in run and '--node-image "$NODE_IMAGE"' in run
    assert "secrets.kubeconfig" in GATE.read_text()
    for cluster in SUITE_CLUSTERS:
        assert cluster in run
    assert gate["outputs"]["verdict"].startswith("${{ steps.suite.outputs.verdict")


# --- every workflow ----------------------------------------------------------------------------

@pytest.mark.parametrize("path", [NIGHTLY, GATE], ids=lambda p: p.name)
def test_least_privilege_concurrency_and_timeouts(path: Path) -> None:
    workflow = load(path)
    assert workflow["permissions"] == {"contents": "read"}
    assert workflow.get("concurrency") or all(job.get("concurrency") for job in workflow["jobs"].values())
    for name, job in workflow["jobs"].items():
        assert isinstance(job.get("timeout-minutes"), int), f"{path.name}: job {name} has no timeout-minutes"


def test_every_action_is_pinned_by_commit_with_its_tag_in_a_comment() -> None:
    pins: dict[str, set[str]] = {}
    found = 0
    for path in sorted(WORKFLOWS.glob("*.y*ml")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            match = USES.match(line)
            if not match:
                continue
            found += 1
            where = f"{path.name}:{number}: {line.strip()}"
            pinned = PINNED.fullmatch(match["ref"])
            assert pinned, f"{where}: not pinned to a 40-hex commit SHA"
            assert match["comment"] and re.fullmatch(r"v\d+(\.\d+)*", match["comment"].strip()), \
                f"{where}: the tag the SHA was taken from belongs in a comment (# vX.Y.Z)"
            pins.setdefault(pinned["action"], set()).add(match["ref"] + " " + match["comment"].strip())
    assert found
    for action, refs in pins.items():
        assert len(refs) == 1, f"{action} is pinned differently across workflows: {sorted(refs)}"


def test_kind_and_actionlint_versions_agree_everywhere() -> None:
    assert node_images()["kind"] == versions.KIND
    assert gate_interface()[0]["kind-version"]["default"] == versions.KIND
    for path in (NIGHTLY, GATE):
        # No workflow hard-codes another kind release.
        for release in re.findall(r"sigs\.k8s\.io/kind@(v[\d.]+)", path.read_text()):
            assert release == versions.KIND, f"{path.name} installs kind {release}"
    pinned = re.search(r"^actionlint_version=(\S+)$", CI_RUN.read_text(), re.M)
    assert pinned, ".ci/run pins actionlint"
    assert load(NIGHTLY)["env"]["ACTIONLINT_VERSION"] == pinned[1]


# --- docs/ci.md's example ----------------------------------------------------------------------

def readme_gate_callers(text: str) -> list[tuple[dict, dict]]:
    """(jobs, caller job) for every job in docs/ci.md's YAML blocks that uses release-gate.yml."""
    found = []
    for block in re.findall(r"```ya?ml\n(.*?)```", text, re.S):
        doc = yaml.safe_load(block)
        jobs = doc.get("jobs", {}) if isinstance(doc, dict) else {}
        for job in jobs.values():
            if isinstance(job, dict) and ".github/workflows/release-gate.yml@" in str(job.get("uses", "")):
                found.append((jobs, job))
    return found


def test_readme_example_calls_the_gate_with_its_declared_inputs() -> None:
    callers = readme_gate_callers(CI_DOC.read_text())
    assert callers, "docs/ci.md's `uses:` example does not call .github/workflows/release-gate.yml"
    inputs, secrets, _, _ = gate_interface()
    for jobs, caller in callers:
        assert set(caller.get("with", {})) <= set(inputs), f"undeclared inputs: {set(caller['with']) - set(inputs)}"
        assert set(caller.get("secrets", {})) <= set(secrets)
        name = next(n for n, j in jobs.items() if j is caller)
        needing = [j for j in jobs.values() if name in ([j["needs"]] if isinstance(j.get("needs"), str)
                                                        else j.get("needs", []))]
        assert needing, f"no job of the example `needs: {name}` (the release must wait for the gate)"


@pytest.mark.parametrize("workflow", [NIGHTLY, GATE], ids=["nightly", "release-gate"])
def test_step_summaries_show_the_matrix_the_suite_writes_where_it_is_uploaded(workflow: Path) -> None:
    from e2e import report

    text = workflow.read_text()
    if workflow == NIGHTLY:  # every results directory under results/: bench.matrix's, and the vm lane's
        assert 'Path("results").rglob("junit.xml")' in text and f'here / "{report.MATRIX_MD}"' in text
    else:
        assert f"results/{report.MATRIX_MD}" in text
    assert "path: results/" in text
    options = (ROOT / "e2e" / "plugin" / "options.py").read_text()
    assert '"--results-dir", default="results"' in options  # the suite writes there by default


def test_the_gate_verdict_follows_the_suite_exit_codes() -> None:
    """The gate's `case` on pytest's exit code, run by bash for every code the suite documents:
    a failed test or gate is `fail`; could not judge (interrupted, preflight, usage, no tests) is
    `error`."""
    import shutil
    import subprocess

    from clusters.cli import Exit

    gate = yaml.safe_load(GATE.read_text())
    script = next(step["run"] for step in gate["jobs"]["gate"]["steps"] if step.get("id") == "suite")
    block = re.search(r"^\s*case \$rc in\n.*?^\s*esac$", script, re.M | re.S)
    assert block, script
    bash = shutil.which("bash") or "/bin/bash"
    expected = {Exit.OK: "pass", Exit.FAILED: "fail", Exit.INTERRUPTED: "error", Exit.PREFLIGHT: "error",
                Exit.USAGE: "error", 5: "error"}  # 5: pytest's "no tests collected"
    for code, verdict in expected.items():
        done = subprocess.run([bash, "-c", f"rc={int(code)}\n{block.group(0)}\necho $verdict"], capture_output=True,
                              text=True, timeout=30)
        assert done.stdout.strip() == verdict, f"exit {int(code)}: the gate says {done.stdout.strip()!r}, not {verdict!r}"


@pytest.mark.parametrize("layout", ["results", "results/kindest-node-v1.36.4-099e049362a1/kind/NoSwap"],
                         ids=["vm-lane", "bench-matrix"])
def test_the_nightly_summary_reads_every_results_directory(tmp_path: Path, layout: str) -> None:
    """The summary step (shared by both lanes), run by bash on the vm lane's results/ and on
    bench.matrix's results/<build>/<provider>/<behaviors>/ with its cell table."""
    import os
    import subprocess

    jobs = load(NIGHTLY)["jobs"]
    script = next(s["run"] for s in steps(jobs["kind"]) if s.get("name") == "Conformance summary")
    assert script == next(s["run"] for s in steps(jobs["vm-kvm"]) if s.get("name") == "Conformance summary")
    here = tmp_path / layout
    here.mkdir(parents=True)
    (here / "junit.xml").write_text('<testsuites><testsuite tests="2" failures="1" errors="0" skipped="0">'
                                    '<testcase classname="e2e.test_x" name="test_a"><failure message="x"/></testcase>'
                                    '<testcase classname="e2e.test_x" name="test_b"/></testsuite></testsuites>')
    (here / "pytest.log").write_text("=== swap coverage ===\nNoSwap: 1 passed, 1 failed\n=== short ===\n")
    (here / "matrix.md").write_text("# Swap conformance matrix\n\n| check | NoSwap |\n|---|---|\n\n## NoSwap\n")
    if layout != "results":
        (tmp_path / "results" / "matrix-table.md").write_text("# Kubernetes version matrix\n\nNote.\n\n| minor |\n|---|\n"
                                                              "| 1.36 |\n\nWhy the gate failed:\n\n- 1.36 kind: x\n")
    summary = tmp_path / "summary.md"
    env = {**os.environ, "GITHUB_STEP_SUMMARY": str(summary), "SUMMARY_TITLE": "title"}
    done = subprocess.run(["bash", "-eo", "pipefail", "-c", script], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    text = summary.read_text()
    assert "| 1 | 1 | 0 | 0 |" in text and "- `e2e.test_x::test_a`" in text and "NoSwap: 1 passed, 1 failed" in text
    assert "#### Conformance matrix" in text
    if layout != "results":
        assert f"#### `{layout}`" in text
        assert "#### Version matrix cells\n\n| minor |\n|---|\n| 1.36 |\n\nWhy the gate failed:\n\n- 1.36 kind: x" in text
