"""No shell text is built from values: commands are argv lists, and where a script is needed (the
rootfs build in its own mount namespace, a file written in the guest) the script is a constant
and the values are its positional parameters. $KSC_DEBIAN_MIRROR is checked before anything runs.

The rootfs script runs here for real, as the root build runs it, with stand-ins for mount,
debootstrap and chroot that record their arguments: a target directory with spaces and a shell
expansion in its name, and a mirror carrying a command, arrive as one argument each."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from clusters import cli
from clusters.vm import image

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parent.parent
CODE = ("clusters", "e2e", "workloads", "bench")


# --- $KSC_DEBIAN_MIRROR --------------------------------------------------------------------------

@pytest.mark.parametrize("value", [
    "http://deb.debian.org/debian", "https://mirror.example.org:8443/debian/", "http://10.0.2.2:3142/debian",
    "http://user:secret@mirror.example/debian",
])
def test_an_http_mirror_is_taken(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(image.MIRROR_VARIABLE, value)
    assert image.mirror() == value


def test_no_mirror_is_debians(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(image.MIRROR_VARIABLE, raising=False)
    assert image.mirror() == image.DEFAULT_MIRROR


@pytest.mark.parametrize("value", [
    "", "deb.debian.org/debian", "ftp://deb.debian.org/debian", "file:///srv/debian", "http://",
    "http://deb.debian.org/debian; touch /pwned", "http://deb.debian.org/$(touch /pwned)x y",
    "http://deb.debian.org/debian'", "http://a b/debian", "http://deb.debian.org/debian\n",
])
def test_a_mirror_that_is_no_http_url_is_a_usage_error_naming_the_variable(monkeypatch: pytest.MonkeyPatch,
                                                                          value: str) -> None:
    monkeypatch.setenv(image.MIRROR_VARIABLE, value)
    with pytest.raises(cli.UsageError, match=f"^{image.MIRROR_VARIABLE}=.* is not an http\\(s\\) URL"):
        image.mirror()
    with pytest.raises(cli.UsageError):
        image.node_recipe("6.12").key()  # no cache is looked up under a key made with it


def test_the_vm_command_refuses_a_bad_mirror_before_anything(tmp_path: Path) -> None:
    (tmp_path / "no-tools").mkdir()
    env = {**os.environ, "PATH": str(tmp_path / "no-tools"), "KSC_CACHE_DIR": str(tmp_path / "cache"),
           "GOPROXY": "http://127.0.0.1:9", "PYTHONPATH": str(REPO),
           image.MIRROR_VARIABLE: "http://user:hunter2@mirror.example/debian; reboot"}
    done = subprocess.run([sys.executable, "-m", "clusters.vm", "build", "--state-dir", str(tmp_path / "state")],
                          env=env, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == cli.Exit.USAGE, done.stderr
    assert done.stderr.startswith(f"error: {image.MIRROR_VARIABLE}=") and "Traceback" not in done.stderr, done.stderr
    assert "hunter2" not in done.stdout + done.stderr, done.stderr
    assert not (tmp_path / "state").exists() and not (tmp_path / "cache" / "vm").exists()


def test_the_suite_refuses_a_bad_mirror_as_a_usage_error(pytester: pytest.Pytester,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makeconftest((REPO / "conftest.py").read_text())
    pytester.makepyprojecttoml((REPO / "pyproject.toml").read_text().replace('testpaths = ["tests"]', ""))
    pytester.makepyfile(test_swap="def test_any(swap_node):\n    pass\n")
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    monkeypatch.setenv(image.MIRROR_VARIABLE, "https://user:hunter2@mirror.example/debian bookworm")
    result = pytester.runpytest_subprocess("--provider=vm")
    output = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR and image.MIRROR_VARIABLE in output, output
    assert "hunter2" not in output, output


# --- the rootfs script --------------------------------------------------------------------------

def test_the_rootfs_build_hands_every_value_to_a_constant_script(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ran: list[list[str]] = []
    monkeypatch.setattr(image, "_run", lambda argv, log, what, **kw: ran.append(argv))
    monkeypatch.setenv(image.MIRROR_VARIABLE, "http://mirror.example/debian")
    root = tmp_path / "a cache"
    recipe = image.node_recipe("6.12")
    with pytest.raises(image.ImageError, match="no kernel installed"):  # the stand-in _run built nothing
        image._build_rootfs_locked(recipe, "k", root / "vm" / "rootfs" / "k", root, lambda line: None)
    assert ran == [["unshare", "--mount", "--fork", "sh", "-c", image.ROOTFS_SCRIPT, "sh",
                    str(root / "vm" / "rootfs" / "k.tmp"), image.SUITE, "http://mirror.example/debian",
                    ",".join(recipe.packages), "bookworm-backports"]]


STAND_IN = """#!{python}
import json, os, sys
with open({log!r}, "a") as f:
    f.write(json.dumps([os.path.basename(sys.argv[0])] + sys.argv[1:]) + "\\n")
if os.path.basename(sys.argv[0]) == "debootstrap":
    os.makedirs(os.path.join(sys.argv[-2], "etc", "apt", "sources.list.d"))
"""


@pytest.mark.parametrize("kernel_suite", ["bookworm-backports", ""])
def test_the_rootfs_script_takes_hostile_values_as_one_argument_each(tmp_path: Path, kernel_suite: str) -> None:
    tools, log = tmp_path / "tools", tmp_path / "ran.jsonl"
    tools.mkdir()
    for tool in ("mount", "debootstrap", "chroot"):
        (tools / tool).write_text(STAND_IN.format(python=sys.executable, log=str(log)))
        (tools / tool).chmod(0o755)
    target = tmp_path / "a root $(touch expanded) `touch too`; touch split"
    mirror = "http://mirror.example/debian; touch ran-the-mirror"
    done = subprocess.run(["sh", "-c", image.ROOTFS_SCRIPT, "sh", str(target), "bookworm", mirror, "a,b c",
                           kernel_suite], env={**os.environ, "PATH": f"{tools}{os.pathsep}{os.environ['PATH']}"},
                          cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    ran = [json.loads(line) for line in log.read_text().splitlines()]
    assert ran[:2] == [["mount", "--make-rprivate", "/"],
                       ["debootstrap", "--variant=minbase", "--include=a,b c", "bookworm", str(target), mirror]]
    if kernel_suite:
        assert ran[2:5] == [["mount", "-t", "proc", "proc", f"{target}/proc"],
                            ["mount", "-t", "sysfs", "sys", f"{target}/sys"], ["mount", "--rbind", "/dev", f"{target}/dev"]]
        assert ran[-2] == ["chroot", str(target), "env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "install", "-y",
                           "--no-install-recommends", "-t", kernel_suite, "linux-image-amd64", "initramfs-tools"]
        backports = target / "etc" / "apt" / "sources.list.d" / "backports.list"
        assert backports.read_text() == f"deb {mirror} bookworm-backports main\n"
    assert ran[-1] == ["chroot", str(target), "apt-get", "clean"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["tools", "ran.jsonl", target.name])


# --- everywhere ----------------------------------------------------------------------------------

SHELLS = {"sh", "bash", "/bin/sh", "/bin/bash", "/usr/bin/env sh"}


def _text(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _shell_text_from_values(path: Path) -> list[str]:
    """Where ``path`` hands a shell (sh/bash -c) a script that is not a constant, or asks
    subprocess for a shell."""
    tree = ast.parse(path.read_text(), str(path))
    constants = {target.id for node in tree.body if isinstance(node, ast.Assign) and _text(node.value) is not None
                 for target in node.targets if isinstance(target, ast.Name)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "shell" and not (
                isinstance(node.value, ast.Constant) and node.value.value is False):
            found.append(f"{path}:{node.value.lineno}: shell={ast.unparse(node.value)}")
        if isinstance(node, (ast.List, ast.Tuple)):
            for shell, flag, script in zip(node.elts, node.elts[1:], node.elts[2:]):
                if _text(shell) in SHELLS and _text(flag) == "-c" and _text(script) is None and not (
                        isinstance(script, ast.Name) and script.id in constants):
                    found.append(f"{path}:{script.lineno}: {ast.unparse(script)[:80]}")
    return found


def test_no_shell_script_is_built_from_values() -> None:
    found = [line for top in CODE for path in sorted((REPO / top).rglob("*.py"))
             for line in _shell_text_from_values(path)]
    assert not found, "shell text built from values (pass them as positional parameters):\n" + "\n".join(found)


def test_the_check_finds_a_script_built_from_a_value(tmp_path: Path) -> None:
    path = tmp_path / "bad.py"
    path.write_text('P = "/x"\nSCRIPT = "echo $1"\n'
                    'a = ["sh", "-c", f"cat > {P}"]\nb = ("bash", "-c", "x " + P)\nc = run("ls", shell=True)\n'
                    'ok = ["sh", "-c", SCRIPT, "sh", P]\nok2 = ["sh", "-c", "cat > \\"$1\\"", "sh", P]\n')
    assert [line.split(":", 2)[1] for line in _shell_text_from_values(path)] == ["3", "4", "5"]
