"""The command lines of the image tools (``python -m workloads.image.build``, ``.verify``): the
suite's usage exit code and argument types, for a layer that may not import clusters/.

clusters/cli.py's Exit and clusters/inputs.py's value types are the suite's; workloads/ sits
below clusters/ (import-linter's layers), so these two tools restate the little they need: exit 4
for bad arguments, and the ``kind`` each argument type declares for the fault harness
(tests/test_fault_harness.py), which checks both against clusters/.
"""

from __future__ import annotations

import argparse
import os
import re
import stat
import sys
from pathlib import Path
from typing import NoReturn

USAGE = 4  # clusters/cli.py Exit.USAGE


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(USAGE, f"{self.prog}: error: {message}\n")


def _problem(path: Path) -> str | None:
    try:
        path.stat()
    except OSError as error:
        return f"{path} {'does not exist' if error.errno == 2 else f'cannot be used ({error.strerror})'}"
    return None


def output_directory(text: str) -> Path:
    """A directory the tool writes into: created if missing, in a directory that exists."""
    path = Path(text)
    if not text:
        raise argparse.ArgumentTypeError("the path is empty: name a directory")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise argparse.ArgumentTypeError(f"{text!r} is not UTF-8 text: name a directory whose name is") from None
    if os.path.islink(path) and not path.exists():
        raise argparse.ArgumentTypeError(f"{path} is a symlink that leads nowhere (a loop, or a missing target)")
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{path} is not a directory: name a directory (it is created if missing)")
    parent = path if path.is_dir() else path.parent
    if not parent.is_dir():
        raise argparse.ArgumentTypeError(f"{path}: its parent {parent} is not a directory that exists: create it first")
    if not os.access(parent, os.W_OK):
        raise argparse.ArgumentTypeError(f"{path}: {parent} is not writable")
    return path


output_directory.kind = "directory"  # type: ignore[attr-defined]


def archive(text: str) -> Path:
    """An image archive (a tar file) to read."""
    path = Path(text)
    problem = _problem(path) if text else "the path is empty"
    if problem:
        raise argparse.ArgumentTypeError(problem)
    if not stat.S_ISREG(path.stat().st_mode):
        raise argparse.ArgumentTypeError(f"{path} is not a file: name an image archive (.tar)")
    return path


archive.kind = "file"  # type: ignore[attr-defined]

_REFERENCE = re.compile(
    r"(?:[a-z0-9.-]+(?::\d+)?/)?[a-z0-9]+(?:[._-][a-z0-9]+)*(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*"
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[a-f0-9]{64})?")


def image(text: str) -> str:
    """An image reference (docker's grammar, simplified; clusters/inputs.py has the same)."""
    if not _REFERENCE.fullmatch(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not an image reference: want REPOSITORY:TAG")
    return text


image.kind = "image"  # type: ignore[attr-defined]
