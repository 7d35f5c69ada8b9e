"""Whether the API server has KEP-5359's `resources.limits.swap`: a server-side dry run of a pod
with the field, asked once per cluster, behavior and build in a worker. Only a refusal of the
field itself (probe_refusal), or a pod taken with the field dropped, means no KEP-5359: a skip on
NoSwap/LimitedSwap, "could not test" on WorkloadControlledSwap; any other rejection of the probe
fails with the server's message."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import pytest

from clusters.behaviors import WORKLOAD_CONTROLLED_SWAP
from clusters.provider import SwapNode
from e2e.gate import could_not_test
from e2e.observe import sent
from e2e.verdict import NO_LIMITS_SWAP_API
from e2e.workspace import Workspace
from workloads.pods import Mi, guaranteed_swap_pod

# The suite's limits.swap pods, the probe among them: memory request and limit, and limits.swap.
MEMORY = 64 * Mi
SWAP = 48 * Mi


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
        answer = sent("the limits.swap probe pod (a dry run)",
                      lambda: ws.observer.core.create_namespaced_pod(ws.namespace, manifest, dry_run="All",
                                                                     _request_timeout=30))
    except ApiException as error:
        rejection = probe_refusal(error.status, error.body)
    else:
        # A server that knows the field but has it turned off may take the pod and drop the field
        # (the API's disabled-field rule): the pods the tests make would then have no limits.swap.
        if not swap_limit_kept(answer):
            return "the API server took the probe pod but dropped its resources.limits.swap (the field is off there)"
        return None
    if not rejection.field_refused:
        pytest.fail(f"the API server rejected the limits.swap probe pod, not (only) for the field: {rejection.message}",
                    pytrace=False)
    return rejection.message[:400]


def swap_limit_kept(pod: Any) -> bool:
    """Whether the API server's answer (the pod as it would be stored) still has every container's
    limits.swap."""
    containers = getattr(getattr(pod, "spec", None), "containers", None) or []
    return bool(containers) and all("swap" in (getattr(c.resources, "limits", None) or {}) for c in containers)


def swap_probe(ws: Workspace) -> dict[str, Any]:
    """A pod with limits.swap, to learn whether the API server has the KEP-5359 field at all."""
    return guaranteed_swap_pod("limits-swap-probe", ws.image, ws.namespace, ws.test, MEMORY, SWAP)


# The API server's answer to the probe, per cluster and behavior, in this worker: the same for
# every test there, so the first test asks (in its namespace) and the others that will skip do so
# before making one (a namespace made and deleted for nothing costs seconds, each test).
_ANSWERS: dict[tuple[str, ...], str | None] = {}


def _answer_key(swap_node: SwapNode) -> tuple[str, ...]:
    # The build too: a vm node may run another build (a prototype) for another behavior.
    return swap_node.kubeconfig, swap_node.behavior, swap_node.kubelet_version, swap_node.build_note


def needs_limits_swap_api(ws: Workspace, swap_node: SwapNode, request: pytest.FixtureRequest) -> None:
    """Ask the API server for the field first: skip (or, under WorkloadControlledSwap, could not
    test) only where it refuses the field itself."""
    key = _answer_key(swap_node)
    if key not in _ANSWERS:
        _ANSWERS[key] = refusal(ws, swap_probe(ws))
    _act_on(_ANSWERS[key], swap_node, request)


def skip_where_limits_swap_was_refused(swap_node: SwapNode, request: pytest.FixtureRequest) -> None:
    """Before a namespace is made: act on a refusal this worker already had from the API server
    (needs_limits_swap_api, once a workspace exists, asks where it has none)."""
    refused = _ANSWERS.get(_answer_key(swap_node))
    if refused:
        _act_on(refused, swap_node, request)


def _act_on(refused: str | None, swap_node: SwapNode, request: pytest.FixtureRequest) -> None:
    if refused and swap_node.behavior == WORKLOAD_CONTROLLED_SWAP:
        # The behavior's own check: without the field it could not be tested (a gate failure).
        could_not_test(request.config, f"{NO_LIMITS_SWAP_API}: {refused}", swap_node.behavior)
    if refused:
        # NoSwap/LimitedSwap: nothing for the field to change there; the gate accepts this skip
        # (e2e/verdict.py), raised only when the server refused the field itself.
        pytest.skip(f"{NO_LIMITS_SWAP_API}: {refused}")
