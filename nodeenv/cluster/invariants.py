"""What must hold in a cluster once it has settled, whatever happened to it: one check for every
fault test, the bench and the join test.

`check(cluster, pods, namespaces)` reads the NB and SB (the members' unix sockets, leader only),
every live node's Open_vSwitch database and its network namespace's links, and says what is wrong,
one sentence per problem ([] = all holds):

- every pod's address is unique (among the pods and among every address the NB holds) and inside
  its switch's subnet;
- every pod has its port everywhere: the NB logical switch port holding its address and naming its
  node, the OVS interface on its node bound to it and installed by ovn-controller (ovn-installed),
  the SB port binding on its node's chassis, and its host veth in its node's namespace;
- no port without its pod: no pod port in the NB, no pod interface in any node's OVS and no host
  veth in any node that belongs to no pod (in `namespaces`, the scope of the check);
- no leaked address: each live node's egress address set holds exactly its pods' addresses; no
  address set (egress or platform guard), management port or chassis is left of a node that is not
  in the cluster.

`settle(...)` repeats the check until it holds or a timeout passes (ovn-controller installs ports
and northd binds them asynchronously), and returns the last problems.
"""

from __future__ import annotations

import ipaddress
import json
import subprocess
import time
from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from cni.attachment import HOST_IF_PREFIX, Attachment
from cni.management import management_names
from cni.ovn import K_CID, K_NODE, K_NS
from cni.ovn_egress import K_ROLE, ipv4_of, pods_set_name
from cni.platform_guard import K_GUARD
from nodeenv.cluster.cluster import Cluster, ClusterNode
from nodeenv.node import read_env_file

Row = dict[str, Any]


@dataclass(frozen=True, slots=True)
class PodRef:
    """A pod as its runtime knows it: where it was ADDed and what the ADD returned."""

    node: str
    namespace: str
    name: str
    container_id: str
    ip: str

    @property
    def attachment(self) -> Attachment:
        return Attachment(container_id=self.container_id, ifname="eth0", network="", namespace=self.namespace,
                          pod=self.name, netns="", node=self.node)  # fmt: skip

    @property
    def lsp(self) -> str:
        return self.attachment.lsp

    @property
    def host_if(self) -> str:
        return self.attachment.host_if


class Unreadable(RuntimeError):
    """A database did not answer (an election, a dead member): the check cannot be made now."""


def _datum(value: Any) -> Any:
    """An OVSDB JSON datum as Python: sets as lists, maps as dicts, uuids as their string."""
    if isinstance(value, list) and len(value) == 2 and isinstance(value[0], str):
        kind, inner = value
        if kind == "set":
            return [_datum(v) for v in inner]
        if kind == "map":
            return {_datum(k): _datum(v) for k, v in inner}
        if kind in ("uuid", "named-uuid"):
            return inner
    return value


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def rows(tool: str, db: str, table: str, columns: Sequence[str], netns: str = "") -> list[Row]:
    """Every row of `table` through `tool` (ovn-nbctl, ovn-sbctl, ovs-vsctl) with `--format=json`."""
    argv = [
        tool,
        f"--db={db}",
        "--timeout=5",
        "--format=json",
        f"--columns={','.join(columns)}",
        "list",
        table,
    ]
    if netns:
        argv = ["ip", "netns", "exec", netns, *argv]
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode != 0:
        raise Unreadable(f"{tool} list {table}: {proc.stderr.strip()}")
    doc = json.loads(proc.stdout)
    return [{h: _datum(v) for h, v in zip(doc["headings"], r, strict=True)} for r in doc["data"]]


def host_links(netns: str) -> set[str]:
    """The pods' host veths (`pn...`) in a node's namespace."""
    proc = subprocess.run(["ip", "-n", netns, "-o", "link", "show"], capture_output=True, text=True)
    if proc.returncode != 0:
        raise Unreadable(f"links of {netns}: {proc.stderr.strip()}")
    names = (line.split(": ")[1].split("@")[0] for line in proc.stdout.splitlines() if ": " in line)
    return {n for n in names if n.startswith(HOST_IF_PREFIX) and len(n) == len(HOST_IF_PREFIX) + 11}


@dataclass
class Snapshot:
    """What the check reads, once."""

    switches: list[Row]
    ports: list[Row]
    address_sets: list[Row]
    chassis: list[Row]
    bindings: list[Row]
    ovs: dict[str, list[Row]]
    """node name -> its Interfaces"""
    links: dict[str, set[str]]
    """node name -> its pods' host veths"""

    @classmethod
    def read(cls, cluster: Cluster, nodes: Iterable[ClusterNode]) -> Snapshot:
        central = read_env_file(cluster.env_file)
        nb, sb = central["OVN_NB_DB"], central["OVN_SB_DB"]
        ovs, links = {}, {}
        for n in nodes:
            ovs_db = f"unix:{n.node.run_dir / 'ovs' / 'ovs.sock'}"
            ovs[n.name] = rows("ovs-vsctl", ovs_db, "Interface", ["name", "external_ids"])
            links[n.name] = host_links(n.netns)
        return cls(
            switches=rows("ovn-nbctl", nb, "Logical_Switch", ["_uuid", "name", "ports", "external_ids"]),
            ports=rows(
                "ovn-nbctl", nb, "Logical_Switch_Port", ["_uuid", "name", "addresses", "external_ids"]
            ),
            address_sets=rows("ovn-nbctl", nb, "Address_Set", ["name", "addresses", "external_ids"]),
            chassis=rows("ovn-sbctl", sb, "Chassis", ["_uuid", "name", "hostname"]),
            bindings=rows("ovn-sbctl", sb, "Port_Binding", ["logical_port", "chassis"]),
            ovs=ovs,
            links=links,
        )


def check(cluster: Cluster, pods: Collection[PodRef], namespaces: Collection[str] | None = None) -> list[str]:
    """The problems found (see the module doc); `namespaces` limits "no port without its pod" to
    pods of those Kubernetes namespaces (None: every pod port in the cluster)."""
    live = list(cluster.nodes)
    return problems(Snapshot.read(cluster, live), [n.name for n in live], pods, namespaces)


def problems(
    snap: Snapshot, live: Sequence[str], pods: Collection[PodRef], namespaces: Collection[str] | None = None
) -> list[str]:
    out: list[str] = []

    def in_scope(ids: dict[str, str]) -> bool:
        return K_CID in ids and (namespaces is None or ids.get(K_NS, "default") in namespaces)

    out += _unique_addresses(snap, pods)
    by_lsp = {p["name"]: p for p in snap.ports}
    chassis_name = {c["_uuid"]: _node_of(c) for c in snap.chassis}
    bound = {b["logical_port"]: chassis_name.get(next(iter(_as_list(b["chassis"])), ""), "")
             for b in snap.bindings}  # fmt: skip
    for pod in pods:
        where = f"pod {pod.namespace}/{pod.name} ({pod.ip} on {pod.node})"
        lsp = by_lsp.get(pod.lsp)
        if lsp is None:
            out.append(f"{where}: no logical switch port {pod.lsp} in the NB")
        else:
            if pod.ip not in ipv4_of(_as_list(lsp["addresses"])):
                out.append(f"{where}: its NB port holds {lsp['addresses']}, not its address")
            if lsp["external_ids"].get(K_NODE) != pod.node:
                out.append(f"{where}: its NB port names node {lsp['external_ids'].get(K_NODE)!r}")
        ifaces = [i for i in snap.ovs.get(pod.node, []) if i["external_ids"].get("iface-id") == pod.lsp]
        if not ifaces:
            out.append(f"{where}: no OVS interface bound to {pod.lsp} on {pod.node}")
        elif ifaces[0]["external_ids"].get("ovn-installed") != "true":
            out.append(f"{where}: ovn-controller has not installed {pod.lsp} on {pod.node}")
        if bound.get(pod.lsp) != pod.node:
            out.append(f"{where}: its SB port binding is on chassis {bound.get(pod.lsp) or 'none'!r}")
        if pod.host_if not in snap.links.get(pod.node, set()):
            out.append(f"{where}: no host veth {pod.host_if} in its node's namespace")
    expected = {p.lsp: p for p in pods}
    for p in snap.ports:
        if in_scope(p["external_ids"]) and K_ROLE not in p["external_ids"] and p["name"] not in expected:
            ip = " ".join(ipv4_of(_as_list(p["addresses"])))
            node = p["external_ids"].get(K_NODE)
            out.append(f"NB port {p['name']} (node {node}, {ip}) has no pod: its address is leaked")
    host_ifs = {p.host_if: p for p in pods}
    for node, ifaces in snap.ovs.items():
        for i in ifaces:
            ids = i["external_ids"]
            if in_scope(ids) and ids.get("iface-id") not in expected:
                out.append(f"OVS interface {i['name']} on {node} (bound to {ids.get('iface-id')}) has no pod")
        for link in sorted(snap.links[node] - {h for h, p in host_ifs.items() if p.node == node}):
            if namespaces is None or _link_in_scope(link, ifaces, namespaces):
                out.append(f"host veth {link} on {node} has no pod")
    out += _nodes(snap, live)
    return out


def _unique_addresses(snap: Snapshot, pods: Collection[PodRef]) -> list[str]:
    out = []
    twice = [ip for ip, n in Counter(p.ip for p in pods).items() if n > 1]
    out += [f"address {ip} handed to {[p.name for p in pods if p.ip == ip]}" for ip in sorted(twice)]
    held = Counter(ip for p in snap.ports for ip in ipv4_of(_as_list(p["addresses"])))
    out += [f"address {ip} held by {n} NB ports" for ip, n in sorted(held.items()) if n > 1]
    subnet_of = {}
    for sw in snap.switches:
        subnet = sw["external_ids"].get("prismnet.subnet")
        for uuid in _as_list(sw["ports"]):
            subnet_of[uuid] = subnet
    for p in snap.ports:
        subnet = subnet_of.get(p["_uuid"])
        for ip in ipv4_of(_as_list(p["addresses"])):
            if subnet and ipaddress.ip_address(ip) not in ipaddress.ip_network(subnet):
                out.append(f"NB port {p['name']} holds {ip}, outside its switch's subnet {subnet}")
    return out


def _link_in_scope(link: str, ifaces: list[Row], namespaces: Collection[str]) -> bool:
    """A host veth with no pod counts when its OVS interface (if any) is in scope; one without an
    interface is always reported (nothing else would ever remove it)."""
    iface = next((i for i in ifaces if i["name"] == link), None)
    return iface is None or iface["external_ids"].get(K_NS, "default") in namespaces


def _nodes(snap: Snapshot, live: Sequence[str]) -> list[str]:
    """Node-level state: each live node's egress set equal to its pods' addresses, its management
    port and chassis there; nothing of any other node."""
    out = []
    pod_ips: dict[str, set[str]] = {}
    for p in snap.ports:
        ids = p["external_ids"]
        if K_NODE in ids and K_ROLE not in ids:
            pod_ips.setdefault(ids[K_NODE], set()).update(ipv4_of(_as_list(p["addresses"])))
    sets = {s["name"]: s for s in snap.address_sets}
    for node in live:
        aset = sets.get(pods_set_name(node))
        if aset is None:
            out.append(f"node {node} has no egress address set")
        elif set(_as_list(aset["addresses"])) != pod_ips.get(node, set()):
            extra = set(_as_list(aset["addresses"])) - pod_ips.get(node, set())
            missing = pod_ips.get(node, set()) - set(_as_list(aset["addresses"]))
            out.append(f"egress set of {node}: leaked {sorted(extra)}, missing {sorted(missing)}")
    names = {p["name"] for p in snap.ports}
    owners = {p["external_ids"].get(K_NODE) for p in snap.ports} | {
        s["external_ids"].get(k) for s in snap.address_sets for k in (K_NODE, K_GUARD)
    }
    for node in live:
        if management_names(node)[1] not in names:
            out.append(f"node {node} has no management port in the NB")
    out += [f"NB still holds state of node {n}, which is not in the cluster"
            for n in sorted(o for o in owners if o and o not in live)]  # fmt: skip
    chassis = Counter(_node_of(c) for c in snap.chassis)
    out += [f"node {n} has no chassis in the SB" for n in live if n not in chassis]
    out += [f"node {n} has {k} chassis in the SB" for n, k in sorted(chassis.items()) if k > 1]
    out += [f"SB chassis {c} is no node of the cluster" for c in sorted(set(chassis) - set(live))]
    return out


def _node_of(chassis: Row) -> str:
    """The node a Chassis is: its hostname (the node's name; a reinstalled node's system-id is new),
    else its name (the system-id, the node's name unless reinstalled)."""
    return str(chassis.get("hostname") or chassis["name"])


def settle(
    cluster: Cluster,
    pods: Collection[PodRef],
    namespaces: Collection[str] | None = None,
    timeout: float = 20.0,
) -> list[str]:
    """`check` until it holds or `timeout` passes; the last problems ([] = it holds)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            found = check(cluster, pods, namespaces)
        except Unreadable as e:
            found = [f"unreadable: {e}"]
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.2)
