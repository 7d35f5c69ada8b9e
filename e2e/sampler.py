"""A pod's containers' memory over time, sampled on the node from their cgroups while a test
runs: `swapstress sample-cgroups` in the privileged node reader, started before the pod is
created so no allocation precedes the first sample. What it reads is what the plots show:
memory.current and memory.swap.current against the memory.max and memory.swap.max the
kubelet wrote."""

from __future__ import annotations

import threading
import time
from datetime import datetime
from typing import TYPE_CHECKING, Any

from e2e.record import Series

if TYPE_CHECKING:
    from e2e.nodefiles import NodeFiles

READY_SECONDS = 120
STOP_SECONDS = 30


def _number(text: str) -> int | None:
    return None if text in ("-", "max") else int(text)


def parse_series(output: str, name: str, cgroup_part: str, terminated: dict[str, Any] | None) -> Series:
    """The samples of the container cgroup whose directory names `cgroup_part` (its container
    id), with how the container ended, placed on the samples' clock (the node's)."""
    rows = [line.split() for line in output.splitlines() if line.startswith("sample ")]
    # A row whose memory.current could not be read was taken while the cgroup was being
    # removed (the container just ended): it carries nothing.
    mine = [r for r in rows if len(r) == 7 and cgroup_part in r[2] and r[3] != "-"]
    if not mine:
        return Series(name, ended=_ended(terminated))
    start = int(mine[0][1])
    last = mine[-1]
    ended_at = None
    if terminated and terminated.get("finishedAt"):
        finished = datetime.fromisoformat(str(terminated["finishedAt"]).replace("Z", "+00:00"))
        ended_at = finished.timestamp() - start / 1000
    return Series(
        name,
        t=[(int(r[1]) - start) / 1000 for r in mine],
        current=[int(r[3]) for r in mine],
        swap=[_number(r[4]) for r in mine],
        memory_max=_number(last[5]),
        swap_max=_number(last[6]),
        ended=_ended(terminated),
        ended_at=ended_at,
    )


def _ended(terminated: dict[str, Any] | None) -> str:
    if not terminated:
        return ""
    return f"{terminated.get('reason', 'terminated')} (exit {terminated.get('exitCode')})"


class CgroupSampler:
    """`start()` before creating the pod, `follow(uid)` once it exists, `stop()` when done."""

    def __init__(self, files: NodeFiles, interval: str = "100ms"):
        self.files = files
        self.interval = interval
        self.client: Any = None
        self.chunks: list[str] = []
        self.pump: threading.Thread | None = None
        self.closing = False
        self.out = ""  # the sampler's file in the reader
        self.error: Exception | None = None  # the stream failed before it was stopped

    def output(self) -> str:
        return "".join(self.chunks)

    def start(self) -> CgroupSampler:
        from kubernetes.stream import stream

        from e2e.nodefiles import HOST_CGROUP, SCRATCH

        ws = self.files.ws
        self.out = f"{SCRATCH}/samples-{time.monotonic_ns()}"
        # Samples go to a file in the reader, not into the exec stream: the stream dies with
        # the kubelet that carries it (the eviction test restarts it), the sampler and its file
        # do not.
        self.client = stream(ws.observer.core.connect_get_namespaced_pod_exec, self.files.pod, ws.namespace,
                             container="reader", command=["/swapstress", "sample-cgroups", "--interval", self.interval,
                                                          "--out", self.out, HOST_CGROUP],
                             stdin=True, stdout=True, stderr=True, tty=False, _preload_content=False)
        self.pump = threading.Thread(target=self._pump, name="cgroup-sampler", daemon=True)
        self.pump.start()
        self._wait_for("ready", READY_SECONDS)
        return self

    def _pump(self) -> None:
        # Read continuously: unread output would fill the stream and stall the sampler.
        try:
            while self.client.is_open():
                self.client.update(timeout=1)
                if self.client.peek_stdout():
                    self.chunks.append(self.client.read_stdout())
        except Exception as error:  # noqa: BLE001 - the stream closing under us ends the pump
            if not self.closing:
                self.error = error

    def _wait_for(self, word: str, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while not any(line.split(" ", 1)[0] == word for line in self.output().splitlines()):
            if time.monotonic() > deadline or not self.pump.is_alive():
                raise AssertionError(f"the cgroup sampler did not say {word!r} within {seconds} s:"
                                     f" {self.output()[-300:]!r} {self.client.read_stderr()[-300:]!r}"
                                     + (f" (stream: {self.error!r})" if self.error else ""))
            time.sleep(0.1)

    def follow(self, pod_uid: str) -> None:
        self.client.write_stdin(f"pod{pod_uid}\n")

    def stop(self) -> str:
        """Stop sampling and return its samples. Where the stream is gone (the kubelet was
        restarted) the sampler cannot be told: it ends with its pods or the reader pod, and the
        samples are read as far as they go."""
        if self.client is None:
            return ""
        try:
            if self.client.is_open():
                self.client.write_stdin("stop\n")
                self._wait_for("stopped", STOP_SECONDS)
        except Exception:  # noqa: BLE001 - the stream died under us: the file has the samples
            pass
        finally:
            self.closing = True
            self.client.close()
            if self.pump is not None:
                self.pump.join(timeout=5)
            self.client = None
        return self.files.read(self.out)
