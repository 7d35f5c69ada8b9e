"""Bad input of every kind, to every command, by construction.

The cases are not written one by one: every option of every tool is found by walking its argparse
parser (each tool's ``parser()``), every option of the suite's pytest plugin by its option group,
every environment variable by clusters/inputs.py VARIABLES; each carries a declared kind, and the
bad values of each kind are generated here (empty, non-UTF-8, wrong type, out of range, a
directory for a file and a file for a directory, a symlink loop, a path under a file, a device, a
FIFO, a value for another provider, conflicting flags), with fake outside services (an HTML page
as the Docker engine, a module proxy that answers 200 to everything, an API server that refuses
the credentials or never answers). An option or a variable added without a declaration fails
the first tests here.

Every case must end with: the right exit code (clusters/cli.py Exit: 4 usage, 3 the host is not
ready), no traceback, at most 60 lines of output, the option or variable it is about named, in
bounded time, nothing left behind (no file outside the case's own directories, no process, no
run directory, no cache made by a refused command), no secret shown. The tools run in this
process (``main(argv)``, output captured) with tripwires on their first costly step, so a value
that gets past the checks fails its case instead of building or booting; the suite's cases run
in a batch subprocess that forks a child per case (tests/fault_runner.py), two batches at once.
"""

from __future__ import annotations

import argparse
import contextlib
import http.server
import importlib
import io
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from clusters import cli, inputs
from e2e.plugin import options

REPO = Path(__file__).resolve().parent.parent
CANARY = "ksc-canary-s3cr3t"  # a credential in a value: no output may show it
MAX_LINES = 60
CLI_SECONDS = 60  # a tool's refusal, in this process
SUITE_SECONDS = 90  # a run of the suite, its preflight's budget against a silent server included
DEAD_PROXY = "http://127.0.0.1:9"  # nothing listens on the discard port: refused at once

# --- the commands ------------------------------------------------------------------------------


class Tripwire(BaseException):
    """A tool reached its first costly step (a build, a boot, a lock, a network probe): the bad
    value it was given got past its checks. BaseException: no `except Exception` swallows it."""


def _trip(what: str) -> Callable[..., Any]:
    def tripped(*args: Any, **kwargs: Any) -> Any:
        raise Tripwire(what)

    return tripped


@dataclass(frozen=True)
class Tool:
    module: str
    # what a run of each parser needs besides the option under test (a subcommand's positionals)
    base: Callable[[tuple[str, ...], "Fixtures"], list[str]] = lambda path, fx: []
    # (module, attribute) -> replaced by a tripwire: the tool's first costly step
    tripwires: tuple[tuple[str, str], ...] = ()
    main_kwargs: dict[str, Any] = field(default_factory=dict)


def _vm_base(path: tuple[str, ...], fx: "Fixtures") -> list[str]:
    return [*path, *(["LimitedSwap"] if path == ("set-behavior",) else [])]


TOOLS: dict[str, Tool] = {
    "clusters.vm": Tool("clusters.vm.__main__", _vm_base, (
        ("clusters.vm.__main__", "_preflight"), ("clusters.vm.__main__", "_cache"),
        ("clusters.vm.cluster", "VmCluster"), ("clusters.vm.kindhost", "KindHost"),
        ("clusters.vm.build", "latest_kubernetes_version"))),
    "clusters.versions": Tool("clusters.versions", tripwires=(("clusters.versions", "newest_patch"),)),
    "bench.mutants": Tool("bench.mutants.__main__", tripwires=(
        ("bench.mutants.__main__", "claim"), ("bench.mutants.__main__", "SharedVm"),
        ("bench.mutants.__main__", "run_one"))),
    "bench.matrix": Tool("bench.matrix", tripwires=(("bench.matrix", "plan"), ("bench.matrix", "execute"))),
    "bench.junit_times": Tool("bench.junit_times", lambda path, fx: [str(fx.junit)]),
    "bench.vm_bench": Tool("bench.vm_bench", tripwires=(("bench.vm_bench", "VmCluster"),)),
    "bench.kind_bench": Tool("bench.kind_bench", tripwires=(("bench.kind_bench", "KindHost"),)),
    "e2e.catalog": Tool("e2e.catalog", tripwires=(("e2e.catalog", "write"),)),
    "workloads.image.build": Tool("workloads.image.build", lambda path, fx: [str(fx.root / "images")], (
        ("workloads.image.build", "build_stress_image"), ("workloads.image.build", "build_pause_image"))),
    # reading an archive is how verify checks it (no tripwire there): its costly step is containerd
    "workloads.image.verify": Tool("workloads.image.verify", lambda path, fx: [str(fx.text)], (
        ("workloads.image.verify", "private_containerd"),)),
}


def parser_of(tool: str) -> argparse.ArgumentParser:
    return importlib.import_module(TOOLS[tool].module).parser()


FLAG_ACTIONS = (argparse._StoreTrueAction, argparse._StoreFalseAction, argparse._StoreConstAction,
                argparse._AppendConstAction, argparse._CountAction)


@dataclass(frozen=True)
class Arg:
    tool: str
    path: tuple[str, ...]  # the subcommands before it
    action: argparse.Action
    kind: str | None

    @property
    def name(self) -> str:
        return self.action.option_strings[-1] if self.action.option_strings else (self.action.metavar or self.action.dest)

    @property
    def where(self) -> str:
        return " ".join(["python -m", self.tool, *self.path, self.name])


def walk(tool: str, parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...],
                                                                                                      argparse.ArgumentParser]]:
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from walk(tool, sub, (*path, name))


def arguments(tool: str) -> list[Arg]:
    """Every argument of every parser of a tool, once (clusters.vm's common options are shared by
    its subcommands' parsers: the first parser that has one is where it is tried)."""
    seen: set[int] = set()
    found = []
    for path, parser in walk(tool, parser_of(tool)):
        for action in parser._actions:
            if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction, argparse._VersionAction)) \
                    or id(action) in seen:
                continue
            seen.add(id(action))
            kind = "flag" if isinstance(action, FLAG_ACTIONS) else "choice" if action.choices else \
                inputs.kind_of(action.type)
            found.append(Arg(tool, path, action, kind))
    return found


def plugin_options() -> list[Any]:
    parser = pytest.Parser(_ispytest=True)
    options.pytest_addoption(parser)
    return list(parser.getgroup("swap").options)


# --- fixtures: the files bad values point at ----------------------------------------------------


class Fixtures:
    def __init__(self, root: Path):
        from tests.test_bad_inputs import kubeconfig_for

        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.text = root / "text.txt"
        self.text.write_text("hello\n")
        self.dir = root / "a-directory"
        self.dir.mkdir()
        self.empty = root / "empty"
        self.empty.write_text("")
        self.latin1 = root / "latin1.txt"
        self.latin1.write_bytes(b"caf\xe9\n")
        self.binary = root / "binary"
        self.binary.write_bytes(b"\x7fELF\x02\x01\x01\x00\x00\x00")
        self.loop = root / "loop"
        self.loop.symlink_to(self.loop)
        self.dangling = root / "dangling"
        self.dangling.symlink_to(root / "nowhere")
        self.fifo = root / "fifo"
        os.mkfifo(self.fifo)
        self.missing = root / "missing"
        self.under_file = self.text / "under"
        self.html = root / "page.html"
        self.html.write_text("<!doctype html><html><body>login</body></html>\n")
        self.junit = root / "junit.xml"
        self.junit.write_text('<testsuites><testsuite name="pytest"><testcase classname="e2e.test_x" name="test_a"'
                              ' time="1.5"/></testsuite></testsuites>\n')
        self.bad_time_junit = root / "bad-time.xml"
        self.bad_time_junit.write_text('<testsuite><testcase classname="a" name="b" time="soon"/></testsuite>\n')
        self.kubeconfig = kubeconfig_for(root / "kubeconfig", "https://127.0.0.1:9")
        self.fake_patch = root / "not-a-diff.patch"
        self.fake_patch.write_text("this is no diff\n")
        self.empty_checkout = root / "not-a-checkout"
        self.empty_checkout.mkdir()
        self.not_executable = root / "not-executable"
        self.not_executable.write_text("#!/bin/sh\n")
        self.cases = root / "cases"
        self.cases.mkdir()
        self.project = root / "project"  # the files of a run of the suite, copied into each case's directory
        self.project.mkdir()
        (self.project / "conftest.py").write_text((REPO / "conftest.py").read_text())
        (self.project / "pyproject.toml").write_text((REPO / "pyproject.toml").read_text()
                                                     .replace('testpaths = ["tests"]', ""))
        (self.project / "test_swap.py").write_text("def test_any(swap_node):\n    pass\n")
        self.bin = root / "bin"  # the only tools a case finds on PATH
        self.bin.mkdir()
        for tool in ("docker", "git"):
            if shutil.which(tool):
                (self.bin / tool).symlink_to(shutil.which(tool))


NOT_UTF8 = "\udcff\udcfeabc"  # bytes 0xff 0xfe, as Python hands undecodable arguments over


def bad_values(kind: str, fx: Fixtures) -> list[tuple[str, str]]:
    """(label, value) of the bad values of a kind; [] for a kind whose every value is good (a flag
    takes none; a guest command's words are the guest's; the tools check pytest's arguments with
    pytest, once per kind below)."""
    files = [("missing", str(fx.missing)), ("a-directory", str(fx.dir)), ("under-a-file", str(fx.under_file)),
             ("symlink-loop", str(fx.loop)), ("dangling-symlink", str(fx.dangling)), ("not-utf8-text", str(fx.latin1)),
             ("binary", str(fx.binary)), ("empty-file", str(fx.empty)), ("dev-null", "/dev/null"),
             ("fifo", str(fx.fifo)), ("empty", ""), ("not-utf8-path", str(fx.root / NOT_UTF8))]
    directories = [("a-file", str(fx.text)), ("under-a-file", str(fx.under_file)), ("unwritable", "/proc/ksc-fault/x"),
                   ("symlink-loop", str(fx.loop)), ("dev-null", "/dev/null"), ("empty", ""),
                   ("not-utf8-path", str(fx.root / NOT_UTF8))]
    sizes = [("empty", ""), ("word", "abc"), ("unit", "4G"), ("negative", "-1"), ("zero", "0"), ("fraction", "1.5"),
             ("other-digits", "\u0661\u0662"), ("huge", "9" * 30), ("not-utf8", NOT_UTF8)]
    counts = [("empty", ""), ("zero", "0"), ("negative", "-3"), ("word", "two"), ("exponent", "1e3"),
              ("other-digits", "\u0663")]
    total, _ = inputs.host_memory_mib()
    values: dict[str, list[tuple[str, str]]] = {
        "file": files,
        "patch": [*files, ("not-a-diff", str(fx.fake_patch))],
        "junit": [*files, ("not-xml", str(fx.text)), ("html", str(fx.html)), ("bad-time", str(fx.bad_time_junit))],
        "directory": directories,
        "source-directory": [("missing", str(fx.missing)), ("a-file", str(fx.text)), ("empty", ""),
                             ("under-a-file", str(fx.under_file)), ("symlink-loop", str(fx.loop))],
        "patch-directory": [("missing", str(fx.missing)), ("a-file", str(fx.text)), ("no-patches", str(fx.dir)),
                            ("empty", "")],
        "output-file": [("a-directory", str(fx.dir)), ("under-a-file", str(fx.under_file / "t.md")),
                        ("unwritable", "/proc/ksc-fault.md"), ("empty", "")],
        "command": [("empty", ""), ("missing", str(fx.missing)), ("a-directory", str(fx.dir)),
                    ("not-executable", str(fx.not_executable)), ("not-on-path", "no-such-program-ksc")],
        "mib": sizes,
        "guest-mib": [*sizes, ("more-than-the-host", str(total + 1))],
        "count": counts,
        "cpus": [*counts, ("more-than-the-host", str(inputs.host_cpus() + 1))],
        "behavior": [("empty", ""), ("lowercase", "limitedswap"), ("removed", "UnlimitedSwap"),
                     ("two", "NoSwap,LimitedSwap"), ("not-utf8", NOT_UTF8)],
        "behaviors": [("empty", ""), ("comma", ","), ("lowercase", "limitedswap"), ("double-comma", "NoSwap,,LimitedSwap"),
                      ("unknown", "Foo"), ("not-utf8", NOT_UTF8)],
        "release": [("empty", ""), ("no-v", "1.37.1"), ("no-patch", "v1.37"), ("too-old", "v1.33.0"),
                    ("too-new", "v1.99.0"), ("not-utf8", NOT_UTF8)],
        "image": [("empty", ""), ("uppercase", "Kindest/Node:v1.37.0"), ("space", "a b"), ("two-tags", "x:y:z"),
                  ("short-digest", "kindest/node@sha256:abc"), ("not-utf8", NOT_UTF8)],
        "name": [("empty", ""), ("space", "a b"), ("path", "../x"), ("not-utf8", NOT_UTF8)],
        "pytest-expression": [("empty", ""), ("dangling-and", "a and"), ("open-paren", "("), ("not", "not")],
        "pytest-args": [("unknown-option", "--no-such-option-ksc")],
        "choice": [("empty", ""), ("unknown", "nope"), ("not-utf8", NOT_UTF8)],
        "argv": [], "flag": [],
        # the environment's kinds
        "url": [("empty", ""), ("ftp", "ftp://deb.debian.org/debian"), ("space", "http://a b/"),
                ("credential-and-space", f"http://u:{CANARY}@a b/"), ("no-scheme", "deb.debian.org")],
        "goproxy": [("direct", "direct"), ("off", "off"), ("space", "https://a b"), ("no-scheme", "proxy.golang.org"),
                    ("only-commas", ","), ("credential-and-space", f"https://u:{CANARY}@x y")],
        "docker-host": [("no-scheme", "localhost:2375"), ("no-host", "tcp://"), ("http", "http://127.0.0.1:2375"),
                        ("port", "tcp://h:99999"), ("no-socket", "unix://")],
        "api-ports": [("no-port", "ksc-mixed"), ("word-port", "ksc-mixed=x"), ("no-name", "=1"),
                      ("port-range", "ksc-mixed=70000"), ("twice", "ksc-mixed=1,ksc-mixed=2")],
        "path-list": [v for v in files if v[1]],
        "text": [],
    }
    return values[kind]


ENV_DIRECTORIES = [("relative", "relative/cache"), ("dev-null", "/dev/null"), ("a-file", "{text}"),
                   ("under-a-file", "{under_file}"), ("symlink-loop", "{loop}")]


def variable_values(variable: inputs.Variable, fx: Fixtures) -> list[tuple[str, str]]:
    kind = inputs.kind_of(variable.parse)
    if variable.default_of:  # its value is a path, checked as the option's
        values = [v for v in bad_values("file", fx) if v[1]]
    elif kind == "directory":
        values = [(label, value.format(text=fx.text, under_file=fx.under_file, loop=fx.loop))
                  for label, value in ENV_DIRECTORIES]
    elif kind == "choice":
        values = [("unknown", "nope"), ("injected", "multi,tb-size=1")]
    elif kind == "mib":
        values = [("empty", ""), ("unit", "2G"), ("zero", "0")]
    elif kind == "release":
        values = [("empty", ""), ("no-patch", "1.37"), ("too-new", "v1.99.0")]
    else:
        values = bad_values(kind, fx)
    return [(label, value) for label, value in values if value or not variable.empty_is_unset]


# --- cases -------------------------------------------------------------------------------------


@dataclass
class Case:
    id: str
    argv: list[str]
    env: dict[str, str]
    code: int
    names: tuple[str, ...]  # one of them must be in the output: the option or variable the case is about
    tool: str = "suite"
    timeout: float = SUITE_SECONDS
    allowed: tuple[str, ...] = ()  # what the case's directory may hold afterwards, besides the project's


def _suite_case(id: str, argv: list[str], names: tuple[str, ...], env: dict[str, str] | None = None,
                code: int = cli.Exit.USAGE, **kw: Any) -> Case:
    return Case(id, ["-p", "no:cacheprovider", *argv], dict(env or {}), code, names, **kw)


GOOD = {  # a good value of each option of the suite, for the cases that are about something else
    "--kubeconfig": "{kubeconfig}", "--stress-image": "ksc/stress:1", "--node-image": "kindest/node:v1.37.0",
    "--kind-bin": "/usr/local/bin/kind", "--kind-config-patch": str(REPO / "clusters/kind/profiles/emulated-host.yaml"),
    "--k8s-version": "v1.37.1", "--k8s-patch": str(REPO / "clusters/prototypes/kep-5359.patch"),
    "--k8s-source": "{dir}", "--vm-kernel": "6.1", "--vm-memory": "2048", "--vm-swap": "1024",
    "--vm-state-dir": "{dir}/state",
}


def plugin_cases(fx: Fixtures) -> list[Case]:
    declared = {o.flag: o for o in options.OPTIONS}
    cases: list[Case] = []
    for option in plugin_options():
        flag = option.names()[-1]
        decl = declared[flag]
        provider = decl.providers[0] if decl.providers else "kind"
        for label, value in bad_values(decl.kind, fx):
            if decl.kind == "choice" and flag == "--provider":
                argv = [f"{flag}={value}"]
            else:
                argv = [f"--provider={provider}", f"{flag}={value}"]
            if flag == "--gate-behaviors":
                argv.append("--gate")
            if flag == "--k8s-source" and value and Path(value).is_dir():
                continue  # a directory: refused by what it holds, below (not-a-checkout)
            # a missing kind is a host prerequisite: the preflight says it with the others (exit 3,
            # tests/test_preflight_once.py), not a usage error
            code = cli.Exit.PREFLIGHT if decl.kind == "command" and value else cli.Exit.USAGE
            cases.append(_suite_case(f"{flag}={label}", argv, (flag,), code=code))
        if flag == "--k8s-source":
            cases.append(_suite_case(f"{flag}=not-a-checkout", ["--provider=vm", f"{flag}={fx.empty_checkout}"], (flag,)))
        for other in ("kind", "existing", "vm"):
            if decl.providers and other not in decl.providers:
                good = GOOD.get(flag, "").format(kubeconfig=fx.kubeconfig, dir=fx.dir)
                argv = [f"--provider={other}", f"{flag}={good}" if good else flag]
                cases.append(_suite_case(f"{flag}-with-{other}", argv, (flag,)))
        for other in decl.conflicts:
            argv = [f"--provider={provider}"] + [f"{f}={GOOD[f].format(dir=fx.dir)}" if f in GOOD else f
                                                 for f in (flag, other)]
            cases.append(_suite_case(f"{flag}-and-{other}", argv, (flag,)))
    cases += [
        _suite_case("-n-with-vm", ["--provider=vm", "-n", "2"], ("-n (2",)),
        _suite_case("-n-and-a-bad-value", ["--behaviors=", "-n", "2"], ("--behaviors",)),
        _suite_case("gate-behaviors-without-gate", ["--gate-behaviors=NoSwap"], ("--gate-behaviors",)),
        _suite_case("bad-k", ["-k", "a and"], ("-k",)),
        _suite_case("unknown-path", ["no-such-dir/"], ("no-such-dir",)),
    ]
    return cases


def env_cases(fx: Fixtures) -> tuple[list[Case], list[tuple[str, list[str], dict[str, str], str]]]:
    """The variables' bad values: (suite cases, tool cases (tool, argv, env, variable)). Every bad
    value on the variable's first reader, one on each of its other readers."""
    suite: list[Case] = []
    tools: list[tuple[str, list[str], dict[str, str], str]] = []
    commands = {
        "clusters.vm": ["status"], "clusters.vm up": ["up"], "clusters.vm build": ["build"],
        "clusters.vm node-image": ["node-image"], "clusters.vm kind-host up": ["kind-host", "up"],
        "clusters.vm swap-kubelet": ["swap-kubelet"], "clusters.versions": [],
        "bench.mutants": ["--mutant", "hash-includes-resources", "--results-dir", str(fx.dir)],
        "bench.matrix": ["--dry-run", "--table", str(fx.root / "matrix.md")], "bench.vm_bench": [],
        "bench.kind_bench": [],
    }
    for variable in inputs.VARIABLES:
        if variable.set_by != "you" or not variable.readers:
            continue  # pytest-xdist's, or one `kind-host up` prints for the user's shell: nobody types it
        values = variable_values(variable, fx)
        assert values, f"no bad value generated for {variable.name}"
        readers = [r for r in variable.readers]
        for i, reader in enumerate(readers):
            for label, value in values if i == 0 else values[:1]:
                if reader.startswith("suite"):
                    providers = ["kind", "existing", "vm"] if reader == "suite" else [reader.split(":")[1]]
                    for provider in providers if i == 0 and label == values[0][0] else providers[:1]:
                        argv = [f"--provider={provider}"]
                        if variable.name == "KUBECONFIG":
                            argv = ["--provider=existing"]
                        suite.append(_suite_case(f"{variable.name}={label}@{provider}", argv, (variable.name,),
                                                 env=_case_env(variable, value)))
                else:
                    tools.append((reader.split()[0], commands[reader], _case_env(variable, value), variable.name))
    return suite, tools


def _case_env(variable: inputs.Variable, value: str) -> dict[str, str]:
    """The variable set to the value, and the one that would take its place emptied (XDG_CACHE_HOME
    is read only without KSC_CACHE_DIR)."""
    return {variable.name: value, **({variable.unless: ""} if variable.unless else {})}


def outside_cases(fx: Fixtures, services: dict[str, str]) -> list[Case]:
    """The fake outside services, each through the run that asks it."""
    kubeconfig_401 = _kubeconfig(fx.root / "kc-401", services["unauthorized"])
    kubeconfig_silent = _kubeconfig(fx.root / "kc-silent", services["silent"])
    return [
        _suite_case("docker-answers-html", ["--provider=kind"], ("DOCKER_HOST",),
                    env={"DOCKER_HOST": services["html-docker"]}, code=cli.Exit.PREFLIGHT, allowed=("results",)),
        _suite_case("go-proxy-answers-200", ["--provider=vm"], ("Go module proxy",),
                    env={"GOPROXY": services["proxy-200"]}, code=cli.Exit.PREFLIGHT, allowed=("results",)),
        _suite_case("api-server-refuses-credentials", ["--provider=existing", f"--kubeconfig={kubeconfig_401}"],
                    ("401",), code=cli.Exit.PREFLIGHT, allowed=("results",)),
        _suite_case("api-server-never-answers", ["--provider=existing", f"--kubeconfig={kubeconfig_silent}"],
                    ("gave up after",), code=cli.Exit.PREFLIGHT, allowed=("results",)),
    ]


def _kubeconfig(path: Path, server: str) -> Path:
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters: [{{name: c, cluster: {{server: '{server}', insecure-skip-tls-verify: true}}}}]\n"
        f"contexts: [{{name: c, context: {{cluster: c, user: u}}}}]\nusers: [{{name: u, user: {{token: {CANARY}}}}}]\n")
    return path


# --- the invariants ----------------------------------------------------------------------------


def problems_of(case_id: str, code: int, want: int, output: str, names: tuple[str, ...], seconds: float,
                timed_out: bool, left: list[str]) -> list[str]:
    found = []
    if timed_out:
        found.append(f"did not end in {seconds:.0f}s")
    if code != want:
        found.append(f"exit {code}, not {want}")
    if "Traceback (most recent call last)" in output or "INTERNALERROR" in output:
        found.append("a traceback")
    lines = output.strip().splitlines()
    if len(lines) > MAX_LINES:
        found.append(f"{len(lines)} lines of output")
    if names and not any(name in output for name in names):
        found.append(f"names none of {names}")
    if CANARY in output:
        found.append("shows the secret")
    if left:
        found.append(f"left behind {left}")
    if found:
        tail = "\n      ".join(lines[-8:])
        return [f"{case_id}: {'; '.join(found)}\n      {tail}"]
    return []


def _children() -> set[int]:
    """This process's child processes."""
    mine = []
    for stat_file in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat_file.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == os.getpid():
            mine.append(int(stat_file.parent.name))
    return set(mine)


def _entries(*directories: Path) -> set[str]:
    return {str(p) for d in directories if d.exists() for p in d.rglob("*")}


# --- running the tools in this process ----------------------------------------------------------

DECLARED_NAMES = [v.name for v in inputs.VARIABLES]


@contextlib.contextmanager
def _environment(scratch: Path, extra: dict[str, str]) -> Iterator[None]:
    saved = dict(os.environ)
    try:
        for name in DECLARED_NAMES:
            os.environ.pop(name, None)
        os.environ.update({"KSC_CACHE_DIR": str(scratch / "cache"), "HOME": str(scratch / "home"),
                           "GOPROXY": DEAD_PROXY, "TMPDIR": str(scratch / "tmp")})
        for name, value in extra.items():
            os.environ[name] = value
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


class _Alarm(BaseException):
    pass


def run_tool(tool: str, argv: list[str], env: dict[str, str], scratch: Path) -> tuple[int, str, float, bool, bool]:
    """(exit code, output, seconds, timed out, tripped) of ``main(argv)`` in this process."""
    module = importlib.import_module(TOOLS[tool].module)
    out = io.StringIO()
    tripped = timed_out = False

    def alarm(signum: int, frame: object) -> None:
        raise _Alarm()

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(CLI_SECONDS)
    started = time.monotonic()
    cwd = os.getcwd()
    try:
        os.chdir(scratch / "cwd")
        with _environment(scratch, env), contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            try:
                code = module.main(argv, **TOOLS[tool].main_kwargs)
            except SystemExit as done:
                code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
                if isinstance(done.code, str):
                    print(done.code, file=sys.stderr)
    except Tripwire as wire:
        code, tripped = -1, True
        out.write(f"\n[harness] reached {wire}: the value got past the checks\n")
    except _Alarm:
        code, timed_out = -1, True
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
        os.chdir(cwd)
    return int(code), out.getvalue(), time.monotonic() - started, timed_out, tripped


def check_tool_case(case_id: str, tool: str, argv: list[str], env: dict[str, str], want: int,
                    names: tuple[str, ...], scratch: Path) -> list[str]:
    for sub in ("cache", "home", "tmp", "cwd"):
        shutil.rmtree(scratch / sub, ignore_errors=True)
    (scratch / "cwd").mkdir(parents=True)
    (scratch / "tmp").mkdir()
    before = _children()
    code, output, seconds, timed_out, tripped = run_tool(tool, argv, env, scratch)
    left = sorted(_entries(scratch / "cwd", scratch / "tmp", scratch / "home", scratch / "cache"))
    if scratch.joinpath("cache").exists() and not left:
        left = [str(scratch / "cache")]
    left += [f"process {pid}" for pid in _children() - before]
    return problems_of(f"{tool} {' '.join(argv)!r} {env or ''}", code, want, output, names, seconds, timed_out, left)


# --- fake outside services --------------------------------------------------------------------


@contextlib.contextmanager
def services() -> Iterator[dict[str, str]]:
    from tests.test_bad_inputs import http_server

    def html(request: http.server.BaseHTTPRequestHandler) -> tuple[int, str, bytes]:
        return 200, "text/html", b"<!doctype html><html><body>router login</body></html>"

    def everything(request: http.server.BaseHTTPRequestHandler) -> tuple[int, str, bytes]:
        return 200, "text/plain", b"ok"

    def refuse(request: http.server.BaseHTTPRequestHandler) -> tuple[int, str, bytes]:
        return 401, "application/json", b'{"kind":"Status","status":"Failure","reason":"Unauthorized","code":401}'

    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(64)  # accepts into its backlog, never answers
    with http_server(html) as docker, http_server(everything) as proxy, http_server(refuse) as api:
        yield {"html-docker": docker.replace("http://", "tcp://"), "proxy-200": proxy.replace("http://", f"http://u:{CANARY}@"),
               "unauthorized": api, "silent": f"https://127.0.0.1:{silent.getsockname()[1]}"}
    silent.close()


# --- the tests --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def fx(tmp_path_factory: pytest.TempPathFactory) -> Fixtures:
    return Fixtures(tmp_path_factory.mktemp("faults"))


def test_every_option_of_every_tool_has_a_declared_type() -> None:
    undeclared = [a.where for tool in TOOLS for a in arguments(tool) if a.kind is None]
    assert not undeclared, ("options whose argparse type declares no kind (clusters/inputs.py `typed`): their bad"
                            f" values cannot be generated: {undeclared}")
    for tool in TOOLS:  # the tools' own parsers, with the suite's usage code
        assert all(getattr(p, "error").__qualname__.endswith("Parser.error") for _, p in walk(tool, parser_of(tool))), tool


def test_every_option_of_the_suite_is_declared_once() -> None:
    flags = [o.names()[-1] for o in plugin_options()]
    declared = [o.flag for o in options.OPTIONS]
    assert sorted(flags) == sorted(declared), (f"options without a row in e2e/plugin/options.py OPTIONS:"
                                               f" {sorted(set(flags) - set(declared))}; rows for no option:"
                                               f" {sorted(set(declared) - set(flags))}")
    for option in options.OPTIONS:
        for other in (*option.conflicts, *option.requires):
            assert other in declared, f"{option.flag} names {other}, which is no option"


ENVIRON_READ = re.compile(r"""(?:environ\.get|getenv|environ\[)\(?\s*["']([A-Z][A-Z0-9_]*)["']""")
# a name kept in a constant (AUTO_VARIABLE = "KSC_KIND_AUTO") is read through it: every literal
# that is a KSC_ name counts as read
KSC_NAME = re.compile(r"""["'](KSC_[A-Z0-9_]+)["']""")


def test_every_environment_variable_the_code_reads_is_declared() -> None:
    read = {}
    for path in [*REPO.glob("clusters/**/*.py"), *REPO.glob("e2e/**/*.py"), *REPO.glob("bench/**/*.py"),
                 *REPO.glob("workloads/**/*.py")]:
        text = path.read_text(encoding="utf-8")
        for name in [*ENVIRON_READ.findall(text), *KSC_NAME.findall(text)]:
            read.setdefault(name, str(path.relative_to(REPO)))
    # HOME and PATH are the system's; the variables tests set for their own tiers are not the suite's
    undeclared = {n: where for n, where in read.items() if n not in inputs.VARIABLE and n not in ("HOME", "PATH")}
    assert not undeclared, f"environment variables read but not declared in clusters/inputs.py VARIABLES: {undeclared}"


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_a_bad_argument_is_exit_4_for_every_tool(tool: str, fx: Fixtures, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The one exit-code table (README "Exit codes and the gate"): usage is 4 for every tool."""
    for module, attribute in TOOLS[tool].tripwires:
        monkeypatch.setattr(importlib.import_module(module), attribute, _trip(f"{module}.{attribute}"))
    argv = [*TOOLS[tool].base(("status",) if tool == "clusters.vm" else (), fx), "--no-such-option-ksc"]
    found = check_tool_case(f"{tool} --no-such-option", tool, argv, {}, cli.Exit.USAGE, ("--no-such-option-ksc",),
                            tmp_path)
    assert not found, "\n".join(found)


def _tool_cases(tool: str, fx: Fixtures) -> list[tuple[str, list[str], dict[str, str], int, tuple[str, ...]]]:
    cases = []
    for arg in arguments(tool):
        base = TOOLS[tool].base(arg.path, fx)
        for label, value in bad_values(arg.kind or "text", fx):
            if arg.action.option_strings:
                argv = [*base, arg.action.option_strings[-1], value]
            else:  # a positional: in place of the good one the base has
                argv = [*arg.path, value]
            if arg.kind == "pytest-args":
                argv = [*base, "--", value]
            cases.append((f"{arg.where}={label}", argv, {}, cli.Exit.USAGE, (arg.name, "argument")))
    for path, _ in walk(tool, parser_of(tool)):  # every parser refuses an option it does not have
        cases.append((f"{tool} {' '.join(path)} --nope", [*path, "--no-such-option-ksc"], {}, cli.Exit.USAGE,
                      ("--no-such-option-ksc", "required")))
    return cases


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_every_bad_argument_of_every_tool(tool: str, fx: Fixtures, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          record_property: Callable[[str, object], None]) -> None:
    for module, attribute in TOOLS[tool].tripwires:
        monkeypatch.setattr(importlib.import_module(module), attribute, _trip(f"{module}.{attribute}"))
    cases = _tool_cases(tool, fx)
    _, env_tool_cases = env_cases(fx)
    cases += [(f"{name}={shown}", argv, env, cli.Exit.USAGE, (name,))
              for t, argv, env, name in env_tool_cases if t == tool
              for shown in [inputs.shown(env[name])]]
    found = [p for id, argv, env, want, names in cases
             for p in check_tool_case(id, tool, argv, env, want, names, tmp_path)]
    record_property("cases", len(cases))
    print(f"{tool}: {len(cases)} generated cases")
    assert not found, f"{len(found)} of {len(cases)} cases:\n" + "\n".join(found)


def _copy_project(fx: Fixtures, i: int) -> Path:
    directory = fx.cases / f"case-{i}"
    shutil.copytree(fx.project, directory)
    (directory / "tmp").mkdir()
    return directory


def test_every_bad_input_of_the_suite(fx: Fixtures, record_property: Callable[[str, object], None]) -> None:
    with services() as outside:
        suite_env_cases, _ = env_cases(fx)
        cases = [*plugin_cases(fx), *suite_env_cases, *outside_cases(fx, outside)]
        batches: list[list[dict]] = [[], []]
        dirs = []
        for i, case in enumerate(cases):
            directory = _copy_project(fx, i)
            dirs.append(directory)
            env = {"PATH": str(fx.bin), "PYTHONPATH": str(REPO), "KSC_CACHE_DIR": str(directory / "cache"),
                   "HOME": str(directory / "home"), "TMPDIR": str(directory / "tmp"), "GOPROXY": DEAD_PROXY,
                   "KSC_FAULT_CASE": f"{os.getpid()}-{i}", **case.env}
            argv = [a.replace("{kubeconfig}", str(fx.kubeconfig)) for a in case.argv]
            batches[i % 2].append({"argv": argv, "env": env, "cwd": str(directory), "timeout": case.timeout, "index": i})
        procs = []
        for n, batch in enumerate(batches):
            (fx.root / f"batch-{n}.json").write_text(json.dumps(batch))
            procs.append(subprocess.Popen([sys.executable, str(REPO / "tests" / "fault_runner.py"),
                                           str(fx.root / f"batch-{n}.json"), str(fx.root / f"results-{n}.json")],
                                          cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}))
        for proc in procs:
            proc.wait(timeout=900)
        results: dict[int, dict] = {}
        for n, batch in enumerate(batches):
            for spec, result in zip(batch, json.loads((fx.root / f"results-{n}.json").read_text())):
                results[spec["index"]] = result
    found = []
    project = {p.name for p in fx.project.iterdir()}
    for i, case in enumerate(cases):
        result = results[i]
        directory = dirs[i]
        # a failed preflight: the cache it checked it can write to, the report of the run (results/)
        allowed = project | {"tmp", *case.allowed} | ({"cache", "results"} if case.code == cli.Exit.PREFLIGHT else set())
        left = sorted(p.name for p in directory.iterdir() if p.name not in allowed)
        left += [str(p) for p in (directory / "tmp").iterdir()]
        left += _processes_of(f"{os.getpid()}-{i}")
        found += problems_of(f"suite {case.id} {' '.join(case.argv)!r} {case.env or ''}", result["code"], case.code,
                             result["output"], case.names, result["seconds"], result["timed_out"], left)
    record_property("cases", len(cases))
    print(f"the suite: {len(cases)} generated cases")
    assert not found, f"{len(found)} of {len(cases)} cases:\n" + "\n".join(found)


def _processes_of(marker: str) -> list[str]:
    """Processes still running with a case's marker in their environment (and killed now)."""
    left = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            if f"KSC_FAULT_CASE={marker}".encode() in environ.read_bytes().split(b"\0"):
                pid = int(environ.parent.name)
                left.append(f"process {pid}")
                os.kill(pid, signal.SIGKILL)
        except (OSError, ValueError):
            continue
    return left


def test_outside_answers_to_the_tools(tmp_path: Path) -> None:
    """A module proxy that answers 200 to everything is not a module proxy: clusters.versions says
    so (exit 3) after a bounded number of questions, with the proxy's credential masked."""
    with services() as outside:
        found = check_tool_case("clusters.versions with a proxy answering 200", "clusters.versions", [],
                                {"GOPROXY": outside["proxy-200"]}, cli.Exit.PREFLIGHT, ("GOPROXY",), tmp_path)
    assert not found, "\n".join(found)


def test_every_input_file_is_declared_with_a_record_that_exists() -> None:
    for declared in inputs.INPUT_FILES:
        if declared.record:
            module, name = declared.record.split(":")
            assert hasattr(importlib.import_module(module), name), declared
