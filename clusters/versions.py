"""Every pinned version the suite builds or installs, in one place: the Kubernetes minors it
supports (each with its newest buildable patch), and the probe that keeps those pins current.

The Go module proxy's version list (``go list -m -versions``, ``@v/list``, ``@latest``) omits
releases, and it serves some releases only in part: a version whose ``.info`` and ``.mod`` are
served can have its module zip refused (403 "not available"), one whose zip is served can have
its ``.info`` and ``.mod`` refused, and a patch in the middle of a minor can be refused while
later ones are served. `go` needs all three files to build a release. So the newest buildable
patch of a minor is found by asking for each patch by name, ``.0`` upward, counting a patch only
when its ``.info`` (JSON naming that version), ``.mod`` and ``.zip`` are all served, and going on
past refused patches until MISSES patches in a row are missing.

``python -m clusters.versions`` prints the pins and, per supported minor, the newest patch the
proxy serves now: current or stale.
"""

from __future__ import annotations

import json
import os
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass

from clusters import cli, inputs
from clusters.redact import redact

# The Kubernetes minors the suite supports, each with the newest patch of it the Go module proxy
# served buildable (.info, .mod and .zip) when it was last probed. The release gate holds only
# where the suite has run: every minor here is one the suite is to pass on, and nothing outside
# it is accepted (--k8s-version, --k8s-source, a kind --node-image or its /kind/version, an
# existing cluster's kubelets). `python -m clusters.versions` says when a pin is stale;
# `python -m bench.matrix` runs the suite on each.
SUPPORTED: dict[str, str] = {
    "1.34": "v1.34.12",
    "1.35": "v1.35.8",
    "1.36": "v1.36.5",
    "1.37": "v1.37.2",
}
# The release the vm node, the local kind node image and the mutant bench are built from unless
# --k8s-version says otherwise: 1.37's pin, once the suite has passed the gate on it (the matrix):
# the default build is one the suite is known to pass on.
KUBERNETES = "v1.37.2"
# kind: 0.33 is the first release whose kubeadm config API (v1beta4) kubeadm 1.37 accepts.
KIND = "v0.33.0"
CONTAINERD = "v2.4.2"
RUNC = "v1.5.2"
CNI_PLUGINS = "v1.9.1"
ETCD = "v3.6.16"
CRICTL = "v1.36.0"  # newest cri-tools on the proxy; crictl talks CRI v1, skew-tolerant


def minor_of(text: str) -> tuple[int, int] | None:
    """(1, 34) of "1.34", "v1.34.12", "v1.38.0-alpha.1+abc"; None when it names no version."""
    match = re.match(r"v?(\d+)\.(\d+)(?:$|[.+-])", text)
    return (int(match.group(1)), int(match.group(2))) if match else None


_MINORS = sorted(minor_of(m) for m in SUPPORTED)  # type: ignore[type-var]
MIN_KUBERNETES: tuple[int, int] = _MINORS[0]
MAX_KUBERNETES: tuple[int, int] = _MINORS[-1]
SUPPORTED_RANGE = f"{MIN_KUBERNETES[0]}.{MIN_KUBERNETES[1]} to {MAX_KUBERNETES[0]}.{MAX_KUBERNETES[1]}"
# What to do about a release outside the range: one of the pins.
PICK_A_RELEASE = ("pick a supported release, the newest patch of each supported minor: "
                  + ", ".join(SUPPORTED.values()))


def is_supported(version: tuple[int, ...] | str) -> bool:
    minor = minor_of(version) if isinstance(version, str) else tuple(version[:2])
    return minor is not None and MIN_KUBERNETES <= minor <= MAX_KUBERNETES


def out_of_range(what: str, version: tuple[int, ...] | str) -> str | None:
    """Why ``what`` (the value as the user gave it: a release, a checkout, a node image) cannot be
    tested, when its Kubernetes ``version`` is outside SUPPORTED; None when it is inside. Callers
    add the fix that fits what was given."""
    if is_supported(version):
        return None
    minor = minor_of(version) if isinstance(version, str) else tuple(version[:2])
    named = f"{minor[0]}.{minor[1]}" if minor else repr(version)
    return (f"{what} is Kubernetes {named}: the suite supports Kubernetes {SUPPORTED_RANGE} only"
            " (clusters/versions.py SUPPORTED)")


DEFAULT_GOPROXY = inputs.DEFAULT_GOPROXY
KUBERNETES_MODULE = "k8s.io/kubernetes"
# A minor's probe goes on past this many refused patches in a row after the last served one
# (v1.34.6 is refused between served patches) before it concludes there are no more.
MISSES = 4
# ...and never asks for more patches than this: a proxy that serves every name asked for is not
# believed, it is an error.
MAX_PATCHES = 64

Get = Callable[..., tuple[int, bytes]]


class ProxyUnusable(cli.UsageError):
    """GOPROXY names no module proxy the suite can ask ("off", "direct")."""


class ProxyUnreachable(cli.NotReady):
    """The module proxy did not answer (network, DNS, a proxy that is down), or answered what no
    Go module proxy would (HTML for a version's .info, every version ever asked for)."""


def module_proxy(value: str | None = None) -> str:
    """The module proxy the suite asks by URL: the first URL in GOPROXY (Go's list, entries
    separated by "," or "|"), as `go` tries them. "off" or "direct" before any URL leave none:
    the suite asks the proxy for versions and module files by name, which VCS access cannot do.
    The syntax is clusters/inputs.py's (the variable's one declaration)."""
    value = os.environ.get("GOPROXY", DEFAULT_GOPROXY) if value is None else value
    try:
        return inputs.goproxy(value)
    except inputs.Invalid as error:
        raise ProxyUnusable(f"GOPROXY={inputs.shown(value)} {error}") from None


def proxy_get(path: str, timeout: float = 60, method: str = "GET") -> tuple[int, bytes]:
    """(status, body) of a request to the module proxy; ProxyUnreachable when it cannot be asked."""
    proxy = module_proxy()
    url, headers = _without_userinfo(f"{proxy}/{path}")
    request = urllib.request.Request(url, headers=headers, method=method)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 - the proxy's URL
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, b""
    except (urllib.error.URLError, OSError, ValueError) as error:  # ValueError: not a URL
        reason = getattr(error, "reason", error)
        raise ProxyUnreachable(f"the Go module proxy {proxy} cannot be reached ({reason}): check the network, or set"
                               f" GOPROXY to a proxy that can be ({DEFAULT_GOPROXY})") from None


def _without_userinfo(url: str) -> tuple[str, dict[str, str]]:
    """A URL's user:password (Go takes one in GOPROXY for a private proxy) as a Basic
    Authorization header: urllib would take it for part of the host name."""
    import base64

    parts = urllib.parse.urlsplit(url)
    if parts.username is None:
        return url, {}
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    credential = f"{urllib.parse.unquote(parts.username)}:{urllib.parse.unquote(parts.password or '')}"
    return (urllib.parse.urlunsplit(parts._replace(netloc=netloc)),
            {"Authorization": "Basic " + base64.b64encode(credential.encode()).decode()})


def _served(status: int, what: str) -> bool:
    if status in (404, 410, 403):  # the proxy answers 403/404/410 for "no such version" or "not available"
        return False
    if status != 200:
        raise ProxyUnreachable(f"the Go module proxy {module_proxy()} answered {status} for {what}")
    return True


def module_zip_served(module: str, version: str, timeout: float = 30) -> bool:
    """True when the proxy serves the module's zip at exactly this version (a HEAD request)."""
    status, _ = proxy_get(f"{module}/@v/{version}.zip", timeout, method="HEAD")
    return _served(status, f"{module}@{version}")


def unbuildable(version: str, module: str = KUBERNETES_MODULE, get: Get = proxy_get) -> str | None:
    """None when the proxy serves all `go` needs to build ``module`` at ``version``: its .info
    (JSON whose Version is that version), .mod and .zip; else the first file it refuses.
    ProxyUnreachable when it answers what a module proxy would not (an HTML page as .info)."""
    base = f"{module}/@v/{version}"
    status, body = get(f"{base}.info", 30)
    if not _served(status, f"{base}.info"):
        return f"{base}.info refused ({status})"
    try:
        info = json.loads(body)
    except ValueError:
        info = None
    if not isinstance(info, dict) or info.get("Version") != version:
        shown = body[:60].decode(errors="replace").strip()
        raise ProxyUnreachable(f"the Go module proxy {module_proxy()} answered {base}.info with {shown!r}, not the JSON"
                               f" of {module} {version}: is GOPROXY a Go module proxy? (e.g. {DEFAULT_GOPROXY})")
    status, _ = get(f"{base}.mod", 30)
    if not _served(status, f"{base}.mod"):
        return f"{base}.mod refused ({status})"
    status, _ = get(f"{base}.zip", 30, method="HEAD")
    if not _served(status, f"{base}.zip"):
        return f"{base}.zip refused ({status})"
    return None


@dataclass(frozen=True)
class Probe:
    """What the proxy said of a minor's patches, asked for by name from .0 up: the newest buildable
    one (None: none of the first ``misses``), and each patch below it that it refused, with the
    first file refused (the patches past the newest are the ones not released yet)."""

    newest: str | None
    refused: tuple[tuple[str, str], ...] = ()


def probe(minor: str, get: Get = proxy_get, misses: int = MISSES, limit: int = MAX_PATCHES) -> Probe:
    """The proxy's answer for ``minor`` ("1.34"), past up to ``misses`` refused patches in a row.
    A proxy still serving at patch ``limit`` is an error, not a release."""
    parsed = minor_of(minor)
    if parsed is None:
        raise ValueError(f"not a Kubernetes minor: {minor!r} (want MAJOR.MINOR, e.g. 1.34)")
    newest, gap = None, []
    refused: list[tuple[str, str]] = []
    for patch in range(limit):
        version = f"v{parsed[0]}.{parsed[1]}.{patch}"
        why = unbuildable(version, get=get)
        if why is None:
            newest, refused, gap = version, refused + gap, []
        else:
            gap.append((version, why))
            if len(gap) >= misses:
                return Probe(newest, tuple(refused))
    raise ProxyUnreachable(f"the Go module proxy {module_proxy()} serves every {KUBERNETES_MODULE} {minor} patch"
                           f" asked for, up to v{parsed[0]}.{parsed[1]}.{limit - 1}: no proxy has that many; is"
                           f" GOPROXY a Go module proxy? (e.g. {DEFAULT_GOPROXY})")


def newest_patch(minor: str, get: Get = proxy_get, misses: int = MISSES, limit: int = MAX_PATCHES) -> str | None:
    """The newest buildable patch of ``minor`` the proxy serves (`probe`)."""
    return probe(minor, get, misses, limit).newest


def next_minor(minor: str) -> str:
    major, number = minor_of(minor)  # type: ignore[misc]
    return f"{major}.{number + 1}"


def parser() -> cli.Parser:
    p = cli.Parser(prog="python -m clusters.versions", description=(
        "Print every pinned version, then ask the Go module proxy ($GOPROXY, default"
        f" {DEFAULT_GOPROXY}) for the newest buildable patch of each supported Kubernetes minor"
        f" ({SUPPORTED_RANGE}) and of the next one. Exit 0: every pin is current; 1: a newer patch is"
        " served (a pin is stale) or a pin is no longer served; 3: the proxy cannot be reached or"
        " answers what no module proxy would; 4: bad arguments or GOPROXY."))
    p.add_argument("--pins-only", action="store_true", help="print the pins, ask no proxy")
    p.add_argument("--debug", action="store_true", help="a failure's traceback too")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    # --pins-only asks no proxy: it reads no GOPROXY either (GOPROXY=direct is a common setting)
    return cli.run(_main, args, command="" if args.pins_only else "clusters.versions")


def _main(args) -> int:
    if not args.pins_only:
        module_proxy()  # GOPROXY that names no proxy: a usage error before anything is printed
    pins = {name: value for name, value in globals().items() if name.isupper() and isinstance(value, str)
            and name not in ("DEFAULT_GOPROXY", "KUBERNETES_MODULE", "SUPPORTED_RANGE", "PICK_A_RELEASE")}
    for name, value in pins.items():
        print(f"{name.lower():12} {value}")
    print(f"supported    Kubernetes {SUPPORTED_RANGE}: " + ", ".join(SUPPORTED.values()))
    if args.pins_only:
        return cli.Exit.OK
    # the proxy's URL may carry a credential (GOPROXY=https://user:token@...): shown masked
    print(redact(f"newest buildable patch on {module_proxy()} (.info, .mod and .zip served):"))
    ok = True
    for minor, pinned in SUPPORTED.items():
        answer = probe(minor)
        newest = answer.newest
        if newest == pinned:
            verdict = "current"
        elif newest is None or _patch(newest) < _patch(pinned):
            verdict = f"PIN NOT SERVED: {unbuildable(pinned)}"
            ok = False
        else:
            verdict = f"STALE: {newest} is served (update SUPPORTED in {__file__})"
            ok = False
        print(f"  {minor}  pinned {pinned:9} served {newest or 'none':9} {verdict}")
        for version, why in answer.refused:  # a release the proxy does not serve whole cannot be built
            print(f"        refused {version}: {why}")
    following = next_minor(list(SUPPORTED)[-1])
    newest = newest_patch(following)
    print(f"  {following}  not supported    served {newest or 'none'}"
          + (" a new minor: add it to SUPPORTED once the suite passes on it" if newest else ""))
    return cli.Exit.OK if ok else cli.Exit.FAILED


def _patch(version: str) -> int:
    return int(version.rsplit(".", 1)[1])


if __name__ == "__main__":
    raise SystemExit(main())
