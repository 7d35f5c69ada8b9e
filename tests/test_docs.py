"""The documentation stays true where checking is cheap: the README's claims list is the tests'
claims, every relative link points at a file that exists, the options table lists exactly the
suite's options, and the README stays a user's page."""

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


def _readme_options() -> set[str]:
    text = README.read_text(encoding="utf-8")
    table = text[text.index("## Options"):]
    table = table[:table.index("\n## ", 1)]
    return {m for row in table.splitlines() if row.startswith("| `--")
            for m in re.findall(r"`(--[a-z0-9-]+)", row.split("|")[1])}


def test_the_options_table_lists_exactly_the_suites_options() -> None:
    suite, readme = _suite_options(), _readme_options()
    assert suite - readme == set(), f"options missing from README.md's table: {sorted(suite - readme)}"
    assert readme - suite == set(), f"README.md's table lists options the suite does not have: {sorted(readme - suite)}"


def test_the_readme_is_a_users_page() -> None:
    text = README.read_text(encoding="utf-8")
    lines = text.splitlines()
    assert len(lines) <= 400, f"README.md has {len(lines)} lines; run logs and design go to docs/"
    head = "\n".join(lines[:120])
    for needed in ("pip install", "python -m pytest e2e", "## Reading a failure"):
        assert needed in head, f"README.md's first 120 lines lack {needed!r}"
    runs = re.findall(r"(?:kind|vm) run \d+|runs? \d+-\d+|20\d\d-\d\d-\d\d", text)
    assert not runs, f"README.md carries run logs ({runs[:5]}): they go to docs/measurements/"
