"""The one rule for "could not test": a skip with the reason, or a failure in gate mode."""

from __future__ import annotations

from typing import NoReturn

import pytest


def could_not_test(config: pytest.Config, message: str) -> NoReturn:
    if config.getoption("gate"):
        pytest.fail(f"[gate] {message}", pytrace=False)
    pytest.skip(message)
