"""The cluster environment itself: files, chassis, tunnels, Node objects, nothing in this namespace."""

from __future__ import annotations

import ipaddress
import json
import re
import subprocess
from dataclasses import replace

import pytest

from nodeenv.cluster.chassis import NodeChassis
from nodeenv.cluster.cluster import Cluster
from nodeenv.cluster.underlay import list_netns
from nodeenv.daemons import DaemonError
from nodeenv.node import read_env_file


def _sb(cluster: Cluster, *args: str) -> str:
    central = read_env_file(cluster.env_file)
    out = subprocess.run(
        ["ovn-sbctl", f"--db={central['OVN_SB_DB']}", "--timeout=10", *args], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_cluster_file_names_nodes_addresses_and_remotes(cluster: Cluster) -> None:
    doc = json.loads(cluster.cluster_file.read_text())
    assert [(n["name"], n["address"]) for n in doc["nodes"]] == [
        ("node1", "10.250.0.11"),
        ("node2", "10.250.0.12"),
        ("node3", "10.250.0.13"),
    ]
    members = 3 if cluster.settings.ovn_central == "raft" else 1
    for key in ("OVN_NB_DB", "OVN_SB_DB", "OVN_NB_DB_SSL", "OVN_SB_DB_SSL"):
        assert len(doc["central"][key].split(",")) == members, key
    for n in cluster.nodes:
        env = read_env_file(n.env_file)
        assert env["OVN_CHASSIS"] == n.name and env["K8SHOST_NETNS"] == n.netns
        assert env["OVN_SB_DB"] == doc["central"]["OVN_SB_DB_SSL"], "a node reaches central over the underlay"
        assert "tcp:" not in doc["central"]["OVN_SB_DB"], "this namespace reaches central over unix sockets"


def test_every_node_is_a_chassis_with_its_own_geneve_endpoint(cluster: Cluster) -> None:
    encaps = _sb(cluster, "--bare", "--columns=chassis_name,ip", "list", "Encap").split()
    assert sorted(zip(encaps[::2], encaps[1::2], strict=True)) == [(n.name, n.address) for n in cluster.nodes]


def test_node_objects_carry_their_addresses(cluster: Cluster) -> None:
    env = read_env_file(cluster.env_file)
    out = subprocess.run(
        ["kubectl", "--kubeconfig", env["KUBECONFIG"], "get", "nodes", "-o", "json"],
        capture_output=True,
        text=True,
        check=True,
    )
    nodes = {n["metadata"]["name"]: n for n in json.loads(out.stdout)["items"]}
    for n in cluster.nodes:
        addresses = {a["type"]: a["address"] for a in nodes[n.name]["status"]["addresses"]}
        assert addresses == {"InternalIP": n.address, "Hostname": n.name}


def test_vswitchd_routes_geneve_over_br_phy(cluster: Cluster) -> None:
    n = cluster.nodes[0]
    ctl = n.vswitchd_ctl
    routes = subprocess.run(
        ["ovs-appctl", "-t", ctl, "ovs/route/show"], capture_output=True, text=True
    ).stdout
    assert f"{cluster.settings.underlay_cidr} dev br-phy SRC {n.address}" in routes
    ports = subprocess.run(
        [
            "ovs-vsctl",
            f"--db={n.env['OVS_DB']}",
            "--bare",
            "--columns=options",
            "find",
            "Interface",
            "type=geneve",
        ],
        capture_output=True,
        text=True,
    ).stdout
    remotes = sorted(re.findall(r'remote_ip="?([0-9.]+)', ports))
    assert remotes == sorted(o.address for o in cluster.nodes[1:]), "one Geneve port per other chassis"
    neighbours = subprocess.run(
        ["ovs-appctl", "-t", ctl, "tnl/arp/show"], capture_output=True, text=True
    ).stdout
    for other in cluster.nodes[1:]:
        assert re.search(rf"^{re.escape(other.address)}\s+\S+\s+br-phy", neighbours, re.M), neighbours


def test_no_underlay_address_in_this_namespace(cluster: Cluster) -> None:
    underlay = ipaddress.IPv4Network(cluster.settings.underlay_cidr)
    here = json.loads(subprocess.run(["ip", "-j", "addr"], capture_output=True, text=True, check=True).stdout)
    addrs = [a["local"] for link in here for a in link.get("addr_info", []) if a.get("family") == "inet"]
    assert not [a for a in addrs if ipaddress.IPv4Address(a) in underlay]
    routes = json.loads(
        subprocess.run(["ip", "-j", "route"], capture_output=True, text=True, check=True).stdout
    )
    assert not [
        r for r in routes if r["dst"] != "default" and ipaddress.IPv4Network(r["dst"]).overlaps(underlay)
    ]


def test_a_node_that_cannot_reach_central_says_why(cluster: Cluster) -> None:
    """A fourth node whose uplink is down: its join fails naming the SB remotes and the error."""
    extra = cluster.new_node(4)
    try:
        cluster.underlay.attach(extra.index, extra.name)
        subprocess.run(["ip", "-n", extra.netns, "link", "set", "eth0", "down"], check=True)
        extra.node.components = cluster.node_components(cluster.central.endpoints)
        with pytest.raises(DaemonError) as err:
            extra.node.up()
        print(f"\n{err.value}")
        said = str(err.value)
        assert said.startswith(
            f"node4 cannot join the cluster: no OVN southbound member answers from {extra.address}"
        )
        for remote in read_env_file(cluster.env_file)["OVN_SB_DB_SSL"].split(","):
            assert f"{remote}: " in said, "each remote tried is named with its error"
        assert not extra.node.run_dir.exists(), "a failed join stops what it started"
    finally:
        extra.node.down()
        subprocess.run(["ip", "netns", "del", extra.netns], capture_output=True)
    assert isinstance(extra.node.components[0], NodeChassis)


def test_a_second_cluster_with_the_same_prefix_leaves_the_running_one_alone(cluster: Cluster) -> None:
    """cluster-up from another run dir with this cluster's prefix refuses, naming the live namespaces,
    instead of tearing the running cluster down as stale."""
    s = cluster.settings
    other = Cluster(replace(s, run_dir=s.run_dir.parent / "other-cluster"))
    with pytest.raises(DaemonError) as err:
        other.up()
    assert f"another cluster with prefix {s.prefix} is running" in str(err.value)
    assert cluster.nodes[0].netns in str(err.value)
    assert not other.settings.run_dir.exists()
    assert {n.netns for n in cluster.nodes} <= set(list_netns(s.prefix))
    assert not cluster.faults(), "the running cluster is untouched"
