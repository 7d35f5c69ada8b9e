"""What each node of a cluster really runs: live kubelet config (/configz), memory, swap, versions."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from typing import Any, TypeVar

from clusters import waits
from clusters.behaviors import UnknownBehaviorError, normalize
from clusters.provider import SwapNode
from clusters.redact import redact


class DiscoveryError(RuntimeError):
    pass


class DiscoveryGaveUp(DiscoveryError):
    """No usable answer within the bound, only errors get_json retries (all but a certificate or
    credentials refused: a timeout, a refused connection, a 5xx, any other status): a wait around
    discovery may look again."""


def check_kubeconfig(kubeconfig: str, what: str = "kubeconfig") -> None:
    """A readable UTF-8 YAML mapping with clusters, contexts and users, each a list of named
    entries (clusters/inputs.py reads it and its shape), or one DiscoveryError; ``what`` names
    where its path came from (--kubeconfig, KUBECONFIG)."""
    import yaml

    from clusters import inputs

    try:
        text = inputs.read_text(kubeconfig, what)
    except inputs.UsageError as error:
        raise DiscoveryError(str(error)) from None
    try:
        loaded = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise DiscoveryError(f"{what} {kubeconfig} is not valid YAML: {str(error).splitlines()[0]}") from None
    if not isinstance(loaded, dict) or not all(loaded.get(k) for k in ("clusters", "contexts", "users")):
        shape = type(loaded).__name__ if not isinstance(loaded, dict) else f"a mapping of {sorted(loaded)}"
        raise DiscoveryError(f"{kubeconfig} is not a kubeconfig: expected a mapping with clusters, contexts and"
                             f" users, found {shape}" + (f" ({what})" if what != "kubeconfig" else ""))
    try:
        inputs.parse_record(loaded, inputs.Kubeconfig, f"{what} {kubeconfig} is not a kubeconfig")
    except inputs.UsageError as error:
        raise DiscoveryError(str(error)) from None


# Every request of every client: an API server that stops answering (etcd stalled on an
# overloaded host, seen for real) fails the call instead of hanging the run. Calls that know
# better pass their own _request_timeout.
CONNECT_TIMEOUT = 10.0
READ_TIMEOUT = 120.0

# An overloaded control plane answers a read with a 5xx it would not give a moment later
# (seen for real on kind under emulation: `etcdserver: request timed out`, a test's pod read
# failing the test on a correct kubelet). Reads are retried on such answers, with backoff
# (0, 4, 8, 16 s); writes are not (a create answered 500 may have happened). What still
# fails after the last retry reaches the caller as before.
RETRIED_STATUSES = (500, 502, 503, 504)
READ_RETRIES = 4
RETRY_BACKOFF = 2.0


def _read_retry() -> Any:
    from urllib3.util.retry import Retry

    class ReadRetry(Retry):
        """urllib3's own retries (connect and read errors, three by default), plus a GET
        answered with one of RETRIED_STATUSES."""

        def is_retry(self, method: str, status_code: int, has_retry_after: bool = False) -> bool:
            return method.upper() == "GET" and super().is_retry(method, status_code, has_retry_after)

    return ReadRetry(total=READ_RETRIES, status_forcelist=RETRIED_STATUSES, backoff_factor=RETRY_BACKOFF,
                     raise_on_status=False)


def api_client(kubeconfig: str, retries: bool = True) -> Any:
    """An API client for the kubeconfig, with bounded connect and read timeouts on every request
    and a GET retried on an overloaded server's 5xx (RETRIED_STATUSES). ``retries=False`` turns
    off every retry (urllib3's hidden ones too), so a caller's time budget is the real one."""
    from kubernetes import client, config

    check_kubeconfig(kubeconfig)
    configuration = client.Configuration()
    configuration.retries = _read_retry() if retries else False
    try:
        config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
    except Exception as error:  # the client raises several types for a bad file
        raise DiscoveryError(redact(f"cannot load kubeconfig {kubeconfig}: {error}")) from error
    api = client.ApiClient(configuration)
    # The client hands urllib3 an explicit timeout=None when a call names none (no pool default
    # survives that), so the default goes in at its request().
    rest = api.rest_client
    plain_request = rest.request

    def request(method: str, url: str, *args: Any, _request_timeout: Any = None, **kwargs: Any) -> Any:
        return plain_request(method, url, *args, _request_timeout=_request_timeout or (CONNECT_TIMEOUT, READ_TIMEOUT),
                             **kwargs)

    rest.request = request
    return api


def _server(api: Any) -> str:
    """The API server's URL as messages name it: a password in it masked (clusters/redact.py)."""
    return redact(getattr(api.configuration, "host", "?"))


def _get_json(api: Any, path: str, timeout: tuple[float, float]) -> Any:
    """GET a node list or a node proxy path and decode the body ourselves: the typed client turns
    proxy bodies into Python reprs, and its call_api signature changed in v37."""
    from kubernetes import client

    core = client.CoreV1Api(api)
    if path == "/api/v1/nodes":
        response = core.list_node(_preload_content=False, _request_timeout=timeout)
    else:
        node, _, rest = path.removeprefix("/api/v1/nodes/").partition("/proxy/")
        response = core.connect_get_node_proxy_with_path(node, rest, _preload_content=False, _request_timeout=timeout)
    try:
        return json.loads(response.data)
    except ValueError:
        kind = response.headers.get("Content-Type", "no content type") if response.headers else "no content type"
        raise DiscoveryError(
            f"{_server(api)} answered {path} with {kind}, not JSON ({response.data[:60]!r}...): it is not a"
            " Kubernetes API server; check the server address in the kubeconfig") from None


def get_json(api: Any, path: str, what: str, seconds: float = 60) -> Any:
    """GET within ``seconds`` in all: each attempt's connect and read timeouts are cut to the time
    left, failed attempts are retried until then, and the error says how long it really took."""
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    start = time.monotonic()
    deadline = start + seconds
    last: Exception | None = None
    while True:
        left = deadline - time.monotonic()
        if left <= 0.5:
            break
        try:
            return _get_json(api, path, (min(5.0, left), min(30.0, left)))
        except (ApiException, HTTPError, OSError) as error:
            permanent = _permanent(api, error, what)
            if permanent:  # no retry can change a certificate or credentials
                raise DiscoveryError(permanent) from None
            last = error
        time.sleep(min(2.0, max(0.0, deadline - time.monotonic())))
    raise DiscoveryGaveUp(f"gave up after {time.monotonic() - start:.0f}s waiting for {what} ({path} on"
                         f" {_server(api)}): {_brief(last)}")


def _tls_failure(error: BaseException) -> str | None:
    """The TLS verification failure behind an error of the client or urllib3, if that is what
    it is (the client turns urllib3's SSLError into ApiException(status=0, reason="SSLError..."),
    urllib3 may wrap it in MaxRetryError.reason)."""
    seen: BaseException | None = error
    for _ in range(10):  # a chain, not a cycle
        if seen is None:
            return None
        match = re.search(r"certificate verify failed: ([^(\n]+)", f"{seen} {getattr(seen, 'reason', '')}")
        if match:
            return f"certificate verify failed: {match.group(1).strip()}"
        reason = getattr(seen, "reason", None)
        seen = reason if isinstance(reason, BaseException) else seen.__cause__ or seen.__context__
    return None


# How a refusal of the kubeconfig's credentials reads (401, 403): bench/cells.py never_judged
# knows a test that met one by these words.
CREDENTIALS_REFUSED = "refused the kubeconfig's credentials"
USER_NOT_ALLOWED = "does not allow the kubeconfig's user"


def _permanent(api: Any, error: BaseException, what: str) -> str | None:
    """The message for an answer no retry can change (a certificate that does not verify, refused
    credentials); None for what may pass (a timeout, a refused connection, a server error)."""
    from kubernetes.client.exceptions import ApiException

    server = _server(api)
    tls = _tls_failure(error)
    if tls:
        return (f"the TLS certificate of {server} cannot be trusted ({tls}): renew the API server's certificate, or"
                " give the kubeconfig the certificate authority that signed it (certificate-authority-data)")
    if isinstance(error, ApiException) and error.status in (401, 403):
        reason = f"{error.status} {error.reason}"
        if error.status == 401:
            return (f"{server} {CREDENTIALS_REFUSED} ({reason}): its token or client certificate is"
                    " not accepted there (expired, revoked, or another cluster's); get a fresh kubeconfig")
        return (f"{server} {USER_NOT_ALLOWED} to read {what} ({reason}): the suite needs to list"
                f" nodes and read their /configz; use a user bound to a role that may ({status_message(error)})")
    return None


def status_message(error: Any) -> str:
    try:
        return str(json.loads(error.body).get("message", ""))[:200]
    except (TypeError, ValueError, AttributeError):
        return ""


def _brief(error: Exception | None) -> str:
    from kubernetes.client.exceptions import ApiException

    if isinstance(error, ApiException):  # its str() starts "(503)" and says nothing else on that line
        reason = str(error.reason or "").splitlines()
        return f"{error.status or 'no'} HTTP status: {' '.join(reason)[:300] or 'no reason given'}"
    text = str(error) if error is not None else "no attempt finished"
    return text.splitlines()[0][:300] if text else type(error).__name__


def kubelet_config(api: Any, node: str, seconds: float = 60) -> dict[str, Any]:
    body = get_json(api, f"/api/v1/nodes/{node}/proxy/configz", f"node {node}'s kubelet /configz", seconds)
    return body.get("kubeletconfig", body)


def _quantity(value: str | None) -> int:
    from kubernetes.utils import parse_quantity

    return int(parse_quantity(value)) if value else 0


def swap_total_from_summary(summary: dict[str, Any]) -> int | None:
    """The node's SwapTotal as the kubelet's /stats/summary gives it, for kubelets before 1.33
    (no nodeInfo.swap). cAdvisor reports the node's swap limit as SwapTotal and
    swapAvailableBytes = limit - usage (pkg/kubelet/stats cadvisorInfoToSwapStats), so their
    sum is SwapTotal, on a host and on a kind node alike. None when the summary has no swap."""
    swap = (summary.get("node") or {}).get("swap") or {}
    if "swapAvailableBytes" not in swap or "swapUsageBytes" not in swap:
        return None
    return int(swap["swapAvailableBytes"]) + int(swap["swapUsageBytes"])


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


READ_FLOOR = 10.0


def discover(
    kubeconfig: str, provider: str, cluster: str, cgroup_v2: bool | None = None, seconds: float = 60,
    names: frozenset[str] | None = None, listed: list[dict[str, Any]] | None = None,
) -> list[SwapNode]:
    """Every Ready, schedulable node in the cluster (of `names`, where given: the others' kubelets
    are not asked), with the behavior its kubelet really runs; within `seconds` in all, except
    that every read gets at least READ_FLOOR seconds (or `seconds`, if less), however late it
    comes: a late node of a large cluster is asked properly, at the cost of an overrun. `listed`:
    the node list's items where the caller has just read them (not read again)."""
    api = api_client(kubeconfig, retries=False)
    deadline = time.monotonic() + seconds
    floor = min(seconds, READ_FLOOR)

    def left() -> float:
        return max(floor, deadline - time.monotonic())

    nodes = listed if listed is not None else get_json(api, "/api/v1/nodes", f"the node list of {cluster}",
                                                       left())["items"]
    found = []
    for node in nodes:
        if not _ready(node) or not _schedulable(node, single=len(nodes) == 1):
            continue
        name = node["metadata"]["name"]
        if names is not None and name not in names:
            continue
        config = kubelet_config(api, name, left())
        raw_behavior = (config.get("memorySwap") or {}).get("swapBehavior") or ""
        try:
            behavior = normalize(raw_behavior)
        except UnknownBehaviorError:
            behavior = raw_behavior  # a future kubelet value: listed, never matched
        status = node.get("status") or {}
        info = status.get("nodeInfo") or {}
        swap = (info.get("swap") or {}).get("capacity")
        if swap is None:  # kubelets before 1.33 do not publish it
            swap = swap_total_from_summary(get_json(api, f"/api/v1/nodes/{name}/proxy/stats/summary",
                                                    f"node {name}'s /stats/summary", left()))
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
                container_runtime=info.get("containerRuntimeVersion", ""),
            )
        )
    return found


AFTER_RESTART_POLL = 3.0


class NotReadyAfterRestart(RuntimeError):
    pass


T = TypeVar("T")


def look_until(look: Callable[[float], T | None], seconds: float, poll: float) -> tuple[T | None, str]:
    """`look(time_left)` every `poll` seconds until it finds something, within `seconds`: what it
    found (None at the bound), and why the last look found nothing, if it gave up waiting for an
    answer ("" otherwise). A look that gives up (DiscoveryGaveUp: the API server or a kubelet
    not answering) is "not yet", like one that finds nothing (decision 0037); since each look is
    given all the time left, that is mostly the last one, whose reason the give-up then names.
    Any other error, such as refused credentials, ends the wait at once."""
    from tenacity import Retrying, retry_if_result, stop_after_delay, wait_fixed

    deadline = time.monotonic() + seconds
    unanswered: list[str] = []

    def once() -> T | None:
        try:
            found = look(max(1.0, deadline - time.monotonic()))
        except DiscoveryGaveUp as error:
            unanswered[:] = [str(error)]
            return None
        unanswered.clear()
        return found

    found = Retrying(stop=stop_after_delay(seconds), wait=wait_fixed(poll), retry=retry_if_result(lambda f: f is None),
                     retry_error_callback=lambda state: None)(once)
    return found, "".join(unanswered)


def ready_after_restart(kubeconfig: str, provider: str, cluster: str, wanted: Callable[[SwapNode], bool], what: str,
                        seconds: float | waits.Wait = waits.NODE_READY_AFTER_RESTART,
                        name: str | None = None) -> SwapNode:
    """The node `wanted` picks, once it is Ready and schedulable after its kubelet restarted.

    A restarted kubelet's first node status can say NotReady (its runtime and network checks
    not passed yet) after the old kubelet's Ready was seen, even right after /configz shows the
    new config, and its /configz may answer 503 until it listens: taking the first answer would
    fail a correct kubelet. So the node is looked for until it is there, within `seconds` (each
    look within what is left of them); one that never comes back Ready still fails, naming what
    was found or why the last look found nothing. `name`: the node, where it is known, so that
    another node's kubelet, restarting meanwhile for another test, is not asked."""
    bound = waits.bound(seconds)
    seen: list[SwapNode] = []

    def look(left: float) -> SwapNode | None:
        seen[:] = discover(kubeconfig, provider, cluster, cgroup_v2=True, seconds=left,
                           names=None if name is None else frozenset({name}))
        return next((n for n in seen if wanted(n)), None)

    found, unanswered = look_until(look, bound, AFTER_RESTART_POLL)
    if found is None:
        last = f"the last look: {unanswered}" if unanswered else f"found: {summary(seen)}"
        raise NotReadyAfterRestart(f"{what}: not Ready and schedulable {bound:.0f}s after its kubelet restarted ({last})")
    return found


def summary(nodes: list[SwapNode]) -> str:
    return ", ".join(f"{n.name}={n.behavior or '(unset)'}" for n in nodes) or "no Ready schedulable node"
