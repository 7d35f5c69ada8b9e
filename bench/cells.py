"""The version matrix's kept cell (bench/matrix.py): what one minor × provider × behavior showed,
as JSON; read by the mutant bench too, whose baseline a gate-passed cell can be. And a run's
JUnit report read as the gate reads it (``read_junit``), for the matrix's cells and the bench's
blind runs."""
from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from pydantic import ConfigDict

from clusters import discovery, inputs

PASSED, FAILED, COULD_NOT_RUN = "passed", "FAILED", "could not run"
GATE_MARK = "[gate] "  # e2e/gate.py could_not_test: in gate mode "could not test" is a failure with this mark
T = TypeVar("T")


@dataclass
class Cell:
    """What one minor × provider × behavior cell showed (kept as JSON)."""

    minor: str
    provider: str
    behavior: str
    version: str  # asked for (the pin, or the published image's)
    gate: str = COULD_NOT_RUN  # passed / FAILED / could not run
    passed: int = 0
    failed: int = 0
    skipped: int = 0  # skips the gate accepts (each with its reason in `skips`)
    could_not_test: int = 0  # skips it does not accept, and gate-mode "could not test" failures
    problems: list[str] = field(default_factory=list)  # the gate's, or why the cell could not run
    build: str = ""  # the kubelet version the node reported (a build id for a patched build)
    artifact: str = ""  # what the build made: the vm disk, the kind node image
    seconds: float = 0.0  # wall time of the suite's run (shared by the behaviors it covered)
    build_seconds: float = 0.0
    behaviors_in_run: list[str] = field(default_factory=list)
    date: str = ""
    suite: str = ""
    exit_code: int | None = None
    results_dir: str = ""
    pytest_args: list[str] = field(default_factory=list)  # given after --: a narrowed run is not the full suite
    # each reason a skip the gate accepted gave, with the tests it skipped (their names in the
    # module, parameters included): what the node did not offer, named per minor
    skips: dict[str, list[str]] = field(default_factory=dict)

    # read back with its types checked (clusters/inputs.py); fields a later version of the bench
    # keeps are let by
    __pydantic_config__ = ConfigDict(strict=True, extra="ignore")

    def to_json(self) -> str:
        """The cell as kept. Paths under the home directory read ``~/...``: a cell committed to the
        checkout (``--kept``) names where its logs are without naming the machine's user."""
        fields = dataclasses.asdict(self)
        for name in ("artifact", "results_dir"):
            fields[name] = _homeless(fields[name])
        fields["problems"] = [_homeless(p) for p in fields["problems"]]
        return json.dumps(fields, indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str, source: str = "kept cell") -> "Cell":
        return inputs.load_json(text, cls, source)


def _homeless(text: str) -> str:
    try:
        home = str(Path.home()).rstrip("/")
    except RuntimeError:  # no HOME and no passwd entry: nothing to hide
        return text
    return re.sub(rf"(?<![\w/.~-]){re.escape(home)}(?![\w.-])", "~", text) if home else text


def read_json(path: Path, cls: type[T], what: str, say: Callable[[str], None] | None = None,
              then: str = "") -> T | None:
    """A result kept as JSON (a matrix cell, a bench outcome), read back with its types checked;
    None where there is none, or where the file is not one: ``say`` is told, with what happens
    ``then``, and the caller does not trust it."""
    if not path.exists():
        return None
    try:
        return cls.from_json(inputs.read_text(path, what), f"{what} {path}")  # type: ignore[attr-defined]
    except inputs.UsageError as error:
        if say is not None:
            say(f"{error}: {then}" if then else str(error))
        return None


def read_kept(path: Path, say: Callable[[str], None] | None = None, then: str = "left out") -> Cell | None:
    """A kept cell (the matrix runs an unreadable one again and leaves it out of the table; the
    bench does not take it as a baseline)."""
    return read_json(path, Cell, "kept cell", say, then)


def nodeid_of(classname: str, name: str) -> str:
    """pytest's node id back from JUnit's classname ("e2e.test_x" or "e2e.test_x.TestY") and name."""
    parts = classname.split(".")
    module = next((i for i, p in enumerate(parts) if p.startswith("test_")), len(parts) - 1)
    return "/".join(parts[:module + 1]) + ".py" + "".join(f"::{p}" for p in parts[module + 1:]) + f"::{name}"


# The words for an API server that refused the suite's own credentials (401, 403): the kubernetes
# client's exception, a bounded wait's last answer (e2e/observe.py), discovery's message
# (clusters/discovery.py). An authenticator or authorizer answering, which no kubelet decides.
# Seen while a control plane came back after its containers were re-created (decision 0042),
# when RBAC had not yet caught up with the admin's binding.
_REFUSED = re.compile(r"\b(?:Unauthorized|Forbidden|Api)Exception: \((?:401|403)\)|the API server answered 40[13] "
                      rf"|{re.escape(discovery.CREDENTIALS_REFUSED)} \(401 |{re.escape(discovery.USER_NOT_ALLOWED)}"
                      r" to read .* \(403 ")


def never_judged(case: inputs.JUnitCase) -> bool:
    """Whether a test that failed never reached the node's verdict: it failed as gate mode's
    "could not test" (e2e/gate.py), its setup or teardown lost the API server, or, in any phase,
    the API server refused the suite's credentials. A test that lost the API server in its own
    body stays a failure: what it was doing to the node (memory pressure) may be the cause."""
    # The suite's own words for an API server that stopped serving; imported, not renamed public:
    # e2e/'s code is the suite's version (bench/mutants suite_hash), and a rename would re-key every kept result.
    from e2e.observe import _API_SERVER_LOST as LOST

    bad = case.failure or case.error
    if bad is None:
        return False
    text = bad.text.lstrip() + " " + bad.message
    lost = case.error is not None and any(marker in text for marker in LOST)
    return GATE_MARK in text or lost or _REFUSED.search(text) is not None


def read_junit(junit: Path) -> list[tuple[object, bool]]:
    """Every test of a run as (e2e.verdict.Result, marked): its behavior from the property its node
    fixture records, its outcome, its skip reason; ``marked`` when it could not test
    (``never_judged``). Tests without a behavior (none in e2e/) are left out."""
    from e2e import verdict

    found = []
    for case in inputs.read_junit(junit, "the run's JUnit report").cases:
        behavior = next(iter(case.values(verdict.BEHAVIOR_PROPERTY)), "")
        if not behavior:
            continue
        nodeid = nodeid_of(case.classname, case.name)
        if case.failure is not None or case.error is not None:
            found.append((verdict.Result(nodeid, behavior, "failed"), never_judged(case)))
        elif case.skipped is not None:
            found.append((verdict.Result(nodeid, behavior, "skipped", case.skipped.message), False))
        else:
            found.append((verdict.Result(nodeid, behavior, "passed"), False))
    return found
