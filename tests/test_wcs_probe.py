"""The KEP-5359 probe's verdict (e2e/wcs.py probe_refusal): only an API
server that refuses the limits.swap field itself means "no KEP-5359" (a skip); any other
rejection of the probe pod is a failure with the server's message. The Status bodies are shaped
as v1.37.1's API server writes them (apimachinery pkg/api/errors NewInvalid)."""

from __future__ import annotations

import json

import pytest

from e2e.wcs import probe_refusal


def invalid(causes: list[tuple[str, str, str]], name: str = "limits-swap-probe") -> str:
    """A 422 Status: causes are (reason, field, message)."""
    text = ", ".join(f"{field}: {message}" for _, field, message in causes)
    return json.dumps({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": f'Pod "{name}" is invalid: ' + (f"[{text}]" if len(causes) > 1 else text),
        "reason": "Invalid",
        "details": {"name": name, "kind": "Pod",
                    "causes": [{"reason": r, "message": m, "field": f} for r, f, m in causes]},
        "code": 422,
    })


C0 = "spec.containers[0].resources"
TYPE = 'Invalid value: "swap": must be a standard resource type or fully qualified'
CONTAINERS = 'Invalid value: "swap": must be a standard resource for containers'
# What v1.37.1 answers for the probe (limits.swap, defaulted into requests.swap): four causes.
V1_37_1 = invalid([("FieldValueInvalid", f"{C0}.limits[swap]", TYPE), ("FieldValueInvalid", f"{C0}.limits[swap]", CONTAINERS),
                   ("FieldValueInvalid", f"{C0}.requests[swap]", TYPE),
                   ("FieldValueInvalid", f"{C0}.requests[swap]", CONTAINERS)])


def test_v1_37_1_refusing_the_field_is_no_kep_5359() -> None:
    verdict = probe_refusal(422, V1_37_1)
    assert verdict.field_refused
    assert verdict.message.startswith('HTTP 422 Invalid: Pod "limits-swap-probe" is invalid: [spec.containers[0].resources.limits[swap]:'
                                      ' Invalid value: "swap": must be a standard resource type or fully qualified')


@pytest.mark.parametrize("cause", [
    ("FieldValueForbidden", f"{C0}.limits[swap]", "Forbidden: swap limits require the WorkloadControlledSwap feature gate"),
    ("FieldValueNotSupported", f"{C0}.limits[swap]", 'Unsupported value: "swap": supported values: "cpu", "memory"'),
    ("FieldValueInvalid", "spec.initContainers[1].resources.requests[swap]", CONTAINERS),
])
def test_the_field_named_as_forbidden_or_unsupported_is_refused_too(cause: tuple[str, str, str]) -> None:
    assert probe_refusal(422, invalid([cause])).field_refused


@pytest.mark.parametrize(("status", "body", "says"), [
    # the server knows the field and judges the value: KEP-5359 is there, the probe is wrong
    (422, invalid([("FieldValueInvalid", f"{C0}.limits[swap]",
                    'Invalid value: "50331648": must be less than or equal to memory limit')]), "less than or equal"),
    # the KEP-5359 prototype's limits-only rule (a defaulting bug would make requests.swap): the
    # server knows the field; a KEP-5359 API server that rejects the probe is a failure, not a skip
    (422, invalid([("FieldValueInvalid", f"{C0}.requests[swap]", 'Invalid value: "50331648": must be 0: swap is'
                    ' limited, never requested (set resources.limits.swap; KEP-5359)')]), "must be 0"),
    # the field refused, and something else too: the probe pod is broken
    (422, invalid([("FieldValueInvalid", f"{C0}.limits[swap]", TYPE),
                   ("FieldValueRequired", "spec.containers[0].image", "Required value")]), "spec.containers[0].image"),
    # another resource, same message: not the field
    (422, invalid([("FieldValueInvalid", f"{C0}.limits[swapp]", 'Invalid value: "swapp": must be a standard'
                    ' resource for containers')]), "swapp"),
    # an admission plugin, a quota, a webhook: 403 / 400 / 500
    (403, json.dumps({"kind": "Status", "status": "Failure", "reason": "Forbidden", "code": 403,
                      "message": 'pods "limits-swap-probe" is forbidden: exceeded quota: q, requested: limits.memory=64Mi'}),
     "exceeded quota"),
    (400, json.dumps({"kind": "Status", "status": "Failure", "reason": "BadRequest", "code": 400,
                      "message": 'Pod in version "v1" cannot be handled as a Pod: quantities must match the regular'
                                 ' expression'}), "cannot be handled as a Pod"),
    (500, "Internal Server Error", "Internal Server Error"),
    # a 422 without causes says nothing about which field
    (422, json.dumps({"kind": "Status", "reason": "Invalid", "code": 422, "message": 'Pod "p" is invalid'}), "is invalid"),
])
def test_any_other_rejection_is_not_a_missing_api(status: int, body: str, says: str) -> None:
    verdict = probe_refusal(status, body)
    assert not verdict.field_refused
    assert says in verdict.message and str(status) in verdict.message


def test_a_worker_asks_the_api_server_once_and_later_tests_skip_before_a_namespace(monkeypatch: pytest.MonkeyPatch) -> None:
    """The refusal is the API server's, the same for every test of a behavior: the first test asks
    (a dry run in its namespace), the next ones skip on that answer before making a namespace."""
    from types import SimpleNamespace

    from kubernetes.client.exceptions import ApiException

    from clusters.provider import SwapNode
    from e2e import wcs

    monkeypatch.setattr(wcs, "_ANSWERS", {})
    asked: list[str] = []

    def dry_run(namespace: str, manifest: dict, dry_run: str, _request_timeout: int) -> None:
        asked.append(namespace)
        error = ApiException(status=422, reason="Unprocessable Entity")
        error.body = V1_37_1
        raise error

    node = SwapNode("LimitedSwap", "kind", "ksc-mixed", "/k", "n1", "v1.37.1", "6.12", 8 << 30, 8 << 30, 4 << 30, True)
    ws = SimpleNamespace(observer=SimpleNamespace(core=SimpleNamespace(create_namespaced_pod=dry_run)),
                         image="img", namespace="ksc-a", test="t")
    request = SimpleNamespace(config=None)
    wcs.skip_where_limits_swap_was_refused(node, request)  # nothing known yet: no skip, no question
    assert asked == []
    with pytest.raises(pytest.skip.Exception, match="limits.swap"):
        wcs.needs_limits_swap_api(ws, node, request)
    assert asked == ["ksc-a"]
    with pytest.raises(pytest.skip.Exception, match="limits.swap"):
        wcs.skip_where_limits_swap_was_refused(node, request)  # the next test: before its namespace
    with pytest.raises(pytest.skip.Exception):
        wcs.needs_limits_swap_api(ws, node, request)
    assert asked == ["ksc-a"], "asked the API server again"
    other = SwapNode("NoSwap", "kind", "ksc-mixed", "/k", "n2", "v1.37.1", "6.12", 8 << 30, 8 << 30, 4 << 30, True)
    wcs.skip_where_limits_swap_was_refused(other, request)  # another behavior asks for itself
    assert asked == ["ksc-a"]


@pytest.mark.parametrize(("limits", "refused"), [
    ({"memory": "64Mi", "swap": "48Mi"}, False),
    ({"memory": "64Mi"}, True),  # taken, the field dropped: no KEP-5359 to test there
    (None, True),
])
def test_a_probe_taken_without_its_limits_swap_is_no_kep_5359(limits: dict | None, refused: bool,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from types import SimpleNamespace

    from kubernetes.client import V1Container, V1Pod, V1PodSpec, V1ResourceRequirements

    from clusters.provider import SwapNode
    from e2e import wcs

    monkeypatch.setattr(wcs, "_ANSWERS", {})

    def dry_run(namespace: str, manifest: dict, dry_run: str, _request_timeout: int) -> V1Pod:
        return V1Pod(spec=V1PodSpec(containers=[V1Container(name="c", resources=V1ResourceRequirements(limits=limits))]))

    ws = SimpleNamespace(observer=SimpleNamespace(core=SimpleNamespace(create_namespaced_pod=dry_run)),
                         image="img", namespace="ksc-a", test="t")
    node = SwapNode("LimitedSwap", "kind", "ksc-mixed", "/k", "n1", "v1.37.1", "6.12", 8 << 30, 8 << 30, 4 << 30, True)
    if refused:
        with pytest.raises(pytest.skip.Exception, match="dropped its resources.limits.swap"):
            wcs.needs_limits_swap_api(ws, node, SimpleNamespace(config=None))
    else:
        wcs.needs_limits_swap_api(ws, node, SimpleNamespace(config=None))
