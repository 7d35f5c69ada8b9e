"""One privileged pod per node for the whole run (per test process): the node agent.

It reads the node's own files for the tests (NodeFiles: cgroups of containers it cannot exec
into, pod and root cgroups, /proc/meminfo) and, as its main process, samples the memory of
every pod a test names (`swapstress sample-cgroups --keep --out-dir`: a file per pod). Before
it, every test that read the node or plotted a container started a privileged pod of its own:
on an emulated node a pod takes about 15 s to start, which for a run was minutes.

It is system-node-critical (the kubelet never evicts it under the memory pressure a test
creates), has no memory request, and carries AGENT_ROLE so that tests looking for other tests'
leftovers on a node pass it over. Its main process outlives kubelet restarts."""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from e2e.nodefiles import HOST_CGROUP, SCRATCH, NodeFiles, Space
from e2e.observe import unique_name
from e2e.podfields import running_container_id
from workloads.pods import labels

if TYPE_CHECKING:
    from clusters.provider import SwapNode
    from e2e.observe import NodeObserver

AGENT_ROLE = {"kube-swap-conformance/role": "node-agent"}
FOLLOW = f"{SCRATCH}/follow"  # a file pod<uid>@<interval> here: sample that pod
SAMPLES = f"{SCRATCH}/samples"  # its samples go to SAMPLES/pod<uid>
LIFETIME = "24h"  # the sampler's own bound; the run deletes the agent long before

# per node observer (one per node and process): the agent, and the observer to delete it with
_agents: weakref.WeakKeyDictionary[NodeObserver, NodeFiles] = weakref.WeakKeyDictionary()

# (node, observer, namespace, image, test) -> the agent's workspace: e2e.workspace.Workspace,
# passed in by the workspace, which starts the agent (so this module does not import it back).
MakeSpace = Callable[["SwapNode", "NodeObserver", str, str, str], Space]


def is_agent(pod: dict) -> bool:
    return all((pod["metadata"].get("labels") or {}).get(k) == v for k, v in AGENT_ROLE.items())


def node_agent(observer: NodeObserver, image: str, workspace: MakeSpace) -> NodeFiles:
    """The agent on the observer's node, started on first use in a `workspace` of its own."""
    if observer not in _agents:
        node = observer.node
        namespace = observer.create_namespace(unique_name("ksc-agent"), {**labels("node-agent"), **AGENT_ROLE})
        ws = workspace(node, observer, namespace, image, "node-agent")
        command = ["/swapstress", "sample-cgroups", "--keep", "--timeout", LIFETIME, "--out-dir", SAMPLES,
                   "--follow-dir", FOLLOW, HOST_CGROUP]
        _agents[observer] = NodeFiles.on(ws, node.name, name="node-agent", critical=True, command=command,
                                         extra_labels=AGENT_ROLE)
    return _agents[observer]


@dataclass(frozen=True)
class AgentContainer:
    """The agent's own container: system-node-critical, so NoSwap under every behavior (its
    memory.swap.max is 0) in a pod whose cgroup the kubelet leaves unlimited. A container and a
    pod every node of the run has, without a pod of the test's own."""

    namespace: str
    pod: str
    container: str
    uid: str  # the pod's
    id: str  # the container's, as its cgroup directory names it


def agent_container(agent: NodeFiles) -> AgentContainer:
    pod = agent.ws.observer.pod(agent.ws.namespace, agent.pod)
    container_id = running_container_id(pod, "reader")
    assert container_id, f"the node agent {agent.ws.namespace}/{agent.pod} has no running container"
    return AgentContainer(agent.ws.namespace, agent.pod, "reader", pod["metadata"]["uid"], container_id)


def remove_agents() -> list[str]:
    """Delete every agent this process started (their namespaces); what could not be, said."""
    problems = []
    for observer, agent in list(_agents.items()):
        try:
            if observer.cluster_reachable():
                observer.delete_namespace(agent.ws.namespace)
        except Exception as error:  # noqa: BLE001 - reported; the run's teardown deletes the cluster anyway
            problems.append(f"node agent {agent.ws.namespace}: {error}")
        del _agents[observer]
    return problems
