"""The `kind` provider: one kind cluster per swapBehavior, created on first use, shared by workers."""

from __future__ import annotations

import dataclasses
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from tenacity import Retrying, retry_if_result, stop_after_delay, wait_fixed

from clusters import kind_config, preflight
from clusters.behaviors import ALL_BEHAVIORS, WORKLOAD_CONTROLLED_SWAP
from clusters.discovery import discover, summary
from clusters.provider import NotCoveredError, Provider, SwapNode
from clusters.shared import get_or_create, record_created

CREATE_WAIT = "5m"
NODE_READY_SECONDS = 300
# KEP-5359 targets alpha in 1.38; no released node image implements it before that.
WORKLOAD_CONTROLLED_SWAP_SINCE = (1, 38)


class KindError(RuntimeError):
    pass


def run_command(argv: Sequence[str], timeout: float) -> subprocess.CompletedProcess:
    """Run a command; on failure raise with the command, exit code and the end of its output."""
    try:
        result = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as error:
        raise KindError(f"`{' '.join(argv)}` did not finish in {timeout:.0f}s") from error
    if result.returncode != 0:
        tail = "\n".join((result.stderr or result.stdout).strip().splitlines()[-15:])
        raise KindError(f"`{' '.join(argv)}` exited {result.returncode}:\n{tail}")
    return result


class KindProvider(Provider):
    name = "kind"

    def __init__(self, kind_bin: str, node_image: str | None, shared_root: Path, reuse: bool):
        self.kind_bin = kind_bin
        self.node_image = node_image
        self.shared_root = shared_root
        self.workdir = shared_root / "kind"
        self.reuse = reuse

    # --- what can be offered -------------------------------------------------------------------

    def coverage(self, behaviors: Sequence[str]) -> dict[str, str | None]:
        return {b: self._why_not(b) for b in behaviors}

    def _why_not(self, behavior: str) -> str | None:
        if behavior != WORKLOAD_CONTROLLED_SWAP:
            return None
        if not self.node_image:
            return (
                "needs a node image built from a Kubernetes tree that implements KEP-5359"
                " (pass --node-image); released kubelets reject this swapBehavior"
            )
        version = kind_config.image_version(self.node_image)
        if version is not None and version[:2] < WORKLOAD_CONTROLLED_SWAP_SINCE:
            return f"node image {self.node_image} is Kubernetes {version[0]}.{version[1]}, before KEP-5359 (1.38)"
        return None

    def preflight(self, behaviors: Sequence[str]) -> None:
        preflight.require(
            preflight.kind_host_checks(self.kind_bin, kind_config.image_version(self.node_image), len(behaviors))
        )

    # --- clusters -------------------------------------------------------------------------------

    def _kind(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
        return run_command([self.kind_bin, *args], timeout)

    def clusters(self) -> set[str]:
        output = self._kind("get", "clusters").stdout
        # Exact names only: a cluster called "ksc-limited" must never match "ksc-limitedswap".
        return {line.strip() for line in output.splitlines() if line.strip() and " " not in line.strip()}

    def leaked(self) -> list[str]:
        ours = {kind_config.cluster_name(b) for b in ALL_BEHAVIORS}
        return sorted(self.clusters() & ours)

    def delete(self, cluster: str) -> None:
        self._kind("delete", "cluster", "--name", cluster, timeout=300)

    def node_for(self, behavior: str) -> SwapNode:
        reason = self._why_not(behavior)
        if reason:
            raise NotCoveredError(behavior, reason)
        cluster = kind_config.cluster_name(behavior)
        handle = get_or_create(self.shared_root, cluster, lambda: self._bring_up(behavior, cluster))
        return SwapNode(**handle)

    def _bring_up(self, behavior: str, cluster: str) -> dict[str, Any]:
        self.workdir.mkdir(parents=True, exist_ok=True)
        kubeconfig = self.workdir / f"{cluster}.kubeconfig"
        if cluster in self.clusters():
            if not self.reuse:
                raise KindError(
                    f"kind cluster {cluster} already exists (left by an earlier run?): pass"
                    " --reuse-clusters to test it as it is, or --cleanup-leaked to delete it"
                )
            kubeconfig.write_text(self._kind("get", "kubeconfig", "--name", cluster).stdout)
        else:
            config_file = self.workdir / f"{cluster}.yaml"
            config_file.write_text(yaml.safe_dump(kind_config.render(behavior, self.node_image), sort_keys=False))
            # Recorded before creating: a half-created cluster is still ours to delete.
            record_created(self.shared_root, {"provider": self.name, "cluster": cluster, "kind_bin": self.kind_bin})
            argv = ["create", "cluster", "--name", cluster, "--config", str(config_file),
                    "--kubeconfig", str(kubeconfig), "--wait", CREATE_WAIT]
            if self.node_image:
                argv += ["--image", self.node_image]
            self._kind(*argv, timeout=900)
        return dataclasses.asdict(self._wait_for_node(behavior, cluster, str(kubeconfig)))

    def _wait_for_node(self, behavior: str, cluster: str, kubeconfig: str) -> SwapNode:
        """kind --wait covers the control plane only; the worker may still be joining."""
        seen: list[SwapNode] = []

        def matching() -> SwapNode | None:
            seen[:] = discover(kubeconfig, self.name, cluster, cgroup_v2=True)
            return next((n for n in seen if n.behavior == behavior), None)

        node = Retrying(
            stop=stop_after_delay(NODE_READY_SECONDS),
            wait=wait_fixed(3),
            retry=retry_if_result(lambda found: found is None),
            retry_error_callback=lambda state: None,
        )(matching)
        if node is None:
            raise KindError(
                f"gave up after {NODE_READY_SECONDS}s waiting for a Ready schedulable node running"
                f" {behavior} in {cluster}; last seen: {summary(seen)}"
            )
        return node

    def stress_image(self, node: SwapNode) -> str:
        """Build the image archive (cached) and `kind load` it into the cluster, once per run."""

        def load() -> dict[str, Any]:
            from workloads.image.build import build_stress_image

            archive, ref = build_stress_image(self.workdir / "images")
            self._kind("load", "image-archive", str(archive), "--name", node.cluster, timeout=600)
            return {"ref": ref}

        return get_or_create(self.shared_root, f"image-{node.cluster}", load)["ref"]

    def teardown(self, created: Sequence[dict[str, Any]]) -> list[str]:
        messages = []
        for entry in created:
            if entry.get("provider") != self.name:
                continue
            try:
                run_command([entry.get("kind_bin") or self.kind_bin, "delete", "cluster", "--name", entry["cluster"]], 300)
                messages.append(f"deleted kind cluster {entry['cluster']}")
            except KindError as error:
                messages.append(f"FAILED to delete kind cluster {entry['cluster']}: {error}")
        return messages

