"""Where the suite keeps its caches (never inside the repository): one root for every cache.

The stress image builds (workloads/image/build.py), the vm node's and kind host's images and
Kubernetes builds (clusters/vm) all live under it. It is in the lowest layer because its lowest
user, the stress image builder, may import nothing above workloads.
"""
from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """``$KSC_CACHE_DIR`` or ``$XDG_CACHE_HOME/kube-swap-conformance`` (default ~/.cache/...)."""
    env = os.environ.get("KSC_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "kube-swap-conformance"


CACHE_VARIABLES = "KSC_CACHE_DIR (or XDG_CACHE_HOME, or HOME)"


def writable_cache_root() -> Path:
    """The cache root, created and proven writable; else an error naming what moves it."""
    import tempfile

    root = cache_root()
    try:
        root.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=root, prefix=".ksc-write-check-"):
            pass
    except OSError as error:
        raise OSError(error.errno, f"the cache directory {root} is not writable ({error.strerror}): set"
                                   f" {CACHE_VARIABLES} to a writable directory") from None
    return root
