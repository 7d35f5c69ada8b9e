"""The kubelet `memorySwap.swapBehavior` values this suite knows, in one place."""

from __future__ import annotations

NO_SWAP = "NoSwap"
LIMITED_SWAP = "LimitedSwap"
WORKLOAD_CONTROLLED_SWAP = "WorkloadControlledSwap"

# Ordered the way reports list them.
ALL_BEHAVIORS: tuple[str, ...] = (NO_SWAP, LIMITED_SWAP, WORKLOAD_CONTROLLED_SWAP)

# The kubelet treats an empty swapBehavior exactly like NoSwap.
KUBELET_VALUES: tuple[str, ...] = ("",) + ALL_BEHAVIORS


class UnknownBehaviorError(ValueError):
    pass


def normalize(behavior: str) -> str:
    """Map a kubelet value to the suite's name for it ("" -> NoSwap); reject anything else.

    Matching is exact: the kubelet's validation is case-sensitive, so "limitedswap" is a
    configuration error there and must be one here.
    """
    if behavior == "":
        return NO_SWAP
    if behavior in ALL_BEHAVIORS:
        return behavior
    cased = [b for b in ALL_BEHAVIORS if b.lower() == behavior.strip().lower()]
    if cased:
        raise UnknownBehaviorError(f"unknown swap behavior {behavior!r}: the kubelet's names are case-sensitive,"
                                   f" write {cased[0]}")
    raise UnknownBehaviorError(
        f"unknown swap behavior {behavior!r}: choose from {', '.join(ALL_BEHAVIORS)}"
        " (UnlimitedSwap was removed from the kubelet in v1.30)"
    )


def parse_list(text: str) -> list[str]:
    """Parse a comma-separated --behaviors value, keeping order and dropping duplicates."""
    seen: list[str] = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name = normalize(item)
        if name not in seen:
            seen.append(name)
    if not seen:
        raise UnknownBehaviorError(f"no swap behavior named in {text!r}")
    return seen
