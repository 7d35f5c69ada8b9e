"""The documentation stays true where checking is cheap: the README's claims list is the tests'
claims, every relative link points at a file that exists, the options table lists exactly the
suite's options and the providers each is for, the README stays a user's page, the sample mutant
header is a real mutant's, and every decision record's code list names code that exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from e2e import catalog
from e2e.plugin import options

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = sorted([README, *ROOT.glob("docs/**/*.md"), *ROOT.glob("clusters/**/README.md"),
               *ROOT.glob("workloads/**/README.md")])
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def test_every_test_states_its_claim() -> None:
    claims = catalog.claims()
    assert len(claims) >= 20, [c.test for c in claims]
    for claim in claims:
        assert 20 <= len(claim.text) <= 400, f"{claim.module}::{claim.test}: {claim.text!r}"


def test_the_readme_lists_exactly_the_tests_claims() -> None:
    assert catalog.readme_block() == catalog.block(catalog.claims()), \
        "README.md's claims list differs from the tests' docstrings: run `python -m e2e.catalog --write`"


def test_a_test_without_a_claim_is_refused(tmp_path: Path) -> None:
    (tmp_path / "test_x.py").write_text("def test_a():\n    '''Says a thing.'''\n\ndef test_b():\n    pass\n")
    with pytest.raises(catalog.MissingClaim, match="test_x.py::test_b: no docstring"):
        catalog.claims(tmp_path)
    (tmp_path / "test_x.py").write_text("def test_a():\n    '''no sentence end\n\n    more'''\n")
    with pytest.raises(catalog.MissingClaim, match="does not end a sentence"):
        catalog.claims(tmp_path)


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(doc: Path) -> None:
    broken = []
    for target in LINK.findall(doc.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue  # a URL, or an anchor in the same page
        path = (doc.parent / target.split("#", 1)[0]).resolve()
        if not path.exists():
            broken.append(target)
    assert not broken, f"{doc.relative_to(ROOT)} links to files that do not exist: {broken}"


def _suite_options() -> set[str]:
    parser = pytest.Parser(_ispytest=True)
    options.pytest_addoption(parser)
    group = parser.getgroup("swap")
    return {name for option in group.options for name in option.names() if name.startswith("--")}


def _readme_option_rows() -> list[tuple[list[str], str]]:
    """The README's options table: each row's options and its meaning."""
    text = README.read_text(encoding="utf-8")
    table = text[text.index("## Options"):]
    table = table[:table.index("\n## ", 1)]
    return [(re.findall(r"`(--[a-z0-9-]+)", row.split("|")[1]), row.split("|")[2].strip())
            for row in table.splitlines() if row.startswith("| `--")]


def _readme_options() -> set[str]:
    return {flag for flags, _ in _readme_option_rows() for flag in flags}


def test_the_options_table_lists_exactly_the_suites_options() -> None:
    suite, readme = _suite_options(), _readme_options()
    assert suite - readme == set(), f"options missing from README.md's table: {sorted(suite - readme)}"
    assert readme - suite == set(), f"README.md's table lists options the suite does not have: {sorted(readme - suite)}"


def test_each_option_row_names_the_providers_it_is_for() -> None:
    """An option for some providers only (e2e/plugin/options.py OPTIONS) says so first in its row,
    as "`kind`, `vm`: ..."; an option for every provider names none: given to another provider it
    is a usage error, which the reader should not meet by surprise."""
    rows = {flags[0]: meaning for flags, meaning in _readme_option_rows()}
    every = set(options.PROVIDERS)
    wrong = {}
    for option in options.OPTIONS:
        meaning = rows.get(option.flag, "")
        said = re.match(r"((?:`[a-z]+`(?:, )?)+): ", meaning)
        named = tuple(re.findall(r"`([a-z]+)`", said.group(1))) if said else ()
        wanted = () if set(option.providers or every) == every else tuple(sorted(option.providers))
        if tuple(sorted(named)) != wanted:
            wrong[option.flag] = f"names {list(named)}, is for {list(wanted) or 'every provider'}"
    assert not wrong, f"README.md's options table and e2e/plugin/options.py OPTIONS disagree on providers: {wrong}"


def test_the_readme_is_a_users_page() -> None:
    text = README.read_text(encoding="utf-8")
    lines = text.splitlines()
    assert len(lines) <= 400, f"README.md has {len(lines)} lines; run logs and design go to docs/"
    head = "\n".join(lines[:120])
    for needed in ("pip install", "python -m pytest e2e", "## Reading a failure"):
        assert needed in head, f"README.md's first 120 lines lack {needed!r}"
    runs = re.findall(r"(?:kind|vm) run \d+|runs? \d+-\d+|20\d\d-\d\d-\d\d", text)
    assert not runs, f"README.md carries run logs ({runs[:5]}): they go to docs/measurements/"


def test_the_sample_mutant_header_is_a_real_mutants() -> None:
    """docs/mutants.md shows a mutant's header as the bench reads it: the lines of that patch,
    not a paraphrase that drifts from it."""
    text = (ROOT / "docs" / "mutants.md").read_text(encoding="utf-8")
    sample = text[text.index("```text\n# mutant: ") + len("```text\n"):]
    sample_lines = sample[:sample.index("```")].splitlines()
    name = sample_lines[0].removeprefix("# mutant: ")
    patches = [p for p in (ROOT / "bench" / "mutants").glob("*.patch")
               if p.read_text(encoding="utf-8").startswith(f"# mutant: {name}\n")]
    assert patches, f"docs/mutants.md shows a header of mutant {name!r}, which bench/mutants/ does not have"
    real = patches[0].read_text(encoding="utf-8").splitlines()[:len(sample_lines)]
    assert sample_lines == real, f"docs/mutants.md's sample header is not {patches[0].name}'s first lines"


DECISIONS = sorted((ROOT / "docs" / "design" / "decisions").glob("0*.md"))
CODE_FILE = re.compile(r"`([\w./-]+\.(?:py|ya?ml|patch|sh|go|md|toml))`(?::\s*([^;]*))?")


def _defines(text: str, name: str) -> bool:
    """Whether a file defines ``name`` (its last dotted part: a method, a class attribute) as a
    function, class or assigned name; an option (``--blind``) need only appear."""
    if name.startswith("-"):
        return name in text
    last = re.escape(name.removesuffix("()").split(".")[-1])
    return bool(re.search(rf"(?m)^\s*(?:(?:async\s+)?def|class)\s+{last}\b|^\s*(?:[\w, ]+,\s*)?{last}\b[\w, ]*"
                          r"\s*(?::[^=\n]*)?=(?!=)", text))


def _code_references(record: Path) -> list[tuple[str, list[str]]]:
    """A record's `## Code` list as (file, names): "- `e2e/oom.py`: `start`, `OOM_KILLED`;
    `clusters/waits.py`: `CREATE`"; names in parentheses are asides, not checked."""
    text = record.read_text(encoding="utf-8")
    section = text.split("\n## Code\n", 1)[1].split("\n## ", 1)[0]
    out = []
    for bullet in re.split(r"\n- ", "\n" + section):
        for path, names in CODE_FILE.findall(" ".join(bullet.split())):
            out.append((path, re.findall(r"`(-{0,2}[\w.]+(?:\(\))?)`", re.sub(r"\([^)]*\)", "", names))))
    return out


@pytest.mark.parametrize("record", DECISIONS, ids=lambda p: p.name[:4])
def test_a_decisions_code_list_names_what_the_code_has(record: Path) -> None:
    """A decision's `## Code` list is how a maintainer finds the code it governs: every file it
    names exists and defines every name given for it (code moves; the record must follow)."""
    assert "\n## Code\n" in record.read_text(encoding="utf-8"), f"{record.name} has no `## Code` section"
    references = _code_references(record)
    assert references, f"{record.name}'s `## Code` section names no file"
    wrong = []
    for path, names in references:
        if not (ROOT / path).is_file():
            wrong.append(f"{path}: no such file")
            continue
        text = (ROOT / path).read_text(encoding="utf-8")
        wrong += [f"{path}: no {name}" for name in names if not _defines(text, name)]
    assert not wrong, f"{record.name}'s `## Code` list names what is not there: {wrong}"
