"""What each node of a cluster really runs: live kubelet config (/configz), memory, swap, versions."""

from __future__ import annotations

import json
from typing import Any

from tenacity import RetryError, Retrying, retry_if_exception_type, stop_after_delay, wait_fixed

from clusters.behaviors import UnknownBehaviorError, normalize
from clusters.provider import SwapNode


class DiscoveryError(RuntimeError):
    pass


def api_client(kubeconfig: str) -> Any:
    from kubernetes import config

    try:
        return config.new_client_from_config(config_file=kubeconfig)
    except Exception as error:  # the client raises several types for a bad file
        raise DiscoveryError(f"cannot load kubeconfig {kubeconfig}: {error}") from error


def _get_json(api: Any, path: str) -> Any:
    """GET a node list or a node proxy path and decode the body ourselves: the typed client turns
    proxy bodies into Python reprs, and its call_api signature changed in v37."""
    from kubernetes import client

    core = client.CoreV1Api(api)
    if path == "/api/v1/nodes":
        response = core.list_node(_preload_content=False, _request_timeout=30)
    else:
        node, _, rest = path.removeprefix("/api/v1/nodes/").partition("/proxy/")
        response = core.connect_get_node_proxy_with_path(node, rest, _preload_content=False, _request_timeout=30)
    return json.loads(response.data)


def _retrying(seconds: float) -> Retrying:
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    return Retrying(
        stop=stop_after_delay(seconds),
        wait=wait_fixed(2),
        retry=retry_if_exception_type((ApiException, HTTPError, OSError)),
        reraise=False,
    )


def get_json(api: Any, path: str, what: str, seconds: float = 60) -> Any:
    """GET with bounded retries; on give-up, say what was asked for and the last error."""
    try:
        for attempt in _retrying(seconds):
            with attempt:
                return _get_json(api, path)
    except RetryError as error:
        last = error.last_attempt.exception()
        raise DiscoveryError(f"gave up after {seconds:.0f}s waiting for {what} ({path}): {last}") from last
    raise AssertionError("unreachable")


def kubelet_config(api: Any, node: str, seconds: float = 60) -> dict[str, Any]:
    body = get_json(api, f"/api/v1/nodes/{node}/proxy/configz", f"node {node}'s kubelet /configz", seconds)
    return body.get("kubeletconfig", body)


def _quantity(value: str | None) -> int:
    from kubernetes.utils import parse_quantity

    return int(parse_quantity(value)) if value else 0


def _schedulable(node: dict[str, Any], single: bool) -> bool:
    if (node.get("spec") or {}).get("unschedulable"):
        return False
    taints = (node.get("spec") or {}).get("taints") or []
    blocking = [t for t in taints if t.get("effect") in ("NoSchedule", "NoExecute")]
    # A lone control-plane node (vm provider, single-node kind) is the node under test anyway;
    # its taint is the provider's business.
    return not blocking or single


def _ready(node: dict[str, Any]) -> bool:
    conditions = (node.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def discover(
    kubeconfig: str, provider: str, cluster: str, cgroup_v2: bool | None = None, seconds: float = 60
) -> list[SwapNode]:
    """Every Ready, schedulable node in the cluster, with the behavior its kubelet really runs."""
    api = api_client(kubeconfig)
    nodes = get_json(api, "/api/v1/nodes", f"the node list of {cluster}", seconds)["items"]
    found = []
    for node in nodes:
        if not _ready(node) or not _schedulable(node, single=len(nodes) == 1):
            continue
        name = node["metadata"]["name"]
        config = kubelet_config(api, name, seconds)
        raw_behavior = (config.get("memorySwap") or {}).get("swapBehavior") or ""
        try:
            behavior = normalize(raw_behavior)
        except UnknownBehaviorError:
            behavior = raw_behavior  # a future kubelet value: listed, never matched
        status = node.get("status") or {}
        info = status.get("nodeInfo") or {}
        swap = (info.get("swap") or {}).get("capacity")
        found.append(
            SwapNode(
                behavior=behavior,
                provider=provider,
                cluster=cluster,
                kubeconfig=kubeconfig,
                name=name,
                kubelet_version=info.get("kubeletVersion", ""),
                kernel=info.get("kernelVersion", ""),
                memory_capacity=_quantity((status.get("capacity") or {}).get("memory")),
                memory_allocatable=_quantity((status.get("allocatable") or {}).get("memory")),
                swap_capacity=int(swap) if swap is not None else 0,
                # The kubelet refuses LimitedSwap on cgroup v1, so a running LimitedSwap node is v2.
                cgroup_v2=cgroup_v2 if cgroup_v2 is not None else behavior == "LimitedSwap" or None,
                kubelet_config=config,
            )
        )
    return found


def summary(nodes: list[SwapNode]) -> str:
    return ", ".join(f"{n.name}={n.behavior or '(unset)'}" for n in nodes) or "no Ready schedulable node"
