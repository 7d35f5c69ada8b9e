"""After a kubelet restart the node is looked for until it is Ready and schedulable again, within
a bound (kind run 16: a correct kubelet's first status after its restart said NotReady); so are
a new kind cluster's nodes, each look that gives up waiting for an answer a look lost, not the
wait (decision 0037)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from clusters import discovery, kind_config, kind_provider, waits
from clusters.discovery import NotReadyAfterRestart, ready_after_restart
from clusters.kind_provider import KindError, KindProvider
from clusters.provider import SwapNode


def node(name: str, behavior: str) -> SwapNode:
    return SwapNode(behavior, "kind", "c", "kc", name, "v1.37.1", "6.12.0", 1 << 33, 1 << 33, 1 << 32, True)


@pytest.fixture(autouse=True)
def quick(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(discovery, "AFTER_RESTART_POLL", 0.01)


def test_a_node_not_ready_at_first_is_waited_for(monkeypatch: pytest.MonkeyPatch) -> None:
    # discover lists Ready, schedulable nodes only: the restarted one is missing twice, then back
    answers = [[node("w", "NoSwap")], [node("w", "NoSwap")], [node("w", "NoSwap"), node("cp", "LimitedSwap")]]
    monkeypatch.setattr(discovery, "discover", lambda *a, **k: answers.pop(0))
    found = ready_after_restart("kc", "kind", "c", lambda n: n.name == "cp", "node cp of c", seconds=5)
    assert (found.name, found.behavior) == ("cp", "LimitedSwap")
    assert answers == []


def test_a_node_that_never_comes_back_fails_naming_what_was_found(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(discovery, "discover", lambda *a, **k: [node("w", "NoSwap")])
    with pytest.raises(NotReadyAfterRestart, match=r"node cp of c: not Ready and schedulable 0s after its kubelet"
                                                   r" restarted \(found: w=NoSwap\)"):
        ready_after_restart("kc", "kind", "c", lambda n: n.name == "cp", "node cp of c", seconds=0.1)


def test_a_kubelet_not_answering_yet_is_waited_for_within_the_same_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    # the old kubelet's Ready is still on the node while the new one does not listen yet: its
    # /configz answers 503 through the API server (kind run 46), for longer than one look's bound
    answers: list = [discovery.DiscoveryGaveUp("gave up after 60s waiting for node cp's kubelet /configz: 503"),
                     [node("cp", "LimitedSwap")]]
    budgets = []

    def discover(*a, seconds: float, **k):  # noqa: ANN202
        budgets.append(seconds)
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            time.sleep(0.5)  # the look that gave up took time: the next gets what is left
            raise answer
        return answer

    monkeypatch.setattr(discovery, "discover", discover)
    found = ready_after_restart("kc", "kind", "c", lambda n: n.name == "cp", "node cp of c", seconds=5)
    assert found.name == "cp" and answers == []
    assert budgets[0] <= 5 and budgets[1] < budgets[0] - 0.4  # each look within what is left


def test_a_kubelet_that_never_answers_fails_with_the_last_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    def discover(*a, **k):  # noqa: ANN202
        raise discovery.DiscoveryGaveUp("gave up after 1s waiting for node cp's kubelet /configz: 503 HTTP status")

    monkeypatch.setattr(discovery, "discover", discover)
    with pytest.raises(NotReadyAfterRestart, match=r"\(the last look: gave up after 1s waiting for node cp's kubelet"):
        ready_after_restart("kc", "kind", "c", lambda n: n.name == "cp", "node cp of c", seconds=0.1)


def test_a_permanent_discovery_error_ends_the_wait_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    looks = []

    def discover(*a, **k):  # noqa: ANN202
        looks.append(1)
        raise discovery.DiscoveryError("the kubeconfig's credentials were refused")

    monkeypatch.setattr(discovery, "discover", discover)
    with pytest.raises(discovery.DiscoveryError, match="credentials"):
        ready_after_restart("kc", "kind", "c", lambda n: n.name == "cp", "node cp of c", seconds=5)
    assert looks == [1]


@pytest.mark.parametrize(("floor", "budget", "late"), [(10.0, 30, None), (0.5, 1, 0.5)])
def test_discovery_asks_every_node_within_one_budget(monkeypatch: pytest.MonkeyPatch, floor: float, budget: float,
                                                     late: float | None) -> None:

    asked: list[tuple[str, float]] = []
    nodes = {"items": [{"metadata": {"name": n}, "status": {"conditions": [{"type": "Ready", "status": "True"}],
                                                            "nodeInfo": {"swap": {"capacity": 1}}}} for n in "abc"]}

    def get_json(api, path: str, what: str, seconds: float):  # noqa: ANN001, ANN202
        asked.append((path, seconds))
        time.sleep(0.3)
        return nodes if path == "/api/v1/nodes" else {"kubeletconfig": {}}

    monkeypatch.setattr(discovery, "api_client", lambda *a, **k: None)
    monkeypatch.setattr(discovery, "get_json", get_json)
    monkeypatch.setattr(discovery, "READ_FLOOR", floor)
    discovery.discover("kc", "kind", "c", seconds=budget)
    assert [path for path, _ in asked][1:] == [f"/api/v1/nodes/{n}/proxy/configz" for n in "abc"]
    budgets = [seconds for _, seconds in asked]
    if late is None:  # what is left, not the whole budget each
        assert all(later < earlier for earlier, later in zip(budgets, budgets[1:]))
    else:  # a read that comes after the budget is spent still gets the floor
        assert budgets[-2:] == [late, late]


def test_only_the_restarted_node_is_asked_where_it_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    # kind: the other worker's kubelet may be restarting for another test meanwhile, its /configz
    # answering 503 until the whole bound is spent
    asked: list[str] = []
    items = [{"metadata": {"name": n}, "status": {"conditions": [{"type": "Ready", "status": "True"}],
                                                  "nodeInfo": {"swap": {"capacity": 1}}}} for n in ("cp", "other")]

    def get_json(api, path: str, what: str, seconds: float):  # noqa: ANN001, ANN202
        asked.append(path)
        if "other" in path:
            raise discovery.DiscoveryGaveUp("gave up after 5s waiting for node other's kubelet /configz: 503")
        return {"items": items} if path == "/api/v1/nodes" else {"kubeletconfig": {}}

    monkeypatch.setattr(discovery, "api_client", lambda *a, **k: None)
    monkeypatch.setattr(discovery, "get_json", get_json)
    found = ready_after_restart("kc", "kind", "c", lambda n: n.name == "cp", "node cp of c", seconds=5, name="cp")
    assert found.name == "cp" and asked == ["/api/v1/nodes", "/api/v1/nodes/cp/proxy/configz"]


# --- the Ready of the restarted kubelet, not the old one's (clusters/kubelet_config.py) ----------

RESTART = 1_700_000_000.75  # the node's clock read just before the restart


def status(ready: str, heartbeat: str, version: str = "v1.37.2") -> dict:
    return {"conditions": [{"type": "MemoryPressure", "status": "False", "lastHeartbeatTime": heartbeat},
                           {"type": "Ready", "status": ready, "reason": "KubeletReady" if ready == "True" else
                            "KubeletNotReady", "message": "", "lastHeartbeatTime": heartbeat}],
            "nodeInfo": {"kubeletVersion": version}}


OLD = "2023-11-14T22:13:15Z"  # RESTART - 5.75 s: the old kubelet's last heartbeat
SAME_SECOND = "2023-11-14T22:13:20Z"  # RESTART floored
NEW = "2023-11-14T22:13:23Z"


@pytest.mark.parametrize(("answer", "since", "version", "said"), [
    (status("True", OLD), RESTART, None, "heartbeat 2023-11-14T22:13:15Z is the kubelet's before the restart"),
    (status("False", NEW), RESTART, None, "Ready=False (KubeletNotReady: )"),
    (status("True", NEW), RESTART, None, None),
    (status("True", SAME_SECOND), RESTART, None, None),
    (status("True", OLD), None, None, None),  # no restart to be newer than: any Ready
    (status("True", NEW, "v1.37.2"), RESTART, "v1.37.2+patch.abc", "kubelet v1.37.2 (not yet v1.37.2+patch.abc)"),
    (status("True", "soon"), RESTART, None, "heartbeat 'soon' unreadable"),
    ({"conditions": []}, RESTART, None, "no Ready condition"),
])
def test_ready_counts_from_the_restarted_kubelets_own_status(answer: dict, since: float | None, version: str | None,
                                                            said: str | None) -> None:
    from clusters.kubelet_config import ready_after

    got = ready_after(answer, since, version)
    assert got == said if said is None else said in (got or "")


class RestartingNode:
    """The API server's node status over a restart: the old kubelet's Ready first, then the new
    kubelet's NotReady, then its Ready."""

    def __new__(cls, answers: list[dict]):  # noqa: ANN204 - a NodeKubelet made here, its abstract methods filled
        from clusters.kubelet_config import NodeKubelet

        class Node(NodeKubelet):
            ready_poll_seconds = 0.01
            looks = 0

            def read_config(self) -> str:
                return "memorySwap: {swapBehavior: LimitedSwap}\n"

            def write_config(self, text: str) -> None:
                pass

            restarted = False

            def restart(self) -> None:
                self.restarted = True

            def configz(self) -> dict:
                return {}

            def node_status(self) -> dict:
                self.looks += 1
                return answers[min(self.looks, len(answers)) - 1]

            def node_command(self, argv) -> str:  # noqa: ANN001
                # the clock moves on: read after the restart, it would be past the new heartbeat
                return f"{RESTART + (10 if self.restarted else 0)}\n"

        return Node()


def test_a_restart_waits_past_the_old_kubelets_ready() -> None:

    node = RestartingNode([status("True", OLD), status("True", OLD), status("False", NEW), status("True", NEW)])
    node.restart_with("memorySwap: {swapBehavior: LimitedSwap}\n", lambda live: True, "kubelet restart", timeout=5)
    assert node.looks == 4
    from clusters.kubelet_config import KubeletConfigError

    stale = RestartingNode([status("True", OLD)])
    t0 = time.monotonic()
    with pytest.raises(KubeletConfigError, match="is the kubelet's before the restart"):
        stale.wait_ready(time.monotonic() + 0.2, RESTART)
    with pytest.raises(KubeletConfigError, match=r"^kubelet restart: timed out waiting for the node to be Ready"):
        RestartingNode([status("True", OLD)]).restart_with("x: 1\n", lambda live: True, "kubelet restart", timeout=0.2)
    assert time.monotonic() - t0 < 5


def test_the_ready_wait_stops_when_the_node_is_gone() -> None:

    node = RestartingNode([status("True", OLD)])
    looks = []

    def check() -> None:
        looks.append(1)
        if len(looks) == 3:
            raise RuntimeError("the node's guest stopped")

    node.check = check
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match="the node's guest stopped"):
        node.wait_ready(time.monotonic() + 60, RESTART)
    assert time.monotonic() - t0 < 10


def labeled_nodes(*names_behaviors: tuple[str, str]) -> dict:
    return {"items": [{"metadata": {"name": n, "labels": {kind_config.BEHAVIOR_LABEL: b}}} for n, b in names_behaviors]}


@pytest.fixture
def new_cluster(monkeypatch: pytest.MonkeyPatch) -> KindProvider:
    """A kind provider waiting for a just-created cluster's nodes, within a 5 s bound polled at once."""
    monkeypatch.setattr(waits, "KIND_NODES_READY", 5.0)
    monkeypatch.setattr(kind_provider, "NODES_POLL", 0.01)
    monkeypatch.setattr(discovery, "api_client", lambda *a, **k: None)
    monkeypatch.setattr(discovery, "get_json", lambda *a, **k: labeled_nodes(("w1", "NoSwap"), ("w2", "LimitedSwap")))
    return KindProvider("kind", None, Path("/nonexistent"), reuse=False)


def test_a_new_clusters_worker_not_answering_yet_is_waited_for(monkeypatch: pytest.MonkeyPatch,
                                                             new_cluster: KindProvider) -> None:
    # a look that gives up (here early, as one given less than the rest of the bound would) is not
    # the wait's end: the next look finds the nodes
    answers: list = [discovery.DiscoveryGaveUp("gave up after 60s waiting for node w2's kubelet /configz: 503"),
                     [node("w1", "NoSwap"), node("w2", "LimitedSwap")]]
    budgets: list[float] = []

    def discover(*a, seconds: float, **k):  # noqa: ANN202
        budgets.append(seconds)
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            time.sleep(0.5)
            raise answer
        return answer

    monkeypatch.setattr(kind_provider, "discover", discover)
    found = new_cluster._wait_for_nodes("c", "kc", ["NoSwap", "LimitedSwap"])
    assert {b: n.name for b, n in found.items()} == {"NoSwap": "w1", "LimitedSwap": "w2"} and answers == []
    assert budgets[0] <= 5 and budgets[1] < budgets[0] - 0.4  # each look within what is left of one bound


def test_a_new_clusters_worker_that_never_answers_fails_naming_the_last_look(monkeypatch: pytest.MonkeyPatch,
                                                                             new_cluster: KindProvider) -> None:
    monkeypatch.setattr(waits, "KIND_NODES_READY", 0.1)

    def discover(*a, **k):  # noqa: ANN202
        raise discovery.DiscoveryGaveUp("gave up after 1s waiting for node w2's kubelet /configz: 503 HTTP status")

    monkeypatch.setattr(kind_provider, "discover", discover)
    with pytest.raises(KindError, match=r"labeled: \{'NoSwap': 'w1', 'LimitedSwap': 'w2'\}; Ready and schedulable: no"
                                        r" Ready schedulable node; the last look: gave up after 1s waiting for node w2"):
        new_cluster._wait_for_nodes("c", "kc", ["NoSwap", "LimitedSwap"])


def test_a_new_cluster_refusing_the_credentials_ends_the_wait_at_once(monkeypatch: pytest.MonkeyPatch,
                                                                      new_cluster: KindProvider) -> None:
    looks = []

    def discover(*a, **k):  # noqa: ANN202
        looks.append(1)
        raise discovery.DiscoveryError("the kubeconfig's credentials were refused")

    monkeypatch.setattr(kind_provider, "discover", discover)
    with pytest.raises(discovery.DiscoveryError, match="credentials"):
        new_cluster._wait_for_nodes("c", "kc", ["NoSwap", "LimitedSwap"])
    assert looks == [1]


def test_a_new_clusters_look_reads_the_node_list_once_and_asks_only_the_labeled_kubelets(
        monkeypatch: pytest.MonkeyPatch, new_cluster: KindProvider) -> None:
    # the real discover under the wait: the control plane (no behavior label) is Ready and
    # schedulable here, and still not asked; the list read for the labels is the one discovered
    def item(name: str, label: str) -> dict:
        return {"metadata": {"name": name, "labels": {kind_config.BEHAVIOR_LABEL: label} if label else {}},
                "status": {**status("True", NEW), "nodeInfo": {"kubeletVersion": "v1.37.2", "swap": {"capacity": 1 << 32}}}}

    lists: list[str] = []
    asked: list[str] = []

    def get_json(api: object, path: str, what: str, seconds: float) -> dict:
        lists.append(path)
        return {"items": [item("cp", ""), item("w1", "NoSwap"), item("w2", "LimitedSwap")]}

    def kubelet_config(api: object, name: str, seconds: float) -> dict:
        asked.append(name)
        return {"memorySwap": {"swapBehavior": {"w1": "NoSwap", "w2": "LimitedSwap"}[name]}}

    monkeypatch.setattr(discovery, "get_json", get_json)
    monkeypatch.setattr(discovery, "kubelet_config", kubelet_config)
    found = new_cluster._wait_for_nodes("c", "kc", ["NoSwap", "LimitedSwap"])
    assert {b: n.name for b, n in found.items()} == {"NoSwap": "w1", "LimitedSwap": "w2"}
    assert lists == ["/api/v1/nodes"] and asked == ["w1", "w2"]
