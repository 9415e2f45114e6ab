"""The runner's scheduler (nodeenv/kubelet/scheduler.py) on the overlay's own placement rules:
nodeSelector, host ports, required pod anti-affinity on the hostname (and its symmetry), preferred
anti-affinity and spreading, and kube-scheduler's FailedScheduling message when nothing fits."""

from __future__ import annotations

from typing import Any

from nodeenv.kubelet.scheduler import Cluster, matches

Obj = dict[str, Any]
CP = {"node-role.kubernetes.io/control-plane": "true"}


def node(name: str, **labels: str) -> Obj:
    return {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **labels}}}


def pod(name: str, app: str, *, owner: str = "", host_port: int = 0, anti: str = "", prefer: str = "",
        selector: dict[str, str] | None = None, on: str = "") -> Obj:  # fmt: skip
    term = {
        "labelSelector": {"matchLabels": {"app": anti or prefer}},
        "topologyKey": "kubernetes.io/hostname",
    }
    affinity: Obj = {}
    if anti:
        affinity = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    elif prefer:
        affinity = {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 100, "podAffinityTerm": term}]}}  # fmt: skip
    ports = [{"containerPort": host_port, "hostPort": host_port}] if host_port else []
    spec: Obj = {
        "containers": [{"name": "c", "ports": ports}],
        "affinity": affinity,
        "nodeSelector": selector or {},
    }
    if on:
        spec["nodeName"] = on
    refs = [{"kind": "ReplicaSet", "name": owner, "uid": owner}] if owner else []
    meta = {"name": name, "namespace": "kube-system", "labels": {"app": app}, "ownerReferences": refs}
    return {"metadata": meta, "spec": spec}


def test_required_anti_affinity_spreads_replicas_then_leaves_the_third_pending() -> None:
    c = Cluster([node("node1", **CP), node("node2", **CP)])
    placed = [c.schedule(pod(f"lb-{i}", "lb", owner="lb", anti="lb")) for i in range(3)]
    assert [n for n, _ in placed[:2]] == ["node1", "node2"]
    assert placed[2] == (None, "0/2 nodes are available: 2 node(s) didn't match pod anti-affinity rules.")


def test_anti_affinity_is_symmetric() -> None:
    """A Pod that itself has no term cannot join a Pod whose term selects it."""
    c = Cluster.of([node("node1"), node("node2")], [pod("guard", "x", anti="web", on="node1")])
    assert c.schedule(pod("web-0", "web")) == ("node2", "")


def test_host_ports_and_node_selector() -> None:
    c = Cluster.of([node("node1", **CP), node("node2")], [pod("a", "a", host_port=6641, on="node1")])
    assert c.schedule(pod("b", "b", host_port=6641, selector=CP)) == (
        None,
        "0/2 nodes are available: 1 node(s) didn't have free ports for the requested pod ports, "
        "1 node(s) didn't match Pod's node affinity/selector.",
    )
    assert c.schedule(pod("c", "c", host_port=6642, selector=CP)) == ("node1", "")


def test_preferred_anti_affinity_and_spreading_pick_the_emptier_node() -> None:
    c = Cluster.of([node("node1"), node("node2"), node("node3")],
                   [pod("x", "x", on="node1"), pod("y", "y", on="node2")])  # fmt: skip
    assert c.schedule(pod("p-0", "p", owner="p", prefer="p")) == ("node3", "")
    assert c.schedule(pod("p-1", "p", owner="p", prefer="p"))[0] in ("node1", "node2")
    # preferred only: a third replica still fits somewhere
    assert c.schedule(pod("p-2", "p", owner="p", prefer="p"))[0] is not None


def test_label_selector_expressions() -> None:
    sel = {"matchLabels": {"app": "a"}, "matchExpressions": [
        {"key": "tier", "operator": "In", "values": ["db", "web"]},
        {"key": "canary", "operator": "DoesNotExist"}]}  # fmt: skip
    assert matches(sel, {"app": "a", "tier": "db"})
    assert not matches(sel, {"app": "a", "tier": "cache"})
    assert not matches(sel, {"app": "a", "tier": "db", "canary": "1"})
    assert matches({"matchExpressions": [{"key": "k", "operator": "Exists"}]}, {"k": ""})
    assert matches({"matchExpressions": [{"key": "k", "operator": "NotIn", "values": ["v"]}]}, {})
