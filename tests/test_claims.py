"""The claim helper (e2e/claims.py): a claim is recorded exactly as `Recorder.check` records it,
and a claim that does not hold fails with expected, observed, the oracle's rule and inputs and
what explains the pod, from the test's own line (its frame is hidden)."""

from __future__ import annotations

import json

import pytest

from e2e.claims import Claims, claim
from e2e.record import CHECK_PROPERTY, Check, Recorder, records

pytest_plugins = ["pytester"]


def recorded(properties: list) -> list[Check]:
    return records(properties)[0]


def test_a_claim_that_holds_is_recorded_and_returns() -> None:
    properties: list = []
    assert claim(Recorder(properties), "memory.swap.max of stress", "1048576", "1048576", "request 64Mi") is None
    assert recorded(properties) == [Check("memory.swap.max of stress", "1048576", "1048576", "request 64Mi", True)]
    assert properties[0][0] == CHECK_PROPERTY


def test_a_claim_is_recorded_as_record_check_records_it() -> None:
    by_claim: list = []
    by_check: list = []
    cases = [("memory.max", "max", "max", "", None), ("swap in range", ">= 10", 12, "limit 64Mi", True),
             ("allocated", "in [1, 2)", 5, "target 9", False), ("pair", ("a", 1), ("a", 1), "x", None)]
    for name, expected, observed, inputs, ok in cases:
        try:
            claim(Recorder(by_claim), name, expected, observed, inputs, ok=ok)
        except AssertionError:
            pass
        Recorder(by_check).check(name, expected, observed, inputs, ok)
    assert [json.loads(str(v)) for _, v in by_claim] == [json.loads(str(v)) for _, v in by_check]
    assert [c.ok for c in recorded(by_claim)] == [True, True, False, True]


def test_a_claim_that_does_not_hold_says_expected_rule_observed_and_the_context() -> None:
    properties: list = []
    asked: list[str] = []

    def explain() -> str:
        asked.append("pod")
        return "pod over-limit: OOMKilled at 12:00:01"

    with pytest.raises(AssertionError) as failure:
        claim(Recorder(properties), "memory.swap.max", "33554432", "0", "LimitedSwap: request 64Mi of 4Gi, swap 1Gi",
              explain=explain)
    message = str(failure.value)
    assert message.splitlines()[0] == "memory.swap.max: expected 33554432, observed 0"
    assert "LimitedSwap: request 64Mi of 4Gi, swap 1Gi" in message
    assert message.endswith("pod over-limit: OOMKilled at 12:00:01")
    assert recorded(properties) == [Check("memory.swap.max", "33554432", "0", "LimitedSwap: request 64Mi of 4Gi, swap 1Gi",
                                          False)]
    assert asked == ["pod"]


def test_a_claim_asks_for_its_explanation_only_when_it_fails() -> None:
    claim(Recorder([]), "restartCount", ">= 1", 2, "restartPolicy Always", ok=True,
          explain=lambda: pytest.fail("explained a claim that held"))


def test_ok_decides_over_equality() -> None:
    with pytest.raises(AssertionError, match=r"^oom_kill events: expected 0, observed 0\n  from: r\ncontext$"):
        claim(Recorder([]), "oom_kill events", 0, 0, "r", ok=False, explain="context")
    claim(Recorder([]), "memory.swap.current", ">= 5", 7, ok=True)


def test_the_claims_frame_is_hidden_from_the_traceback() -> None:
    with pytest.raises(AssertionError) as failure:
        claim(Recorder([]), "memory.max", "max", "134217728")
    shown = failure.traceback.filter(failure)
    assert shown[-1].name == "test_the_claims_frame_is_hidden_from_the_traceback"
    with pytest.raises(AssertionError) as failure:
        each = Claims(Recorder([]))
        each.claim("memory.max of a", "max", "1")
        each.hold()
    assert failure.traceback.filter(failure)[-1].name == "test_the_claims_frame_is_hidden_from_the_traceback"


def test_pytest_reports_a_failed_claim_at_the_tests_line(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_claimed="""
        from e2e.claims import claim
        from e2e.record import Recorder

        def test_swap():
            context = "the pod and its events"
            claim(Recorder([]), "memory.swap.max", 0, 4096, "NoSwap: none", explain=context)  # the claim's line
        """)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-p", "no:randomly")
    result.assert_outcomes(failed=1)
    output = result.stdout.str()
    assert "# the claim's line" in output
    assert "claims.py" not in output and "__tracebackhide__" not in output, output
    result.stdout.fnmatch_lines(["E *AssertionError: memory.swap.max: expected 0, observed 4096",
                                 "E *from: NoSwap: none", "E *the pod and its events",
                                 "test_claimed.py:6: AssertionError"])


def test_several_claims_are_all_recorded_and_fail_once_naming_each() -> None:
    properties: list = []
    each = Claims(Recorder(properties))
    assert each.claim("memory.swap.max of a", "0", "0", "Guaranteed") is True
    assert each.claim("memory.swap.max of b", "0", "4096", "BestEffort", explain="b's cgroup /x") is False
    assert each.claim("memory.swap.max of c", "8192", "0", "Burstable") is False
    each.problem("configMap volume: tmpfs, expected a disk-backed mount")
    with pytest.raises(AssertionError) as failure:
        each.hold(explain=lambda: "node: n1")
    message = str(failure.value)
    assert [c.ok for c in recorded(properties)] == [True, False, False]
    for text in ("memory.swap.max of b: expected 0, observed 4096", "from: BestEffort", "b's cgroup /x",
                 "memory.swap.max of c: expected 8192, observed 0", "from: Burstable",
                 "configMap volume: tmpfs, expected a disk-backed mount"):
        assert text in message, message
    assert "memory.swap.max of a" not in message and message.endswith("node: n1")


def test_claims_that_all_hold_pass_without_asking_for_the_explanation() -> None:
    each = Claims(Recorder([]))
    each.claim("memory.max of a", "max", "max")
    each.hold(explain=lambda: pytest.fail("explained claims that held"))
