"""Every value the suite and its tools take from outside, declared once, and the one way each is
checked before any work starts.

* **Value types** (``mib``, ``count``, ``behavior``, ``existing_file`` ...): the argparse types of
  every command-line option. Each carries a ``kind``, the family of bad values the fault harness
  (tests/test_fault_harness.py) tries on every option of that type; an option whose type has no
  kind is one the harness refuses to pass, so a new option cannot arrive undeclared.
* **Environment variables** (``VARIABLES``): each with its parser and the commands that read it.
  ``check_environment(command)`` checks those set in the environment that the command reads; it
  is the first thing every tool does (clusters/cli.py ``run``) and the suite's option phase does
  (e2e/plugin/options.py). A variable only one command reads does not stop the others.
* **Input files** (``read_text``, ``load_yaml``, ``parse_record``): one reader that refuses a
  directory, a missing file, a device, a symlink loop, a path under a file, an unreadable file,
  non-UTF-8 and binary text, and parsed data of the wrong shape (pydantic records, strict), each
  with one message naming the option or variable, the path and what to do.
* **Outside answers** (``docker_info``, ``kind_version``, ``read_junit``): what Docker, kind and a
  JUnit XML report say, as typed records that refuse an empty or wrong-shaped answer and name its
  source.

It is the lowest part of clusters/ that knows about values (it imports no provider, no tool, not
clusters/cli.py, which imports it): workloads/ must not import it.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import re
import stat
import xml.etree.ElementTree as ET  # noqa: S405 - JUnit reports this suite's own runs wrote
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar

import pydantic
from pydantic import BaseModel, ConfigDict, Field

from clusters import behaviors as swap_behaviors
from clusters.redact import redact


class UsageError(ValueError):
    """A value the command line, the environment or an input file gave that cannot work: exit 4."""


class Invalid(argparse.ArgumentTypeError, ValueError):
    """What a value type raises: argparse shows its text after the option's name (it shows only
    "invalid X value" for any other error), and everyone else catches it as a ValueError."""


# --- text ----------------------------------------------------------------------------------------

def not_utf8(text: str) -> str | None:
    """Why ``text`` (an argument or a variable: Python keeps their undecodable bytes as
    surrogates) is not UTF-8 text; None when it is."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        raw = text.encode("utf-8", "surrogateescape") if _escapable(text) else b""
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as decoded:
            return f"is not UTF-8 text (byte 0x{raw[decoded.start]:02x} at offset {decoded.start})"
        return f"is not UTF-8 text (character {error.start})"
    if "\0" in text:
        return f"holds a NUL character (at offset {text.index(chr(0))})"
    return None


def _escapable(text: str) -> bool:
    try:
        text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return False
    return True


def shown(value: str, limit: int = 120) -> str:
    """A value as a message quotes it, the way a shell would take it back: credentials masked
    (clusters/redact.py), undecodable bytes escaped, cut short."""
    import shlex

    text = redact(value.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
                  if _escapable(value) else value.encode("utf-8", "backslashreplace").decode())
    text = text if len(text) <= limit else text[:limit] + "..."
    return shlex.quote(text) if text.isprintable() else repr(text)  # a newline in it stays on the line


# --- value types (argparse types, and the parsers of variables and plugin options) ---------------

Kind = Literal[
    "mib", "guest-mib", "count", "cpus", "behavior", "behaviors", "release", "file", "junit", "patch",
    "directory", "source-directory", "patch-directory", "command", "image", "name", "pytest-expression",
    "pytest-args", "argv", "url", "goproxy", "docker-host", "api-ports", "path-list", "choice", "flag",
    "text", "output-file",
]
T = TypeVar("T")


def typed(kind: Kind, name: str | None = None) -> Callable[[Callable[[str], T]], Callable[[str], T]]:
    """Make ``parse`` (text -> value, ValueError with the reason) a declared value type: UTF-8
    checked first, every ValueError an ``Invalid`` with its own text, ``kind`` for the harness,
    ``name`` for argparse's usage lines."""

    def declare(parse: Callable[[str], T]) -> Callable[[str], T]:
        def value(text: str) -> T:
            problem = not_utf8(text)
            if problem:
                raise Invalid(problem)
            try:
                return parse(text)
            except Invalid:
                raise
            except ValueError as error:
                raise Invalid(str(error)) from None

        value.kind = kind  # type: ignore[attr-defined]
        value.__name__ = name or parse.__name__
        value.__doc__ = parse.__doc__
        return value

    return declare


def kind_of(value_type: Any) -> str | None:
    """The declared kind of an argparse type; None for one that is not declared here."""
    return getattr(value_type, "kind", None)


def _whole(text: str, unit: str) -> int:
    # int() takes "1_000", " 12 " and other scripts' digits ("١٢"): a size is ASCII digits only
    if not re.fullmatch(r"-?[0-9]+", text):
        raise ValueError(f"{text!r} is not a {unit}")
    return int(text)


def host_memory_mib() -> tuple[int, int]:
    """(MemTotal, MemAvailable) of this host, in MiB; (0, 0) where /proc/meminfo says neither."""
    try:
        meminfo = Path("/proc/meminfo").read_text()
    except OSError:
        return 0, 0
    found = {m.group(1): int(m.group(2)) // 1024 for m in re.finditer(r"^(MemTotal|MemAvailable):\s+(\d+) kB", meminfo, re.M)}
    return found.get("MemTotal", 0), found.get("MemAvailable", 0)


def host_cpus() -> int:
    """The CPUs this process may run on (a container's or a cgroup's limit on affinity included)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def mib(minimum: int = 1, why: str = "", guest: bool = False, maximum: int | None = None,
        why_at_most: str = "") -> Callable[[str], int]:
    """A whole number of MiB, at least ``minimum`` (``why`` says why), at most ``maximum``.
    ``guest``: memory a guest of this host gets, so at most the host's MemTotal (QEMU gives a guest
    what it asks for and the host's OOM killer takes it back, many minutes into a run)."""

    @typed("guest-mib" if guest else "mib", "MiB")
    def parse(text: str) -> int:
        value = _whole(text, "number of MiB")
        if value <= 0:
            raise ValueError(f"must be a positive number of MiB, got {value}")
        if value < minimum:
            raise ValueError(f"{value} MiB is too small: at least {minimum} MiB" + (f" ({why})" if why else ""))
        if maximum is not None and value > maximum:
            raise ValueError(f"{value} MiB is too large: at most {maximum} MiB" + (f" ({why_at_most})" if why_at_most else ""))
        total, _ = host_memory_mib() if guest else (0, 0)
        if total and value > total:
            raise ValueError(f"{value} MiB is more than this host's memory ({total} MiB MemTotal): a guest that large"
                             f" is killed by the host's OOM killer once it uses it; ask for at most {total} MiB")
        return value

    return parse


@typed("count", "count")
def count(text: str) -> int:
    """A whole number, at least 1."""
    value = _whole(text, "whole number")
    if value < 1:
        raise ValueError(f"must be at least 1, got {value}")
    return value


@typed("cpus", "CPUs")
def cpus(text: str) -> int:
    """A guest's vCPUs: at least 1, at most this host's CPUs (more only share them, slower)."""
    value = count(text)
    have = host_cpus()
    if value > have:
        raise ValueError(f"{value} vCPUs is more than the {have} CPUs this host gives this process: at most {have}")
    return value


@typed("behavior", "swapBehavior")
def behavior(text: str) -> str:
    """One swapBehavior, by the kubelet's (case-sensitive) name."""
    if not text:
        raise ValueError(f"is empty: name a swap behavior ({', '.join(swap_behaviors.ALL_BEHAVIORS)})")
    return swap_behaviors.normalize(text)


@typed("behaviors", "behaviors")
def behaviors(text: str) -> list[str]:
    """Comma-separated swapBehaviors, each named once, at least one."""
    items = [part.strip() for part in text.split(",")]
    if not any(items):
        raise ValueError(f"{text!r} names no swap behavior: choose from {', '.join(swap_behaviors.ALL_BEHAVIORS)}"
                         " (or leave the option out for every behavior)")
    if "" in items:
        raise ValueError(f"{text!r} has an empty entry: separate behaviors by single commas, e.g. NoSwap,LimitedSwap")
    return swap_behaviors.parse_list(text)


# A Kubernetes release as the Go module proxy names it; the range is clusters/versions.py's
# (the release's users check it: this module imports no tool).
RELEASE = re.compile(r"v1\.(\d+)\.(\d+)")


@typed("image", "image")
def image(text: str) -> str:
    """An image reference: docker's grammar, simplified ([registry[:port]/]path[:tag][@sha256:hex])."""
    if not IMAGE_REFERENCE.fullmatch(text):
        raise ValueError(f"{text!r} is not an image reference: want REPOSITORY:TAG, e.g. kindest/node:v1.37.0")
    return text


IMAGE_REFERENCE = re.compile(
    r"(?:[a-z0-9.-]+(?::\d+)?/)?[a-z0-9]+(?:[._-][a-z0-9]+)*(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*"
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[a-f0-9]{64})?")


@typed("name", "name")
def name(text: str) -> str:
    """A name (a mutant's): letters, digits, dots, dashes and underscores."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", text):
        raise ValueError(f"{text!r} is not a name (letters, digits, '.', '-', '_')")
    return text


@typed("pytest-expression", "EXPRESSION")
def pytest_expression(text: str) -> str:
    """A pytest -k/-m expression, compiled as pytest will (its message, word for word)."""
    from _pytest.mark.expression import Expression

    if not text.strip():
        raise ValueError("is empty: it would select no test; leave the option out to run every test")
    try:
        Expression.compile(text)
    except SyntaxError as error:  # pytest's ParseError is one
        raise ValueError(f"{error.text}: at column {error.offset}: {error.msg}") from None
    return text


@typed("pytest-args", "PYTEST_ARG")
def pytest_arg(text: str) -> str:
    """One more argument for pytest (checked by the tool with pytest's own parser, all at once)."""
    return text


@typed("argv", "ARG")
def argv_item(text: str) -> str:
    """One word of a command to run as it is (a guest's `exec`)."""
    return text


# --- paths ---------------------------------------------------------------------------------------

def _file_type(mode: int) -> str:
    for test, what in ((stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a named pipe"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return what
    return "not a regular file"


def _first_not_directory(path: Path) -> Path | None:
    """The nearest ancestor of ``path`` that exists and is not a directory (a path under a file)."""
    for ancestor in reversed(path.absolute().parents):
        try:
            mode = ancestor.stat().st_mode
        except OSError:
            return None
        if not stat.S_ISDIR(mode):
            return ancestor
    return None


def tilde_hint(path: Path | str) -> str:
    """A path that starts with "~" reached the suite unexpanded (quoted, or after "="): say so."""
    unexpanded = str(path).startswith("~") or "~" in Path(path).parts
    return " (a '~' is expanded by the shell only at the start of a word: write $HOME instead)" if unexpanded else ""


def path_problem(path: Path, error: OSError) -> str:
    """Why ``path`` cannot be opened, from the error its stat or open gave."""
    if error.errno == errno.ENOENT:
        if os.path.islink(path):
            return f"is a symlink to {os.readlink(path)}, which does not exist"
        return "does not exist" + tilde_hint(path)
    if error.errno == errno.ENOTDIR:
        blocker = _first_not_directory(path)
        return f"is under {blocker}, which is a file, not a directory" if blocker else "is under a file, not a directory"
    if error.errno == errno.ELOOP:
        return "is a symlink loop (it leads back to itself)"
    if error.errno in (errno.EACCES, errno.EPERM):
        return "cannot be read: permission denied"
    if error.errno == errno.ENAMETOOLONG:
        return "is too long a name for the file system"
    return f"cannot be read ({error.strerror or error})"


def _label(what: str, path: Path | str) -> str:
    return f"{what} {path}" if what else str(path)


MAX_INPUT_BYTES = 64 * 1024 * 1024  # an input file larger than this is not one of the suite's


def read_bytes(path: Path | str, what: str, fix: str = "", limit: int = MAX_INPUT_BYTES) -> bytes:
    """The bytes of a regular file ``what`` names (an option or variable, e.g. "--kubeconfig");
    UsageError with one message for anything else."""
    path = Path(path)
    tail = f": {fix}" if fix else ""
    if str(path) == "":
        raise UsageError(f"{what}: the path is empty{tail}")
    problem = not_utf8(str(path))
    if problem:
        raise UsageError(f"{what} {shown(str(path))}: the path {problem}{tail}")
    try:
        st = path.stat()
    except OSError as error:
        raise UsageError(f"{_label(what, path)} {path_problem(path, error)}{tail}") from None
    if not stat.S_ISREG(st.st_mode):  # a FIFO would block the open, a device never end the read
        raise UsageError(f"{_label(what, path)} is {_file_type(st.st_mode)}, not a file{tail}")
    if st.st_size > limit:
        raise UsageError(f"{_label(what, path)} is {st.st_size} bytes, more than any such file"
                         f" ({limit // (1024 * 1024)} MiB){tail}")
    try:
        return path.read_bytes()
    except OSError as error:
        raise UsageError(f"{_label(what, path)} {path_problem(path, error)}{tail}") from None


def read_text(path: Path | str, what: str, fix: str = "", empty_ok: bool = False,
              limit: int = MAX_INPUT_BYTES) -> str:
    """A UTF-8 text file's text (read_bytes, then): not empty unless ``empty_ok``, no NUL byte."""
    data = read_bytes(path, what, fix, limit)
    tail = f": {fix}" if fix else ""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise UsageError(f"{_label(what, path)} is not UTF-8 text (byte 0x{data[error.start]:02x} at offset"
                         f" {error.start}){tail}") from None
    if "\0" in text:
        raise UsageError(f"{_label(what, path)} is binary, not text (a NUL byte at offset {text.index(chr(0))}){tail}")
    if not empty_ok and not text.strip():
        raise UsageError(f"{_label(what, path)} is empty{tail}")
    return text


def _not_empty(text: str) -> None:
    # Path("") is ".", the directory a command runs from: an empty value is a mistake, not that
    if not text:
        raise ValueError("the path is empty: name one")


@typed("text", "PATH")
def nonempty_path(text: str) -> Path:
    """A path, not empty (checked further by what it is for)."""
    _not_empty(text)
    return Path(text)


@typed("file", "FILE")
def existing_file(text: str) -> Path:
    """A readable UTF-8 text file, as the option's user reads it (read_text)."""
    _not_empty(text)
    path = Path(text)
    try:
        read_text(path, "")
    except UsageError as error:
        raise ValueError(str(error)) from None
    return path


@typed("patch", "FILE")
def patch_file(text: str) -> Path:
    """A `git diff` of a kubernetes checkout (clusters/vm/k8s_source.py reads its hunks)."""
    return existing_file(text)


@typed("junit", "JUNIT_XML")
def junit_file(text: str) -> Path:
    """A JUnit XML report of a run of the suite."""
    path = Path(text)
    try:
        read_junit(path, "")
    except UsageError as error:
        raise ValueError(str(error)) from None
    return path


def directory_problem(path: Path, what: str, parents: bool = False) -> str | None:
    """Why ``path`` cannot be (or become) a directory a command writes into; None when it can.
    It may not exist yet; its parent must (a typo is not made into a tree of directories),
    unless ``parents``: then the nearest existing ancestor counts."""
    import tempfile

    problem = not_utf8(str(path))
    if problem:
        return f"{what} {shown(str(path))}: the path {problem}"
    if str(path) == "":
        return f"{what}: the path is empty: name a directory"
    if os.path.islink(path) and not path.exists():
        return f"{what} {path} is a symlink that leads nowhere (to {os.readlink(path)}): name a directory"
    try:
        mode = path.stat().st_mode
    except OSError as error:
        if error.errno not in (errno.ENOENT, errno.ENOTDIR):
            return f"{what} {path} {path_problem(path, error)}"
        mode = None
    if mode is not None and not stat.S_ISDIR(mode):
        return f"{what} {path} is {'a file' if stat.S_ISREG(mode) else _file_type(mode)}, not a directory: name a" \
               " directory (it is created if missing)"
    blocker = _first_not_directory(path)
    if blocker is not None:
        return f"{what} {path}: {blocker} is a file, not a directory: name a directory outside it"
    existing = path if mode is not None else path.parent
    while parents and not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        state = "is not a directory" if existing.exists() else "does not exist"
        return f"{what} {path}: its parent {existing} {state}{tilde_hint(path)}: create it first (mkdir -p" \
               f" {existing}) or name another"
    try:
        with tempfile.TemporaryFile(dir=existing, prefix=".ksc-write-check-"):
            pass
    except OSError as error:
        return f"{what} {path}: {existing} is not writable ({error.strerror}): name a directory you can write to"
    return None


@typed("directory", "DIR")
def output_directory(text: str) -> Path:
    """A directory a command writes into: it may not exist yet, its parent must."""
    _not_empty(text)
    path = Path(text)
    problem = directory_problem(path, "")
    if problem:
        raise ValueError(problem.strip())
    return path


@typed("output-file", "FILE")
def output_file(text: str) -> Path:
    """A file a command writes (replaced if there): not a directory, in a directory it can write."""
    _not_empty(text)
    path = Path(text)
    if path.is_dir():
        raise ValueError(f"{path} is a directory, not a file: name the file to write")
    problem = directory_problem(path.parent, "its directory")
    if problem:
        raise ValueError(f"{path}: {problem}")
    return path


@typed("directory", "DIR")
def state_directory(text: str) -> Path:
    """A directory a command keeps its state in, created with its parents if missing."""
    _not_empty(text)
    path = Path(text)
    problem = directory_problem(path, "", parents=True)
    if problem:
        raise ValueError(problem.strip())
    return path


def existing_directory_problem(path: Path) -> str | None:
    """Why ``path`` is not a directory to read from; None when it is one."""
    try:
        mode = path.stat().st_mode
    except OSError as error:
        return f"{path} {path_problem(path, error)}"
    if not stat.S_ISDIR(mode):
        return f"{path} is {'a file' if stat.S_ISREG(mode) else _file_type(mode)}, not a directory"
    return None


@typed("source-directory", "DIR")
def source_directory(text: str) -> Path:
    """An existing directory to read from (a kubernetes checkout)."""
    _not_empty(text)
    problem = existing_directory_problem(Path(text))
    if problem:
        raise ValueError(problem)
    return Path(text)


@typed("patch-directory", "DIR")
def patch_directory(text: str) -> Path:
    """An existing directory of *.patch files (the mutant bench's)."""
    path = source_directory(text)
    if not any(path.glob("*.patch")):
        raise ValueError(f"{path} has no *.patch file: name the directory of the mutants (default bench/mutants)")
    return path


@typed("command", "PATH")
def command(text: str) -> str:
    """A program: a name looked up on PATH, or a path to an executable file."""
    import shutil

    if not text:
        raise ValueError("is empty: name the program, or a path to it")
    if os.sep not in text:
        if shutil.which(text) is None:
            raise ValueError(f"{text!r} is not on PATH: install it, or pass its path")
        return text
    path = Path(text)
    try:
        mode = path.stat().st_mode
    except OSError as error:
        raise ValueError(f"{path} {path_problem(path, error)}") from None
    if not stat.S_ISREG(mode):
        raise ValueError(f"{path} is {_file_type(mode)}, not a program")
    if not os.access(path, os.X_OK):
        raise ValueError(f"{path} is not executable (mode {mode & 0o777:o}): chmod +x {path}")
    return text


# --- environment variables ----------------------------------------------------------------------

_MIRROR_URL = re.compile(r"https?://[^\s/?#'\"\\]+(?:/[^\s'\"\\]*)?")
DEFAULT_MIRROR = "http://deb.debian.org/debian"
DEFAULT_GOPROXY = "https://proxy.golang.org"


@typed("url", "URL")
def debian_mirror(text: str) -> str:
    """What debootstrap and a sources.list line take as a mirror: an http(s) URL with a host, no
    whitespace or quotes (a sources.list line splits on whitespace)."""
    if not _MIRROR_URL.fullmatch(text):
        raise ValueError(f"is not an http(s) URL of a Debian mirror: set it to one, e.g. {DEFAULT_MIRROR} (or unset it"
                         " for that one)")
    return text


_PROXY_URL = re.compile(r"(?:https?://[^\s/?#,|'\"\\]+|file://)[^\s,|'\"\\]*")


@typed("goproxy", "GOPROXY")
def goproxy(text: str) -> str:
    """Go's GOPROXY: URLs, "direct" and "off" separated by "," or "|" (empty: Go's default). The
    suite asks the first URL for releases and module files by name, so one must come before "off"
    or "direct". Returns that URL."""
    entries = [e.strip() for e in re.split(r"[,|]", text) if e.strip()]  # Go trims each entry too
    if not text:
        return DEFAULT_GOPROXY
    if not entries:
        raise ValueError(f"names no proxy: e.g. GOPROXY={DEFAULT_GOPROXY},direct (or unset it)")
    for entry in entries:
        if entry not in ("off", "direct") and not _PROXY_URL.fullmatch(entry):
            raise ValueError(f"entry {shown(entry)} is not a proxy URL (http://, https:// or file://, no spaces),"
                             f" direct or off: e.g. GOPROXY={DEFAULT_GOPROXY},direct")
    first = entries[0]
    if first in ("off", "direct"):
        why = "turns module downloads off" if first == "off" else "fetches modules from their repositories, with no proxy"
        raise ValueError(f"{why}; the suite asks a Go module proxy for Kubernetes releases and their module files by"
                         f" name: set GOPROXY to a proxy ({DEFAULT_GOPROXY}, or your mirror), e.g."
                         f" GOPROXY={DEFAULT_GOPROXY},direct")
    return first.rstrip("/")


@typed("docker-host", "DOCKER_HOST")
def docker_host(text: str) -> str:
    """Where the docker CLI finds its engine: unix://PATH, tcp://HOST:PORT, ssh://[USER@]HOST[:PORT],
    fd://, npipe://."""
    match = re.fullmatch(r"(unix|tcp|ssh|fd|npipe)://(\S*)", text)
    if not match:
        raise ValueError("is not a Docker endpoint: want unix:///var/run/docker.sock, tcp://HOST:PORT or"
                         " ssh://HOST (or unset it for the local engine)")
    scheme, rest = match.groups()
    if scheme == "tcp" and not re.fullmatch(r"[^\s:/]+(?::[0-9]{1,5})?/?", rest):
        raise ValueError("is not tcp://HOST:PORT")
    if scheme == "tcp" and ":" in rest and not 0 < int(rest.rstrip("/").rsplit(":", 1)[1]) < 65536:
        raise ValueError("names a port outside 1-65535")
    if scheme in ("unix", "ssh") and not rest.strip("/"):
        raise ValueError(f"names no {'socket' if scheme == 'unix' else 'host'}")
    return text


API_PORTS_VARIABLE = "KSC_KIND_API_PORTS"


@typed("api-ports", "CLUSTER=PORT,...")
def api_ports(text: str) -> dict[str, int]:
    """``ksc-noswap=40001,ksc-limitedswap=40002`` -> {name: port}."""
    ports: dict[str, int] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        cluster, sep, port = item.partition("=")
        if not sep or not cluster or not re.fullmatch(r"[0-9]{1,5}", port) or not 0 < int(port) < 65536:
            raise ValueError(f"{API_PORTS_VARIABLE}: {item!r} is not CLUSTER=PORT (a port 1-65535), e.g."
                             " ksc-mixed=40001")
        if cluster in ports:
            raise ValueError(f"{API_PORTS_VARIABLE}: {cluster} is named twice")
        ports[cluster] = int(port)
    return ports


def _absolute_directory(variable: str) -> Callable[[str], Path]:
    @typed("directory", "DIR")
    def parse(text: str) -> Path:
        path = Path(text).expanduser()
        if not path.is_absolute():
            raise ValueError(f"is a relative path: it would move with the directory a command runs from; give an"
                             f" absolute one, e.g. {variable}=$HOME/.cache")
        problem = directory_problem(path, "", parents=True)
        # Writable or not is the host's state, said by the preflight (exit 3); a file where the
        # directory must be is a wrong value.
        if problem and "is not writable" not in problem:
            raise ValueError(problem.strip())
        return path

    return parse


@typed("choice", "CHOICE")
def _accel(text: str) -> str:
    if text not in ("", "kvm", "tcg"):
        raise ValueError("is not an accelerator: use kvm (fail unless KVM runs a guest) or tcg (software emulation),"
                         " or unset it to take KVM where it works")
    return text


@typed("choice", "CHOICE")
def _tcg_thread(text: str) -> str:
    if text not in ("multi", "single"):
        raise ValueError("is not a TCG threading mode: use multi (one host thread per vCPU, the default) or single")
    return text


@typed("choice", "CHOICE")
def _on_off(text: str) -> bool:
    if text not in ("on", "off"):
        raise ValueError("is not on or off")
    return text == "on"


@typed("mib", "MiB")
def _tb_mib(text: str) -> int:
    value = _whole(text, "size in MiB")
    if value < 1:
        raise ValueError("is not a size in MiB: at least 1 (QEMU caps it at 2048)")
    return value


@typed("release", "RELEASE")
def release(text: str) -> str:
    """A Kubernetes release as the Go module proxy names it (v1.MINOR.PATCH); its users check the
    supported range (clusters/versions.py)."""
    if not RELEASE.fullmatch(text):
        raise ValueError(f"{text!r} is not a Kubernetes release (want v1.MINOR.PATCH, e.g. v1.37.1)")
    return text


@typed("path-list", "PATHS")
def _path_list(text: str) -> list[str]:
    return [p for p in text.split(os.pathsep) if p]


@typed("text", "TEXT")
def _anything(text: str) -> str:
    return text


Setter = Literal["you", "pytest-xdist", "clusters.vm kind-host up"]


class Variable(BaseModel):
    """An environment variable the suite or a tool reads."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    name: str
    parse: Callable[[str], Any]
    # who reads it: "suite" (every provider), "suite:kind", a tool ("clusters.vm"), one of its
    # commands ("clusters.vm up"); a command reads what its tool's entry names
    readers: tuple[str, ...]
    what: str
    # the option it is the default of: checked as that option's value, when the option is not given
    default_of: str = ""
    set_by: Setter = "you"
    # only read when this other variable is unset or empty
    unless: str = ""
    # set but empty: its readers take it as unset (Go's GOPROXY, docker's DOCKER_HOST ...), or it
    # is a value like any other, checked (a mirror, a size)
    empty_is_unset: bool = True


_BUILDS = ("clusters.vm up", "clusters.vm build", "clusters.vm node-image", "clusters.vm kind-host up",
           "clusters.vm swap-kubelet", "suite:vm", "bench.mutants", "bench.matrix", "bench.vm_bench",
           "bench.kind_bench")
_BOOTS = ("clusters.vm up", "clusters.vm kind-host up", "clusters.vm build", "suite:vm", "suite:kind", "bench.mutants",
          "bench.matrix", "bench.vm_bench", "bench.kind_bench")  # build: an image's first boot; kind: the kind host
_CACHES = ("suite", "clusters.vm", "bench.mutants", "bench.matrix", "bench.vm_bench", "bench.kind_bench")

VARIABLES: tuple[Variable, ...] = (
    Variable(name="KSC_CACHE_DIR", parse=_absolute_directory("KSC_CACHE_DIR"), readers=_CACHES,
             what="where every cache lives (default $XDG_CACHE_HOME/kube-swap-conformance)"),
    Variable(name="XDG_CACHE_HOME", parse=_absolute_directory("XDG_CACHE_HOME"), readers=_CACHES,
             what="the caches' parent when KSC_CACHE_DIR is unset (default ~/.cache)", unless="KSC_CACHE_DIR"),
    Variable(name="KSC_VM_ACCEL", parse=_accel, readers=_BOOTS, what="the guests' accelerator: kvm or tcg"),
    Variable(name="KSC_VM_TCG_TB_MIB", parse=_tb_mib, readers=_BOOTS, empty_is_unset=False, what="TCG's translation cache, in MiB"),
    Variable(name="KSC_VM_TCG_THREAD", parse=_tcg_thread, readers=_BOOTS, empty_is_unset=False, what="TCG's threading: multi or single"),
    Variable(name="KSC_VM_ALONE", parse=_on_off, readers=_BOOTS,
             what="on (default): a guest under TCG does not start while another of the suite's guests runs; off: it"
                  " does (a host with cores for both)"),
    Variable(name="KSC_DEBIAN_MIRROR", parse=debian_mirror, readers=_BUILDS,
             empty_is_unset=False, what="the Debian mirror the guests' root filesystems come from"),
    Variable(name="GOPROXY", parse=goproxy, readers=(*_BUILDS, "clusters.versions"),
             what="the Go module proxy releases and modules are fetched from"),
    Variable(name="KSC_MUTANTS_RELEASE", parse=release, readers=("bench.mutants",),
             empty_is_unset=False, what="the release the mutant bench patches (default clusters/versions.py KUBERNETES)"),
    Variable(name="DOCKER_HOST", parse=docker_host, readers=("suite:kind", "bench.mutants", "bench.matrix"),
             what="the Docker engine kind creates its nodes in"),
    Variable(name=API_PORTS_VARIABLE, parse=api_ports, readers=("suite:kind",),
             what="the port on this machine's loopback of each cluster's API server on a remote Docker host"),
    Variable(name="KSC_KIND_AUTO", parse=_on_off, readers=("suite:kind",),
             what="on (default): where the local Docker cannot run swap-enabled kind nodes, the kind provider"
                  " installs kind and starts the kind host VM itself; off: it names what is missing instead"),
    Variable(name="KSC_KIND_CONFIG_PATCH", parse=_anything, readers=("suite:kind",), default_of="--kind-config-patch",
             what="a host profile appended to every kind cluster's config"),
    Variable(name="KUBECONFIG", parse=_path_list, readers=("suite:existing",), default_of="--kubeconfig",
             what="the existing provider's kubeconfig (the first of the list)"),
    Variable(name="KSC_KIND_NODE_IMAGE", parse=image, readers=(), set_by="clusters.vm kind-host up",
             what="the local node image `kind-host up` built and loaded; pass it as --node-image"),
    Variable(name="PYTEST_XDIST_WORKER", parse=_anything, readers=("suite",), set_by="pytest-xdist",
             what="the xdist worker a test runs on (its turn's record)"),
)
VARIABLE = {v.name: v for v in VARIABLES}


def reads(reader: str, command: str) -> bool:
    """Whether ``command`` ("clusters.vm up", "suite:kind") reads what ``reader`` names."""
    return command == reader or command.startswith((reader + " ", reader + ":"))


def read_by(command: str) -> list[Variable]:
    return [v for v in VARIABLES if any(reads(r, command) for r in v.readers)]


def variable_problem(variable: Variable, value: str) -> str | None:
    """The one message for a bad value of ``variable``; None when it is good."""
    try:
        variable.parse(value)
    except (Invalid, ValueError) as error:
        # the value is named once, as NAME=VALUE: a parser's own quote of it (for an option) goes
        reason = str(error).removeprefix(f"{variable.name}: ").removeprefix(f"{value!r} ")
        return f"{variable.name}={shown(value)} {reason}"
    return None


def check_environment(command: str, environ: Mapping[str, str] | None = None) -> None:
    """Every variable ``command`` reads, where the environment sets it, checked; the first bad one
    is a UsageError naming it, its value and the fix. A variable that is an option's default is
    checked as that option's value (the option, when given, wins)."""
    environ = os.environ if environ is None else environ
    for variable in read_by(command):
        value = environ.get(variable.name)
        if value is None or variable.default_of or variable.set_by != "you":
            continue
        if variable.unless and environ.get(variable.unless):
            continue
        if value == "" and variable.empty_is_unset:
            continue
        problem = variable_problem(variable, value)
        if problem:
            raise UsageError(problem)


def variable(name_: str, default: str = "", environ: Mapping[str, str] | None = None) -> Any:
    """The parsed value of a declared variable (``default`` when unset or empty); UsageError when bad."""
    declared = VARIABLE[name_]
    value = (os.environ if environ is None else environ).get(name_)
    if value is None or (value == "" and declared.empty_is_unset):
        value = default
    problem = variable_problem(declared, value)
    if problem:
        raise UsageError(problem)
    return declared.parse(value)


# --- records: parsed input files and outside answers ---------------------------------------------

class Record(BaseModel):
    """A parsed input: strict types, no unknown fields (a typo is not silently dropped)."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


_TYPE_NAMES = {"str": "a string", "int": "a whole number", "float": "a number", "bool": "true or false",
               "list": "a list", "dict": "a mapping", "NoneType": "null"}


def _type_name(value: Any) -> str:
    return type(value).__name__


def _describe(annotation: Any) -> str:
    """What an annotation asks for, in words: list[str] -> "a list of strings"."""
    import typing

    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (list, tuple, Sequence) and args:
        inner = _describe(args[0])
        plural = {"a string": "strings", "a whole number": "whole numbers", "a mapping": "mappings",
                  "a number": "numbers"}.get(inner, inner.removeprefix("a ").removeprefix("an ") + "s")
        return f"a list of {plural}"
    if origin in (dict, Mapping):
        return "a mapping"
    if origin is Literal:
        return " or ".join(repr(a) for a in args)
    if origin is typing.Annotated:
        return _describe(args[0])
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "a mapping"
    if origin is typing.Union or type(annotation).__name__ == "UnionType":
        return " or ".join(_describe(a) for a in args if a is not type(None))
    return _TYPE_NAMES.get(getattr(annotation, "__name__", ""), str(annotation))


def _fields(model: Any) -> dict[str, Any]:
    """Field name -> annotation of a BaseModel or a dataclass (its string annotations resolved)."""
    import dataclasses
    import typing

    if isinstance(model, type) and issubclass(model, BaseModel):
        return {name: info.annotation for name, info in model.model_fields.items()}
    if dataclasses.is_dataclass(model):
        hints = typing.get_type_hints(model)
        return {f.name: hints.get(f.name, f.type) for f in dataclasses.fields(model)}
    return {}


def _field_annotation(model: Any, loc: Sequence[Any]) -> Any:
    """The annotation at ``loc`` in ``model`` (a BaseModel or a dataclass), or None."""
    import typing

    current: Any = model
    for part in loc:
        fields = _fields(current)
        if isinstance(part, str) and part in fields:
            current = fields[part]
        elif isinstance(part, int) and typing.get_args(current):
            current = typing.get_args(current)[0]
        else:
            return None
    return current


def shape_problem(error: pydantic.ValidationError, model: Any) -> str:
    """The first thing wrong with parsed data, in words: "kubeadmConfigPatches must be a list of
    strings, got int"."""
    first = error.errors(include_url=False)[0]
    loc = [p for p in first["loc"] if p not in ("function-after",)]
    where = "".join(f"[{p}]" if isinstance(p, int) else (f".{p}" if i else str(p)) for i, p in enumerate(loc))
    kind = first["type"]
    if kind == "missing":
        return f"{where} is missing"
    if kind in ("extra_forbidden", "unexpected_keyword_argument"):
        parent = _field_annotation(model, loc[:-1]) if len(loc) > 1 else model
        return f"{where} is not one of its fields ({', '.join(_fields(parent))})"
    if kind in ("model_type", "dataclass_type", "dict_type") and not loc:
        return f"must be a mapping, got {_type_name(first['input'])}"
    ctx, got = first.get("ctx") or {}, first.get("input")
    if kind in ("string_too_short", "too_short") and not got:
        return f"{where} is empty"
    if kind == "too_short":
        return f"{where} has {len(got)} entries: at least {ctx.get('min_length')}"
    if kind in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
        bound = {"greater_than": "more than", "greater_than_equal": "at least", "less_than": "less than",
                 "less_than_equal": "at most"}[kind]
        limit = next(iter(ctx.values()), "?")
        return f"{where} must be {bound} {limit}, got {got!r}"
    annotation = _field_annotation(model, loc)
    expected = _describe(annotation) if annotation is not None else None
    if kind.endswith("_type") or kind.endswith("_parsing") or kind == "literal_error":
        expected = expected or first["msg"].removeprefix("Input should be ")
        return f"{where or 'it'} must be {expected}, got {_type_name(first['input'])}"
    detail = first["msg"].removeprefix("Value error, ")
    return f"{where or 'it'}: {detail}" if where else detail


M = TypeVar("M")


def parse_record(data: Any, model: type[M], source: str, fix: str = "") -> M:
    """``data`` as a ``model`` (a Record, or a dataclass with a pydantic config), or a UsageError
    that names ``source``, the first thing wrong with it and ``fix``."""
    try:
        return pydantic.TypeAdapter(model).validate_python(data)
    except pydantic.ValidationError as error:
        raise UsageError(f"{source}: {shape_problem(error, model)}" + (f": {fix}" if fix else "")) from None


def load_yaml(path: Path | str, what: str, model: type[M], fix: str = "") -> M:
    """A YAML file read (read_text) and parsed into ``model``."""
    import yaml

    text = read_text(path, what, fix)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        # the parser's words in parentheses: "...cannot start any token: pass ..." reads as a credential
        # to clusters/redact.py, which masks it
        raise UsageError(f"{_label(what, path)} is not valid YAML ({where.strip(' ()')}: {problem})"
                         + (f": {fix}" if fix else "")) from None
    return parse_record(data, model, _label(what, path), fix)


def load_json(text: str, model: type[M], source: str) -> M:
    """JSON text parsed into ``model`` (strict types, JSON's own: an object is a record); UsageError
    naming ``source``."""
    try:
        json.loads(text)
    except ValueError as error:
        raise UsageError(f"{source} is not JSON ({error})") from None
    try:
        return pydantic.TypeAdapter(model).validate_json(text)
    except pydantic.ValidationError as error:
        raise UsageError(f"{source}: {shape_problem(error, model)}") from None


# The kind config fragment a host profile may hold (--kind-config-patch): kind's own fields for
# patches, each the type kind takes.
class Json6902Patch(Record):
    group: str
    version: str
    kind: str
    patch: str


class KindConfigPatch(Record):
    kubeadmConfigPatches: list[str] = Field(default_factory=list)  # noqa: N815 - kind's field names
    kubeadmConfigPatchesJSON6902: list[Json6902Patch] = Field(default_factory=list)  # noqa: N815
    containerdConfigPatches: list[str] = Field(default_factory=list)  # noqa: N815

    @pydantic.model_validator(mode="after")
    def _something(self) -> KindConfigPatch:
        if not self.model_fields_set:
            raise ValueError(f"names none of {', '.join(KindConfigPatch.model_fields)}")
        return self


class _Named(BaseModel):
    model_config = ConfigDict(strict=True, extra="allow", frozen=True)
    name: str


class Kubeconfig(BaseModel):
    """A kubeconfig's shape, as far as the suite relies on it (kubectl's other fields are let by)."""

    model_config = ConfigDict(strict=True, extra="allow", frozen=True)
    clusters: list[_Named] = Field(min_length=1)
    contexts: list[_Named] = Field(min_length=1)
    users: list[_Named] = Field(min_length=1)


class DockerInfo(BaseModel):
    """What `docker info --format '{{json .}}'` must say for an engine kind can use. The docker CLI
    talking to something else (an HTML page, a proxy) still prints this JSON, empty."""

    model_config = ConfigDict(extra="ignore", frozen=True)
    ServerVersion: str = Field(min_length=1)  # noqa: N815 - Docker's field names
    CgroupVersion: Literal["1", "2"]  # noqa: N815
    KernelVersion: str = Field(min_length=1)  # noqa: N815
    MemTotal: int = Field(gt=0)  # noqa: N815
    Name: str = ""  # noqa: N815


def docker_endpoint(environ: Mapping[str, str] | None = None) -> str:
    value = (os.environ if environ is None else environ).get("DOCKER_HOST", "")
    return f"DOCKER_HOST={value}" if value else "the Docker engine (default socket unix:///var/run/docker.sock)"


class NotAnEngine(RuntimeError):
    """What answered for Docker is no Docker engine (exit 3: the host is not ready)."""


def docker_info(stdout: str, environ: Mapping[str, str] | None = None) -> DockerInfo:
    """`docker info --format '{{json .}}'`'s answer as a DockerInfo; NotAnEngine naming the endpoint."""
    source = redact(docker_endpoint(environ))
    try:
        data = json.loads(stdout)
    except ValueError:
        raise NotAnEngine(f"{source} does not answer like a Docker engine: `docker info` said "
                          f"{shown(stdout.strip()[:80])}, not its JSON") from None
    try:
        return DockerInfo.model_validate(data)
    except pydantic.ValidationError as error:
        raise NotAnEngine(f"{source} does not answer like a Docker engine: its info's "
                          f"{shape_problem(error, DockerInfo)}") from None


class KindVersion(Record):
    version: tuple[int, int, int]
    go: str
    platform: str


_KIND_VERSION_LINE = re.compile(r"kind v(\d+)\.(\d+)\.(\d+)(?:[-+]\S*)? (go\S+) (\S+/\S+)")


def kind_version(stdout: str) -> KindVersion | None:
    """`kind version`'s one line ("kind v0.33.0 go1.24.0 linux/amd64") as a KindVersion; None when
    the answer is not that line."""
    lines = stdout.strip().splitlines()
    match = _KIND_VERSION_LINE.fullmatch(lines[0].strip()) if len(lines) == 1 else None
    if match is None:
        return None
    major, minor, patch, go, platform = match.groups()
    return KindVersion(version=(int(major), int(minor), int(patch)), go=go, platform=platform)


# --- JUnit XML reports (what the benches read from the suite's runs) -----------------------------

class JUnitResult(Record):
    message: str = ""
    text: str = ""


class JUnitCase(Record):
    classname: str
    name: str
    time: float = Field(ge=0)
    properties: tuple[tuple[str, str], ...] = ()
    failure: JUnitResult | None = None
    error: JUnitResult | None = None
    skipped: JUnitResult | None = None

    def values(self, name: str) -> list[str]:
        return [value for key, value in self.properties if key == name]


class JUnitReport(Record):
    source: str
    cases: tuple[JUnitCase, ...]


def read_junit(path: Path | str, what: str) -> JUnitReport:
    """A JUnit XML report (pytest's --junitxml) as a JUnitReport; UsageError naming the file for a
    file that is not one, or a test case whose fields are not what pytest writes."""
    label = _label(what, path)
    data = read_bytes(path, what)
    if not data.strip():
        raise UsageError(f"{label} is empty: not a JUnit XML report (pytest --junitxml writes one)")
    try:
        root = ET.fromstring(data)  # noqa: S314 - reports of this suite's runs
    except ET.ParseError as error:
        line, column = error.position
        raise UsageError(f"{label} is not XML (line {line}, column {column + 1}): not a JUnit XML report") from None
    if root.tag not in ("testsuites", "testsuite"):
        raise UsageError(f"{label} is not a JUnit XML report: its root element is <{root.tag}>, not <testsuites> or"
                         " <testsuite>")
    cases = []
    for i, case in enumerate(root.iter("testcase")):
        where = f"{label}: testcase {i + 1} ({case.get('name') or 'no name'})"
        time_text = case.get("time") or "0"
        try:
            seconds = float(time_text)
        except ValueError:
            raise UsageError(f"{where}: time {time_text!r} is not a number of seconds") from None

        def result(tag: str) -> dict[str, str] | None:
            found = case.find(tag)
            return None if found is None else {"message": found.get("message") or "", "text": found.text or ""}

        cases.append(parse_record({
            "classname": case.get("classname") or "", "name": case.get("name") or "", "time": seconds,
            "properties": tuple((p.get("name") or "", p.get("value") or "") for p in case.iter("property")),
            "failure": result("failure"), "error": result("error"), "skipped": result("skipped")}, JUnitCase, where))
    return JUnitReport(source=str(path), cases=tuple(cases))


# --- the input files, declared ------------------------------------------------------------------

class InputFile(BaseModel):
    """An input file the suite or a tool reads: through read_text/read_bytes (so a directory, a
    device, a FIFO, a symlink loop, non-UTF-8 and binary text are refused by name), parsed into
    ``record`` ("module:name"; "" for text whose reader checks it, a patch's hunks)."""

    model_config = ConfigDict(frozen=True)

    what: str
    given_by: tuple[str, ...]  # the options and variables that name it
    format: Literal["yaml", "json", "xml", "diff"]
    record: str
    readers: tuple[str, ...]


INPUT_FILES: tuple[InputFile, ...] = (
    InputFile(what="the existing provider's kubeconfig", given_by=("--kubeconfig", "KUBECONFIG"), format="yaml",
              record="clusters.inputs:Kubeconfig", readers=("suite:existing",)),
    InputFile(what="a kind host profile", given_by=("--kind-config-patch", "KSC_KIND_CONFIG_PATCH"), format="yaml",
              record="clusters.inputs:KindConfigPatch", readers=("suite:kind",)),
    InputFile(what="a Kubernetes patch", given_by=("--k8s-patch", "bench.mutants --patches"), format="diff",
              record="", readers=("suite:vm", "clusters.vm", "bench.mutants")),
    InputFile(what="a run's JUnit XML report", given_by=("bench.junit_times JUNIT", "the benches' runs"), format="xml",
              record="clusters.inputs:JUnitReport", readers=("bench.junit_times", "bench.mutants", "bench.matrix")),
    InputFile(what="a mutant's kept result", given_by=("bench.mutants --results-dir",), format="json",
              record="bench.mutants:Outcome", readers=("bench.mutants",)),
    InputFile(what="a matrix cell's kept result", given_by=("bench.matrix --store",), format="json",
              record="bench.matrix:Cell", readers=("bench.matrix",)),
)


# --- declarations of options (the pytest plugin's table) -----------------------------------------

class Option(BaseModel):
    """A command-line option as the suite declares it: its value's kind, the providers it is for
    (empty: every one), the options it cannot go with, and those it needs."""

    model_config = ConfigDict(frozen=True)

    flag: str
    kind: Kind
    providers: tuple[str, ...] = ()
    conflicts: tuple[str, ...] = ()
    requires: tuple[str, ...] = ()
    why: str = ""  # why the conflict or the requirement
