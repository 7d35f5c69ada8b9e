"""Every pinned version the suite builds or installs, in one place, and the probe that keeps
the Kubernetes pin current.

The Go module proxy's version list (``go list -m -versions``, ``@v/list``, ``@latest``) omits
releases: on 2026-11-21 it stopped at v1.36.3 while v1.37.x resolved when asked by name. And a
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

# Newest buildable patch of the newest Kubernetes minor on the Go proxy (probed 2026-11-21:
# v1.37.2 exists but its zip is refused). The vm node and the local kind node image are built
# from it unless --k8s-version says otherwise.
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

GOPROXY = os.environ.get("GOPROXY", "https://proxy.golang.org").split(",")[0]
_RELEASE = re.compile(r"v(\d+)\.(\d+)\.(\d+)")

Exists = Callable[[str], bool]


def module_zip_served(module: str, version: str, timeout: float = 30) -> bool:
    """True when the proxy serves the module's zip at exactly this version (a HEAD request)."""
    url = f"{GOPROXY.rstrip('/')}/{module}/@v/{version}.zip"
    request = urllib.request.Request(url, method="HEAD")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 - fixed proxy URL
            return response.status == 200
    except urllib.error.HTTPError as error:
        if error.code in (404, 410, 403):  # the proxy answers 403/404/410 for "no such version"
            return False
        raise


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


def main() -> int:
    pins = {name: value for name, value in globals().items() if name.isupper() and isinstance(value, str)
            and name not in ("GOPROXY",)}
    for name, value in pins.items():
        print(f"{name.lower():12} {value}")
    newest = newest_kubernetes()
    verdict = "current" if newest == KUBERNETES else f"STALE: {newest} exists (update KUBERNETES in {__file__})"
    print(f"kubernetes on the Go proxy now: {newest} ({verdict})")
    return 0 if newest == KUBERNETES else 1


if __name__ == "__main__":
    raise SystemExit(main())
