"""KEP-5359 `resources.limits.swap`: under WorkloadControlledSwap a container's memory.swap.max
is its own limits.swap, whatever its QoS class; `limits.swap: 0` and no limits.swap both mean
none. On NoSwap and LimitedSwap nodes the field changes nothing: their own rules decide.

The shape tests expect 0 everywhere under WorkloadControlledSwap and so cannot tell it from
NoSwap; these can. They need an API server that accepts limits.swap (not merged upstream yet):
each test asks the API server first, with a server-side dry run of its pod, and skips saying so
only where the server refuses the field itself (probe_refusal); any other rejection of the probe
fails with the server's message. The node fixture has already read the behavior from /configz."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from clusters.behaviors import WORKLOAD_CONTROLLED_SWAP
from clusters.provider import SwapNode
from e2e import oracle
from e2e.conftest import Workspace
from e2e.gate import could_not_test
from e2e.verdict import NO_LIMITS_SWAP_API
from workloads.pods import GUARANTEED, Mi, guaranteed_swap_pod, stress_pod

SWAP = 48 * Mi
MEMORY = 64 * Mi


@dataclass(frozen=True)
class Case:
    id: str
    qos: str
    build: Callable[[Workspace, str], dict[str, Any]]


def _burstable_with_swap(ws: Workspace, name: str) -> dict[str, Any]:
    pod = stress_pod(name, ws.image, ws.namespace, ws.test, ["/swapstress", "pause"],
                     {"memory": MEMORY // 2}, {"memory": MEMORY})
    pod["spec"]["containers"][0]["resources"]["limits"]["swap"] = str(SWAP)
    return pod


def _guaranteed_without_swap(ws: Workspace, name: str) -> dict[str, Any]:
    resources = {"memory": MEMORY, "cpu": GUARANTEED["cpu"]}
    return stress_pod(name, ws.image, ws.namespace, ws.test, ["/swapstress", "pause"], resources, resources)


CASES = [
    Case("guaranteed-with-limits-swap", "Guaranteed", lambda ws, n: guaranteed_swap_pod(n, ws.image, ws.namespace,
                                                                                       ws.test, MEMORY, SWAP)),
    Case("burstable-with-limits-swap", "Burstable", _burstable_with_swap),
    Case("limits-swap-zero", "Guaranteed", lambda ws, n: guaranteed_swap_pod(n, ws.image, ws.namespace, ws.test,
                                                                            MEMORY, 0)),
    Case("no-limits-swap", "Guaranteed", _guaranteed_without_swap),
]


# What v1.37.1's API server says of a resource name it does not know, in a container's limits or
# requests (pkg/apis/core/validation/validation.go): validateResourceRequirements calls
# ValidateContainerResourceName for every key of both maps (the probe's limits.swap is defaulted
# into requests.swap by SetDefaults_Pod, pkg/apis/core/v1/defaults.go); "swap" has no "/", so
# validateResourceName (not helper.IsStandardResourceName) and then ValidateContainerResourceName
# itself (not helper.IsStandardContainerResourceName) each add a field.Invalid. NewInvalid
# (apimachinery pkg/api/errors) turns them into a 422 Status, reason Invalid, one cause each:
# {"reason": "FieldValueInvalid", "field": "spec.containers[0].resources.limits[swap]",
#  "message": "Invalid value: \"swap\": must be a standard resource type or fully qualified"}.
UNKNOWN_RESOURCE_DETAILS = ("must be a standard resource type or fully qualified",
                            "must be a standard resource for containers")
_SWAP_FIELD = re.compile(r"spec\.(?:containers|initContainers)\[\d+\]\.resources\.(?:limits|requests)\[swap\]")


@dataclass(frozen=True)
class ProbeRejection:
    field_refused: bool  # the server refuses limits.swap itself: no KEP-5359 API there
    message: str  # the server's own message


def probe_refusal(status: int, body: str | None) -> ProbeRejection:
    """Why the API server rejected the probe pod (HTTP `status`, Status `body`).

    The field is refused only when the Status is a 422 Invalid whose every cause is about the
    swap resource name of a container's limits or requests, and says the name is unknown (the
    v1.37.1 messages above) or not supported/forbidden (a server that knows the name but has the
    API turned off). A cause about anything else, a value the server judged invalid (it knows the
    field then), any other status, or a body without causes is some other rejection."""
    try:
        parsed = json.loads(body or "")
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict):
        return ProbeRejection(False, f"HTTP {status}: {(body or '').strip()[:400] or 'no body'}")
    message = f"HTTP {status} {parsed.get('reason') or ''}: {str(parsed.get('message') or '').strip()}"
    causes = (parsed.get("details") or {}).get("causes") or []
    if status != 422 or parsed.get("reason") != "Invalid" or not causes:
        return ProbeRejection(False, message)

    def about_the_field(cause: dict[str, Any]) -> bool:
        if not _SWAP_FIELD.fullmatch(str(cause.get("field", ""))):
            return False
        kind, text = cause.get("reason"), str(cause.get("message", ""))
        if kind == "FieldValueInvalid":
            return text in {f'Invalid value: "swap": {detail}' for detail in UNKNOWN_RESOURCE_DETAILS}
        return kind in ("FieldValueNotSupported", "FieldValueForbidden")

    return ProbeRejection(all(about_the_field(c) for c in causes), message)


def refusal(ws: Workspace, manifest: dict[str, Any]) -> str | None:
    """Why the API server refuses the limits.swap field (server-side dry run: nothing is created),
    or None where it accepts the probe. Any other rejection fails the test, with the server's message."""
    from kubernetes.client.exceptions import ApiException

    try:
        ws.observer.core.create_namespaced_pod(ws.namespace, manifest, dry_run="All", _request_timeout=30)
        return None
    except ApiException as error:
        rejection = probe_refusal(error.status, error.body)
    if not rejection.field_refused:
        pytest.fail(f"the API server rejected the limits.swap probe pod, not (only) for the field: {rejection.message}",
                    pytrace=False)
    return rejection.message[:400]


def swap_probe(ws: Workspace) -> dict[str, Any]:
    """A pod with limits.swap, to learn whether the API server has the KEP-5359 field at all."""
    return guaranteed_swap_pod("limits-swap-probe", ws.image, ws.namespace, ws.test, MEMORY, SWAP)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_limits_swap_decides_the_containers_swap(swap_node: SwapNode, workspace: Callable[[SwapNode], Workspace],
                                                 case: Case, request: pytest.FixtureRequest) -> None:
    ws = workspace(swap_node)
    refused = refusal(ws, swap_probe(ws))
    if refused and swap_node.behavior == WORKLOAD_CONTROLLED_SWAP:
        # The behavior's own check: without the field it could not be tested (a gate failure).
        could_not_test(request.config, f"{NO_LIMITS_SWAP_API}: {refused}", swap_node.behavior)
    if refused:
        # NoSwap/LimitedSwap: nothing for the field to change there; the gate accepts this skip
        # (e2e/verdict.py), raised only when the server refused the field itself.
        pytest.skip(f"{NO_LIMITS_SWAP_API}: {refused}")
    manifest = case.build(ws, case.id)
    ws.deploy(manifest)
    pod = ws.running(case.id)
    assert pod["status"]["qosClass"] == case.qos, f"built as {case.qos}, runs as {pod['status']['qosClass']}"
    decision = oracle.decide_swap(swap_node.behavior, pod, "stress", swap_node.memory_capacity, swap_node.swap_capacity)
    got = ws.observer.cgroup_value(ws.namespace, case.id, "stress", "memory.swap.max")
    assert got == oracle.readback_swap_max(decision.value), f"memory.swap.max {got}; expected {decision}\n" + ws.explain(case.id)
