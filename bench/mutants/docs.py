"""The generated block of docs/mutants.md: per release (and provider), the newest run of the
bench on it.

``python -m bench.mutants --docs FILE`` replaces its release's section of the block and those of
older patches of its minor on the same provider (a run on v1.37.2 replaces v1.37.1's) and leaves the
others as they are, then writes the block's summary again from every
section: one row per release (caught/ran, not applicable, false alarms, the run's date and suite
version). The vm provider's section is the release's own (``v1.37.1``); another provider's is
beside it (``v1.37.1-kind``): a mutant not applicable to vm runs there. A section is the bench's
own table of that run, never edited by hand:

    <!-- mutants:begin -->
    ...summary...
    <!-- mutants:v1.37.1:begin -->
    ...that release's run...
    <!-- mutants:v1.37.1:end -->
    <!-- mutants:end -->

``--blind --docs FILE`` keeps a second block the same way, ``<!-- blind:begin -->`` ... ``<!-- blind:end -->``,
a section per release (and provider): the blind table of every group, from their kept results.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

BEGIN = "<!-- mutants:begin -->"
END = "<!-- mutants:end -->"
# what a section's text says, as the bench wrote it (table() and section()); the older form of the
# last line (without "on RELEASE" and the not-applicable count) is read as 0 not applicable
_CAUGHT = re.compile(r"^caught (\d+)/(\d+) mutants(?: on \S+)?(?:, (\d+) not applicable)?, (\d+) false alarms"
                     r"( \(no baseline run\))?$", re.M)
_DATE = re.compile(r"^Mutant bench(?: on \S+)? \((\d{4}-\d\d-\d\d)\)$", re.M)
_PARTIAL = re.compile(r"^A partial run: (\d+) of the bench's (\d+) mutants\.", re.M)
_SUITE = re.compile(r"Suite version `(\w+)`")
SUITE_NOTE = "(a hash of the code in e2e/, workloads/, conftest.py, comments and docstrings aside)"


BLIND = "blind"  # the name of the --blind table's block


def _markers(name: str) -> tuple[str, str, re.Pattern[str]]:
    section = re.compile(rf"<!-- {name}:(v1\.\d+\.\d+(?:-kind)?):begin -->\n(.*?)<!-- {name}:\1:end -->\n", re.S)
    return f"<!-- {name}:begin -->", f"<!-- {name}:end -->", section


def block(path: Path, name: str = "mutants") -> tuple[int, int]:
    """Where the generated block ``name`` of a docs page starts and ends; ValueError when it has none."""
    begin, end_marker, _ = _markers(name)
    text = path.read_text(encoding="utf-8")
    start, end = text.find(begin), text.find(end_marker)
    if start < 0 or end < start:
        raise ValueError(f"{path} has no generated block ({begin} ... {end_marker})")
    return start, end


def sections(path: Path, name: str = "mutants") -> dict[str, str]:
    """The block's sections, by release."""
    start, end = block(path, name)
    return {m.group(1): m.group(2) for m in _markers(name)[2].finditer(path.read_text(encoding="utf-8")[start:end])}


def section(release: str, table_text: str, suite: str, ran: int | None = None, total: int | None = None) -> str:
    """One run's section: the suite version it ran and, where it took only some of the bench's
    mutants, how many; then the bench's table."""
    part = f"A partial run: {ran} of the bench's {total} mutants. " if ran is not None and total and ran < total else ""
    return f"### {title(release)}\n\n{part}Suite version `{suite}` {SUITE_NOTE}.\n\n{table_text.rstrip()}\n"


def key(release: str, provider: str = "vm") -> str:
    """The section of a run on ``release`` and ``provider``."""
    return release if provider == "vm" else f"{release}-{provider}"


def title(section_key: str) -> str:
    release, _, provider = section_key.partition("-")
    return f"{release} on {provider}" if provider else release


def _version(section_key: str) -> tuple[tuple[int, ...], str]:
    release, _, provider = section_key.partition("-")
    return tuple(int(n) for n in release[1:].split(".")), provider


def _minor(section_key: str) -> tuple[tuple[int, ...], str]:
    (major, minor, _), provider = _version(section_key)
    return (major, minor), provider


def summary_row(release: str, body: str, current: str | None = None) -> str:
    """A release's row of the summary, read from its section; one of a suite other than
    ``current`` (the run writing the page) says the suite changed since."""
    caught, date, partial, suite = _CAUGHT.search(body), _DATE.search(body), _PARTIAL.search(body), _SUITE.search(body)
    if caught:
        score, na = f"{caught.group(1)}/{caught.group(2)}", caught.group(3) or "0"
        alarms = "no baseline run" if caught.group(5) else caught.group(4)
    else:
        score = na = alarms = "?"
    run = (date.group(1) if date else "?") + (f"; partial: {partial.group(1)} of {partial.group(2)} mutants"
                                              if partial else "")
    ran_on = suite.group(1) if suite else "?"
    since = " (changed since)" if current is not None and ran_on != current else ""
    return f"| {title(release)} | {score} | {na} | {alarms} | {run} | `{ran_on}`{since} |"


def render(by_release: dict[str, str], current: str | None = None) -> str:
    """The whole block but its end marker: the summary, then every release's section, oldest first."""
    releases = sorted(by_release, key=_version)
    rows = [summary_row(r, by_release[r], current) for r in releases]
    parts = [f"{BEGIN}\n",
             "Per release, its newest run (`--docs` replaces that release's row and section, and those of"
             " older patches of its minor, and keeps the others). Caught counts the mutants that ran there; not applicable ones are in their own"
             " column.\n\n",
             "| release | caught | not applicable | false alarms | run | suite version |\n",
             "|---|---|---|---|---|---|\n",
             *[row + "\n" for row in rows]]
    return "".join(parts) + _sections_text("mutants", by_release)


def _sections_text(name: str, by_release: dict[str, str]) -> str:
    """Every release's section of block ``name``, oldest first, between its markers."""
    return "".join(f"\n<!-- {name}:{r}:begin -->\n{by_release[r]}<!-- {name}:{r}:end -->\n"
                   for r in sorted(by_release, key=_version))


def _replace_section(path: Path, name: str, section_key: str, text: str,
                     rendered: Callable[[dict[str, str]], str]) -> None:
    """Put ``text`` as the section ``section_key`` of block ``name``, keep the others, and write
    the block again as ``rendered`` makes it from them (all but its end marker)."""
    start, end = block(path, name)
    page = path.read_text(encoding="utf-8")
    # A run replaces the sections of older patches of its minor on its provider (the pin moved on):
    # their tables would contradict this one's. A newer patch's section stays beside it.
    by_release = {r: body for r, body in sections(path, name).items()
                  if _minor(r) != _minor(section_key) or _version(r) > _version(section_key)}
    by_release[section_key] = text
    path.write_text(page[:start] + rendered(by_release) + page[end:], encoding="utf-8")


def write(path: Path, release: str, table_text: str, suite: str, ran: int | None = None,
          total: int | None = None, provider: str = "vm") -> None:
    """Replace the section of ``release`` on ``provider`` in the page's block with this run's, keep
    the others, and write the summary again."""
    _replace_section(path, "mutants", key(release, provider),
                     section(key(release, provider), table_text, suite, ran, total),
                     lambda by_release: render(by_release, suite))


def write_blind(path: Path, release: str, table_text: str, suite: str, provider: str = "vm") -> None:
    """Replace the blind section of ``release`` on ``provider``, keep the others: the table says
    its own count, so the block has no summary of its own."""
    _replace_section(path, BLIND, key(release, provider), section(key(release, provider), table_text, suite),
                     lambda by_release: f"<!-- {BLIND}:begin -->\n" + _sections_text(BLIND, by_release))
