"""What the suite's commands share: their exit codes, their argument types and their one error path.

The same numbers mean the same thing for `python -m pytest e2e ...` and for the command-line
tools (`python -m clusters.vm`, `python -m clusters.versions`); 0, 1, 2 and 4 are pytest's own.
"""

from __future__ import annotations

import argparse
import contextlib
import enum
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Iterator, Sequence
from typing import NoReturn

from clusters import inputs
from clusters.checks import PreflightError
from clusters.redact import redact


class Exit(enum.IntEnum):
    OK = 0  # passed (and the gate, if asked); a command did what it was asked
    FAILED = 1  # a test or the gate failed; a command's work failed (a build, a boot)
    INTERRUPTED = 2  # Ctrl-C or SIGTERM; what the run or command created is removed first
    PREFLIGHT = 3  # the host or cluster cannot run it (missing tool, unreachable cluster); nothing created.
    #                pytest also exits 3 on an internal error, which the suite reports as one message
    USAGE = 4  # bad command line or environment value; nothing started


# Smallest guests the tools boot. The kubeadm node skips kubeadm's own Mem check (1700 MB for a
# control plane), so the suite states the floor: below it the control plane alone does not fit.
MIN_NODE_MEMORY_MIB = 2048
# The kind host holds a kind control plane and a worker per behavior, about 1 GiB each
# (clusters/preflight.py MEMORY_PER_KIND_NODE), and Docker.
MIN_KIND_HOST_MEMORY_MIB = 4096
# A guest's swap file is made at boot on its disk (clusters/vm/image.py DISK_SIZE, 12 GiB;
# clusters/vm/kindhost.py DISK_SIZE, 40 GiB), beside the root filesystem, which the baked node
# image already fills to about 2 GiB: 4 GiB of each disk is kept for the rest. A larger file
# fails in the guest, minutes into its boot.
MAX_NODE_SWAP_MIB = 12 * 1024 - 4096
MAX_KIND_HOST_SWAP_MIB = 40 * 1024 - 4096


# A value the command line, the environment or an input file gave that cannot work: exit 4.
# Declared with the values it is about (clusters/inputs.py), which this module imports.
UsageError = inputs.UsageError


class NotReady(RuntimeError):
    """The host cannot do it now, and says what would let it (a module proxy that cannot be
    reached, a guest that is already starting): exit 3, like a failed preflight."""


def mib(minimum: int = 1, why: str = "", guest: bool = False, maximum: int | None = None,
        why_at_most: str = "") -> Callable[[str], int]:
    """An argparse type: a whole number of MiB, at least ``minimum`` (``why`` says why), at most
    ``maximum``; ``guest``: at most this host's memory (clusters/inputs.py)."""
    return inputs.mib(minimum, why, guest, maximum, why_at_most)


def node_swap() -> Callable[[str], int]:
    return mib(maximum=MAX_NODE_SWAP_MIB, why_at_most="the swap file and the node's files share its 12 GiB disk")


def kind_host_swap() -> Callable[[str], int]:
    return mib(maximum=MAX_KIND_HOST_SWAP_MIB, why_at_most="the swap file, Docker's images and the kind nodes share its"
                                                           " 40 GiB disk")


count = inputs.count  # an argparse type: a whole number, at least 1
cpus = inputs.cpus  # an argparse type: a guest's vCPUs, at most this host's CPUs
behavior = inputs.behavior  # an argparse type: one swapBehavior, by the kubelet's (case-sensitive) name


class Parser(argparse.ArgumentParser):
    """argparse with the suite's usage exit code (4)."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(Exit.USAGE, f"{self.prog}: error: {message}\n")


@contextlib.contextmanager
def signals_handled(handler: Callable[[int, object], None]) -> Iterator[None]:
    """SIGINT and SIGTERM go to `handler` for the block, then to what they went to before (in the
    main thread: only it can set a handler; elsewhere the block runs as it is)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, h in old.items():
            signal.signal(sig, h)


def interrupts_raise() -> contextlib.AbstractContextManager[None]:
    """SIGINT and SIGTERM raise KeyboardInterrupt (even if SIGINT was inherited as ignored, as a
    background job's is): a command ended by `kill`, or by CI's cancel, takes the Ctrl-C path and
    removes what it started."""
    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    return signals_handled(handler)


def run(main: Callable[[argparse.Namespace], int], args: argparse.Namespace,
        known: Sequence[type[BaseException]] = (), command: str = "") -> int:
    """The one error path of a command: its message and exit code, no traceback unless --debug.

    First the environment variables ``command`` reads ("clusters.vm up": clusters/inputs.py
    VARIABLES), before anything else: a bad one is a usage error. Then UsageError: 4; a PreflightError (clusters.checks) or NotReady: its message, 3; Ctrl-C/SIGTERM: 2;
    an error of a type in ``known`` (a failed build, a guest that did not boot): its message, 1;
    anything else: what it was, and that --debug shows where, 1. Whatever it prints goes through
    clusters.redact: a message may carry a kubeconfig's URL, a token, a tool's output."""
    debug = getattr(args, "debug", False)

    def say(message: str) -> None:
        if debug:
            print(redact(traceback.format_exc()), end="", file=sys.stderr)
        print(redact(message), file=sys.stderr)

    try:
        inputs.check_environment(command)
        with interrupts_raise():
            return main(args)
    except KeyboardInterrupt:
        print("interrupted: what this command had started is stopped", file=sys.stderr)
        return Exit.INTERRUPTED
    except UsageError as error:
        say(f"error: {error}")
        return Exit.USAGE
    except (PreflightError, NotReady) as error:
        say(str(error) if isinstance(error, PreflightError) else f"error: {error}")
        return Exit.PREFLIGHT
    except Exception as error:  # noqa: BLE001 - the one place a command's failure becomes its message
        if isinstance(error, tuple(known)):
            say(f"error: {error}")
        else:
            say(f"error: {type(error).__name__}: {error} (an unexpected failure: --debug shows where)")
        return Exit.FAILED
