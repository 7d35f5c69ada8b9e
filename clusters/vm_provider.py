"""The `vm` provider seam: one QEMU node (clusters/vm) whose kubelet is switched between behaviors.

The VM is brought up once per run (or attached to with --reuse-clusters) and shared by the
workers of the run; switching swapBehavior restarts the kubelet in place, so tests of one
behavior must not run while another behavior's tests do: run the vm provider without -n
(the suite orders tests by behavior, so each switch happens once).
"""

from __future__ import annotations

import shlex
from dataclasses import replace
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest

from clusters.behaviors import WORKLOAD_CONTROLLED_SWAP
from clusters.discovery import NotReadyAfterRestart, ready_after_restart
from clusters.kubelet_config import KubeletChange, Restarted
from clusters.kubelet_refusal import StartAttempt
from clusters import pidlock
from clusters.cli import NotReady
from clusters.checks import Check, PreflightError
from clusters.progress import Progress
from clusters.provider import NotCoveredError, Provider, SwapNode
from clusters.shared import get_or_create, record_created

CLUSTER = "ksc-vm"
# Held from the preflight to the end of the process that owns the run (pytest alone, or xdist's
# controller, which outlives its workers and tears the VM down): a second run on the same state
# directory would otherwise stop the VM as "left from an earlier run", or switch its kubelet, in
# the middle of the first run's tests.
IN_USE = "in-use.lock"
_HELD: dict[Path, Any] = {}  # this process's open IN_USE locks by state directory: held until it exits


class NodeInUse(NotReady):
    """Another run of the suite holds the vm node's state directory (exit 3)."""


def take_node(state_dir: Path) -> Any:
    """The open, held IN_USE lock of ``state_dir``; NodeInUse naming the run that holds it."""
    try:
        return pidlock.take(state_dir / IN_USE)
    except pidlock.Held as other:
        raise NodeInUse(f"another run of the suite (pid {other.holder}) is using the vm node in {state_dir}: wait for"
                        " it to end, or give this run a state directory of its own (--vm-state-dir)") from None


class VmProvider(Provider):
    name = "vm"
    reconfigures_kubelets = True
    restarts_kubelets = True
    one_node_for_every_behavior = True

    def __init__(self, shared_root: Path, *, k8s_version: str | None, kernel: str, memory_mb: int, swap_mb: int,
                 reuse: bool, state_dir: Path | None = None, progress: Progress | None = None,
                 kubernetes: Any = None, install_packages: bool = False):
        self.progress = progress
        self.install_packages = install_packages  # --install-host-packages
        self.shared_root = shared_root
        self.options: dict[str, Any] = {"kernel": kernel, "memory_mb": memory_mb, "swap_mb": swap_mb}
        if k8s_version:
            self.options["k8s_version"] = k8s_version
        # a KubernetesSource: a patched release or a local checkout (--k8s-patch, --k8s-source)
        self.kubernetes = kubernetes
        if kubernetes is not None:
            self.options["kubernetes"] = kubernetes
        self.reuse = reuse
        self.state_dir = state_dir
        self._vm: Any = None

    @classmethod
    def from_pytest_config(cls, config: pytest.Config, run_dir: Path, progress: Progress | None = None,
                           kubernetes: Any = None) -> "VmProvider":
        return cls(
            run_dir,
            kubernetes=kubernetes,
            k8s_version=config.getoption("k8s_version"),
            kernel=config.getoption("vm_kernel"),
            memory_mb=config.getoption("vm_memory"),
            swap_mb=config.getoption("vm_swap"),
            reuse=config.getoption("reuse_clusters"),
            state_dir=config.getoption("vm_state_dir"),
            progress=progress,
            install_packages=config.getoption("install_host_packages"),
        )

    def vm(self) -> Any:
        if self._vm is None:
            from clusters.vm import VmCluster

            self._vm = VmCluster(self.state_dir, **self.options, progress=self.progress)
        return self._vm

    def coverage(self, behaviors: Sequence[str]) -> dict[str, str | None]:
        if self.kubernetes is not None and WORKLOAD_CONTROLLED_SWAP in self.kubernetes.feature_gates:
            return dict.fromkeys(behaviors)  # a KEP-5359 build (the prototype patch, or a checkout with the gate)
        built = self.kubernetes.describe() if self.kubernetes is not None else \
            f"a released kubelet ({self.options.get('k8s_version', 'default version')})"
        reason = (f"the vm node runs {built}, which has no {WORKLOAD_CONTROLLED_SWAP} feature gate (KEP-5359):"
                  " build it with --k8s-patch clusters/prototypes/kep-5359.patch or --k8s-source a KEP-5359 checkout")
        return {b: reason if b == WORKLOAD_CONTROLLED_SWAP else None for b in behaviors}

    def preflight(self, behaviors: Sequence[str]) -> None:
        from clusters import hostpackages
        from clusters.preflight import check_cache_dir
        from clusters.vm import hostcheck

        cache = check_cache_dir()
        checks = [cache]
        state_dir = self.vm().state_dir
        made_it = not state_dir.exists()
        held = None
        try:
            if state_dir.resolve() not in _HELD:  # this process's run holds it already: a second preflight
                held = take_node(state_dir)
        except NodeInUse as error:
            checks.append(Check("vm node free", False, str(error)))
        except OSError as error:  # a state directory that cannot be made (the cache's check says why too)
            checks.append(Check("vm state directory", False, f"{state_dir}: {error.strerror or error}"))
        if cache.ok:  # the same checks as `python -m clusters.vm up`: tools, Go for what is not built yet
            checks += hostpackages.checked(
                lambda: hostcheck.checks(self.vm().kubernetes, root=self.vm().cache_dir, guest_image=True, boot=True),
                self.install_packages, self.progress or (lambda message: None))
        if all(c.ok for c in checks):  # QEMU is there: KSC_VM_ACCEL=kvm on a KVM that runs no guest fails here
            from clusters.vm import qemu

            try:
                accel = qemu.choose_accel()
            except (qemu.KvmUnavailable, qemu.QemuError) as error:  # forced KVM that fails; a nonsense value
                checks.append(Check("accelerator", False, str(error)))
            else:  # before the build: start_qemu refuses it too, but only after the build
                crowded = qemu.sharing_problem(self.vm().paths, accel)
                if crowded:
                    checks.append(Check("one emulated guest", False, crowded))
        if not all(c.ok for c in checks):
            if held is not None:  # a run stopped here has made nothing but the lock
                pidlock.release(held)
                if made_it:
                    pidlock.remove_if_alone(state_dir / IN_USE)
            raise PreflightError(checks)
        if held is not None:
            _HELD[state_dir.resolve()] = held
        self._build_kubernetes()

    def _build_kubernetes(self) -> None:
        """Build (or find cached) the node's binaries now: a patch that does not apply or a build
        that fails is one preflight message (the hunk, or the compiler's first error), before any
        VM boots."""
        from clusters.vm import build as vbuild

        vm = self.vm()
        try:
            vbuild.build_all(vm.kubernetes, root=vm.cache_dir, progress=vm.progress)
        except vbuild.BuildError as error:
            first, _, rest = str(error).partition("\n")
            log = rest.split("\n", 1)[0].removeprefix("log ").removesuffix(", last lines:")
            # A patch that does not apply fails here too, before anything is compiled (the
            # patches are applied to a fresh copy of the release's source first).
            remedy = (f"regenerate the patch against {vm.kubernetes.release} (git diff in a checkout of that tag)"
                      if first.startswith("--k8s-patch") else f"the build's full output: {log}" if log else "")
            raise PreflightError([Check(f"build Kubernetes {vm.kubernetes.describe()}", False, first, remedy)]) from None

    def node_for(self, behavior: str) -> SwapNode:
        reason = self.coverage([behavior])[behavior]
        if reason:
            raise NotCoveredError(behavior, reason)
        get_or_create(self.shared_root, CLUSTER, lambda: self._bring_up(behavior))
        vm = self.vm()
        if vm.swap_behavior() != behavior:
            vm.set_swap_behavior(behavior)
        return self._node_running(behavior)

    def restart_kubelet(self, node: SwapNode, behavior: str | None = None) -> SwapNode:
        self.vm().kubelet().restart_as(behavior)
        return self._node_running(behavior or node.behavior)

    def _node_running(self, behavior: str) -> SwapNode:
        vm = self.vm()
        try:
            node = ready_after_restart(str(vm.kubeconfig), self.name, CLUSTER, lambda n: n.behavior == behavior,
                                       f"the vm node running {behavior}")
        except NotReadyAfterRestart as error:
            raise RuntimeError(str(error)) from None
        note = self.kubernetes.prototype_note if self.kubernetes is not None else ""
        return replace(node, build_note=note or node.build_note, emulated=vm.emulated())

    def _bring_up(self, behavior: str) -> dict[str, Any]:
        vm = self.vm()
        # recorded once up() holds the VM's lock and has decided to boot one: a VM it reuses, or
        # one another command is starting (up() then stops at its lock), is not the run's to stop
        vm.up(behavior, reuse=self.reuse, booting=lambda: record_created(
            self.shared_root, {"provider": self.name, "cluster": CLUSTER, "state_dir": str(vm.state_dir)}))
        return {"kubeconfig": str(vm.kubeconfig)}

    def removal_hint(self, entry: Mapping[str, Any]) -> str:
        from clusters.vm.paths import default_state_dir

        state_dir = entry.get("state_dir")
        where = "" if not state_dir or Path(state_dir) == default_state_dir() else f" --state-dir {shlex.quote(state_dir)}"
        return f", stop it with `python -m clusters.vm down{where}`"

    def teardown(self, created: Sequence[dict[str, Any]]) -> list[str]:
        if not any(e.get("provider") == self.name for e in created):
            return []
        stopped = self.vm().down()
        return [f"stopped the vm node ({'it was running' if stopped else 'it was already down'})"]

    def reconfigured_kubelet(self, node: SwapNode, change: KubeletChange) -> AbstractContextManager[Restarted]:
        return self.vm().kubelet().reconfigured(change)

    def attempt_kubelet_start(self, node: SwapNode, change: KubeletChange) -> StartAttempt:
        return self.vm().kubelet().attempt_start(change)

    def kubelet_without_swap(self, node: SwapNode) -> AbstractContextManager[None]:
        return self.vm().kubelet().without_swap()

    def node_view(self, node: SwapNode | None) -> str:
        vm = self.vm()
        return vm.kubelet().inside_view() if vm.is_running() else "the VM is not running"

    def stress_image(self, node: SwapNode) -> str:
        # The guest image imports the workload image at boot; its ref is in the VM's state.
        vm = self.vm()
        state = None if vm.stress_ref else vm.state()
        ref = vm.stress_ref or (state.stress_image if state else "")
        if not ref:
            raise RuntimeError(f"the vm node has no workload image recorded in {self.vm().state_file}")
        return ref
