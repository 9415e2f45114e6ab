"""The cluster invariant check (nodeenv/cluster/invariants.py) on made-up snapshots: a consistent
cluster passes, and each kind of breakage is named; and `cluster-join` without a cluster says so."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from cni.management import management_names
from cni.ovn import K_CID, K_NODE, K_NS
from cni.ovn_egress import K_ROLE, pods_set_name
from nodeenv.cli import main
from nodeenv.cluster.invariants import PodRef, Snapshot, _datum, problems

PODS = [PodRef("node1", "ns", "a", "cida", "10.9.1.2"), PodRef("node2", "ns", "b", "cidb", "10.9.1.3")]
LIVE = ["node1", "node2"]


def _snapshot() -> Snapshot:
    ports: list[dict[str, Any]] = [
        {"_uuid": f"u-{p.name}", "name": p.lsp, "addresses": f"0a:58:0a:09:01:0{i} {p.ip}",
         "external_ids": {K_CID: p.container_id, K_NODE: p.node, K_NS: p.namespace}}
        for i, p in enumerate(PODS, 2)
    ]  # fmt: skip
    ports += [
        {"_uuid": f"m-{n}", "name": management_names(n)[1], "addresses": f"0a:58:0a:09:00:0{i} 10.9.0.{i}",
         "external_ids": {K_NODE: n, K_ROLE: "management"}}
        for i, n in enumerate(LIVE, 2)
    ]  # fmt: skip
    switches = [{"_uuid": "s1", "name": "k8s-ns", "ports": ["u-a", "u-b"],
                 "external_ids": {"prismnet.subnet": "10.9.1.0/24"}}]  # fmt: skip
    sets = [
        {"name": pods_set_name(p.node), "addresses": p.ip, "external_ids": {K_NODE: p.node}} for p in PODS
    ]
    return Snapshot(
        switches=switches,
        ports=ports,
        address_sets=sets,
        chassis=[{"_uuid": f"c-{n}", "name": n} for n in LIVE],
        bindings=[{"logical_port": p.lsp, "chassis": f"c-{p.node}"} for p in PODS],
        ovs={p.node: [{"name": p.host_if, "external_ids": {"iface-id": p.lsp, "ovn-installed": "true",
                                                           K_CID: p.container_id, K_NS: p.namespace}}]
             for p in PODS},
        links={p.node: {p.host_if} for p in PODS},
    )  # fmt: skip


def test_a_consistent_cluster_passes() -> None:
    assert problems(_snapshot(), LIVE, PODS, ["ns"]) == []
    assert problems(_snapshot(), LIVE, PODS) == []


def test_ovsdb_json_datums() -> None:
    assert _datum(["set", [["uuid", "x"], ["uuid", "y"]]]) == ["x", "y"]
    assert _datum(["map", [["k", "v"]]]) == {"k": "v"}
    assert _datum(["uuid", "z"]) == "z" and _datum("plain") == "plain"


def _broken(change: str) -> Snapshot:
    s = copy.deepcopy(_snapshot())
    if change == "duplicate":
        s.ports[1]["addresses"] = "0a:58:0a:09:01:03 10.9.1.2"
    elif change == "nb port without pod":
        s.ports.append({"_uuid": "u-x", "name": "x-cidx", "addresses": "0a:58:0a:09:01:09 10.9.1.9",
                        "external_ids": {K_CID: "cidx", K_NODE: "node1", K_NS: "ns"}})  # fmt: skip
    elif change == "no nb port":
        del s.ports[0]
    elif change == "not installed":
        s.ovs["node1"][0]["external_ids"]["ovn-installed"] = "false"
    elif change == "ovs without pod":
        s.ovs["node2"].append(
            {"name": "pnxxxxxxxxxxx", "external_ids": {"iface-id": "gone", K_CID: "g", K_NS: "ns"}}
        )
    elif change == "veth without pod":
        s.links["node1"].add("pn00000000000")
    elif change == "no binding":
        s.bindings[0]["chassis"] = []
    elif change == "leaked egress":
        s.address_sets[0]["addresses"] = ["10.9.1.2", "10.9.1.7"]
    elif change == "dead node's chassis":
        s.chassis.append({"_uuid": "c-node3", "name": "node3"})
    elif change == "reinstalled node's stale chassis":
        s.chassis.append({"_uuid": "c-node1-old", "name": "8d1f0c2e", "hostname": "node1"})
    elif change == "dead node's state":
        s.address_sets.append(
            {"name": pods_set_name("node3"), "addresses": [], "external_ids": {K_NODE: "node3"}}
        )
    elif change == "outside subnet":
        s.ports[0]["addresses"] = "0a:58:0a:09:02:02 10.9.2.2"
    return s


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ("duplicate", "address 10.9.1.2 held by 2 NB ports"),
        ("nb port without pod", "NB port x-cidx (node node1, 10.9.1.9) has no pod"),
        ("no nb port", "no logical switch port a-cida in the NB"),
        ("not installed", "ovn-controller has not installed a-cida on node1"),
        ("ovs without pod", "OVS interface pnxxxxxxxxxxx on node2 (bound to gone) has no pod"),
        ("veth without pod", "host veth pn00000000000 on node1 has no pod"),
        ("no binding", "its SB port binding is on chassis 'none'"),
        ("leaked egress", "egress set of node1: leaked ['10.9.1.7']"),
        ("dead node's chassis", "SB chassis node3 is no node of the cluster"),
        ("reinstalled node's stale chassis", "node node1 has 2 chassis in the SB"),
        ("dead node's state", "NB still holds state of node node3"),
        ("outside subnet", "outside its switch's subnet 10.9.1.0/24"),
    ],
)
def test_each_breakage_is_named(change: str, said: str) -> None:
    found = problems(_broken(change), LIVE, PODS, ["ns"])
    assert any(said in p for p in found), found


def test_a_port_outside_the_scope_is_not_counted() -> None:
    s = _broken("nb port without pod")
    s.ports[-1]["external_ids"][K_NS] = "elsewhere"
    s.address_sets[0]["addresses"] = ["10.9.1.2", "10.9.1.9"]  # as its agent keeps it
    assert problems(s, LIVE, PODS, ["ns"]) == []
    assert problems(s, LIVE, PODS) != []


def test_cluster_join_without_a_cluster_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cluster-join", "--cluster-dir", str(tmp_path / "c"), "--prefix", "k8sjx"]) == 1
    assert "cluster-join: no cluster is up in" in capsys.readouterr().out
    assert not (tmp_path / "c").exists()
