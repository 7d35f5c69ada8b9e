"""The results directory a person reads after a run: the conformance matrix (behavior × check,
with the expected value, the oracle inputs behind it, the observed value, the verdict and the
node) in Markdown and HTML, and a plot per sampled stress container. Built on the controller
from the test results and the records the tests made (e2e/record.py)."""

from __future__ import annotations

import html
import re
import shutil
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from clusters.behaviors import ALL_BEHAVIORS
from e2e.record import Check, Series
from e2e.verdict import Result

MATRIX_MD = "matrix.md"
REPORT_HTML = "report.html"
PLOTS = "plots"
MiB = 1 << 20
MARK = {"passed": "✓", "failed": "✗", "skipped": "–"}


@dataclass
class Run:
    """What the report is made of."""

    results: Sequence[Result]
    records: Mapping[str, tuple[list[Check], list[Series]]]  # nodeid -> what it recorded
    selected: Sequence[str]
    nodes: Mapping[str, str]  # behavior -> the node it ran on
    not_covered: Mapping[str, str] = field(default_factory=dict)
    gate: tuple[Sequence[str], Sequence[str]] | None = None  # (required behaviors, problems)


def check_of(result: Result) -> str:
    """The check a test is, whatever behavior it ran on: `module::test[params]` without the
    behavior among the parameters."""
    path, _, name = result.nodeid.partition("::")
    module = path.rsplit("/", 1)[-1].removesuffix(".py")
    base, bracket, params = name.partition("[")
    if bracket:
        kept = [p for p in params.rstrip("]").split("-") if p != result.behavior]
        base += f"[{'-'.join(kept)}]" if kept else ""
    return f"{module}::{base}"


def group_of(check: str) -> str:
    return check.partition("[")[0]


def behaviors_in(run: Run) -> list[str]:
    return [b for b in ALL_BEHAVIORS if b in run.selected or any(r.behavior == b for r in run.results)]


def overview(run: Run) -> tuple[list[str], list[list[str]]]:
    """(header, rows): one row per test function, one column per behavior, counts per cell."""
    behaviors = behaviors_in(run)
    cells: dict[str, dict[str, Counter]] = defaultdict(lambda: defaultdict(Counter))
    for result in run.results:
        cells[group_of(check_of(result))][result.behavior][result.outcome] += 1
    rows = []
    for group in sorted(cells):
        row = [group]
        for behavior in behaviors:
            counts = cells[group].get(behavior)
            if not counts:
                row.append(" ")
            elif counts["failed"]:
                row.append(f"✗ {counts['failed']} failed" + (f", {counts['passed']} passed" if counts["passed"] else ""))
            elif counts["passed"]:
                row.append(f"✓ {counts['passed']}" + (f" (+{counts['skipped']} skipped)" if counts["skipped"] else ""))
            else:
                row.append(f"– {counts['skipped']} skipped")
        rows.append(row)
    return ["check", *behaviors], rows


def terminal_lines(run: Run) -> list[str]:
    header, rows = overview(run)
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in [header, *rows]]


def detail_rows(run: Run, behavior: str) -> list[dict[str, str]]:
    """One row per recorded check (or per test where it recorded none) of one behavior."""
    rows = []
    for result in sorted((r for r in run.results if r.behavior == behavior), key=lambda r: check_of(r)):
        checks, series = run.records.get(result.nodeid, ([], []))
        base = {"test": check_of(result), "nodeid": result.nodeid, "plots": ", ".join(s.name for s in series)}
        if not checks:
            observed = result.reason if result.outcome == "skipped" else ""
            rows.append({**base, "check": "(the test's own assertions)", "expected": "", "inputs": "",
                         "observed": observed, "verdict": result.outcome})
            continue
        for check in checks:
            verdict = "skipped" if result.outcome == "skipped" else ("passed" if check.ok else "failed")
            rows.append({**base, "check": check.name, "expected": check.expected, "inputs": check.inputs,
                         "observed": check.observed, "verdict": verdict})
        if result.outcome == "failed" and all(c.ok for c in checks):
            rows.append({**base, "check": "(another assertion of the test)", "expected": "", "inputs": "",
                         "observed": "see the test's failure", "verdict": "failed"})
    return rows


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown(run: Run, plots: Mapping[tuple[str, str], str]) -> str:
    header, rows = overview(run)
    out = ["# Swap conformance matrix", ""]
    if run.gate:
        required, problems = run.gate
        out += [f"**Release gate: {'FAILED' if problems else 'PASSED'}** (required: {', '.join(required)})", ""]
        out += [f"- {p}" for p in problems] + ([""] if problems else [])
    out += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(_md(c) for c in row) + " |" for row in rows]
    for behavior in behaviors_in(run):
        out += ["", f"## {behavior}", ""]
        if behavior in run.nodes:
            out += [f"Node: {run.nodes[behavior]}", ""]
        elif behavior in run.not_covered:
            out += [f"Not covered: {run.not_covered[behavior]}", ""]
        details = detail_rows(run, behavior)
        if not details:
            continue
        out += ["| test | check | expected | oracle inputs | observed | verdict |", "|---|---|---|---|---|---|"]
        for row in details:
            verdict = f"{MARK[row['verdict']]} {row['verdict']}"
            out.append("| " + " | ".join(_md(row[k]) for k in ("test", "check", "expected", "inputs", "observed"))
                       + f" | {verdict} |")
        mine = [(nodeid, name) for nodeid, name in plots if any(r.nodeid == nodeid and r.behavior == behavior
                                                                 for r in run.results)]
        if mine:
            out += ["", "Plots: " + ", ".join(f"[{nodeid.partition('::')[2]} {name}]({plots[(nodeid, name)]})"
                                               for nodeid, name in mine)]
    return "\n".join(out) + "\n"


STYLE = """body{font-family:sans-serif;margin:1.5em;}table{border-collapse:collapse;margin:.5em 0 1.5em;}
td,th{border:1px solid #bbb;padding:.25em .5em;vertical-align:top;font-size:90%;}th{background:#eee;}
.passed{background:#e6f4e6;}.failed{background:#fbe3e3;}.skipped{background:#f3f3f3;color:#555;}
td.inputs{color:#444;max-width:40em;}img{max-width:100%;border:1px solid #ccc;margin:.5em 0;}"""


def _cell_class(text: str) -> str:
    return "failed" if text.startswith("✗") else "passed" if text.startswith("✓") else "skipped" if text.startswith("–") else ""


def html_report(run: Run, plots: Mapping[tuple[str, str], str]) -> str:
    e = html.escape
    header, rows = overview(run)
    out = ["<!doctype html><html><head><meta charset='utf-8'><title>Swap conformance report</title>",
           f"<style>{STYLE}</style></head><body><h1>Swap conformance matrix</h1>"]
    if run.gate:
        required, problems = run.gate
        out.append(f"<p class='{'failed' if problems else 'passed'}'><b>Release gate: {'FAILED' if problems else 'PASSED'}"
                   f"</b> (required: {e(', '.join(required))})</p>")
        if problems:
            out.append("<ul>" + "".join(f"<li>{e(p)}</li>" for p in problems) + "</ul>")
    out.append("<table><tr>" + "".join(f"<th>{e(h)}</th>" for h in header) + "</tr>")
    for row in rows:
        out.append(f"<tr><td>{e(row[0])}</td>" + "".join(f"<td class='{_cell_class(c)}'>{e(c)}</td>" for c in row[1:]) + "</tr>")
    out.append("</table>")
    for behavior in behaviors_in(run):
        out.append(f"<h2 id='{e(behavior)}'>{e(behavior)}</h2>")
        if behavior in run.nodes:
            out.append(f"<p>Node: {e(run.nodes[behavior])}</p>")
        elif behavior in run.not_covered:
            out.append(f"<p>Not covered: {e(run.not_covered[behavior])}</p>")
        details = detail_rows(run, behavior)
        if details:
            out.append("<table><tr><th>test</th><th>check</th><th>expected</th><th>oracle inputs</th><th>observed</th>"
                       "<th>verdict</th><th>plot</th></tr>")
            for row in details:
                links = " ".join(f"<a href='#{_anchor(row['nodeid'], name)}'>{e(name)}</a>"
                                 for name in row["plots"].split(", ") if name and (row["nodeid"], name) in plots)
                out.append(f"<tr class='{row['verdict']}'><td>{e(row['test'])}</td><td>{e(row['check'])}</td>"
                           f"<td>{e(row['expected'])}</td><td class='inputs'>{e(row['inputs'])}</td>"
                           f"<td>{e(row['observed'])}</td><td>{MARK[row['verdict']]} {row['verdict']}</td><td>{links}</td></tr>")
            out.append("</table>")
        for (nodeid, name), path in plots.items():
            if any(r.nodeid == nodeid and r.behavior == behavior for r in run.results):
                out.append(f"<h3 id='{_anchor(nodeid, name)}'>{e(nodeid.partition('::')[2])}: {e(name)}</h3>"
                           f"<a href='{e(path)}'><img src='{e(path)}' alt='{e(name)}'></a>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def _anchor(nodeid: str, name: str) -> str:
    return "plot-" + re.sub(r"[^A-Za-z0-9]+", "-", f"{nodeid.partition('::')[2]}-{name}").strip("-")


def plot_file(nodeid: str, name: str) -> str:
    return f"{PLOTS}/{re.sub(r'[^A-Za-z0-9._-]+', '_', nodeid.partition('::')[2] + '__' + name).strip('_')}.png"


def plot(series: Series, title: str, path: Path) -> None:
    """memory.current and memory.swap.current over time against memory.max and memory.swap.max."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    figure, axes = pyplot.subplots(figsize=(9, 4.8), dpi=100)
    try:
        axes.plot(series.t, [v / MiB for v in series.current], color="tab:blue", label="memory.current")
        swap = [None if v is None else v / MiB for v in series.swap]
        axes.plot(series.t, swap, color="tab:orange", label="memory.swap.current")
        if series.memory_max is not None:
            axes.axhline(series.memory_max / MiB, color="tab:blue", linestyle="--",
                         label=f"memory.max {series.memory_max / MiB:.1f} MiB")
        if series.swap_max is not None:
            axes.axhline(series.swap_max / MiB, color="tab:orange", linestyle="--",
                         label=f"memory.swap.max {series.swap_max / MiB:.1f} MiB")
        else:
            axes.plot([], [], color="tab:orange", linestyle="--", label="memory.swap.max: max (unlimited)")
        if series.ended_at is not None:
            # finishedAt has whole seconds: the container ended within the second after it.
            axes.axvspan(series.ended_at, series.ended_at + 1, color="tab:red", alpha=0.15,
                         label=f"ended: {series.ended} (finishedAt, 1 s resolution)")
        elif series.ended:
            axes.plot([], [], " ", label=f"ended: {series.ended} (no finishedAt reported)")
        else:
            axes.plot([], [], " ", label="still running when sampling stopped")
        if not series.t:
            axes.text(0.5, 0.5, "no samples", transform=axes.transAxes, ha="center")
        axes.set_xlabel("seconds since the first sample")
        axes.set_ylabel("MiB")
        axes.set_ylim(bottom=0)
        axes.set_title(title, fontsize=9)
        axes.grid(alpha=0.3)
        axes.legend(fontsize=8, loc="best")
        figure.tight_layout()
        path.parent.mkdir(parents=True, exist_ok=True)
        figure.savefig(path)
    finally:
        pyplot.close(figure)


def write(results_dir: Path, run: Run) -> Path:
    """Write the matrix (Markdown, HTML) and the plots; returns the HTML report's path. Only
    this module's own files are replaced: a results directory may hold logs of other tools."""
    results_dir.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(results_dir / PLOTS, ignore_errors=True)
    plots: dict[tuple[str, str], str] = {}
    behavior_of = {r.nodeid: r.behavior for r in run.results}
    for nodeid, (_, series_list) in run.records.items():
        for series in series_list:
            relative = plot_file(nodeid, series.name)
            plot(series, f"{nodeid.partition('::')[2]} — {series.name} ({behavior_of.get(nodeid, '?')})",
                 results_dir / relative)
            plots[(nodeid, series.name)] = relative
    (results_dir / MATRIX_MD).write_text(markdown(run, plots))
    (results_dir / REPORT_HTML).write_text(html_report(run, plots))
    return results_dir / REPORT_HTML
