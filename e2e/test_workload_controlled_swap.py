"""KEP-5359 `resources.limits.swap`: under WorkloadControlledSwap a container's memory.swap.max
is its own limits.swap, whatever its QoS class; `limits.swap: 0` and no limits.swap both mean
none. On NoSwap and LimitedSwap nodes the field changes nothing: their own rules decide, and a
Pod event says the field has no effect there. Under stress, a Guaranteed pod with limits.swap
swaps past its memory limit up to its swap limit and is OOM-killed only there (the one without
it: test_stress_outcomes.test_guaranteed_pod_never_swaps, also run under WorkloadControlledSwap).

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
from e2e.claims import claim
from e2e.workspace import Workspace
from e2e.gate import could_not_test
from e2e.observe import wait_for
from e2e.test_stress_outcomes import (OOM_KILLED, OVERHEAD_BOUND, START_FILE, STEP, allocated_before_kill,
                                      ended_before_holding, killed_by_the_oom_killer, start_once_sampled)
from e2e.verdict import NO_LIMITS_SWAP_API
from workloads.pods import GUARANTEED, STRESS, Mi, alloc_command, guaranteed_swap_pod, stress_pod

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


def _best_effort_with_swap(ws: Workspace, name: str) -> dict[str, Any]:
    """Only limits.swap: no cpu or memory anywhere, so BestEffort (QoS reads cpu and memory only)."""
    return stress_pod(name, ws.image, ws.namespace, ws.test, [STRESS, "pause"], None, {"swap": SWAP})


def _guaranteed_without_swap(ws: Workspace, name: str) -> dict[str, Any]:
    resources = {"memory": MEMORY, "cpu": GUARANTEED["cpu"]}
    return stress_pod(name, ws.image, ws.namespace, ws.test, ["/swapstress", "pause"], resources, resources)


CASES = [
    Case("guaranteed-with-limits-swap", "Guaranteed", lambda ws, n: guaranteed_swap_pod(n, ws.image, ws.namespace,
                                                                                       ws.test, MEMORY, SWAP)),
    Case("burstable-with-limits-swap", "Burstable", _burstable_with_swap),
    Case("best-effort-with-limits-swap", "BestEffort", _best_effort_with_swap),
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


# The API server's answer to the probe, per cluster and behavior, in this worker: the same for
# every test there, so the first test asks (in its namespace) and the others that will skip do so
# before making one (kind run 21: ten such tests, a namespace each, 2-47 s apiece).
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


# The kubelet sends the event when it creates the container, before the pod runs; the API
# server may take a moment to list it (the recorder batches).
EVENT_WAIT_SECONDS = 60


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_limits_swap_decides_the_containers_swap(swap_node: SwapNode, workspace: Callable[[SwapNode], Workspace],
                                                 case: Case, request: pytest.FixtureRequest) -> None:
    skip_where_limits_swap_was_refused(swap_node, request)
    ws = workspace(swap_node)
    needs_limits_swap_api(ws, swap_node, request)
    manifest = case.build(ws, case.id)
    ws.deploy(manifest)
    pod = ws.running(case.id)
    assert pod["status"]["qosClass"] == case.qos, f"built as {case.qos}, runs as {pod['status']['qosClass']}"
    decision = oracle.decide_swap(swap_node.behavior, pod, "stress", swap_node.memory_capacity, swap_node.swap_capacity)
    got = ws.observer.cgroup_value(ws.namespace, case.id, "stress", "memory.swap.max")
    inputs = f"{case.id} on {swap_node.behavior}: {decision}"
    claim(ws.record, "memory.swap.max", oracle.readback_swap_max(decision.value), got, inputs,
          explain=lambda: ws.explain(case.id))
    # KEP-5359: on NoSwap and LimitedSwap a pod that sets limits.swap (0 included: it changes
    # nothing there either) runs, and a Pod event says the field has no effect; never elsewhere.
    has_field = oracle.SWAP_RESOURCE in (oracle.find_container(manifest, "stress").get("resources") or {}).get("limits", {})
    wants_event = has_field and swap_node.behavior != WORKLOAD_CONTROLLED_SWAP

    def ignored_events() -> list[str]:
        return [e for e in ws.observer.events(ws.namespace, case.id) if oracle.swap_limit_ignored_event(e, "stress")]

    if wants_event:
        events = wait_for(f"the Pod event that limits.swap has no effect on {swap_node.behavior}",
                          lambda: ignored_events() or None, EVENT_WAIT_SECONDS,
                          lambda: f"events: {ws.observer.events(ws.namespace, case.id)}")
    else:
        events = ignored_events()
    claim(ws.record, "Pod event: limits.swap has no effect here", wants_event, bool(events), inputs,
          explain=lambda: f"events: {ws.observer.events(ws.namespace, case.id)}\n" + ws.explain(case.id))


@pytest.mark.needs_behavior("WorkloadControlledSwap")
def test_guaranteed_pod_swaps_up_to_its_swap_limit_then_is_oom_killed(
        swap_node: SwapNode, workspace: Callable[[SwapNode], Workspace], request: pytest.FixtureRequest) -> None:
    """KEP-5359 use case 3: a Guaranteed pod with limits.swap allocates past its memory limit
    into swap, up to limits.swap, and is OOM-killed only where memory.max + memory.swap.max run
    out (the same pod without the field is killed at its limit: test_guaranteed_pod_never_swaps)."""
    skip_where_limits_swap_was_refused(swap_node, request)
    ws = workspace(swap_node)
    needs_limits_swap_api(ws, swap_node, request)
    target = MEMORY + SWAP + 32 * Mi
    # A slow interval leaves several samples of each step, the last one included; the
    # allocation starts only once the node agent samples the container, or a pod killed within
    # seconds might never be seen swapping (the OOM tests of test_stress_outcomes do the same).
    command = alloc_command(target, step=STEP, interval="250ms", start_when=START_FILE)
    ws.deploy_sampled(guaranteed_swap_pod("swapping-guaranteed", ws.image, ws.namespace, ws.test, MEMORY, SWAP, command))
    start_once_sampled(ws, "swapping-guaranteed")
    terminated = ended_before_holding(ws, "swapping-guaranteed", target,
                                      f"Guaranteed, memory {MEMORY}, limits.swap {SWAP}, target {target}")
    series = ws.samples("swapping-guaranteed")
    pod = ws.observer.pod(ws.namespace, "swapping-guaranteed")
    allocated = allocated_before_kill(ws.observer.log(ws.namespace, "swapping-guaranteed", "stress"))
    swap_max = oracle.readback_bytes(SWAP)  # memory.swap.max as it reads back
    capacity = MEMORY + swap_max
    swapped = max((s for s in series.swap if s is not None), default=0)
    context = (f"memory {MEMORY}, limits.swap {SWAP}, target {target}, last allocated {allocated}, most swap {swapped},"
               f" {len(series.swap)} samples: {terminated}\n" + ws.explain("swapping-guaranteed"))
    inputs = f"Guaranteed, memory {MEMORY}, limits.swap {SWAP}, target {target}"
    assert pod["status"]["qosClass"] == "Guaranteed", context
    claim(ws.record, "memory.swap.max", swap_max, series.swap_max_as_read, inputs, explain=context)
    killed, how = killed_by_the_oom_killer(terminated, series)
    claim(ws.record, "killed by the OOM killer", OOM_KILLED, how, inputs, ok=killed, explain=context)
    low = capacity - STEP - OVERHEAD_BOUND
    claim(ws.record, "allocated when killed", f"in [{low}, {capacity}) (memory.max + memory.swap.max, less a step"
          " and overhead)", allocated, inputs, ok=low <= allocated < capacity, explain=context)
    # It swapped up to its limit: after its last step it held more than its memory limit, and
    # every page above memory.max was in swap, never more than memory.swap.max.
    floor = swap_max - STEP - OVERHEAD_BOUND
    claim(ws.record, "memory.swap.current, most in any sample", f"in [{floor}, {swap_max}]", swapped,
          f"{inputs}, {len(series.swap)} samples", ok=floor <= swapped <= swap_max, explain=context)
