"""What the run proved, in the process that owns it: every test's result with its behavior, the
release gate's verdict, the results directory (e2e/report.py) and the terminal sections
(`conformance matrix`, `swap coverage`, `release gate`)."""

from __future__ import annotations

import functools
import json

import pytest

from clusters import behaviors as swap_behaviors
from clusters.redact import redact
from e2e import gate, record, verdict
from e2e.plugin.options import settings
from e2e.plugin.state import is_worker, the_run

_phases_key = pytest.StashKey[list]()
_records_key = pytest.StashKey[dict]()
_gate_key = pytest.StashKey[tuple]()
_report_key = pytest.StashKey[tuple]()


class _ResultRecorder:
    """Every phase of every test with the behavior it ran on (on the controller, xdist hands
    over the workers' reports, user properties included)."""

    def __init__(self, phases: list, properties: dict[str, list]):
        self.phases = phases
        self.properties = properties  # nodeid -> user properties, over all phases

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        behavior = dict(report.user_properties).get(verdict.BEHAVIOR_PROPERTY, "")
        self.properties.setdefault(report.nodeid, []).extend(report.user_properties)
        reason = ""
        if report.skipped and isinstance(report.longrepr, tuple):
            reason = str(report.longrepr[2]).removeprefix("Skipped: ")
        self.phases.append((report.nodeid, behavior, report.when, report.outcome, reason))


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_phases_key] = []
    config.stash[_records_key] = {}
    config.stash[gate.REQUIRED_KEY] = functools.cache(lambda: _required_behaviors(config))
    if not is_worker(config):
        config.pluginmanager.register(_ResultRecorder(config.stash[_phases_key], config.stash[_records_key]),
                                      "ksc-result-recorder")


def results(config: pytest.Config) -> list[verdict.Result]:
    return verdict.final_results(config.stash.get(_phases_key, []))


def _required_behaviors(config: pytest.Config) -> list[str]:
    required = settings(config).gate_behaviors
    if required is not None:
        return required
    required = list(verdict.DEFAULT_REQUIRED)
    try:
        wcs = swap_behaviors.WORKLOAD_CONTROLLED_SWAP
        if the_run(config).provider.coverage([wcs])[wcs] is None:
            required.append(wcs)
    except Exception:  # noqa: BLE001, S110 - a provider that cannot say: not required, and the summary says why
        pass
    return required


# --- coverage: which node each behavior ran on, or why it had none ------------------------------

def record_coverage(config: pytest.Config, behavior: str, covered: str | None, reason: str | None) -> None:
    path = the_run(config).directory / f"coverage-{behavior}.json"
    # the reason may carry what a cluster answered (an unreachable server's URL): the summary and
    # the results directory show it
    path.write_text(json.dumps({"node": covered, "reason": redact(reason) if reason else reason}))


def coverage_records(config: pytest.Config) -> tuple[dict[str, str], dict[str, str]]:
    """(behavior -> node it ran on, behavior -> why not covered), as the fixtures recorded them."""
    nodes, not_covered = {}, {}
    for behavior in swap_behaviors.ALL_BEHAVIORS:
        path = the_run(config).directory / f"coverage-{behavior}.json"
        if path.exists():
            recorded = json.loads(path.read_text())
            if recorded["node"]:
                nodes[behavior] = recorded["node"]
            else:
                not_covered[behavior] = recorded["reason"]
    return nodes, not_covered


# --- the end of the run --------------------------------------------------------------------------

def conclude(session: pytest.Session, judge_gate: bool = True) -> None:
    """The gate's verdict (exit 1 when it fails a run that passed) and the results directory."""
    config = session.config
    if judge_gate and config.getoption("gate"):
        required = gate.required_behaviors(config)
        problems = verdict.gate_problems(results(config), required)
        config.stash[_gate_key] = (required, problems)
        if problems and session.exitstatus == 0:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
    _write_report(config)


def _report_run(config: pytest.Config):
    from e2e import report

    nodes, not_covered = coverage_records(config)
    records = {nodeid: record.records(props) for nodeid, props in config.stash.get(_records_key, {}).items()}
    return report.Run(results(config), records, settings(config).behaviors, nodes, not_covered,
                      config.stash.get(_gate_key, None))


def _write_report(config: pytest.Config) -> None:
    """The results directory, whenever conformance tests ran (self-test runs have no results)."""
    from e2e import report

    if not results(config):
        return
    run = _report_run(config)
    try:
        path = report.write(settings(config).results_dir, run)
        config.stash[_report_key] = (run, f"report: {path} (matrix.md beside it, plots in {path.parent / report.PLOTS})")
    except Exception as error:  # noqa: BLE001 - the verdict stands without its report; say so loudly
        config.stash[_report_key] = (run, f"REPORT NOT WRITTEN to {config.getoption('results_dir')}: {error!r}")


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    run = the_run(config)
    if not run.owner:
        return
    done = results(config)
    teardown = run.teardown_lines
    gate_verdict = config.stash.get(_gate_key, None)
    if not (done or teardown or gate_verdict):
        return
    nodes, not_covered = coverage_records(config)
    written = config.stash.get(_report_key, None)
    if written:
        from e2e import report

        terminalreporter.section("conformance matrix")
        for line in report.terminal_lines(written[0]) + [written[1]]:
            terminalreporter.write_line(redact(line))
    terminalreporter.section("swap coverage")
    for line in verdict.summary_lines(done, settings(config).behaviors, nodes, not_covered) + teardown:
        terminalreporter.write_line(redact(line))  # teardown lines say what a failed delete said
    run.teardown_said = True
    if gate_verdict:
        required, problems = gate_verdict
        terminalreporter.section("release gate", red=bool(problems), green=not problems)
        terminalreporter.write_line(f"required: {', '.join(required)}; checks per behavior:"
                                    f" {'; '.join(f'{b}: ' + ', '.join(verdict.checks_for(b)) for b in required)}")
        for line in problems or ["PASSED: every core check of every required behavior ran and passed"]:
            terminalreporter.write_line(redact(("FAILED " if problems else "") + line))
