"""What the kubelet asks of the node's kernel for swap, as pure functions of its release string.

It lives in the clusters layer because both the host preflight (clusters/preflight.py) and the
oracle (e2e/oracle.py, which re-exports it) need it, and the layer below may not import the one
above.
"""

from __future__ import annotations

import re

_RELEASE = re.compile(r"^(\d+)\.(\d+)")


def kernel_supports_noswap(kernel_release: str, probe_succeeded: bool | None = None) -> bool:
    """IsTmpfsNoswapOptionSupported: kernel >= 6.4, or else a real `noswap` tmpfs probe mount.

    Distributions backport `noswap`, so below 6.4 the answer is the probe's; passing no probe
    result for an older kernel is an error rather than a guess.
    """
    match = _RELEASE.match(kernel_release)
    if not match:
        raise ValueError(f"cannot read a kernel version from {kernel_release!r}")
    if (int(match.group(1)), int(match.group(2))) >= (6, 4):
        return True
    if probe_succeeded is None:
        raise ValueError(
            f"kernel {kernel_release} is older than 6.4: whether it supports tmpfs noswap"
            " depends on a probe mount; pass its result"
        )
    return probe_succeeded
