"""One test's namespace on one node, the workload image there, and the node's observer: what a
conformance test works in (`workspace(node)`, the fixture in e2e/conftest.py, makes one)."""

from __future__ import annotations

import warnings
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clusters import waits
from clusters.provider import SwapNode
from e2e.agent import node_agent
from e2e.alone import burst
from e2e.apitime import api_time
from e2e.nodefiles import NodeFiles
from e2e.observe import NodeObserver, wait_for
from e2e.record import Recorder, Series
from e2e.sampler import CgroupSampler, parse_series

_observers: dict[tuple[str, str], NodeObserver] = {}


def observer_of(node: SwapNode) -> NodeObserver:
    key = (node.kubeconfig, node.name)
    if key not in _observers:
        _observers[key] = NodeObserver(node)
    # The node's behavior may have been switched since (vm): keep the observer's view current.
    _observers[key].node = node
    return _observers[key]




@dataclass
class Workspace:
    """One test's namespace on one node, the workload image there, and the node's observer."""

    node: SwapNode
    observer: NodeObserver
    namespace: str
    image: str
    test: str
    record: Recorder = field(default_factory=lambda: Recorder([]))
    deployed: list[str] = field(default_factory=list)
    sampled: list[tuple[str, str]] = field(default_factory=list)  # (pod, container) being sampled
    _sampler: CgroupSampler | None = None
    _container_ids: dict[tuple[str, str], str] = field(default_factory=dict)
    run_dir: Path | None = None  # the run's directory, whose locks it shares (None: outside a run)

    def burst(self) -> AbstractContextManager[None]:
        """Held while many pods start: no other deployment of many pods in the run starts
        meanwhile (e2e/alone.py)."""
        return burst(self.run_dir) if self.run_dir is not None else nullcontext()

    def deploy(self, manifest: dict[str, Any]) -> dict[str, Any]:
        self.observer.create(manifest)
        if manifest["kind"] == "Pod":
            self.deployed.append(manifest["metadata"]["name"])
        return manifest

    def node_files(self) -> NodeFiles:
        """The node's own files, read by the node agent (e2e/agent.py), started on first use."""
        return node_agent(self.observer, self.image, Workspace)

    def deploy_sampled(self, *manifests: dict[str, Any], container: str = "stress", interval: str = "100ms") -> None:
        """Deploy pods whose container's memory the node agent samples from its cgroup, every
        `interval` of the first call, from when it starts until the test ends: the report plots it."""
        if self._sampler is None:
            self._sampler = CgroupSampler(self.node_files(), interval)
        uids = []
        for manifest in manifests:
            name = manifest["metadata"]["name"]
            self.sampled.append((name, container))
            self.deploy(manifest)
            uids.append(self.observer.pod(self.namespace, name)["metadata"]["uid"])
        self._sampler.follow(*uids)

    def stop_sampling(self) -> dict[tuple[str, str], Series]:
        """Every sampled container's series so far (recorded for the report); sampling of this
        test's pods is over."""
        if self._sampler is None:
            return {}
        output = self._sampler.samples()
        self._sampler = None
        found = {}
        for pod, container in self.sampled:
            statuses = self.observer.pod(self.namespace, pod).get("status", {}).get("containerStatuses") or []
            status = next((cs for cs in statuses if cs["name"] == container), {})
            container_id = str(status.get("containerID") or self._container_ids.get((pod, container), "")).rpartition("://")[2]
            terminated = (status.get("state") or {}).get("terminated") or (status.get("lastState") or {}).get("terminated")
            found[(pod, container)] = parse_series(output, f"{pod}/{container}", container_id or "<no container id>",
                                                   terminated)
            self.record.series(found[(pod, container)])
        self.sampled = []
        return found

    def wait_sampled(self, pod: str, container: str = "stress", seconds: float | waits.Wait = waits.AGENT_SAMPLED) -> None:
        """Until the node agent has a sample of this running container's cgroup (bounded).
        Following a pod is an exec into the agent, 10-40 s on a loaded emulated node: a container
        that runs and dies within that time (an allocation OOM-killed within seconds) is
        never sampled. So a workload that must be seen starts behind a file (alloc_command
        start_when) that the test writes once this returns."""
        sampler = self._sampler
        assert sampler is not None and (pod, container) in self.sampled, f"{pod}/{container} is not sampled"
        cgroup_part = self._container_ids.get((pod, container), "").rpartition("://")[2]
        assert cgroup_part, f"{pod}/{container}: no container id yet (ws.running first)"
        seen = {"samples": 0}

        def probe() -> bool | None:
            seen["samples"] = len(parse_series(sampler.samples(), f"{pod}/{container}", cgroup_part, None).t)
            return True if seen["samples"] else None

        wait_for(f"the node agent to sample {pod}/{container}", probe, seconds,
                 lambda: f"{seen['samples']} samples of cgroup {cgroup_part}")

    def samples(self, pod: str, container: str = "stress") -> Series:
        """Stop sampling and return that container's series (every sampled one is recorded)."""
        return self.stop_sampling()[(pod, container)]

    def finish_sampling(self) -> None:
        try:
            self.stop_sampling()
        except Exception as error:  # noqa: BLE001 - a missing plot must not hide the test's own outcome
            warnings.warn(f"{self.namespace}: memory samples lost: {error}", stacklevel=1)

    def running(self, name: str) -> dict[str, Any]:
        pod = self.observer.wait_running(self.namespace, name)
        self.record.phase(f"{name} running" + start_breakdown(pod))
        for status in pod.get("status", {}).get("containerStatuses") or []:
            if status.get("containerID"):  # an evicted container's status may lose it
                self._container_ids[(name, status["name"])] = status["containerID"]
        return pod

    def explain(self, name: str) -> str:
        return self.observer.explain(self.namespace, name)


def start_breakdown(pod: dict[str, Any]) -> str:
    """Where a pod's start went, from its own timestamps (the API server's clock, whole seconds):
    " (scheduled +0s, sandbox +41s, started +52s)" after its creation; "" where it has none. A
    slow start on an emulated node then says whether the scheduler, the sandbox (runtime and
    CNI) or the containers were slow."""
    created = api_time(pod.get("metadata", {}).get("creationTimestamp"))
    status = pod.get("status") or {}
    conditions = {c.get("type"): api_time(c.get("lastTransitionTime")) for c in status.get("conditions") or []
                  if c.get("status") == "True"}
    started = [api_time(((cs.get("state") or {}).get("running") or {}).get("startedAt"))
               for cs in status.get("containerStatuses") or []]
    steps = [("scheduled", conditions.get("PodScheduled")), ("sandbox", conditions.get("PodReadyToStartContainers")),
             ("started", max((s for s in started if s), default=None))]
    known = [f"{what} +{(when - created).total_seconds():.0f}s" for what, when in steps if when and created]
    return f" ({', '.join(known)})" if known else ""

