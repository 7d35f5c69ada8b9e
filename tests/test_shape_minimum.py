"""A shape's own minimum kubelet version (PodShape.min_kubernetes) reaches the shape's test items
as a `min_kubernetes` marker, which skips only that shape's tests on an older node."""

from __future__ import annotations

import pytest

from tests.suite_project import the_suite

pytest_plugins = ["pytester"]

TESTS = """
import pytest

from e2e.plugin.nodes import skip_if_too_old
from clusters.provider import SwapNode
from e2e.test_cgroup_limits import SHAPES


@pytest.mark.parametrize("kubelet", ["v1.33.4", "v1.34.0", "v1.37.1"])
@pytest.mark.parametrize("shape", SHAPES)
def test_shape(request, shape, kubelet):
    node = SwapNode("LimitedSwap", "vm", "c", "kc", "node-1", kubelet, "6.12.48", 1, 1, 1, True)
    skip_if_too_old(request, node)
"""


def test_pod_level_shapes_skip_on_kubelets_before_1_34_and_only_them(pytester: pytest.Pytester,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from workloads.pods import QOS_SHAPES

    the_suite(pytester, monkeypatch, test_shapes=TESTS)
    result = pytester.runpytest_subprocess("-rs", "-v", "-p", "no:cacheprovider")
    pod_level = sorted(s.id for s in QOS_SHAPES if s.min_kubernetes == "1.34")
    assert len(pod_level) == 3
    result.assert_outcomes(passed=3 * len(QOS_SHAPES) - len(pod_level), skipped=len(pod_level))
    skipped = sorted(line.split("[", 1)[1].split("]", 1)[0] for line in result.stdout.lines
                     if line.startswith("test_shapes.py::") and " SKIPPED" in line)
    assert skipped == [f"{shape}-v1.33.4" for shape in pod_level]
    result.stdout.fnmatch_lines(["SKIPPED [[]3[]] *needs kubelet >= 1.34; node node-1 runs v1.33.4"])
