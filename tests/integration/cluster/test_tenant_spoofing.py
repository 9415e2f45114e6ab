"""Spoofing from a tenant pod: OVN port security on every pod's logical port drops what claims
another pod's identity, and the victim keeps its traffic.

attacker (node1), victim (node2) and receiver (node3) share one namespace, so one logical switch
spans the three nodes and the attacker's frames reach the others' L2 unless OVN drops them. The
receiver logs each UDP datagram it gets; a spoof counts as dropped when none of its datagrams
arrives while the same path with the attacker's own address does. With the attacker's port
security cleared the spoofed datagram arrives: the check can fail.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pytest

from nodeenv.cluster.cluster import Cluster
from nodeenv.node import read_env_file
from tests.integration.cluster.conftest import Pod, Pods
from tests.integration.cluster.kube import eventually, nbctl
from tests.integration.cluster.test_tenant_isolation import PROBE, guards, guards_off, probe
from tests.integration.cluster.traffic import ping

NS, PORT = "tenant-spoof", 7001


@dataclass
class Trio:
    attacker: Pod
    victim: Pod
    receiver: Pod


def mac_of(pod: Pod) -> str:
    return pod.run("cat", "/sys/class/net/eth0/address").stdout.strip()


@pytest.fixture(scope="module")
def trio(cluster: Cluster) -> Iterator[Trio]:
    pods = Pods([])
    try:
        roles = zip(("attacker", "victim", "receiver"), cluster.nodes, strict=True)
        yield Trio(*(pods.add(n, namespace=NS, name=f"{role}-{n.name}") for role, n in roles))
    finally:
        pods.delete_all()


@contextmanager
def received(pod: Pod) -> Iterator[list[dict[str, str]]]:
    """The datagrams `pod` gets on PORT meanwhile (filled in on exit)."""
    argv = ["ip", "netns", "exec", pod.netns, sys.executable, PROBE, "udp-log", str(PORT)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and json.loads(proc.stdout.readline()).get("ready")
    got: list[dict[str, str]] = []
    try:
        yield got
        time.sleep(0.5)  # the last datagrams in flight
    finally:
        proc.kill()
        got += [json.loads(line) for line in proc.communicate()[0].splitlines()]


def test_port_security_on_every_pod_port(cluster: Cluster, trio: Trio) -> None:
    """Every pod's logical switch port carries port security equal to its MAC + IP."""
    rows = json.loads(nbctl(cluster, "--format=json", "--columns=name,addresses,port_security,external_ids",
                            "list", "Logical_Switch_Port"))  # fmt: skip
    names = [h for h in rows["headings"]]
    pods = [dict(zip(names, r, strict=True)) for r in rows["data"]]
    pods = [p for p in pods if "prismnet.pod" in dict(p["external_ids"][1])]
    assert {trio.attacker.lsp, trio.victim.lsp, trio.receiver.lsp} <= {p["name"] for p in pods}
    bare = [p["name"] for p in pods if not p["port_security"] or p["port_security"] != p["addresses"]]
    assert not bare, f"pod ports without port security (MAC + IP): {bare}"


def _sends(t: Trio, *args: str, count: int = 5) -> list[dict[str, str]]:
    with received(t.receiver) as got:
        probe(t.attacker, *args, str(count))
    return got


def test_another_pods_ip_as_source_is_dropped(trio: Trio) -> None:
    a, v, r = trio.attacker, trio.victim, trio.receiver
    spoofed = _sends(trio, "udp-from", v.ip, r.ip, str(PORT))
    own = _sends(trio, "udp-from", a.ip, r.ip, str(PORT))
    assert not [d for d in spoofed if d["from"] == v.ip], spoofed
    assert [d for d in own if d["from"] == a.ip], "the attacker's own raw datagrams never arrived"
    _victim_keeps_its_traffic(trio)


def test_another_pods_mac_as_source_is_dropped(trio: Trio) -> None:
    a, v, r = trio.attacker, trio.victim, trio.receiver
    stolen, own_mac, dst = mac_of(v), mac_of(a), mac_of(r)
    spoofed = _sends(trio, "frame-from", stolen, dst, a.ip, r.ip, str(PORT))
    own = _sends(trio, "frame-from", own_mac, dst, a.ip, r.ip, str(PORT))
    assert not [d for d in spoofed if stolen in d["data"]], spoofed
    assert [d for d in own if own_mac in d["data"]], "the attacker's own frames never arrived"
    _victim_keeps_its_traffic(trio)


def test_gratuitous_arp_claiming_another_pods_ip_is_dropped(trio: Trio) -> None:
    """The receiver knows the victim's MAC; ARPs from the attacker claiming the victim's IP do not
    move it, and the receiver's traffic still goes to the victim."""
    a, v, r = trio.attacker, trio.victim, trio.receiver
    assert ping(r.netns, v.ip).returncode == 0
    time.sleep(1.2)  # past the neighbour entry's locktime (1 s): a GARP now would override it
    probe(a, "garp", "eth0", v.ip, "10")
    time.sleep(0.3)
    entry = r.run("ip", "neigh", "show", v.ip, "dev", "eth0").stdout
    assert mac_of(v) in entry and mac_of(a) not in entry, entry
    _victim_keeps_its_traffic(trio, sender=trio.receiver, to=trio.victim)


def _victim_keeps_its_traffic(t: Trio, sender: Pod | None = None, to: Pod | None = None) -> None:
    sender, to = sender or t.victim, to or t.receiver
    for _ in range(3):
        with received(to) as got:
            probe(sender, "udp-from", sender.ip, to.ip, str(PORT), "3")
        if [d for d in got if d["from"] == sender.ip]:
            return
    raise AssertionError(f"{sender.name} -> {to.name}: nothing arrives")


def test_spoof_probe_sees_it_without_port_security(cluster: Cluster, trio: Trio) -> None:
    """The guard left off (the attacker's port security cleared): the spoofed source arrives."""
    a, v, r = trio.attacker, trio.victim, trio.receiver
    saved = nbctl(cluster, "--bare", "--columns=port_security", "list", "Logical_Switch_Port", a.lsp).strip()
    nbctl(cluster, "--wait=hv", "lsp-set-port-security", a.lsp)
    try:
        spoofed = _sends(trio, "udp-from", v.ip, r.ip, str(PORT))
    finally:
        nbctl(cluster, "--wait=hv", "lsp-set-port-security", a.lsp, saved)
    assert [d for d in spoofed if d["from"] == v.ip], spoofed


def _sbctl(cluster: Cluster, *args: str) -> str:
    db = read_env_file(cluster.env_file)["OVN_SB_DB"]
    out = subprocess.run(["ovn-sbctl", f"--db={db}", "--timeout=20", *args], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_a_geneve_datagram_to_another_nodes_tunnel_endpoint_is_dropped(cluster: Cluster, trio: Trio) -> None:
    """A pod's UDP datagram to another node's Geneve port, carrying a frame for the victim's logical
    port (its datapath's and port's tunnel keys, as OVN encapsulates) from a made-up address: with
    the platform guard nothing arrives; with the guard's policies deleted the node decapsulates it
    (its outer source is the attacker's node after masquerade, a trusted tunnel peer) and the frame
    reaches the victim past every check of the attacker's own port. Then the agents restore it."""
    a, v = trio.attacker, trio.victim
    binding = ("find", "Port_Binding", f"logical_port={v.lsp}")
    key = _sbctl(cluster, "--bare", "--columns=tunnel_key", *binding)
    datapath = _sbctl(cluster, "--bare", "--columns=datapath", *binding)
    vni = _sbctl(cluster, "get", "Datapath_Binding", datapath, "tunnel_key")
    inject = ("geneve", v.node.address, vni, key, mac_of(v), v.ip, str(PORT), "5")
    assert len(guards(cluster)) == len(cluster.nodes)
    with received(v) as guarded:
        probe(a, *inject)
    with guards_off(cluster), received(v) as open_:
        probe(a, *inject)
    back = eventually(lambda: guards(cluster), lambda g: len(g) == len(cluster.nodes), timeout=5, every=0.1)
    assert not [d for d in guarded if d["from"] == "192.0.2.66"], guarded
    assert [d for d in open_ if d["from"] == "192.0.2.66"], f"the probe never got through unguarded: {open_}"
    assert len(back) == len(cluster.nodes), "the agents did not restore their platform guards"
