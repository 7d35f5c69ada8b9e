"""The one rule for "could not test": a skip with the reason, or a failure in gate mode when the
behavior is one the gate requires."""

from __future__ import annotations

from collections.abc import Callable
from typing import NoReturn

import pytest

# The suite's plugin (e2e/plugin/summary.py) puts here how to learn the behaviors the gate requires (computed once,
# it asks the provider whether WorkloadControlledSwap can be offered).
REQUIRED_KEY = pytest.StashKey[Callable[[], list[str]]]()


def required_behaviors(config: pytest.Config) -> list[str]:
    from e2e.verdict import DEFAULT_REQUIRED

    return config.stash[REQUIRED_KEY]() if REQUIRED_KEY in config.stash else list(DEFAULT_REQUIRED)


def could_not_test(config: pytest.Config, message: str, behavior: str | None = None) -> NoReturn:
    if config.getoption("gate") and (behavior is None or behavior in required_behaviors(config)):
        pytest.fail(f"[gate] {message}", pytrace=False)
    pytest.skip(message)
