"""Seeing what a node really did: one module for every observation the tests make.

Files inside containers through the API's exec, node metrics and stats through the API
server's node proxy, namespaces and pods through the typed client. Every wait is bounded, says
what it waited for, and reports the last state it saw; terminal states fail at once.
"""

from __future__ import annotations

import collections
import json
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from tenacity import Retrying, retry_if_exception_type, stop_after_delay, wait_exponential

from clusters import waits
from clusters.discovery import RETRIED_STATUSES, api_client, status_message
from clusters.provider import SwapNode

T = TypeVar("T")

# What this process asked of the nodes, by kind: an exec (a runc exec on the node: about 0.6 s
# of CPU on an emulated kind node), a node proxy path (a /stats/summary scrape ~0.07 s there), a
# pod created (its start and deletion ~15 s). Each test's share goes into its report
# (record.CALLS_PROPERTY; bench.junit_times sums them), so a run says what each test cost.
CALLS: collections.Counter[str] = collections.Counter()



class WaitTimeout(AssertionError):
    pass


class PodFailed(AssertionError):
    pass


class _NotYet(Exception):
    pass


def _overloaded(error: Exception) -> bool:
    """The API server's answer of a moment (etcd timed out, too many requests), not the node's."""
    from kubernetes.client.exceptions import ApiException

    return isinstance(error, ApiException) and (error.status == 429 or error.status in RETRIED_STATUSES)


# How an API server that stopped serving reads once a bounded wait has turned it into text: a lost
# connection, or an overloaded answer (wait_for's last state: 5xx or 429) that lasted to the deadline.
_API_SERVER_LOST = ("Connection refused", "Connection reset", "Connection aborted", "EOF occurred in violation",
                    "Max retries exceeded", "RemoteDisconnected", "Read timed out",
                    "the API server answered 50", "the API server answered 429")


def api_server_lost(error: BaseException) -> bool:
    """Whether an error, or one it was raised from, is the API server not serving: at the
    connection level (the client library's connection errors: refused, reset, a TLS handshake
    cut, no answer in time), or a bounded wait that saw only its overloaded answers (5xx, 429) to
    the end, as opposed to an answer (a status, a wrong value) or an error of another channel
    (the vm guest agent's socket). A certificate the client refuses is a wrong kubeconfig, not a
    lost server; a context suppressed (`raise ... from None`) is not followed."""
    import ssl

    from urllib3.exceptions import HTTPError as Urllib3Error

    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        # urllib3 keeps the verification error as a MaxRetryError's reason, or as text only
        if isinstance(current, ssl.SSLCertVerificationError) or "certificate verify failed" in str(current).lower():
            return False
        if isinstance(current, (Urllib3Error, ssl.SSLEOFError)):
            return True
        if isinstance(current, AssertionError) and any(marker in str(current) for marker in _API_SERVER_LOST):
            return True  # a bounded wait's last state
        current = current.__cause__ or (None if current.__suppress_context__ else current.__context__)
    return False


def wait_for(what: str, probe: Callable[[], T | None], seconds: float | waits.Wait,
             describe: Callable[[], str] = lambda: "") -> T:
    """Poll `probe` until it returns a value; give up after `seconds` naming `what` and the last state.
    An overloaded API server's answer (5xx, 429), and a wait inside the probe that gave up, are
    polled through like "not yet", and are the last state if they last to the deadline; every
    other error ends the wait at once. A Wait from
    clusters/waits.py is scaled for the node's speed."""
    seconds = waits.bound(seconds)
    last: list[str | None] = [""]  # None: the probe said not yet, and describe() says how it stands

    def attempt() -> T:
        try:
            value = probe()
        except WaitTimeout as error:
            # a wait inside the probe (an exec retried until served) ran out: another look may
            # still come within this wait's own bound, and its message is how things stand
            last[0] = str(error)
            raise _NotYet() from None
        except Exception as error:
            if not _overloaded(error):
                raise
            last[0] = overloaded_answer(error)
            raise _NotYet() from None
        if value is None:
            last[0] = None
            raise _NotYet()
        return value

    try:
        return Retrying(
            stop=stop_after_delay(seconds),
            wait=wait_exponential(multiplier=0.5, max=5),
            retry=retry_if_exception_type(_NotYet),
            reraise=True,
        )(attempt)
    except _NotYet:
        pass
    # Described once, when the wait gives up, not on every "not yet": a description may read the
    # node itself (an exec), and an error there must not end a wait the probe would go on with.
    if last[0] is None:
        try:
            last[0] = describe()
        except Exception as error:  # noqa: BLE001 - the timeout is the failure; this only explains it
            last[0] = f"(the state could not be read: {type(error).__name__}: {str(error)[:300]})"
    raise WaitTimeout(f"gave up after {seconds:.0f}s waiting for {what}; last seen: {last[0] or 'nothing'}")


def overloaded_answer(error: Any) -> str:
    return f"the API server answered {error.status} {error.reason}: {status_message(error) or str(error.body or '')[:300]}"


def unless_overloaded(look: Callable[[], T], missed: list[str]) -> T | None:
    """One look of a loop bounded by its own deadline: its value, or None where the API server
    answered it overloaded (5xx, 429) even after the client's retries, the answer added to
    `missed` for the loop's account. Such a look costs the loop one look, not the test; every
    other error is raised."""
    try:
        return look()
    except Exception as error:
        if not _overloaded(error):
            raise
        missed.append(overloaded_answer(error))
        return None


def sent(what: str, send: Callable[[], T], seconds: float | waits.Wait = waits.CREATE,
         landed: Callable[[Any], bool] = lambda error: False) -> T | None:
    """Send one write to the API server, resending while an overloaded API server answers 5xx or
    429 (etcd timed out: the write may or may not have been stored), and return its answer.
    After such an answer, an error that ``landed`` says is the earlier attempt's effect (the
    object already there, the field already gone) ends it, with None; every other error, and
    any on the first attempt, is raised as it is. Every write of the suite goes through here
    (tests/test_api_writes.py): each would otherwise fail a run on the first slow etcd."""
    from kubernetes.client.exceptions import ApiException

    overloaded_before = [False]
    answer: list[T | None] = [None]

    def attempt() -> bool:
        try:
            answer[0] = send()
        except ApiException as error:
            if overloaded_before[0] and not _overloaded(error) and landed(error):
                return True
            if not _overloaded(error):
                raise
            overloaded_before[0] = True
            raise
        return True

    wait_for(what, attempt, seconds)
    return answer[0]


def once(what: str, send: Callable[[], Any], seconds: float | waits.Wait = waits.CREATE) -> None:
    """Create an object of the test's own (its name is new to the cluster): sent, where
    AlreadyExists after an overloaded answer is the earlier attempt having landed."""
    sent(what, send, seconds, landed=lambda error: error.status == 409)


def absent(error: Any) -> bool:
    """NotFound: for a delete, what was asked for is so."""
    return error.status == 404


class ExecRefused(RuntimeError):
    """The kubelet answered an exec with a Failure status that is not the command's exit code:
    it did not run it (right after a kubelet restart: "unable to upgrade connection: pod does not
    exist", until the kubelet has synced the pod). Callers that may meet a restarting kubelet
    retry it, bounded, like the API error the same refusal is on other releases."""


ERROR_CHANNEL = 3  # the exec stream's status channel (kubernetes.stream.ws_client)


def exit_status(client: Any) -> int | None:
    """The exec's exit status from the stream's status channel: 0 on Success, the ExitCode
    cause of a NonZeroExitCode, None while the stream is open or when it closed without one.
    Any other Failure (the kubelet refusing to run the command) is ExecRefused, never a
    number: the client library's own `returncode` crashes on it (int() of the message)."""
    if client.is_open():
        return None
    raw = client.read_channel(ERROR_CHANNEL)
    if not raw:
        return None
    try:
        status = json.loads(raw)
    except ValueError:
        status = None
    if not isinstance(status, dict):
        raise ExecRefused(f"the exec's status is not a Status object: {raw[:200]!r}")
    if status.get("status") == "Success":
        return 0
    causes = (status.get("details") or {}).get("causes") or []
    for cause in causes if isinstance(causes, list) else []:
        if isinstance(cause, dict) and cause.get("reason") == "ExitCode":
            try:
                return int(cause.get("message"))
            except (TypeError, ValueError):
                break
    raise ExecRefused(str(status.get("message") or raw[:200]))


def exec_once_served(what: str, run: Callable[[], T], seconds: float | waits.Wait) -> T:
    """`run` (an exec into a pod) until the kubelet runs it, bounded: a kubelet just restarted
    refuses execs into a pod it has not synced yet, as an API error on some releases and as the
    exec stream's status (ExecRefused) on others. The last refusal is in the failure."""
    from kubernetes.client.exceptions import ApiException

    errors: list[str] = []

    def attempt() -> T | None:
        try:
            return run()
        except ApiException as error:
            errors.append(f"{error.status} {str(error.reason)[-120:]}")
        except ExecRefused as error:
            errors.append(str(error)[-120:])
        return None

    return wait_for(what, attempt, seconds, lambda: errors[-1] if errors else "")


@dataclass
class ExecResult:
    stdout: str
    stderr: str


class NodeObserver:
    """Everything the tests read from one node (and the pods on it)."""

    def __init__(self, node: SwapNode):
        from kubernetes import client

        self.node = node
        self.api = api_client(node.kubeconfig)
        self.core = client.CoreV1Api(self.api)

    # --- namespaces and pods --------------------------------------------------------------------

    def create_namespace(self, name: str, labels: dict[str, str]) -> str:
        """A new namespace, returned once pods can be created in it (its ServiceAccount exists)."""
        once(f"namespace {name} created", lambda: self.core.create_namespace({"metadata": {"name": name, "labels": labels}}))
        self.wait_default_service_account(name)
        return name

    def wait_default_service_account(self, namespace: str, seconds: float = 120) -> None:
        """Pods are refused until the controller manager has made the namespace's ServiceAccount."""
        from kubernetes.client.exceptions import ApiException

        def probe() -> bool | None:
            try:
                self.core.read_namespaced_service_account("default", namespace, _request_timeout=30)
                return True
            except ApiException as error:
                if error.status == 404:
                    return None
                raise

        wait_for(f"the default ServiceAccount of namespace {namespace}", probe, seconds)

    def cluster_reachable(self) -> bool:
        """Whether the node's API server answers at all (a refused connection: it is gone)."""
        try:
            self.core.get_api_resources(_request_timeout=(10, 30))
            return True
        except Exception:  # noqa: BLE001 - any failure to connect means there is nothing to clean up
            return False

    def delete_namespace(self, name: str) -> None:
        from kubernetes.client.exceptions import ApiException

        try:
            sent(f"namespace {name} deleted", lambda: self.core.delete_namespace(name, grace_period_seconds=0),
                 landed=absent)
        except ApiException as error:
            if not absent(error):
                raise

    def create(self, manifest: dict[str, Any]) -> None:
        kind = manifest["kind"]
        CALLS[f"create {kind}"] += 1
        namespace = manifest["metadata"]["namespace"]
        if kind == "Pod":
            # Pinned to the node under test unless the manifest names another node on purpose.
            manifest = {**manifest, "spec": {"nodeName": self.node.name, **manifest["spec"]}}
            send = lambda: self.core.create_namespaced_pod(namespace, manifest)  # noqa: E731
        elif kind == "Secret":
            send = lambda: self.core.create_namespaced_secret(namespace, manifest)  # noqa: E731
        elif kind == "ConfigMap":
            send = lambda: self.core.create_namespaced_config_map(namespace, manifest)  # noqa: E731
        else:
            raise ValueError(f"cannot create a {kind}")
        once(f"{kind} {namespace}/{manifest['metadata']['name']} created", send)

    def pod(self, namespace: str, name: str) -> dict[str, Any]:
        response = self.core.read_namespaced_pod(name, namespace, _preload_content=False)
        return json.loads(response.data)

    def events(self, namespace: str, name: str | None = None) -> list[str]:
        selector = f"involvedObject.name={name}" if name else None
        response = self.core.list_namespaced_event(namespace, field_selector=selector, _preload_content=False)
        return [f"{e.get('type')} {e.get('reason')}: {e.get('message')}" for e in json.loads(response.data)["items"]]

    def events_by_object(self, namespace: str) -> dict[str, list[str]]:
        """Every event of the namespace, by the name of the object it is about (one API call)."""
        response = self.core.list_namespaced_event(namespace, _preload_content=False)
        found: dict[str, list[str]] = {}
        for e in json.loads(response.data)["items"]:
            name = (e.get("involvedObject") or {}).get("name", "")
            found.setdefault(name, []).append(f"{e.get('type')} {e.get('reason')}: {e.get('message')}")
        return found

    def node_events(self) -> list[dict[str, Any]]:
        response = self.core.list_event_for_all_namespaces(
            field_selector=f"involvedObject.kind=Node,involvedObject.name={self.node.name}", _preload_content=False
        )
        return json.loads(response.data)["items"]

    def eviction_events(self) -> dict[str, str]:
        """When the kubelet decided each eviction it made (`namespace/pod` -> the earliest
        "Evicted" event's firstTimestamp, whole seconds): evictPod records the event before it
        kills the pod, where the pod's DisruptionTarget condition is stamped when its status is
        written, which can come later for a pod slower to die."""
        response = self.core.list_event_for_all_namespaces(field_selector="reason=Evicted,involvedObject.kind=Pod",
                                                           _preload_content=False)
        decided: dict[str, str] = {}
        for event in json.loads(response.data)["items"]:
            involved, source = event.get("involvedObject") or {}, event.get("source") or {}
            if source.get("component") != "kubelet" or source.get("host") not in (None, self.node.name):
                continue
            key = f"{involved.get('namespace')}/{involved.get('name')}"
            at = event.get("firstTimestamp") or event.get("eventTime") or event["metadata"].get("creationTimestamp") or ""
            if at and (key not in decided or at < decided[key]):
                decided[key] = at
        return decided

    def wait_running(self, namespace: str, name: str, seconds: float | waits.Wait = waits.POD_START) -> dict[str, Any]:
        """Until every container runs; a pod that failed or cannot start fails at once."""
        seen: dict[str, Any] = {}

        def probe() -> dict[str, Any] | None:
            seen.clear()
            seen.update(self.pod(namespace, name))
            status = seen.get("status") or {}
            if status.get("phase") in ("Failed", "Succeeded"):
                raise PodFailed(f"pod {namespace}/{name} ended ({status.get('phase')}) before the test read it: {self._state(seen)}")
            for cs in status.get("containerStatuses") or []:
                waiting = (cs.get("state") or {}).get("waiting") or {}
                if waiting.get("reason") in ("ErrImageNeverPull", "CreateContainerConfigError", "CreateContainerError", "InvalidImageName"):
                    raise PodFailed(f"pod {namespace}/{name} cannot start: {self._state(seen)}; events: {self.events(namespace, name)}")
            statuses = status.get("containerStatuses") or []
            if statuses and all(cs.get("ready") or "running" in (cs.get("state") or {}) for cs in statuses):
                return dict(seen)
            return None

        return wait_for(f"pod {namespace}/{name} to run", probe, seconds, lambda: self._state(seen))

    def add_ephemeral_container(self, namespace: str, pod: str, container: dict[str, Any]) -> None:
        """Add an ephemeral (debug) container to a running pod, as `kubectl debug` does: a JSON
        patch of its pods/ephemeralcontainers subresource (GA since 1.25)."""
        CALLS["create ephemeral container"] += 1
        existing = (self.pod(namespace, pod).get("spec") or {}).get("ephemeralContainers")
        patch = ({"op": "add", "path": "/spec/ephemeralContainers/-", "value": container} if existing else
                 {"op": "add", "path": "/spec/ephemeralContainers", "value": [container]})
        def there(error: Any) -> bool:  # a duplicate name: the earlier attempt added it
            containers = (self.pod(namespace, pod).get("spec") or {}).get("ephemeralContainers") or []
            return any(c.get("name") == container["name"] for c in containers)

        sent(f"ephemeral container {container['name']} added to {namespace}/{pod}",
             lambda: self.core.patch_namespaced_pod_ephemeralcontainers(pod, namespace, [patch], _request_timeout=60),
             landed=there)

    def wait_ephemeral_running(self, namespace: str, pod: str, name: str,
                               seconds: float | waits.Wait = waits.POD_START) -> dict[str, Any]:
        """The pod once its ephemeral container `name` runs (it has a container id); one that ended
        or cannot start fails at once."""
        seen: dict[str, Any] = {}

        def status() -> dict[str, Any]:
            return next((cs for cs in (seen.get("status") or {}).get("ephemeralContainerStatuses") or []
                         if cs.get("name") == name), {})

        def probe() -> dict[str, Any] | None:
            seen.clear()
            seen.update(self.pod(namespace, pod))
            state = status().get("state") or {}
            where = f"ephemeral container {namespace}/{pod}/{name}"
            if "terminated" in state:
                raise PodFailed(f"{where} ended before the test read it: {state['terminated']}")
            if (state.get("waiting") or {}).get("reason") in ("ErrImageNeverPull", "CreateContainerConfigError",
                                                               "CreateContainerError", "InvalidImageName"):
                raise PodFailed(f"{where} cannot start: {state['waiting']}; events: {self.events(namespace, pod)}")
            return dict(seen) if "running" in state and status().get("containerID") else None

        return wait_for(f"ephemeral container {namespace}/{pod}/{name} to run", probe, seconds,
                        lambda: f"{self._state(seen)} {name}={status().get('state') or 'no status yet'}")

    def explain(self, namespace: str, name: str) -> str:
        """What a human needs when an assertion about a pod fails: its YAML and its events."""
        try:
            return explanation(self.pod(namespace, name), self.events(namespace, name))
        except Exception as error:  # the report must not hide the assertion that failed
            return f"(could not read pod {namespace}/{name}: {error})"

    @staticmethod
    def _state(pod: dict[str, Any]) -> str:
        status = pod.get("status") or {}
        containers = [
            f"{cs.get('name')}={next(iter(cs.get('state') or {'?': 0}))}"
            f"{'(' + ((cs.get('state') or {}).get('waiting') or {}).get('reason', '') + ')' if 'waiting' in (cs.get('state') or {}) else ''}"
            for cs in status.get("containerStatuses") or []
        ]
        return f"phase={status.get('phase')} containers=[{', '.join(containers)}]"

    def log(self, namespace: str, pod: str, container: str) -> str:
        response = self.core.read_namespaced_pod_log(pod, namespace, container=container, _preload_content=False)
        return response.data.decode(errors="replace")

    def wait_log_line(self, namespace: str, pod: str, container: str, prefix: str, seconds: float | waits.Wait = waits.POD_START) -> str:
        """Until the container prints a line starting with `prefix`; a container that ended first fails."""
        seen = {"log": "", "state": ""}

        def probe() -> str | None:
            seen["log"] = self.log(namespace, pod, container)
            for line in seen["log"].splitlines():
                if line.startswith(prefix):
                    return line
            current = self.pod(namespace, pod)
            seen["state"] = self._state(current)
            terminated = self.terminated(current, container)
            if terminated:
                raise PodFailed(f"{namespace}/{pod}/{container} ended ({terminated}) before printing {prefix!r}; log tail: {seen['log'][-400:]}")
            return None

        return wait_for(f"{namespace}/{pod}/{container} to print {prefix!r}", probe, seconds,
                        lambda: f"{seen['state']}; log tail: {seen['log'][-300:]!r}")

    @staticmethod
    def terminated(pod: dict[str, Any], container: str) -> dict[str, Any] | None:
        for cs in (pod.get("status") or {}).get("containerStatuses") or []:
            if cs.get("name") == container:
                return (cs.get("state") or {}).get("terminated")
        return None

    def wait_terminated_or_printed(self, namespace: str, pod: str, container: str, line: str,
                                   seconds: float | waits.Wait = waits.POD_START) -> dict[str, Any] | None:
        """The container's terminated state once it ends, or None as soon as its log has `line`
        (while it still runs): what a container that should have been killed prints when it was not."""
        seen: dict[str, Any] = {}

        # The answer is wrapped: wait_for takes None for "not yet", and None is an answer here.
        # The log is read only once the container runs (before, the API server answers 400).
        def probe() -> tuple[dict[str, Any] | None] | None:
            seen.clear()
            seen.update(self.pod(namespace, pod))
            terminated = self.terminated(seen, container)
            if terminated:
                return (terminated,)
            running = any(cs.get("name") == container and "running" in (cs.get("state") or {})
                          for cs in (seen.get("status") or {}).get("containerStatuses") or [])
            return (None,) if running and line in self.log(namespace, pod, container).splitlines() else None

        return wait_for(f"{namespace}/{pod}/{container} to terminate", probe, seconds, lambda: self._state(seen))[0]

    # --- inside containers ----------------------------------------------------------------------

    def exec(self, namespace: str, pod: str, container: str, argv: list[str], allowed: tuple[int, ...] = (0,),
             seconds: float = 120) -> ExecResult:
        from kubernetes.stream import stream

        CALLS["exec"] += 1
        client = stream(
            self.core.connect_get_namespaced_pod_exec,
            pod,
            namespace,
            container=container,
            command=argv,
            stderr=True,
            stdin=False,
            stdout=True,
            tty=False,
            _preload_content=False,
        )
        client.run_forever(timeout=seconds)
        stdout, stderr = client.read_stdout(), client.read_stderr()
        try:
            code = exit_status(client)
        finally:
            client.close()
        where = f"`{' '.join(argv)}` in {namespace}/{pod}/{container}"
        if code is None:  # the stream ended without the exit status: nothing proves it ran
            raise AssertionError(f"{where}: no exit status arrived within {seconds:g} s (stdout {stdout[:200]!r},"
                                 f" stderr {stderr[:200]!r})")
        if code not in allowed:
            raise AssertionError(f"{where} exited {code}: {stderr.strip()}")
        return ExecResult(stdout, stderr)

    def read_file(self, namespace: str, pod: str, container: str, path: str) -> str:
        return self.exec(namespace, pod, container, ["/swapstress", "cat", path]).stdout

    def cgroup_value(self, namespace: str, pod: str, container: str, name: str) -> str:
        """A file of the container's own cgroup (cgroup namespaces put it at /sys/fs/cgroup)."""
        return self.read_file(namespace, pod, container, f"/sys/fs/cgroup/{name}").strip()

    def mounts(self, namespace: str, pod: str, container: str) -> dict[str, "Mount"]:
        text = self.exec(namespace, pod, container, ["/swapstress", "mountinfo"]).stdout
        return {m.target: m for m in (Mount.parse(line) for line in text.splitlines() if line.strip())}

    # --- the node, through the API server -------------------------------------------------------

    def node_proxy(self, path: str) -> str:
        CALLS[path.partition("?")[0]] += 1
        response = self.core.connect_get_node_proxy_with_path(self.node.name, path, _preload_content=False, _request_timeout=60)
        return response.data.decode()

    def configz(self) -> dict[str, Any]:
        """The node's live kubelet configuration (/configz)."""
        body = json.loads(self.node_proxy("configz"))
        return body.get("kubeletconfig", body)

    def pods_on_node(self, node: str | None = None) -> list[dict[str, Any]]:
        response = self.core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node or self.node.name}",
                                                         _preload_content=False)
        return json.loads(response.data)["items"]

    def node_names(self) -> list[str]:
        return [n["metadata"]["name"] for n in json.loads(self.core.list_node(_preload_content=False).data)["items"]]

    def node_status(self) -> dict[str, Any]:
        response = self.core.read_node(self.node.name, _preload_content=False)
        return json.loads(response.data)

    def remove_node_info(self, fields: Sequence[str]) -> None:
        """Remove these fields of the Node's status.nodeInfo (a JSON patch of its status: every
        field must be there)."""
        operations = [{"op": "remove", "path": f"/status/nodeInfo/{field}"} for field in fields]
        # a remove of a field already gone is refused (422): after an overloaded answer, that is
        # the earlier attempt having landed
        sent(f"{', '.join(fields)} removed from {self.node.name}'s nodeInfo",
             lambda: self.core.patch_node_status(self.node.name, operations, _content_type="application/json-patch+json",
                                                 _preload_content=False),
             landed=lambda error: error.status == 422)


def explanation(pod: dict[str, Any], events: list[str]) -> str:
    """A pod's YAML (without managedFields) and its events, as a failure report shows them."""
    import yaml

    metadata = {k: v for k, v in pod.get("metadata", {}).items() if k != "managedFields"}
    return (f"--- pod {metadata.get('namespace')}/{metadata.get('name')}\n"
            f"{yaml.safe_dump({**pod, 'metadata': metadata}, sort_keys=False)}--- events\n" + "\n".join(events))


@dataclass(frozen=True)
class Mount:
    target: str
    fstype: str
    options: frozenset[str]  # per-mount and super-block options together

    @classmethod
    def parse(cls, line: str) -> "Mount":
        # mountinfo: id parent major:minor root target opts [optional...] - fstype source superopts
        left, _, right = line.partition(" - ")
        fields = left.split()
        fstype, _source, super_options = (right.split() + ["", "", ""])[:3]
        return cls(fields[4], fstype, frozenset(fields[5].split(",")) | frozenset(super_options.split(",")))

    def option(self, key: str) -> str | None:
        prefix = key + "="
        return next((o[len(prefix):] for o in self.options if o.startswith(prefix)), None)


def unique_name(prefix: str) -> str:
    """A name no other test of any xdist worker (or any earlier run) will pick: random, not clock-based."""
    return f"{prefix}-{secrets.token_hex(5)}"
