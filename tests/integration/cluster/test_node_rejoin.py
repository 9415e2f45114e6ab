"""Issue 29 item 3: a node reboots (its OVS database kept, as /etc/openvswitch is) and rejoins
under its name and address; a node reinstalled under its old name (a new system-id) replaces its
stale chassis. Both on the session's cluster, through what a node's kubelet does on its way back:
its Node registered, its pods recreated (new sandboxes: new container ids) through the installed
plugin, then CNI GC with the attachments it has now.

Each prints the time from the node's start to its pods reachable from the other nodes.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator

import pytest

from nodeenv.cluster.chassis import PHYS_BRIDGE
from nodeenv.cluster.cluster import Cluster, ClusterNode
from nodeenv.cluster.invariants import PodRef, rows, settle
from nodeenv.cluster.reboot import reboot, rejoin
from nodeenv.cni_component import installed_runtime
from nodeenv.node import read_env_file
from tests.integration.cluster.conftest import Pod, Pods
from tests.integration.cluster.traffic import ping

pytestmark = [pytest.mark.root, pytest.mark.ovn]
NS = "rejoin"


def _sb(cluster: Cluster, table: str, columns: list[str]) -> list[dict[str, object]]:
    return rows("ovn-sbctl", read_env_file(cluster.env_file)["OVN_SB_DB"], table, columns)


def _chassis_of(cluster: Cluster, node: str) -> list[dict[str, object]]:
    """The Chassis rows that are `node` (by hostname, as node-controller and ovn-kubernetes match)."""
    return [
        c for c in _sb(cluster, "Chassis", ["_uuid", "name", "hostname", "encaps"]) if c["hostname"] == node
    ]


def _lsps(cluster: Cluster) -> set[str]:
    return {str(p["name"]) for p in rows("ovn-nbctl", read_env_file(cluster.env_file)["OVN_NB_DB"],
                                         "Logical_Switch_Port", ["name"])}  # fmt: skip


def _ovs_ifaces(n: ClusterNode) -> dict[str, str]:
    """The node's OVS interfaces bound to a logical port: name -> iface-id."""
    db = f"unix:{n.node.run_dir / 'ovs' / 'ovs.sock'}"
    found = rows("ovs-vsctl", db, "Interface", ["name", "external_ids"])
    return {
        str(i["name"]): str(i["external_ids"]["iface-id"]) for i in found if "iface-id" in i["external_ids"]
    }


def _tunnels_to(n: ClusterNode, address: str) -> dict[str, str]:
    """Node `n`'s Geneve tunnel ports to `address`: port name -> the chassis ovn-controller made it
    for (the Port's external_ids:ovn-chassis-id)."""
    db = f"unix:{n.node.run_dir / 'ovs' / 'ovs.sock'}"
    ifaces = rows("ovs-vsctl", db, "Interface", ["name", "type", "options"])
    names = {
        i["name"] for i in ifaces if i["type"] == "geneve" and dict(i["options"]).get("remote_ip") == address
    }
    ports = rows("ovs-vsctl", db, "Port", ["name", "external_ids"])
    return {
        str(p["name"]): str(dict(p["external_ids"]).get("ovn-chassis-id", ""))
        for p in ports
        if p["name"] in names
    }


def _mac_known_by(m: ClusterNode, address: str) -> str:
    """The MAC node `m`'s vswitchd sends its tunnel packets for `address` to (`tnl/neigh/show`)."""
    out = subprocess.run(
        ["ovs-appctl", "-t", m.vswitchd_ctl, "tnl/neigh/show"], capture_output=True, text=True
    ).stdout
    return next((line.split()[1] for line in out.splitlines() if line.startswith(f"{address} ")), "")


def _announced(others: list[ClusterNode], n: ClusterNode) -> None:
    """The others' vswitchd send to `n`'s MAC of this boot (its br-phy's, new with its namespace),
    not to the last boot's: the tunnel neighbour cache keeps an entry 15 min."""
    link = subprocess.run(["ip", "-n", n.netns, "-br", "link", "show", PHYS_BRIDGE], capture_output=True,
                          text=True, check=True).stdout.split()  # fmt: skip
    assert {m.name: _mac_known_by(m, n.address) for m in others} == {m.name: link[2] for m in others}


def _lost(pods: Pods, victim: ClusterNode) -> list[Pod]:
    """The victim's pods die with it: their namespaces go (no DEL ever comes for them)."""
    gone = [p for p in pods.created if p.node.name == victim.name]
    for p in gone:
        subprocess.run(["ip", "netns", "del", p.netns], capture_output=True)
        pods.created.remove(p)
    return gone


def _back(pods: Pods, n: ClusterNode, gone: list[Pod]) -> list[Pod]:
    """kubelet on the node that came back: the same pods in new sandboxes, then GC with what it has."""
    again = [pods.add(n, namespace=p.namespace, name=p.name) for p in gone]
    call = installed_runtime(n.env).gc((p.cid, "eth0") for p in again)
    assert call.rc == 0, (call.out, call.stderr)
    return again


def _reachable(src: list[Pod], dst: list[Pod], timeout: float = 30.0) -> None:
    for a in src:
        for b in dst:
            proc = ping(a.netns, b.ip, timeout=timeout)
            assert proc.returncode == 0, (
                f"{a.name} on {a.node.name} -> {b.name} {b.ip} on {b.node.name}",
                proc.stdout,
            )


def _refs(pods: list[Pod]) -> list[PodRef]:
    return [PodRef(p.node.name, p.namespace, p.name, p.cid, p.ip) for p in pods]


@pytest.fixture
def victim(cluster: Cluster) -> Iterator[ClusterNode]:
    """The last node (no controller replica there: the leader's handover is another test's)."""
    n = cluster.nodes[-1]
    assert not cluster.settings.runs_controllers(n.index)
    yield n
    assert n.name in [m.name for m in cluster.nodes], f"{n.name} did not come back"


def test_a_rebooted_node_keeps_its_chassis_and_gets_its_pods_back(
    cluster: Cluster, pods: Pods, victim: ClusterNode
) -> None:
    others = [n for n in cluster.nodes if n.name != victim.name]
    on_victim = [pods.add(victim, NS, f"rb-{i}") for i in range(2)]
    elsewhere = [pods.add(n, NS, f"rb-on-{n.name}") for n in others]
    _reachable(elsewhere, on_victim)
    (chassis,) = _chassis_of(cluster, victim.name)
    encaps = _sb(cluster, "Encap", ["_uuid", "chassis_name", "ip"])
    old_lsps = {p.lsp for p in on_victim}

    reboot(cluster, victim)
    gone = _lost(pods, victim)
    assert victim.name not in [n.name for n in cluster.nodes]
    t0 = time.monotonic()
    n = rejoin(cluster, victim.index, victim.name)
    started = time.monotonic() - t0
    _announced(others, n)
    assert old_lsps <= set(_ovs_ifaces(n).values())  # the kept database: its pods' ports of the last boot
    again = _back(pods, n, gone)
    _reachable(elsewhere, again)
    _reachable(again, elsewhere)
    reachable = time.monotonic() - t0

    # the same chassis, not a second one: same row, same Encap
    assert _chassis_of(cluster, victim.name) == [chassis]
    assert [
        e
        for e in _sb(cluster, "Encap", ["_uuid", "chassis_name", "ip"])
        if e["chassis_name"] == chassis["name"]
    ] == [e for e in encaps if e["chassis_name"] == chassis["name"]]
    # GC removed the previous boot's ports (NB and the kept OVS database); nothing leaked anywhere
    assert not old_lsps & _lsps(cluster)
    assert not old_lsps & set(_ovs_ifaces(n).values())
    assert settle(cluster, _refs([*elsewhere, *again]), [NS]) == []
    print(f"\n{n.name} rebooted: up in {started:.1f} s, its {len(again)} pods reachable both ways "
          f"{reachable:.1f} s after its start; chassis {chassis['name']} kept")  # fmt: skip


def test_a_reinstalled_node_replaces_its_stale_chassis(
    cluster: Cluster, pods: Pods, victim: ClusterNode
) -> None:
    others = [n for n in cluster.nodes if n.name != victim.name]
    on_victim = [pods.add(victim, NS, "ri-0")]
    elsewhere = [pods.add(n, NS, f"ri-on-{n.name}") for n in others]
    _reachable(elsewhere, on_victim)
    (old,) = _chassis_of(cluster, victim.name)

    reboot(cluster, victim)
    gone = _lost(pods, victim)
    t0 = time.monotonic()
    n = rejoin(cluster, victim.index, victim.name, reinstall=True)
    started = time.monotonic() - t0
    new_id = n.node.settings.system_id
    assert new_id != old["name"]
    _announced(others, n)
    again = _back(pods, n, gone)
    _reachable(elsewhere, again)
    _reachable(again, elsewhere)
    reachable = time.monotonic() - t0

    # one chassis for the node's hostname: the new one; the old one and its Encap gone
    (now,) = _chassis_of(cluster, victim.name)
    assert now["name"] == new_id
    encaps = _sb(cluster, "Encap", ["chassis_name", "ip"])
    assert [e["chassis_name"] for e in encaps if e["ip"] == n.address] == [new_id]
    assert old["name"] not in {p["name"] for p in _sb(cluster, "Chassis_Private", ["name"])}
    # the others' tunnels to it point at the new chassis
    for m in others:
        tunnels = _tunnels_to(m, n.address)
        assert len(tunnels) == 1 and new_id in next(iter(tunnels.values())), (m.name, tunnels)
    assert settle(cluster, _refs([*elsewhere, *again]), [NS]) == []
    print(f"\n{n.name} reinstalled (chassis {old['name']} -> {new_id}): up in {started:.1f} s, its pod "
          f"reachable both ways {reachable:.1f} s after its start")  # fmt: skip
