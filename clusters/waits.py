"""Every bound the suite puts on a wait for the outside world, in one table, and how it scales
with the node's speed.

A bound has two parts. `work` is what the node's speed decides (starting containers, execs, a
kubelet or an API server coming up): it is sized for the slowest node the suite supports, a
2-vCPU QEMU guest under software emulation (TCG), where a pod takes about 15 s to start and an
exec about 0.6 s of CPU. `clock` is what timers decide whatever the speed (the kubelet's sync
and eviction loops, cAdvisor's housekeeping, a grace period): it never shrinks.

On a node that is not emulated (KVM, real hardware, kind on a real Docker host) the work part is
halved. Emulation costs 10-30x against the host (docs/measurements/cpu.md), so half the emulated
bound is still several times what a healthy fast node needs; a stuck step there fails in half
the time. Unknown speed (a provider that cannot tell) keeps the emulated bounds.

Durations that are rules rather than bounds (how long a pod holds its memory, the quiet minute
that ends an eviction episode, poll intervals) are not waits and stay with the code they define.
"""

from __future__ import annotations

from dataclasses import dataclass

NATIVE_WORK_FACTOR = 0.5

_emulated: bool | None = None  # this process's nodes; None until a provider says


def use_nodes(emulated: bool | None) -> None:
    """Say whether this process's nodes are emulated (the node fixture does, per test process)."""
    global _emulated
    _emulated = emulated


def work_factor() -> float:
    return NATIVE_WORK_FACTOR if _emulated is False else 1.0


@dataclass(frozen=True)
class Wait:
    work: float  # seconds on an emulated node; scaled by the node's speed
    clock: float = 0.0  # seconds timers take on any node
    what: str = ""

    def seconds(self) -> float:
        return self.clock + self.work * work_factor()


# --- the table -------------------------------------------------------------------------------------
# pods and containers
POD_START = Wait(600, what="a pod's containers running: sandbox, image present on the node, start")
# An overloaded API server answers a write 504 only after its own 60 s request timeout, so a bound
# of 120 s is two attempts; an emulated kind control plane, which is also a node under test, has
# stayed that slow for longer (decision 0008).
CREATE = Wait(300, what="creating an object while an overloaded API server answers 5xx/429")
EXEC_RETRY = Wait(120, what="an exec into the node agent through an API server that is busy")
AGENT_SAMPLED = Wait(120, what="an exec into the agent, and its next look for new cgroups")
CONTAINER_RESTART = Wait(290, clock=10, what="a container exiting and started again (the kubelet's 10 s back-off)")
FORK_EXEC_ROUND = Wait(900, what="the fork-exec spike's round, or its end")
# the kubelet
KUBELET_EXEC_AFTER_RESTART = Wait(120, what="a restarted kubelet serving exec again")
NODE_READY_AFTER_RESTART = Wait(100, clock=20, what="a restarted kubelet's node Ready and its /configz live")
NODE_STATUS = Wait(100, clock=20, what="the node's status after its kubelet was reconfigured (posted every 10 s)")
KUBELET_REFUSAL = Wait(100, clock=20, what="a kubelet restarted with a config it must refuse: systemd seeing it exit,"
                                           " or its /configz where it comes up instead")
KUBELET_LOG_SETTLED = Wait(10, clock=5, what="a refused kubelet's last lines in the journal: the next start's first"
                                            " (systemd restarts it every 1-3 s)")
RESIZE_DECIDED = Wait(160, clock=20, what="the kubelet deciding an in-place resize (a pod sync)")
MIRROR_POD = Wait(140, clock=40, what="a static pod's mirror pod appearing or going (the kubelet's 20 s file check)")
POD_EVENT = Wait(50, clock=10, what="a Pod event the kubelet records when it starts a container")
# stats and metrics: cAdvisor's housekeeping runs every 10-15 s, jittered up to twice that
NODE_SIGNAL = Wait(0, clock=60, what="new cAdvisor samples of the node (four housekeeping intervals)")
METRIC = Wait(120, clock=60, what="a metric or stats figure for a new container")
STATS_SETTLED = Wait(120, clock=60, what="/stats/summary showing every pod's allocation, and a node sample since")
# eviction
LEFTOVER_PODS = Wait(600, what="other tests' pods terminating on the node (their namespaces deleted while the other node runs a test)")
TAINT = Wait(30, clock=30, what="the MemoryPressure taint after the condition")
FIRST_EVICTION = Wait(200, clock=40, what="the first eviction after the threshold, past its grace period")
EVICTION_WATCH = Wait(840, clock=60, what="a whole eviction episode, until pressure is over")
# under -n, a test's turn
TURN = Wait(3600, what="a test's turn on its node or the host (the longest test runs minutes)")
# this machine's own commands: not the node's speed, never scaled
APT_INSTALL = Wait(0, clock=1800, what="apt-get update and an install of QEMU and its dependencies from a slow mirror")
GO_INSTALL_KIND = Wait(0, clock=1800, what="go install of kind: its modules fetched and compiled on two shared cores")
# clusters
# Past kubeadm's own longest wait in the emulated-host profile (40 min for the control plane), so
# that kubeadm's message, which names what it waited for, is the one a failure shows.
KIND_CREATE = Wait(3600, what="kind create cluster (kubeadm may wait 40 minutes for an emulated control plane)")
VM_KUBEADM_INIT = Wait(0, clock=2700, what="kubeadm init on the vm node (past its own 40-minute control-plane wait)")
KIND_NODES_READY = Wait(600, what="after kind create: workers joining, an API server catching up")
VM_BAKE_IMPORT = Wait(1200, what="the vm disk's bake boot: booting and containerd importing the image archives")
VM_BAKE_POWEROFF = Wait(300, what="the bake boot's guest powering off after its sync (a disk whose guest had to be"
                                  " killed is not kept)")
KIND_EXPORT_LOGS = Wait(300, what="kind export logs of a cluster whose creation failed (journals of every node)")


def bound(seconds: float | Wait) -> float:
    """Seconds to wait: a Wait scaled for this process's nodes, or a plain number as it is."""
    return seconds.seconds() if isinstance(seconds, Wait) else float(seconds)
