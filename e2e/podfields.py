"""Typed reads of a pod as the API server returns it (a JSON dict): what the tests ask of its
metadata, spec and status, in one place instead of nested `.get(...) or {}` chains."""

from __future__ import annotations

from typing import Any

from e2e import oracle

Pod = dict[str, Any]


def pod_name(pod: Pod) -> str:
    return pod["metadata"]["name"]


def pod_namespace(pod: Pod) -> str:
    return pod["metadata"]["namespace"]


def annotations(pod: Pod) -> dict[str, str]:
    return pod["metadata"].get("annotations") or {}


def is_mirror(pod: Pod) -> bool:
    """A mirror pod: the API server's copy of a static pod the kubelet runs from a file or URL."""
    return oracle.CONFIG_MIRROR_ANNOTATION in annotations(pod)


def priority(pod: Pod) -> int:
    """spec.priority as the API server resolved it (0 where it has none)."""
    return pod["spec"].get("priority") or 0


def first_container(pod: Pod) -> str:
    return pod["spec"]["containers"][0]["name"]


def status_containers(pod: Pod) -> list[str]:
    """The containers the pod's status lists (status.containerStatuses), in its order."""
    return [s["name"] for s in pod["status"].get("containerStatuses") or []]


def running_container_id(pod: Pod, container: str) -> str | None:
    """The id (without its runtime's `containerd://` prefix) of the container the status names
    as running; None where the status has no id for it or says it is not running."""
    status = next((s for s in pod["status"].get("containerStatuses") or [] if s["name"] == container), {})
    container_id = (status.get("containerID") or "").split("://")[-1]
    if not container_id or "running" not in (status.get("state") or {}):
        return None
    return container_id
