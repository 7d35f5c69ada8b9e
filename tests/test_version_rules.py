"""Every oracle rule that differs by Kubernetes version, asked at each supported pin: what the
suite expects of v1.34.12, v1.35.8, v1.36.5 and v1.37.2, in one table. A rule whose boundary
moves, or a pin added to SUPPORTED without a row here, fails."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from clusters.provider import version_tuple
from clusters.versions import SUPPORTED
from e2e import oracle
from tests import k8s_pins
from workloads.pods import POD_LEVEL

ROOT = Path(__file__).resolve().parents[1]

CONTAINERD = "containerd://2.4.2"


def at_least(version: str, since: str) -> bool:
    return version_tuple(version) >= version_tuple(since)


# rule -> how the suite asks it of a kubelet version
RULES = {
    "resource_metrics_carry_container_swap (containerd)":
        lambda v: oracle.resource_metrics_carry_container_swap(v, CONTAINERD),
    "hugepage_aware_eviction": oracle.hugepage_aware_eviction,
    "RESIZE_SWAP_METRIC_SINCE": lambda v: at_least(v, oracle.RESIZE_SWAP_METRIC_SINCE),
    "RESIZE_SWAP_EVENT_SINCE": lambda v: at_least(v, oracle.RESIZE_SWAP_EVENT_SINCE),
    "POD_LEVEL (pod-level resources shapes)": lambda v: at_least(v, POD_LEVEL),
    "kubelet_start_refusal (featureGates NodeSwap: false)":
        lambda v: oracle.kubelet_start_refusal({"failSwapOn": False, "featureGates": {"NodeSwap": False}}, True, v)
        is not None,
}

# pin -> each rule's answer there, in RULES' order
EXPECTED = {
    "v1.34.12": (False, False, True, False, True, True),
    "v1.35.8": (False, False, True, False, True, True),
    "v1.36.5": (True, False, True, True, True, True),
    "v1.37.2": (True, True, True, True, True, True),
}


def test_every_supported_pin_has_a_row() -> None:
    assert sorted(EXPECTED) == sorted(SUPPORTED.values())


@pytest.mark.parametrize("pin", sorted(EXPECTED))
def test_each_rule_at_each_pin(pin: str) -> None:
    assert tuple(rule(pin) for rule in RULES.values()) == EXPECTED[pin], dict(zip(RULES, EXPECTED[pin]))


def test_cri_o_without_stats_from_cri_takes_cadvisor_s_swap_on_every_release() -> None:
    for pin in SUPPORTED.values():
        assert oracle.resource_metrics_carry_container_swap(pin, "cri-o://1.34.0")
        assert oracle.resource_metrics_carry_container_swap(pin, "cri-o://1.34.0", {"PodAndContainerStatsFromCRI": True}) \
            == oracle.resource_metrics_carry_container_swap(pin, CONTAINERD)


def test_an_unknown_runtime_before_1_36_is_taken_for_the_cri_stats_provider() -> None:
    assert not oracle.resource_metrics_carry_container_swap("v1.35.8", "")
    assert oracle.resource_metrics_carry_container_swap("v1.36.0-alpha.2", "")


def test_the_versions_doc_names_every_rule() -> None:
    text = (ROOT / "docs" / "versions.md").read_text(encoding="utf-8")
    missing = [name.split(" ")[0] for name in RULES if name.split(" ")[0] not in text]
    assert not missing, f"docs/versions.md's 'What differs by version' does not name {missing}"


def doc_rows() -> list[dict[str, str]]:
    """docs/versions.md's "What differs by version" table, a row per rule, by column name."""
    text = (ROOT / "docs" / "versions.md").read_text(encoding="utf-8")
    lines = [line for line in text[text.index("## What differs by version"):].splitlines() if line.startswith("| ")]
    columns = [cell.strip() for cell in lines[0].strip("|").split("|")]  # the |---| line does not start "| "
    assert columns[0].startswith("rule"), lines[0]
    return [dict(zip(columns, (cell.strip() for cell in line.strip("|").split("|")))) for line in lines[1:]]


def _rule(row: dict[str, str]) -> str:
    return next(iter(row.values()))


def test_the_versions_doc_table_says_what_each_rule_answers_at_each_pin() -> None:
    """docs/versions.md's per-minor columns are EXPECTED's answers, read back from the table."""
    from clusters.versions import minor_of

    rows = doc_rows()
    said = {"yes": True, "no": False, "0": False, "figures": True}
    for index, name in enumerate(RULES):
        key = name.split(" ")[0]
        row = next(row for row in rows if key in _rule(row))
        for pin, answers in EXPECTED.items():
            major, minor = minor_of(pin)  # type: ignore[misc]
            shown = row[f"{major}.{minor}"]
            assert said.get(shown) == answers[index], f"docs/versions.md: {key} at {major}.{minor} says {shown!r}"


def test_every_min_kubernetes_marker_above_the_oldest_pin_is_a_row_saying_where_it_skips() -> None:
    """A test that skips on some supported minors is named in docs/versions.md's row of its
    marker, whose columns say "skipped" below the marker's minor and "yes" from it."""
    import re

    from clusters.versions import MIN_KUBERNETES, minor_of

    sources = [path.read_text(encoding="utf-8") for path in sorted((ROOT / "e2e").glob("test_*.py"))]
    marked = [(since, test) for source in sources
              for since, test in re.findall(r'@pytest\.mark\.min_kubernetes\("(\d+\.\d+)"\).*\n(?:@.*\n)*def (\w+)', source)]
    written = sum(source.count('@pytest.mark.min_kubernetes("') for source in sources)
    assert len(marked) == written, "a min_kubernetes marker whose test this check cannot find"
    above = [(since, test) for since, test in marked if minor_of(since) > MIN_KUBERNETES]
    assert above, "no marker above the oldest pin: nothing skips by version, this check has nothing to read"
    rows = doc_rows()
    for since, test in above:
        row = next((row for row in rows if _rule(row).startswith(f'`min_kubernetes("{since}")`')), None)
        assert row is not None, f"docs/versions.md has no row for min_kubernetes(\"{since}\") ({test})"
        assert f"`{test}`" in " ".join(row.values()), \
            f"docs/versions.md's min_kubernetes(\"{since}\") row does not name {test}"
        for minor in SUPPORTED:
            shown = row[minor]
            assert shown == ("yes" if minor_of(minor) >= minor_of(since) else "skipped"), (since, minor, shown)


# `pkg/x/file.go` `Name`, or `file.go` `Name` where the cell also cites that file in full
CITED = re.compile(r"`([\w/.-]+\.go)` `([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)?)`")


def citation_problems(rows: list[dict[str, str]], trees: dict[str, Path]) -> list[str]:
    """Each function the "decided by" column cites in its file, that no pin's source defines
    there (a file cited by its name alone is the one of that name the cell cited in full)."""
    out = []
    for row in rows:
        cell = row["decided by"]
        full = {Path(f).name: f for f in re.findall(r"`([\w-]+/[\w/.-]+\.go)`", cell)}
        for file, name in CITED.findall(cell):
            path = file if "/" in file else full.get(file)
            if path is None:
                out.append(f"{_rule(row)}: `{file}` is cited by its name alone, and nowhere in the cell in full")
            elif not any(k8s_pins.has(tree, path, name) for tree in trees.values()):
                out.append(f"{_rule(row)}: {path}:{name} is defined in none of {', '.join(trees)}")
    return out


def test_every_function_the_versions_table_cites_is_in_the_pins_source() -> None:
    rows = doc_rows()
    assert sum(len(CITED.findall(row["decided by"])) for row in rows) >= 10, "the citations are no longer read"
    found = citation_problems(rows, k8s_pins.sources())
    assert not found, "docs/versions.md against the pins' source:\n" + "\n".join(found)


def test_a_wrong_citation_is_named(tmp_path: Path) -> None:
    tree = tmp_path / "v1.36.5"
    (tree / "pkg/a").mkdir(parents=True)
    (tree / "pkg/a/b.go").write_text("package a\n\nfunc (h *handler) Admit() {}\n\nvar (\n\tCounter = 1\n)\n")
    good = {"rule": "r", "decided by": "`pkg/a/b.go` `handler.Admit`, then `b.go` `Counter`"}
    assert citation_problems([good], {"v1.36.5": tree}) == []
    for cell, expected in [("`pkg/a/b.go` `handler.Gone`", "pkg/a/b.go:handler.Gone is defined in none of v1.36.5"),
                           ("`pkg/a/c.go` `Counter`", "pkg/a/c.go:Counter is defined in none of v1.36.5"),
                           ("`b.go` `Counter`", "`b.go` is cited by its name alone, and nowhere in the cell in full")]:
        assert citation_problems([{"rule": "r", "decided by": cell}], {"v1.36.5": tree}) == [f"r: {expected}"]
