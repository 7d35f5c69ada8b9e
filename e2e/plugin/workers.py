"""Which xdist worker runs which test.

Where each behavior has a node of its own (kind's `ksc-mixed`, `existing`), each worker runs one
behavior's tests, in the collection's order (its `runs_first` test first): a test that runs alone
on its node (e2e/alone.py) then holds back only its own worker, while the other goes on on its
node. Test by test in collection order (xdist's default) both workers are mostly on the same node,
and a test that runs alone there holds both back.

A worker whose behavior's tests are all handed out takes another behavior's, from the end of
that behavior's list: the tests its own worker would have run last, never its first ones (a
worker done early would otherwise sit idle while tests that could run beside the other are still
queued). A behavior's tests that run alone on its node come
early in its list (e2e/plugin/nodes.py), so what is taken from the end runs beside its own
worker's tests rather than waiting for them. Tests are handed out one or two at a time, so that
much is left to take.

The vm provider (one node for every behavior) and an explicit --dist keep xdist's scheduling.
"""

from __future__ import annotations

from typing import Any

import pytest

from clusters import behaviors as swap_behaviors
from e2e.plugin.state import the_run


def behavior_in_nodeid(nodeid: str) -> str | None:
    """The behavior a test id names among its parameters (`...::test_x[NoSwap-best-effort]`)."""
    params = nodeid.rpartition("[")[2].rstrip("]") if nodeid.endswith("]") else ""
    return next((b for b in params.split("-") if b in swap_behaviors.ALL_BEHAVIORS), None)


def pick(pending: list[str], mine: set[str], count: int) -> list[int]:
    """Positions in `pending` (test ids, in the order they are to run) of the next `count` tests
    for a worker whose behaviors are `mine`: its own behaviors' tests, and those naming no
    behavior, from the front; once there are none, another behavior's from the back."""
    own = [i for i, nodeid in enumerate(pending) if behavior_in_nodeid(nodeid) in mine | {None}]
    if own:
        return own[:count]
    return list(range(len(pending) - 1, -1, -1))[:count]


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.getoption("dist", "load") != "load" or the_run(config).provider.one_node_for_every_behavior:
        return None
    from xdist.scheduler import LoadScheduling

    class ByBehavior(LoadScheduling):
        def __init__(self, config: pytest.Config, log: Any = None) -> None:
            super().__init__(config, log)
            self.maxschedchunk = 1  # at most two tests queued on a worker: the rest can be taken

        def _behaviors_of(self, node: Any) -> set[str]:
            assert self.collection is not None
            order = list(dict.fromkeys(b for b in map(behavior_in_nodeid, self.collection) if b))
            workers = list(self.node2pending)
            k = workers.index(node)
            return {b for i, b in enumerate(order) if i % len(workers) == k}

        def _send_tests(self, node: Any, num: int) -> None:
            assert self.collection is not None
            chosen = pick([self.collection[i] for i in self.pending], self._behaviors_of(node), num)
            indices = [self.pending[p] for p in chosen]
            for p in sorted(chosen, reverse=True):
                del self.pending[p]
            if indices:
                self.node2pending[node].extend(indices)
                node.send_runtest_some(indices)

    return ByBehavior(config, log)
