"""bench/matrix.py: the plan (which cells, which commands), resuming from kept cells, reading a
run's cells from its results directory with the gate's rules, and the table, run with a fake
runner that plays the suite's build commands, docker and pytest (no VM, no kind)."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench import matrix
from bench.cells import COULD_NOT_RUN, PASSED, Cell, nodeid_of
from clusters import cli, versions
from clusters.behaviors import LIMITED_SWAP, NO_SWAP
from e2e import report, verdict
from tests import api_failures

SUITE = "suite0000000"
REPO = Path(__file__).resolve().parent.parent


def passing(behavior: str) -> list[tuple[str, str, str]]:
    """One passing test of every module the gate requires of ``behavior``: (module, test, outcome)."""
    return [(module, f"test_one[{behavior}]", "passed") for module in verdict.checks_for(behavior)]


class FakeSuite:
    """Plays `python -m clusters.vm build|node-image`, `docker` and `python -m pytest e2e`: a run
    writes junit.xml and matrix.md (e2e/report.py's own) into its --results-dir, with ``tests[behavior]``
    as (module, test, outcome[, message]) and the node's kubelet ``kubelet``."""

    def __init__(self, cache: Path) -> None:
        self.cache = cache  # where node-image "writes" its archive
        self.calls: list[list[str]] = []
        self.tests: dict[str, list[tuple]] = {b: passing(b) for b in matrix.BEHAVIORS}
        self.build_exit = 0
        self.pytest_exit: int | None = None  # None: 0 when every test passed, else 1
        self.kubelet = "{version}"
        self.docker_images: set[str] = set()

    def pytests(self) -> list[list[str]]:
        return [c for c in self.calls if c[1:4] == ["-m", "pytest", "e2e"]]

    def builds(self) -> list[list[str]]:
        return [c for c in self.calls if c[1:3] == ["-m", "clusters.vm"]]

    def __call__(self, argv: list[str], log: Path, *, suite: bool = False) -> subprocess.CompletedProcess:
        self.calls.append(list(argv))
        log.parent.mkdir(parents=True, exist_ok=True)
        if argv[:1] == ["docker"]:
            with open(log, "a") as f:
                f.write(" ".join(argv) + "\n")
            if argv[1:3] == ["image", "inspect"]:
                return subprocess.CompletedProcess(argv, 0 if argv[3] in self.docker_images else 1, "", "")
            if argv[1] == "commit":
                self.docker_images.add(argv[-1])
            return subprocess.CompletedProcess(argv, 0, "", "")
        if argv[1:3] == ["-m", "clusters.vm"]:
            version = argv[argv.index("--k8s-version") + 1]
            with open(log, "a") as f:
                f.write(f"building {version}\n" + ("go: build failed: undefined: x\n" if self.build_exit else ""))
            if self.build_exit:
                return subprocess.CompletedProcess(argv, self.build_exit, "", "")
            if argv[3] == "build":
                return subprocess.CompletedProcess(argv, 0, f"/cache/vm/images/{version}-abc/disk.qcow2\n", "")
            archive = self.cache / "vm" / "kind-node" / f"key{version}" / "node-image.tar"
            archive.parent.mkdir(parents=True, exist_ok=True)
            archive.write_bytes(b"tar")
            return subprocess.CompletedProcess(argv, 0, f"{archive}\nkind-node:{version}-key\n", "")
        assert argv[1:4] == ["-m", "pytest", "e2e"], argv
        results = Path(argv[argv.index("--results-dir") + 1])
        behaviors = argv[argv.index("--behaviors") + 1].split(",")
        version = argv[argv.index("--k8s-version") + 1] if "--k8s-version" in argv else \
            argv[argv.index("--node-image") + 1].split(":", 1)[1].split("-")[0].split("@")[0]
        results.mkdir(parents=True, exist_ok=True)
        cases, outcomes = [], []
        for behavior in behaviors:
            for module, test, outcome, *message in self.tests[behavior]:
                outcomes.append(outcome)
                text = message[0] if message else ""
                inner = {"passed": "",
                         "failed": f'<failure message="Failed: {text}">{text}</failure>',
                         "error": f'<error message="failed on setup with &quot;Failed: {text}&quot;">{text}</error>',
                         "skipped": f'<skipped type="pytest.skip" message="{text}">e2e/x.py:1: {text}</skipped>',
                         }[outcome]
                cases.append(f'<testcase classname="e2e.{module}" name="{test}"><properties><property'
                             f' name="swap_behavior" value="{behavior}"/></properties>{inner}</testcase>')
        (results / "junit.xml").write_text(f'<testsuites><testsuite name="pytest">{"".join(cases)}</testsuite>'
                                           "</testsuites>")
        nodes = {b: f"vm:ksc/node (b, kubelet {self.kubelet.format(version=version)}, kernel 6.12, memory 1, swap 2)"
                 for b in behaviors}
        run = report.Run([], {}, behaviors, nodes, {}, None)
        (results / report.MATRIX_MD).write_text(report.markdown(run, {}))
        with open(results / "pytest.log", "a") as f:  # as the Runner does
            f.write(f"{' '.join(argv)}\n")
        code = self.pytest_exit if self.pytest_exit is not None else (0 if set(outcomes) <= {"passed"} else 1)
        return subprocess.CompletedProcess(argv, code, "", "")


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> FakeSuite:
    import bench.mutants

    monkeypatch.setattr(bench.mutants, "suite_hash", lambda root: SUITE)
    monkeypatch.setenv("KSC_CACHE_DIR", str(tmp_path / "cache"))  # the vm node it checks is the test's own
    monkeypatch.setattr(matrix, "MUTANT_RESULTS", tmp_path / "mutant-results")  # not the checkout's
    return FakeSuite(tmp_path / "cache")


def run_matrix(fake: FakeSuite, tmp_path: Path, *args: str) -> int:
    return matrix.main(["--store", str(tmp_path / "store"), "--table", str(tmp_path / "matrix.md"), *args], fake)


def kept(tmp_path: Path) -> dict[tuple[str, str, str], dict]:
    found = {}
    for path in (tmp_path / "store").glob("*/*/*.json"):
        cell = json.loads(path.read_text())
        found[(cell["minor"], cell["provider"], cell["behavior"])] = cell
    return found


# --- the plan ----------------------------------------------------------------------------------

def test_the_default_plan_is_every_supported_minor_on_both_providers_with_both_behaviors(tmp_path: Path) -> None:
    runs, done = matrix.plan(list(versions.SUPPORTED), matrix.PROVIDERS, matrix.BEHAVIORS, tmp_path, SUITE)
    assert done == []
    assert [(r.minor, r.provider, r.version) for r in runs] == [
        (m, p, v) for m, v in versions.SUPPORTED.items() for p in ("vm", "kind")]
    assert all(r.behaviors == (NO_SWAP, LIMITED_SWAP) for r in runs)  # one suite run per minor × provider


def test_each_run_s_commands_are_the_suite_s_own(tmp_path: Path) -> None:
    vm = matrix.Run("1.34", "vm", (NO_SWAP, LIMITED_SWAP), "v1.34.12")
    assert vm.build_argv() == [sys.executable, "-m", "clusters.vm", "build", "--k8s-version", "v1.34.12"]
    assert vm.pytest_argv(tmp_path, None, ["-x"]) == [
        sys.executable, "-m", "pytest", "e2e", "-p", "no:cacheprovider", "--provider", "vm", "--k8s-version", "v1.34.12",
        "--behaviors", "NoSwap,LimitedSwap", "--gate", "--gate-behaviors", "NoSwap,LimitedSwap",
        "--results-dir", str(tmp_path / "v1.34.12" / "vm" / "NoSwap+LimitedSwap"), "-x"]
    kind = matrix.Run("1.37", "kind", (LIMITED_SWAP,), "v1.37.2")
    assert kind.build_argv() == [sys.executable, "-m", "clusters.vm", "node-image", "--k8s-version", "v1.37.2"]
    argv = kind.pytest_argv(tmp_path, "kind-node:v1.37.2-key")
    assert argv[argv.index("--provider") + 1:argv.index("--behaviors")] == ["kind", "--node-image", "kind-node:v1.37.2-key"]
    # the commands' options exist: the vm CLI and the suite's plugin accept them
    from clusters.vm.__main__ import parser

    assert parser().parse_args(vm.build_argv()[3:]).k8s_version == "v1.34.12"
    assert parser().parse_args(kind.build_argv()[3:]).cmd == "node-image"
    options = (REPO / "e2e" / "plugin" / "options.py").read_text()
    for option in ("--provider", "--k8s-version", "--node-image", "--behaviors", "--gate", "--gate-behaviors",
                   "--results-dir"):
        assert f'"{option}"' in options


def test_published_kind_images_are_run_as_kind_ships_them(tmp_path: Path) -> None:
    images = {"1.34": "kindest/node:v1.34.11@sha256:" + "4" * 64}
    runs, _ = matrix.plan(["1.34"], ["kind"], [NO_SWAP], tmp_path, SUITE, kind_images="published",
                          images=lambda: images)
    (run,) = runs
    assert run.version == "v1.34.11" and run.image == images["1.34"] and run.build_argv() is None
    assert run.build_key == "kindest-node-v1.34.11-444444444444"
    with pytest.raises(cli.UsageError, match="has no kind node image of Kubernetes 1.35"):
        matrix.plan(["1.35"], ["kind"], [NO_SWAP], tmp_path, SUITE, kind_images="published", images=lambda: images)


def test_the_repository_s_published_images_cover_the_table() -> None:
    assert set(matrix.published_images()) == set(versions.SUPPORTED)


@pytest.mark.parametrize(("args", "message"), [
    (["--minors", "1.33"], "argument --minors: 1.33: not a supported minor; choose from 1.34, 1.35, 1.36, 1.37"),
    (["--minors", "1.38,1.34"], "argument --minors: 1.38: not a supported minor"),
    (["--providers", "existing"], "argument --providers: existing: not a provider; choose from vm, kind"),
    (["--behaviors", "WorkloadControlledSwap"], "argument --behaviors: WorkloadControlledSwap: not a released swap"
                                                " behavior; choose from NoSwap, LimitedSwap"),
    (["--minors", ""], "argument --minors: '': not a supported minor"),
])
def test_bad_arguments_are_a_usage_error(fake: FakeSuite, tmp_path: Path, capsys, args: list[str], message: str) -> None:
    with pytest.raises(SystemExit) as exited:
        run_matrix(fake, tmp_path, *args)
    assert exited.value.code == cli.Exit.USAGE
    assert message in capsys.readouterr().err
    assert fake.calls == [] and not (tmp_path / "store").exists()


def test_a_dry_run_prints_the_plan_and_runs_nothing(fake: FakeSuite, tmp_path: Path, capsys) -> None:
    assert run_matrix(fake, tmp_path, "--minors", "1.34,1.37", "--providers", "vm,kind", "--dry-run") == cli.Exit.OK
    out = capsys.readouterr().out
    assert fake.calls == [] and not (tmp_path / "store").exists() and not (tmp_path / "matrix.md").exists()
    assert out.startswith("matrix: 2 minor(s) × 2 provider(s) × 2 behavior(s) = 8 cells, 0 kept, 8 to run")
    assert "1.34 vm (v1.34.12): run NoSwap, LimitedSwap" in out
    assert "  build: python -m clusters.vm build --k8s-version v1.34.12" in out
    assert "  build: python -m clusters.vm node-image --k8s-version v1.37.2" in out
    assert (f"  suite: python -m pytest e2e -p no:cacheprovider --provider vm --k8s-version v1.37.2 --behaviors"
            f" NoSwap,LimitedSwap --gate --gate-behaviors NoSwap,LimitedSwap --results-dir"
            f" {tmp_path / 'store' / 'v1.37.2' / 'vm' / 'NoSwap+LimitedSwap'}") in out


# --- running, keeping, resuming ------------------------------------------------------------------

def test_cells_are_run_kept_and_skipped_on_the_next_run(fake: FakeSuite, tmp_path: Path) -> None:
    assert run_matrix(fake, tmp_path, "--minors", "1.34,1.37", "--providers", "vm") == cli.Exit.OK
    assert [c[5] for c in fake.builds()] == ["v1.34.12", "v1.37.2"]
    assert len(fake.pytests()) == 2  # one run per minor × provider, both behaviors
    cells = kept(tmp_path)
    assert set(cells) == {(m, "vm", b) for m in ("1.34", "1.37") for b in (NO_SWAP, LIMITED_SWAP)}
    cell = cells[("1.34", "vm", NO_SWAP)]
    assert cell["gate"] == "passed" and cell["passed"] == len(verdict.checks_for(NO_SWAP))
    assert cell["failed"] == cell["skipped"] == cell["could_not_test"] == 0
    assert cell["build"] == "v1.34.12" and cell["artifact"] == "/cache/vm/images/v1.34.12-abc/disk.qcow2"
    assert cell["suite"] == SUITE and cell["date"] and cell["behaviors_in_run"] == [NO_SWAP, LIMITED_SWAP]

    fake.calls.clear()
    assert run_matrix(fake, tmp_path, "--minors", "1.34,1.37", "--providers", "vm") == cli.Exit.OK
    assert fake.calls == [], "every cell was kept: nothing is built or run again"

    (tmp_path / "store" / "v1.37.2" / "vm" / f"{LIMITED_SWAP}.json").unlink()
    assert run_matrix(fake, tmp_path, "--minors", "1.34,1.37", "--providers", "vm") == cli.Exit.OK
    (only,) = fake.pytests()
    assert only[only.index("--behaviors") + 1] == LIMITED_SWAP and "v1.37.2" in only

    fake.calls.clear()
    assert run_matrix(fake, tmp_path, "--minors", "1.34", "--providers", "vm", "--rerun") == cli.Exit.OK
    assert len(fake.pytests()) == 1


def test_cells_kept_elsewhere_are_read_back_from_there_and_the_runs_stay_in_the_store(
        fake: FakeSuite, tmp_path: Path) -> None:
    cells = tmp_path / "checkout" / "matrix-cells"
    assert run_matrix(fake, tmp_path, "--minors", "1.36", "--providers", "vm", "--kept", str(cells)) == cli.Exit.OK
    assert sorted(p.relative_to(cells).as_posix() for p in cells.rglob("*") if p.is_file()) == \
        [f"v1.36.5/vm/{LIMITED_SWAP}.json", f"v1.36.5/vm/{NO_SWAP}.json"]
    assert (tmp_path / "store" / "v1.36.5" / "vm" / f"{NO_SWAP}+{LIMITED_SWAP}" / "junit.xml").is_file()
    assert kept(tmp_path) == {}, "a cell went to the store"
    assert "| 1.36 | vm | NoSwap |" in (tmp_path / "matrix.md").read_text()

    fake.calls.clear()
    assert run_matrix(fake, tmp_path, "--minors", "1.36", "--providers", "vm", "--kept", str(cells)) == cli.Exit.OK
    assert fake.calls == [], "the cells kept in --kept were not read back"
    assert run_matrix(fake, tmp_path, "--minors", "1.36", "--providers", "vm") == cli.Exit.OK
    assert len(fake.pytests()) == 1, "without --kept the store is where cells are kept"


def test_a_rerun_s_logs_hold_that_run_alone(fake: FakeSuite, tmp_path: Path) -> None:
    fake.build_exit = 1
    assert run_matrix(fake, tmp_path, "--minors", "1.36", "--providers", "vm") == cli.Exit.FAILED
    fake.build_exit = 0
    assert run_matrix(fake, tmp_path, "--minors", "1.36", "--providers", "vm") == cli.Exit.OK
    assert run_matrix(fake, tmp_path, "--minors", "1.36", "--providers", "vm", "--rerun") == cli.Exit.OK
    cell = tmp_path / "store" / "v1.36.5" / "vm"
    assert (cell / "build.log").read_text() == "building v1.36.5\n", "the failed build's log is gone"
    assert len((cell / f"{NO_SWAP}+{LIMITED_SWAP}" / "pytest.log").read_text().splitlines()) == 1


def test_a_changed_suite_runs_the_cells_again(fake: FakeSuite, tmp_path: Path, monkeypatch) -> None:
    import bench.mutants

    assert run_matrix(fake, tmp_path, "--minors", "1.35", "--providers", "vm") == cli.Exit.OK
    monkeypatch.setattr(bench.mutants, "suite_hash", lambda root: "suite1111111")
    fake.calls.clear()
    assert run_matrix(fake, tmp_path, "--minors", "1.35", "--providers", "vm") == cli.Exit.OK
    assert len(fake.pytests()) == 1 and kept(tmp_path)[("1.35", "vm", NO_SWAP)]["suite"] == "suite1111111"


def test_a_failed_build_could_not_run_and_is_tried_again(fake: FakeSuite, tmp_path: Path) -> None:
    fake.build_exit = 1
    assert run_matrix(fake, tmp_path, "--minors", "1.36", "--providers", "vm") == cli.Exit.FAILED
    assert fake.pytests() == [], "no suite run on a build that failed"
    cell = kept(tmp_path)[("1.36", "vm", NO_SWAP)]
    assert cell["gate"] == COULD_NOT_RUN
    assert cell["problems"][0].startswith("the build failed (exit 1): go: build failed: undefined: x")
    fake.build_exit = 0
    assert run_matrix(fake, tmp_path, "--minors", "1.36", "--providers", "vm") == cli.Exit.OK
    assert len(fake.pytests()) == 1 and kept(tmp_path)[("1.36", "vm", NO_SWAP)]["gate"] == "passed"


@pytest.mark.parametrize("code", [cli.Exit.INTERRUPTED, cli.Exit.PREFLIGHT, cli.Exit.USAGE, 5])
def test_a_suite_that_stopped_before_its_verdict_could_not_run(fake: FakeSuite, tmp_path: Path, code: int) -> None:
    fake.pytest_exit = int(code)
    assert run_matrix(fake, tmp_path, "--minors", "1.36", "--providers", "vm") == cli.Exit.FAILED
    cell = kept(tmp_path)[("1.36", "vm", LIMITED_SWAP)]
    assert cell["gate"] == COULD_NOT_RUN and f"(exit {int(code)})" in cell["problems"][0]
    assert not matrix.is_done(Cell.from_json(json.dumps(cell)), SUITE)


def test_a_failed_cell_is_kept_and_fails_the_command(fake: FakeSuite, tmp_path: Path) -> None:
    fake.tests[LIMITED_SWAP][0] = (verdict.checks_for(LIMITED_SWAP)[0], "test_one[LimitedSwap]", "failed",
                                   "AssertionError: memory.swap.max 0 != 4096")
    assert run_matrix(fake, tmp_path, "--minors", "1.34", "--providers", "vm") == cli.Exit.FAILED
    cells = kept(tmp_path)
    assert cells[("1.34", "vm", NO_SWAP)]["gate"] == "passed"
    bad = cells[("1.34", "vm", LIMITED_SWAP)]
    assert bad["gate"] == "FAILED" and bad["failed"] == 1 and bad["could_not_test"] == 0
    fake.calls.clear()
    assert run_matrix(fake, tmp_path, "--minors", "1.34", "--providers", "vm") == cli.Exit.FAILED
    assert fake.calls == [], "a failed cell is a result: kept, not run again without --rerun"


def test_kind_builds_the_node_image_loads_it_and_runs_it(fake: FakeSuite, tmp_path: Path) -> None:
    assert run_matrix(fake, tmp_path, "--minors", "1.37", "--providers", "kind") == cli.Exit.OK
    ref = "kind-node:v1.37.2-key"
    docker = [c[1:] for c in fake.calls if c[0] == "docker"]
    assert ["load", "-i", str(tmp_path / "cache" / "vm" / "kind-node" / "keyv1.37.2" / "node-image.tar")] in docker
    assert ["commit", "--change", 'ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]', "ksc-bake-keyv1.37.2",
            ref] in docker
    (suite,) = fake.pytests()
    assert suite[suite.index("--node-image") + 1] == ref
    cell = kept(tmp_path)[("1.37", "kind", NO_SWAP)]
    assert cell["artifact"] == ref and cell["gate"] == "passed"
    assert (tmp_path / "store" / "v1.37.2" / "kind" / "NoSwap+LimitedSwap" / "junit.xml").is_file()


# --- reading a run's cells -----------------------------------------------------------------------

def test_cells_are_judged_by_the_gate_s_rules(tmp_path: Path) -> None:
    fake = FakeSuite(tmp_path / "cache")
    core = verdict.CORE_CHECKS[0]
    fake.tests[NO_SWAP] = passing(NO_SWAP) + [
        ("test_resize", "test_new[NoSwap]", "skipped", "needs kubelet >= 1.35; node n runs v1.34.12"),  # accepted
        (core, "test_core_skip[NoSwap]", "skipped", "no tmpfs noswap on this kernel"),  # core: could not test
        ("test_eviction", "test_thresholds[NoSwap]", "failed", "[gate] cannot set a kubelet's eviction thresholds"),
        ("test_metrics", "test_real[NoSwap]", "failed", "AssertionError: 0 != 1"),
    ]
    fake.tests[LIMITED_SWAP] = [(m, t, "error", "[gate] LimitedSwap not covered: no swap on the host")
                                for m, t, _ in passing(LIMITED_SWAP)]
    run = matrix.Run("1.34", "vm", (NO_SWAP, LIMITED_SWAP), "v1.34.12")
    fake(run.pytest_argv(tmp_path, None), tmp_path / "log", suite=True)
    no_swap, limited = matrix.judge(run, run.results_dir(tmp_path), 1)
    assert (no_swap.passed, no_swap.failed, no_swap.skipped, no_swap.could_not_test) == (
        len(verdict.checks_for(NO_SWAP)), 1, 1, 2)
    assert no_swap.gate == "FAILED" and any("test_metrics" in p for p in no_swap.problems)
    assert (limited.passed, limited.failed, limited.could_not_test) == (0, 0, len(verdict.checks_for(LIMITED_SWAP)))
    assert limited.gate == "FAILED" and no_swap.build == limited.build == "v1.34.12"
    # the accepted skip is kept with its reason, the ones it does not accept are not skips
    assert no_swap.skips == {"needs kubelet >= 1.35; node n runs v1.34.12": ["test_new[NoSwap]"]}
    assert limited.skips == {}


def test_the_page_says_why_each_cell_skipped_per_minor(tmp_path: Path) -> None:
    def cell(minor: str, skips: dict[str, list[str]]) -> Cell:
        return Cell(minor, "vm", NO_SWAP, versions.SUPPORTED[minor], gate="passed", passed=3,
                    skipped=sum(map(len, skips.values())), skips=skips, suite="s")

    quoted = 'no KEP-5359: HTTP 422 Invalid: Pod "p" is invalid: [a | b]'
    page = matrix.table([cell("1.34", {"needs kubelet >= 1.36; node n runs v1.34.12": ["test_new[NoSwap]"],
                                       quoted: ["test_swap[a]", "test_swap[b]"],
                                       "a | b\nacross lines": ["test_odd"]}),
                         cell("1.37", {quoted: ["test_swap[a]", "test_swap[b]"]}),
                         dataclasses.replace(cell("1.36", {}), skipped=2)], "s")
    section = page[page.index("## Why tests skipped"):]
    rows = [line for line in section.splitlines() if line.startswith("| 1.")]
    assert rows == [
        "| 1.34 | vm | NoSwap | 1 | a \\| b across lines | `test_odd` |",
        "| 1.34 | vm | NoSwap | 1 | needs kubelet >= 1.36; node n runs v1.34.12 | `test_new` |",
        "| 1.34 | vm | NoSwap | 2 | no KEP-5359: … | `test_swap` |",
        "| 1.37 | vm | NoSwap | 2 | no KEP-5359: … | `test_swap` |",
    ]
    assert "- 1.36 vm NoSwap: 2 skipped, their reasons not kept" in section
    assert "## Why tests skipped" not in matrix.table([cell("1.37", {})], "s"), "no skips, no section"


def test_the_junit_reader_agrees_with_pytest_s_own_report(tmp_path: Path) -> None:
    """A real pytest run of tests that fail as the gate's "could not test" in setup and in the
    test, skip with the node fixture's reason, fail, and lose the API server: the reader's view of
    its JUnit XML."""
    e2e = tmp_path / "e2e"
    e2e.mkdir()
    (e2e / "test_resize.py").write_text(
        "import pytest\n\n"
        "@pytest.fixture\n"
        "def node(request):\n"
        "    request.node.user_properties.append(('swap_behavior', 'NoSwap'))\n"
        "    pytest.fail('[gate] NoSwap not covered: no node', pytrace=False)\n\n"
        "def test_setup(node):\n    pass\n\n"
        "def test_call(request):\n"
        "    request.node.user_properties.append(('swap_behavior', 'LimitedSwap'))\n"
        "    pytest.fail('[gate] cannot set', pytrace=False)\n\n"
        "def test_skip(request):\n"
        "    request.node.user_properties.append(('swap_behavior', 'LimitedSwap'))\n"
        "    pytest.skip('needs kubelet >= 1.35; node n runs v1.34.1')\n\n"
        "def test_assert(request):\n"
        "    request.node.user_properties.append(('swap_behavior', 'LimitedSwap'))\n"
        "    assert 1 == 2\n\n"
        "def test_pass(request):\n"
        "    request.node.user_properties.append(('swap_behavior', 'LimitedSwap'))\n\n"
        # the API server lost: a real refused connection through urllib3, in setup and in the test
        "from conftest import lost\n\n"
        "@pytest.fixture\n"
        "def api(request):\n"
        "    request.node.user_properties.append(('swap_behavior', 'LimitedSwap'))\n"
        "    lost()\n\n"
        "def test_api_lost_in_setup(api):\n    pass\n\n"
        "def test_api_lost_in_the_test(request):\n"
        "    request.node.user_properties.append(('swap_behavior', 'LimitedSwap'))\n"
        "    lost()\n\n"
        # an API server that answered only 504s until the create's bound ran out (kind run 44)
        "@pytest.fixture\n"
        "def overloaded(request):\n"
        "    request.node.user_properties.append(('swap_behavior', 'NoSwap'))\n"
        "    raise AssertionError('gave up after 300s waiting for create pod a/b; last seen: the API server answered 504'\n"
        "                      ' Gateway Timeout: context deadline exceeded')\n\n"
        "def test_api_overloaded_in_setup(overloaded):\n    pass\n\n"
        # an API server that refused the suite's credentials (403: RBAC not yet caught up after
        # the control plane restarted), answered on loopback to the real client, in the test
        "def test_api_refused_in_the_test(request):\n"
        "    request.node.user_properties.append(('swap_behavior', 'LimitedSwap'))\n"
        "    from conftest import refused\n"
        "    refused()\n")
    (tmp_path / "conftest.py").write_text(api_failures.CONFTEST)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", f"--junitxml={tmp_path / 'j.xml'}",
                    "e2e"], cwd=tmp_path, capture_output=True, timeout=120)
    found = {r.nodeid: (r.behavior, r.outcome, r.reason, marked) for r, marked in matrix.read_junit(tmp_path / "j.xml")}
    assert found == {
        "e2e/test_resize.py::test_setup": ("NoSwap", "failed", "", True),
        "e2e/test_resize.py::test_call": ("LimitedSwap", "failed", "", True),
        "e2e/test_resize.py::test_skip": ("LimitedSwap", "skipped", "needs kubelet >= 1.35; node n runs v1.34.1", False),
        "e2e/test_resize.py::test_assert": ("LimitedSwap", "failed", "", False),
        "e2e/test_resize.py::test_pass": ("LimitedSwap", "passed", "", False),
        # never reached the node's verdict: could not test; in the test itself it stays a failure
        "e2e/test_resize.py::test_api_lost_in_setup": ("LimitedSwap", "failed", "", True),
        "e2e/test_resize.py::test_api_lost_in_the_test": ("LimitedSwap", "failed", "", False),
        "e2e/test_resize.py::test_api_overloaded_in_setup": ("NoSwap", "failed", "", True),
        "e2e/test_resize.py::test_api_refused_in_the_test": ("LimitedSwap", "failed", "", True),
    }
    assert {r.module for r, _ in matrix.read_junit(tmp_path / "j.xml")} == {"test_resize"}


def test_node_ids_come_back_from_junit_classnames() -> None:
    assert nodeid_of("e2e.test_x", "test_a[NoSwap]") == "e2e/test_x.py::test_a[NoSwap]"
    assert nodeid_of("e2e.test_x.TestY", "test_a") == "e2e/test_x.py::TestY::test_a"


def test_the_kubelet_version_comes_from_the_report_s_node_line(tmp_path: Path) -> None:
    node = "vm:ksc/n1 (LimitedSwap, kubelet v1.35.8+patch.0123456789ab, kernel 6.12.9, memory 4, swap 2)"
    run = report.Run([], {}, [NO_SWAP, LIMITED_SWAP], {LIMITED_SWAP: node}, {NO_SWAP: "no node"}, None)
    (tmp_path / "matrix.md").write_text(report.markdown(run, {}))
    assert matrix.nodes_in_report(tmp_path / "matrix.md") == {LIMITED_SWAP: "v1.35.8+patch.0123456789ab"}
    assert matrix.nodes_in_report(tmp_path / "missing.md") == {}


# --- the table -----------------------------------------------------------------------------------

def test_the_table_has_a_row_per_cell_in_the_table_s_order(fake: FakeSuite, tmp_path: Path) -> None:
    fake.tests[LIMITED_SWAP][0] = (verdict.checks_for(LIMITED_SWAP)[0], "test_one[LimitedSwap]", "failed", "boom")
    assert run_matrix(fake, tmp_path, "--minors", "1.37,1.34", "--providers", "kind,vm") == cli.Exit.FAILED
    fake.build_exit = 1
    assert run_matrix(fake, tmp_path, "--minors", "1.35", "--providers", "vm", "--behaviors", "NoSwap") == \
        cli.Exit.FAILED
    text = (tmp_path / "matrix.md").read_text().split("## The mutant bench on each minor")[0]
    rows = [line for line in text.splitlines() if line.startswith("| 1.")]
    assert [tuple(r.split(" | ")[:3]) for r in rows] == [
        ("| 1.34", "vm", "NoSwap"), ("| 1.34", "vm", "LimitedSwap"), ("| 1.34", "kind", "NoSwap"),
        ("| 1.34", "kind", "LimitedSwap"), ("| 1.35", "vm", "NoSwap"), ("| 1.37", "vm", "NoSwap"),
        ("| 1.37", "vm", "LimitedSwap"), ("| 1.37", "kind", "NoSwap"), ("| 1.37", "kind", "LimitedSwap")]
    n = len(verdict.checks_for(NO_SWAP))
    first = rows[0].split(" | ")
    assert first[3:8] == [str(n), "0", "0", "0", "passed"] and first[10] == "v1.34.12"
    assert rows[1].split(" | ")[3:8] == [str(len(verdict.checks_for(LIMITED_SWAP)) - 1), "1", "0", "0", "FAILED"]
    assert rows[4].split(" | ")[3:8] == ["—", "—", "—", "—", "could not run: the build failed (exit 1): go: build"
                                         " failed: undefined: x (log " + str(tmp_path / "store" / "v1.35.8" / "vm" /
                                                                           "build.log") + ")"]
    assert rows[4].split(" | ")[10] == "v1.35.8 (asked; no node reported)"
    assert "Why the gate failed:" in text and "- 1.34 vm LimitedSwap: LimitedSwap: " in text
    assert text.startswith("# Kubernetes version matrix\n")
    assert "| minor | provider | behavior | passed | failed | skipped | could not test | gate | wall time |" \
           " build time | build | date |" in text


def test_the_table_shows_the_suite_s_time_and_the_build_s_apart() -> None:
    built = Cell("1.35", "vm", NO_SWAP, "v1.35.8", gate="passed", seconds=1812.1, build_seconds=401.3)
    kept = Cell("1.35", "vm", LIMITED_SWAP, "v1.35.8", gate="passed", seconds=1812.1, build_seconds=0.6)
    rows = [line.split(" | ") for line in matrix.table([built, kept], SUITE).splitlines() if line.startswith("| 1.")]
    assert [r[8:10] for r in rows] == [["30.2 min", "6.7 min"], ["30.2 min", "1 s"]]


def test_the_table_marks_results_of_an_earlier_suite_and_leaves_earlier_pins_out(fake: FakeSuite, tmp_path: Path,
                                                                                 monkeypatch) -> None:
    assert run_matrix(fake, tmp_path, "--minors", "1.36", "--providers", "vm", "--behaviors", "NoSwap") == cli.Exit.OK
    old = tmp_path / "store" / "v1.36.4" / "vm"  # a cell of the pin before this one
    old.mkdir(parents=True)
    (old / "NoSwap.json").write_text(Cell("1.36", "vm", NO_SWAP, "v1.36.4", gate="passed").to_json())
    text = matrix.table(matrix.every_kept(tmp_path / "store", matrix.current_builds()), "suite2222222")
    rows = [line for line in text.splitlines() if line.startswith("| 1.")]
    assert len(rows) == 1 and rows[0].endswith(f"(suite {SUITE}, changed since) |")
    assert "No cell has run yet" in matrix.table([], SUITE)


def test_a_kept_cell_names_paths_under_home_without_the_user(tmp_path: Path, monkeypatch) -> None:
    """A cell committed to the checkout says ~/... where this machine's home directory is; a path
    that merely begins like it is left as it is, and the cell reads back."""
    home = tmp_path / "home" / "ann"
    monkeypatch.setenv("HOME", str(home))
    cell = Cell("1.36", "vm", NO_SWAP, "v1.36.5", artifact=f"{home}/.cache/ksc/vm/disk.raw",
                       results_dir=f"{home}/.cache/ksc/matrix/NoSwap",
                       problems=[f"see {home}/.cache/ksc/pytest.log", f"{home}x/a and {home}.bak/b"])
    text = cell.to_json()
    assert str(home) + "/" not in text
    back = Cell.from_json(text)
    assert (back.artifact, back.results_dir) == ("~/.cache/ksc/vm/disk.raw", "~/.cache/ksc/matrix/NoSwap")
    assert back.problems == ["see ~/.cache/ksc/pytest.log", f"{home}x/a and {home}.bak/b"]


# --- the vm node it would use ------------------------------------------------------------------

def test_the_vm_state_directory_is_the_one_the_runs_are_given() -> None:
    from clusters.vm import paths

    assert matrix.vm_state_dir([]) == paths.default_state_dir()
    assert matrix.vm_state_dir(["-x", "--vm-state-dir", "/s/a"]) == Path("/s/a")
    assert matrix.vm_state_dir(["--vm-state-dir=/s/b", "-x"]) == Path("/s/b")


def test_a_vm_node_another_run_holds_stops_the_matrix_before_any_build(
        fake: FakeSuite, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    from clusters.vm_provider import IN_USE

    from tests.lock_holder import holding

    state = tmp_path / "cache" / "vm" / "run"
    state.mkdir(parents=True)
    with holding(state / IN_USE) as holder:
        assert run_matrix(fake, tmp_path, "--minors", "1.36", "--providers", "vm") == cli.Exit.PREFLIGHT
    assert fake.calls == [], "built or ran while another run held the node"
    assert f"another run of the suite (pid {holder.pid}) is using the vm node in {state}" in capsys.readouterr().err
    assert run_matrix(fake, tmp_path, "--minors", "1.36", "--providers", "vm") == cli.Exit.OK


# --- the mutant bench on each minor ------------------------------------------------------------

def _patch(directory: Path, name: str, extra: str = "", tests: str = "test_a") -> None:
    header = (f"# mutant: {name}\n# wrong: w\n# area: a\n# binaries: kubelet\n# tests: {tests}\n"
              f"# behaviors: LimitedSwap\n# expect: caught\n{extra}")
    (directory / f"{name}.patch").write_text(header + "diff --git a/x.go b/x.go\n--- a/x.go\n+++ b/x.go\n"
                                                       "@@ -1 +1 @@\n-a\n+b\n")


def test_the_page_says_where_the_bench_stands_on_each_minor(tmp_path: Path, fake: FakeSuite) -> None:
    """Per pin, from the bench's kept results on this suite: the baseline green only where one covers
    every test the release's mutants name; a mutant caught or survived only by a result of this
    suite and this build; not applicable as its header declares; a prototype's mutants not counted."""
    from bench import mutants as model
    from bench.mutants import standing
    from clusters.vm import k8s_source

    patches, keep = tmp_path / "patches", tmp_path / "mutant-results"
    patches.mkdir()
    keep.mkdir()
    _patch(patches, "01-caught")
    _patch(patches, "02-survived", tests="test_b")
    _patch(patches, "03-stale")
    _patch(patches, "04-newer", "# not-applicable: 1.34: the code path is newer\n")
    _patch(patches, "05-prototype", f"# base: {tmp_path / 'kep-5359.patch'}\n")
    (tmp_path / "kep-5359.patch").write_text("diff --git a/y.go b/y.go\n--- a/y.go\n+++ b/y.go\n@@ -1 +1 @@\n-a\n+b\n")
    mutants = {m.name: m for m in model.load(patches)}
    release = versions.SUPPORTED["1.36"]

    def keep_result(name: str, verdict: str, suite: str = SUITE) -> None:
        m = mutants[name]
        build = k8s_source.release(release, m.patches).build_id
        standing.mutant_path(keep, m, release, "vm").write_text(
            model.Outcome(m.name, build, verdict, suite=suite).to_json())

    keep_result("01-caught", model.CAUGHT)
    keep_result("02-survived", model.SURVIVED)
    keep_result("03-stale", model.CAUGHT, suite="another00000")
    _, label, _ = standing.baseline_selection([m for m in mutants.values() if m.base is None], None)
    assert label == "-k ((test_a) or (test_b)) on LimitedSwap"
    base = standing.baseline_path(keep, release, "vm")
    base.write_text(model.Outcome("baseline", release, model.SURVIVED, selection=label, suite=SUITE).to_json())

    on_136 = standing.standing(keep, release, "vm", SUITE, patches)
    assert on_136 == standing.Standing(release, "vm", "green", caught=1, survived=1, pending=2, not_applicable=0)
    assert on_136.applicable == 4
    on_134 = standing.standing(keep, versions.SUPPORTED["1.34"], "vm", SUITE, patches)
    assert (on_134.baseline, on_134.pending, on_134.not_applicable) == ("not run", 3, 1)

    base.write_text(model.Outcome("baseline", release, model.SURVIVED, selection="-k ((test_a)) on LimitedSwap",
                                  suite=SUITE).to_json())  # the tests of fewer mutants
    assert standing.standing(keep, release, "vm", SUITE, patches).baseline == "not run"
    base.write_text(model.Outcome("baseline", release, model.SURVIVED, failed=["test_a[LimitedSwap]"],
                                  selection=label, suite=SUITE).to_json())
    assert standing.standing(keep, release, "vm", SUITE, patches).baseline == "1 false alarm"

    text = matrix.bench_table([on_136], SUITE, "docs/measurements/mutant-results/")
    assert f"| 1.36 | vm | {release} | green | 1/4 | 1 | 2 | 0 |" in text

    base.unlink()  # no baseline of the bench's own: the matrix's gate-passed run of both behaviors is one
    grid = tmp_path / "cells"
    for behavior in (NO_SWAP, LIMITED_SWAP):
        (grid / release / "vm").mkdir(parents=True, exist_ok=True)
        (grid / release / "vm" / f"{behavior}.json").write_text(Cell(
            "1.36", "vm", behavior, release, gate=PASSED, build=release, suite=SUITE).to_json())
    assert standing.standing(keep, release, "vm", SUITE, patches).baseline == "not run"
    assert standing.standing(keep, release, "vm", SUITE, patches, cells=grid).baseline == "green"


def test_the_matrix_page_ends_with_the_bench_on_every_pin(tmp_path: Path, fake: FakeSuite) -> None:
    assert run_matrix(fake, tmp_path, "--minors", "1.36", "--providers", "vm", "--behaviors", "NoSwap") == cli.Exit.OK
    page = (tmp_path / "matrix.md").read_text()
    section = page.split("## The mutant bench on each minor", 1)[1]
    rows = [line for line in section.splitlines() if line.startswith("| 1.")]
    assert [row.split(" | ")[2] for row in rows] == list(versions.SUPPORTED.values())
    assert all(" | vm | " in row and " | not run | " in row for row in rows)  # nothing kept in the test's directory
