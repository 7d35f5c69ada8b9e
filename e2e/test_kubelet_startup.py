"""What the kubelet refuses to start with on a node with swap: a config file that leaves
failSwapOn out (its default is true), a swapBehavior it does not know, the NodeSwap feature gate
turned off. Each test restarts the node's kubelet once with one such change to its config file
(the provider's attempt_kubelet_start, clusters/kubelet_config.py NodeKubelet.attempt_start),
waits until systemd has seen the kubelet exit, looks in its journal since that restart for the
error the oracle expects (oracle.kubelet_start_refusal, citing the kubelet code), and puts the
node's own file back, confirmed through /configz and Ready. A kubelet that comes up instead fails
the test, saying so.

No pod is deployed. The refusals do not depend on the node's swapBehavior, so they run on the
NoSwap node only (every provider provisions swap on it); the KEP-5359 prototype's own refusal, of
its behavior without its feature gate, runs on the WorkloadControlledSwap node. Needs a provider that can reconfigure a
kubelet for one test (vm, kind); elsewhere the tests are skipped, saying so."""

from __future__ import annotations

import pytest

from clusters import kubelet_config
from clusters.behaviors import WORKLOAD_CONTROLLED_SWAP
from clusters.kubelet_config import KubeletChange
from clusters.kubelet_refusal import StartAttempt
from clusters.provider import NotCoveredError, Provider, SwapNode
from e2e import oracle
from e2e.claims import claim
from e2e.record import Recorder

UNKNOWN_BEHAVIOR = "UnlimitedSwap"  # KEP-2400's third behavior, removed from the kubelet in 1.30


def refused_start(node: SwapNode, provider: Provider, record: Recorder, change: KubeletChange) -> StartAttempt:
    """Start the node's kubelet with `change` made to its config file and claim that it refused,
    logging the error the oracle expects of that file on this node."""
    __tracebackhide__ = True
    if not provider.reconfigures_kubelets:
        # Not among the gate's core checks: a skip with the reason, before the node is touched.
        pytest.skip(f"the {provider.name} provider cannot reconfigure a kubelet for one test")
    try:
        attempt = provider.attempt_kubelet_start(node, change)
    except NotCoveredError as error:  # the provider said it could, then could not
        pytest.fail(str(error))
    swap_on = oracle.swap_on_according_to_proc_swaps(attempt.proc_swaps)
    # a kubelet running WorkloadControlledSwap carries the KEP-5359 prototype, which knows the behavior
    expected = oracle.kubelet_start_refusal(attempt.config, swap_on, node.kubelet_version,
                                            workload_controlled_swap=node.behavior == WORKLOAD_CONTROLLED_SWAP,
                                            flags=attempt.flags)
    if expected is None:  # the test's own premise failed (a node without swap): it would prove nothing
        pytest.fail(f"the oracle expects a kubelet with {change.what} to start on this node (swap on: {swap_on},"
                    f" /proc/swaps {attempt.proc_swaps.strip()!r}): there is nothing to refuse\n{attempt.describe()}")
    wanted = f"refused, logging {expected.message!r}"
    found = oracle.logged(expected.message, attempt.kubelet_lines()) if attempt.refused else None
    observed = wanted if found else attempt.outcome() + (", without that line in its log" if attempt.refused else "")
    claim(record, f"kubelet start with {change.what}", wanted, observed, f"{expected.rule}; {oracle.shown_inputs(expected.inputs)}",
          explain=attempt.describe)
    return attempt



@pytest.mark.needs_behavior("NoSwap")
@pytest.mark.runs_alone("restarts the node's kubelet with a config file it must refuse")
def test_kubelet_with_fail_swap_on_left_out_refuses_to_start_on_a_node_with_swap(
        swap_node: SwapNode, swap_provider: Provider, record: Recorder) -> None:
    """On a node with swap a kubelet whose config file leaves failSwapOn out (its default is true) does not start, and logs that swap is on and "running with swap on is not supported".

    The providers write `failSwapOn: false`, so this default is otherwise never run. The kubelet
    reads /proc/swaps once (swap_util.go IsSwapOn: on when it has a line below its header; the
    test reads it on the node as the kubelet starts and gives it to the oracle), logs "Swap is
    on", and NewContainerManager refuses (container_manager_linux.go). A kubelet defaulting
    failSwapOn to false, or not seeing the node's swap, starts: the test fails saying so."""
    attempt = refused_start(swap_node, swap_provider, record, kubelet_config.fail_swap_on_unset())
    found = oracle.logged(oracle.SWAP_ON_LOGGED, attempt.kubelet_lines())
    claim(record, "the kubelet found swap on", f"logged {oracle.SWAP_ON_LOGGED!r}",
          f"logged {oracle.SWAP_ON_LOGGED!r}" if found else "no such line",
          "swap_util.go isSwapOnAccordingToProcSwaps: /proc/swaps has a line below its header"
          f" ({attempt.proc_swaps.strip()!r})", explain=attempt.describe)


@pytest.mark.needs_behavior("NoSwap")
@pytest.mark.runs_alone("restarts the node's kubelet with a config file it must refuse")
def test_kubelet_with_fail_swap_on_on_its_command_line_refuses_to_start_on_a_node_with_swap(
        swap_node: SwapNode, swap_provider: Provider, record: Recorder) -> None:
    """On a node with swap a kubelet started with --fail-swap-on=true does not start, though its config file says failSwapOn: false: the flag wins over the file.

    The flag is added to KUBELET_EXTRA_ARGS in /etc/default/kubelet, which both providers'
    kubeadm drop-in reads; the file and the config are put back afterwards. A kubelet that
    registered the flag but never applied it over the file (server.go kubeletConfigFlagPrecedence)
    starts: the test fails saying so."""
    refused_start(swap_node, swap_provider, record, kubelet_config.fail_swap_on_flag())


@pytest.mark.needs_behavior("NoSwap")
@pytest.mark.runs_alone("restarts the node's kubelet with a config file it must refuse")
def test_kubelet_with_an_unknown_swap_behavior_refuses_to_start(
        swap_node: SwapNode, swap_provider: Provider, record: Recorder) -> None:
    """A kubelet configured with swapBehavior UnlimitedSwap (removed in 1.30) does not start, and says the value must be "", LimitedSwap or NoSwap.

    ValidateKubeletConfiguration (validation.go) accepts exactly "", NoSwap and LimitedSwap; a
    kubelet that accepted another value would start and silently run NoSwap."""
    refused_start(swap_node, swap_provider, record, kubelet_config.swap_behavior_set(UNKNOWN_BEHAVIOR))


@pytest.mark.needs_behavior("NoSwap")
@pytest.mark.min_kubernetes("1.34")
@pytest.mark.runs_alone("restarts the node's kubelet with a config file it must refuse")
def test_kubelet_with_the_node_swap_gate_off_refuses_to_start(
        swap_node: SwapNode, swap_provider: Provider, record: Recorder) -> None:
    """From 1.34 a kubelet configured with the NodeSwap feature gate false does not start, and says the gate is locked to true.

    NodeSwap went GA in 1.34, locked to its default (pkg/features/kube_features.go); setting a
    locked gate away from its default fails the kubelet's feature gates (component-base
    featuregate). The file also leaves memorySwap out, which a kubelet with the gate off would
    refuse on its own (validation.go): only the lock can refuse this one."""
    refused_start(swap_node, swap_provider, record, kubelet_config.node_swap_gate_off())


@pytest.mark.needs_behavior("WorkloadControlledSwap")
@pytest.mark.runs_alone("restarts the node's kubelet with a config file it must refuse")
def test_kubelet_with_workload_controlled_swap_but_not_its_gate_refuses_to_start(
        swap_node: SwapNode, swap_provider: Provider, record: Recorder) -> None:
    """A KEP-5359 kubelet configured with swapBehavior WorkloadControlledSwap and its feature gate off does not start, and says the behavior requires the gate.

    The prototype's ValidateKubeletConfiguration accepts the behavior only with the
    WorkloadControlledSwap gate (alpha, off by default); a kubelet that accepted it without would
    start and decide swap by limits.swap on a node whose operator never turned the feature on."""
    refused_start(swap_node, swap_provider, record, kubelet_config.workload_controlled_swap_gate_off())
