"""Hooks the suite's plugin declares (pytest-xdist's ``newhooks`` pattern)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from clusters.provider import Provider


@pytest.hookspec(firstresult=True)
def pytest_ksc_make_provider(config: pytest.Config) -> Provider | None:
    """The provider of the run's nodes (called once per process). The suite's own
    implementation (trylast) builds the one ``--provider`` names; a plugin that returns one
    instead (a fake for self-tests) gets the run's whole life: preflight, prepare, teardown."""
