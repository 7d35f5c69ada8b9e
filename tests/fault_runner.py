"""Runs a batch of pytest command lines of the suite, each in a process of its own, for the fault
harness (tests/test_fault_harness.py): one interpreter imports pytest and the suite's plugin once,
then forks a child per case, so a case costs pytest's own start, not Python's and the imports'.

    python tests/fault_runner.py CASES.json RESULTS.json

CASES.json: a list of {"argv": [...], "env": {...}, "cwd": DIR, "timeout": SECONDS}. Each child
gets exactly that environment, that working directory, its own process group, and stdout and
stderr into one file; a child still running at its timeout is killed with its group.
RESULTS.json: per case {"code", "output", "seconds", "timed_out"}.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import tempfile
import time

import pytest

# the plugin's modules, imported once for every child (conftest.py registers them)
import e2e.plugin.nodes  # noqa: F401
import e2e.plugin.options  # noqa: F401
import e2e.plugin.run  # noqa: F401
import e2e.plugin.summary  # noqa: F401
import e2e.plugin.workers  # noqa: F401


def run_case(case: dict) -> dict:
    with tempfile.TemporaryFile() as out:
        started = time.monotonic()
        pid = os.fork()
        if pid == 0:  # the child: this case's environment, directory and output, then pytest
            code = 70
            try:
                os.setpgid(0, 0)
                os.dup2(out.fileno(), 1)
                os.dup2(out.fileno(), 2)
                os.environ.clear()
                os.environ.update(case["env"])
                os.chdir(case["cwd"])
                code = int(pytest.main(case["argv"]))
            except SystemExit as done:
                code = done.code if isinstance(done.code, int) else 1
            except BaseException as error:  # noqa: BLE001 - said in the output the harness reads
                os.write(2, f"fault_runner: {type(error).__name__}: {error}\n".encode())
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        timed_out = False
        deadline = started + case.get("timeout", 60)
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() > deadline:
                timed_out = True
                try:
                    os.killpg(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                os.waitpid(pid, 0)
                status = 9
                break
            time.sleep(0.02)
        seconds = time.monotonic() - started
        out.seek(0)
        output = out.read().decode("utf-8", "backslashreplace")
    code = os.waitstatus_to_exitcode(status) if not timed_out else -9
    return {"code": code, "output": output, "seconds": round(seconds, 2), "timed_out": timed_out}


def main() -> int:
    cases_file, results_file = sys.argv[1:3]
    with open(cases_file) as f:
        cases = json.load(f)
    results = [run_case(case) for case in cases]
    with open(results_file, "w") as f:
        json.dump(results, f)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
