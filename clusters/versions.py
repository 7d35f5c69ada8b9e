"""Every pinned version the suite builds or installs, in one place, and the probe that keeps
the Kubernetes pin current.

The Go module proxy's version list (``go list -m -versions``, ``@v/list``, ``@latest``) can omit
releases: it has listed up to v1.36.3 while v1.37.x resolved when asked by name. And a
version that resolves is not always buildable: v1.37.2's ``.info`` and ``.mod`` are served, its
module zip is refused (403 "not available"). So "newest" is found by asking for each version's
zip by name: the next patch of the newest minor until one is missing, then the next minor's
``.0``.

``python -m clusters.versions`` prints the pins and what the proxy has now.
"""

from __future__ import annotations

import os
import re
import urllib.error
import urllib.request
from collections.abc import Callable

from clusters import cli

# Newest buildable patch of the newest Kubernetes minor on the Go proxy (v1.37.2 exists but its
# zip is refused; `python -m clusters.versions` says when a newer one is served). The vm node
# and the local kind node image are built from it unless --k8s-version says otherwise.
KUBERNETES = "v1.37.1"
# kind: 0.33 is the first release whose kubeadm config API (v1beta4) kubeadm 1.37 accepts.
KIND = "v0.33.0"
CONTAINERD = "v2.4.2"
RUNC = "v1.5.2"
CNI_PLUGINS = "v1.9.1"
ETCD = "v3.6.16"
CRICTL = "v1.36.0"  # newest cri-tools on the proxy; crictl talks CRI v1, skew-tolerant
# The oldest Kubernetes the suite tests: 1.28 brought LimitedSwap's proportional formula and
# removed nothing the oracle models since (UnlimitedSwap went in 1.30: never tested here).
MIN_KUBERNETES = (1, 28)

DEFAULT_GOPROXY = "https://proxy.golang.org"
_RELEASE = re.compile(r"v(\d+)\.(\d+)\.(\d+)")

Exists = Callable[[str], bool]


class ProxyUnusable(cli.UsageError):
    """GOPROXY names no module proxy the suite can ask ("off", "direct")."""


class ProxyUnreachable(cli.NotReady):
    """The module proxy did not answer (network, DNS, a proxy that is down)."""


def module_proxy(value: str | None = None) -> str:
    """The module proxy the suite asks by URL: the first URL in GOPROXY (Go's list, entries
    separated by "," or "|"), as `go` tries them. "off" or "direct" before any URL leave none:
    the suite asks the proxy for versions and module files by name, which VCS access cannot do."""
    value = os.environ.get("GOPROXY", DEFAULT_GOPROXY) if value is None else value
    for entry in re.split(r"[,|]", value or DEFAULT_GOPROXY):
        entry = entry.strip()
        if entry in ("off", "direct"):
            why = "turns module downloads off" if entry == "off" else "fetches modules from their repositories, with no proxy"
            raise ProxyUnusable(f"GOPROXY={value} {why}; the suite asks a Go module proxy for Kubernetes releases and"
                                f" their module files by name: set GOPROXY to a proxy ({DEFAULT_GOPROXY}, or your"
                                " mirror), e.g. GOPROXY=https://proxy.golang.org,direct")
        if entry:
            return entry.rstrip("/")
    return DEFAULT_GOPROXY


def proxy_get(path: str, timeout: float = 60, method: str = "GET") -> tuple[int, bytes]:
    """(status, body) of a request to the module proxy; ProxyUnreachable when it cannot be asked."""
    proxy = module_proxy()
    request = urllib.request.Request(f"{proxy}/{path}", method=method)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 - the proxy's URL
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, b""
    except (urllib.error.URLError, OSError, ValueError) as error:  # ValueError: not a URL
        reason = getattr(error, "reason", error)
        raise ProxyUnreachable(f"the Go module proxy {proxy} cannot be reached ({reason}): check the network, or set"
                               f" GOPROXY to a proxy that can be ({DEFAULT_GOPROXY})") from None


def module_zip_served(module: str, version: str, timeout: float = 30) -> bool:
    """True when the proxy serves the module's zip at exactly this version (a HEAD request)."""
    status, _ = proxy_get(f"{module}/@v/{version}.zip", timeout, method="HEAD")
    if status in (404, 410, 403):  # the proxy answers 403/404/410 for "no such version"
        return False
    if status != 200:
        raise ProxyUnreachable(f"the Go module proxy {module_proxy()} answered {status} for {module}@{version}")
    return True


def kubernetes_release_exists(version: str) -> bool:
    return module_zip_served("k8s.io/kubernetes", version)


def newest_kubernetes(start: str = KUBERNETES, exists: Exists = kubernetes_release_exists) -> str:
    """The newest release at or after ``start``, probing by name (patches, then minors)."""
    match = _RELEASE.fullmatch(start)
    if not match:
        raise ValueError(f"not a Kubernetes release: {start!r} (want vMAJOR.MINOR.PATCH)")
    major, minor, patch = (int(x) for x in match.groups())
    if not exists(start):
        raise LookupError(f"the Go proxy serves no k8s.io/kubernetes {start} module zip")
    while True:
        if exists(f"v{major}.{minor}.{patch + 1}"):
            patch += 1
        elif exists(f"v{major}.{minor + 1}.0"):
            minor, patch = minor + 1, 0
        else:
            return f"v{major}.{minor}.{patch}"


def main(argv: list[str] | None = None) -> int:
    parser = cli.Parser(prog="python -m clusters.versions", description=(
        "Print every pinned version, then ask the Go module proxy ($GOPROXY, default"
        f" {DEFAULT_GOPROXY}) whether a newer Kubernetes release than the pin is served. Exit 0: the pin"
        " is current; 1: a newer release exists (the pin is stale); 3: the proxy cannot be reached;"
        " 4: bad arguments or GOPROXY."))
    parser.add_argument("--pins-only", action="store_true", help="print the pins, ask no proxy")
    parser.add_argument("--debug", action="store_true", help="a failure's traceback too")
    return cli.run(_main, parser.parse_args(argv))


def _main(args) -> int:
    if not args.pins_only:
        module_proxy()  # GOPROXY that names no proxy: a usage error before anything is printed
    pins = {name: value for name, value in globals().items() if name.isupper() and isinstance(value, str)
            and name != "DEFAULT_GOPROXY"}
    for name, value in pins.items():
        print(f"{name.lower():12} {value}")
    if args.pins_only:
        return cli.Exit.OK
    newest = newest_kubernetes()
    verdict = "current" if newest == KUBERNETES else f"STALE: {newest} exists (update KUBERNETES in {__file__})"
    print(f"kubernetes on {module_proxy()} now: {newest} ({verdict})")
    return cli.Exit.OK if newest == KUBERNETES else cli.Exit.FAILED


if __name__ == "__main__":
    raise SystemExit(main())
