"""Where the vm provider keeps its caches and run state (never inside the repository)."""
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


def default_state_dir() -> Path:
    return cache_root() / "vm" / "run"
