"""A test's claims: what the node must show, compared with what it showed, recorded for the
report (e2e/record.py, `Recorder.check`) and asserted in one step.

`claim(record, name, expected, observed, inputs=...)` records the check (its name, the expected
value, the oracle's rule and inputs it came from, the observed value, whether it held) and fails
the test where it did not hold, with a message that says all of that and `explain` (the pod, its
events, what else the test saw). Its own frame is hidden from pytest's traceback
(`__tracebackhide__`), so a failure points at the test's line.

`Claims` is for a test that makes one claim per container or volume in a loop: every claim is
recorded, and the test fails once, at `hold()`, naming every claim that did not hold."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from e2e.record import Recorder

Explanation = str | Callable[[], str]  # a callable is called only on failure (explaining a pod asks the API server)


def _text(explain: Explanation) -> str:
    return explain() if callable(explain) else explain


def failure(name: str, expected: Any, observed: Any, inputs: str = "", explain: Explanation = "") -> str:
    """What a claim that did not hold says: expected and observed, the oracle's rule and inputs,
    then what explains the pod."""
    lines = [f"{name}: expected {expected}, observed {observed}"]
    if inputs:
        lines.append(f"  from: {inputs}")
    text = _text(explain)
    if text:
        lines.append(text)
    return "\n".join(lines)


def claim(record: Recorder, name: str, expected: Any, observed: Any, inputs: str = "", *, ok: bool | None = None,
          explain: Explanation = "") -> None:
    """Record that `observed` was compared with `expected` (computed from `inputs`: the oracle's
    rule and what it was given) and fail the test unless it held: equality, unless `ok` says
    whether it held (a range, a bound). `explain` (text, or a callable giving it) is added to the
    failure only."""
    __tracebackhide__ = True
    if not record.check(name, expected, observed, inputs, ok):
        raise AssertionError(failure(name, expected, observed, inputs, explain))


class Claims:
    """Several claims of one test, each recorded when it is made; `hold()` fails the test once for
    all that did not hold (so the report has every container's check, not only the first wrong one)."""

    def __init__(self, record: Recorder):
        self.record = record
        self.failures: list[str] = []

    def claim(self, name: str, expected: Any, observed: Any, inputs: str = "", *, ok: bool | None = None,
              explain: Explanation = "") -> bool:
        """Record one claim, as `claim` does; whether it held. `explain` is kept with it, if it did not."""
        held = self.record.check(name, expected, observed, inputs, ok)
        if not held:
            self.failures.append(failure(name, expected, observed, inputs, explain))
        return held

    def problem(self, text: str) -> None:
        """Something else found wrong on the way (not a recorded comparison): it fails `hold()` too."""
        self.failures.append(text)

    def hold(self, explain: Explanation = "") -> None:
        """Fail the test if any claim did not hold or any problem was found: every one, then `explain`."""
        __tracebackhide__ = True
        if self.failures:
            text = _text(explain)
            raise AssertionError("\n".join(self.failures + ([text] if text else [])))
