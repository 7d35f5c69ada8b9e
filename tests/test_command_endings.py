"""A command of the project ended by SIGTERM (`kill`, CI's cancel) takes the Ctrl-C path, and a
child command it runs (clusters.vm up, a pytest run of the suite) is given its grace to remove
what it owns before its process group is killed: nothing is left running. Real processes, no VM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# A child that owns something (a grandchild standing in for its qemu) and, on SIGTERM, removes it
# and says so; or, with IGNORE, takes no notice of SIGTERM at all.
CHILD = textwrap.dedent("""
    import os, signal, subprocess, sys, time
    owned = subprocess.Popen(["sleep", "600"])
    open(sys.argv[1] + ".owned", "w").write(str(owned.pid))
    def stop(signum, frame):
        owned.kill(); owned.wait()
        open(sys.argv[1] + ".cleaned", "w").write("yes")
        sys.exit(2)
    signal.signal(signal.SIGTERM, signal.SIG_IGN if sys.argv[2] == "IGNORE" else stop)
    while True:
        time.sleep(0.1)
""")

# A command run through clusters.cli.run that runs the child through clusters.commands.run.
PARENT = textwrap.dedent("""
    import sys
    from clusters import cli, commands
    def main(args):
        commands.run([sys.executable, sys.argv[1], sys.argv[2], sys.argv[3]], timeout=None, capture_output=False,
                     grace=float(sys.argv[4]))
        return 0
    sys.exit(cli.run(main, cli.Parser(prog="t").parse_args([])))
""")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


def run_and_terminate(tmp_path: Path, mode: str, grace: float) -> tuple[int, Path, int]:
    (tmp_path / "child.py").write_text(CHILD)
    (tmp_path / "parent.py").write_text(PARENT)
    marker = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, str(tmp_path / "parent.py"), str(tmp_path / "child.py"), str(marker), mode,
                             str(grace)], cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, stderr=subprocess.PIPE,
                            text=True)
    owned = marker.with_suffix(".owned")
    deadline = time.monotonic() + 60
    while not owned.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert owned.exists(), proc.stderr.read() if proc.poll() is not None else "the child never started"
    time.sleep(0.3)  # the child's handler is in place once it wrote the file; the parent's long before
    proc.send_signal(signal.SIGTERM)  # the parent alone, as `kill <pid>` does
    rc = proc.wait(timeout=60)
    return rc, marker, int(owned.read_text())


def test_sigterm_to_a_command_gives_its_child_the_grace_to_remove_what_it_owns(tmp_path: Path) -> None:
    rc, marker, owned = run_and_terminate(tmp_path, "CLEAN", grace=30)
    assert rc == 2  # cli.Exit.INTERRUPTED: the Ctrl-C path
    assert marker.with_suffix(".cleaned").exists()
    assert not alive(owned)


def test_a_child_that_ignores_sigterm_is_killed_with_its_group_after_the_grace(tmp_path: Path) -> None:
    started = time.monotonic()
    rc, marker, owned = run_and_terminate(tmp_path, "IGNORE", grace=2)
    assert rc == 2 and not marker.with_suffix(".cleaned").exists()
    deadline = time.monotonic() + 10
    while alive(owned) and time.monotonic() < deadline:  # SIGKILL to the group: the grandchild too
        time.sleep(0.05)
    assert not alive(owned)
    assert time.monotonic() - started < 30


@pytest.mark.parametrize("module", ["bench.mutants.__main__", "bench.matrix", "bench.kind_bench"])
def test_every_bench_runs_the_commands_it_owns_through_the_grace(module: str) -> None:
    """The benches run clusters.vm and the suite, which own VMs and clusters: never through a bare
    subprocess call, which an interrupt would leave running (the bench's parent ended, its child not)."""
    import importlib
    import inspect

    source = inspect.getsource(importlib.import_module(module))
    assert "subprocess.Popen(" not in source
    assert "grace" in source


# A command that, told to stop, reports what it removes: far more than a pipe holds (64 KiB).
TALKATIVE = textwrap.dedent("""
    import signal, sys, time
    def stop(signum, frame):
        for i in range(20000):
            print(f"removing part {i} of what this run made")
        sys.exit(3)
    signal.signal(signal.SIGTERM, stop)
    print("started", flush=True)
    while True:
        time.sleep(0.1)
""")


def test_an_interrupted_command_that_reports_its_cleanup_is_read_to_its_end(tmp_path: Path) -> None:
    """Its report is read while it has its grace (a full pipe would block it until the kill) and
    handed to the caller's log."""
    from clusters import commands

    (tmp_path / "talkative.py").write_text(TALKATIVE)
    log: list[str] = []
    begun = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        with commands.started([sys.executable, str(tmp_path / "talkative.py")], 60, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, drained=log.append) as proc:
            assert proc.stdout is not None
            assert proc.stdout.readline() == "started\n"
            raise KeyboardInterrupt
    assert proc.returncode == 3  # it exited by itself, not by the SIGKILL after the grace
    assert time.monotonic() - begun < 30
    assert "".join(log).splitlines()[-1] == "removing part 19999 of what this run made"
