"""The underlay: the network between the nodes, entirely inside namespaces the cluster creates.

`<prefix>-underlay` holds a Linux bridge `br-underlay` with the central's address (OVN central
runs there); each node is a namespace `<prefix>-<node>` joined to that bridge by a veth pair
(`ul<i>` on the bridge, `eth0` in the node). The node's address is not on `eth0`: the node's
ovs-vswitchd takes `eth0` into its `br-phy` bridge and the address sits on br-phy's internal
port (nodeenv/cluster/chassis.py), as OVS userspace tunnelling needs. Nothing is created in,
or routed to, the namespace this runs in: it reaches the central databases over unix sockets.
"""

from __future__ import annotations

import logging
import subprocess

from nodeenv.daemons import DaemonError, run_checked

log = logging.getLogger(__name__)

BRIDGE = "br-underlay"
NODE_UPLINK = "eth0"


def list_netns(prefix: str) -> list[str]:
    """Network namespaces named `<prefix>-...`, the ones a cluster with this prefix creates."""
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return [line.split()[0] for line in out.splitlines() if line.startswith(f"{prefix}-")]


def netns_pids(name: str) -> list[int]:
    """Processes running in the network namespace `name` (none if it does not exist)."""
    out = subprocess.run(["ip", "netns", "pids", name], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def delete_netns(name: str) -> None:
    subprocess.run(["ip", "netns", "del", name], capture_output=True)


def add_netns(name: str) -> None:
    """A new namespace with loopback up (daemons in it listen on 127.0.0.1)."""
    run_checked(["ip", "netns", "add", name])
    run_checked(["ip", "-n", name, "link", "set", "lo", "up"])


def tx_offload_off(netns: str, ifname: str) -> None:
    """The userspace datapath reads packets off this device with AF_PACKET: checksums left to
    the device (offload) would reach the other side unfilled and TCP would stall."""
    run_checked(["ip", "netns", "exec", netns, "ethtool", "-K", ifname, "tx", "off"])


class Underlay:
    def __init__(self, prefix: str, address: str, prefixlen: int) -> None:
        self.prefix, self.address, self.prefixlen = prefix, address, prefixlen

    @property
    def netns(self) -> str:
        return f"{self.prefix}-underlay"

    def node_netns(self, node: str) -> str:
        return f"{self.prefix}-{node}"

    def create(self) -> None:
        """The underlay namespace and its bridge with the central's address."""
        left = list_netns(self.prefix)
        if left:
            raise DaemonError(
                f"network namespaces {', '.join(left)} already exist: another cluster with prefix "
                f"{self.prefix!r} runs (make cluster-down), or a crashed one left them behind"
            )
        add_netns(self.netns)
        ns = ["ip", "-n", self.netns]
        run_checked([*ns, "link", "add", "name", BRIDGE, "type", "bridge"])
        run_checked([*ns, "addr", "add", f"{self.address}/{self.prefixlen}", "dev", BRIDGE])
        run_checked([*ns, "link", "set", BRIDGE, "up"])

    def attach(self, index: int, node: str) -> str:
        """The node's namespace, wired to the bridge; returns the namespace's name."""
        netns, port = self.node_netns(node), f"ul{index}"
        add_netns(netns)
        ns = ["ip", "-n", self.netns]
        run_checked([*ns, "link", "add", "name", port, "type", "veth", "peer", "name", NODE_UPLINK,
                     "netns", netns])  # fmt: skip
        run_checked([*ns, "link", "set", port, "master", BRIDGE, "up"])
        run_checked(["ip", "-n", netns, "link", "set", NODE_UPLINK, "up"])
        tx_offload_off(self.netns, port)
        tx_offload_off(netns, NODE_UPLINK)
        return netns

    def detach(self, index: int, node: str) -> None:
        """The node's namespace deleted and its bridge port with it (at once: the kernel frees a
        deleted namespace's devices later, and a node joining next would want the same port name)."""
        subprocess.run(["ip", "-n", self.netns, "link", "del", f"ul{index}"], capture_output=True)
        delete_netns(self.node_netns(node))

    def destroy(self) -> list[str]:
        """Delete every namespace of this prefix (nodes, underlay; pods' ones named so too)."""
        gone = list_netns(self.prefix)
        for name in gone:
            delete_netns(name)
        return gone


def learn_neighbours(nodes: list[tuple[str, str]]) -> None:
    """One ARP exchange from every node (netns, address) to every other over the underlay: each
    node's vswitchd learns the others' MACs from the ARP replies through its br-phy
    (`tnl/neigh/show`), so a pod's first packet to another node is not dropped while the tunnel's
    neighbour is resolved, and a node that came back with a new MAC is not sent to at its old one.

    vswitchd learns only from ARP replies to its own address and from gratuitous ARP
    (lib/tnl-neigh-cache.c), never from requests: the kernel's entry for the other node is flushed
    first, so the ping asks (an ARP request the other answers) instead of going out to a MAC the
    kernel already knew, or learned from the other's own request, which vswitchd never saw."""
    for netns, _ in nodes:
        for other_ns, address in nodes:
            if other_ns != netns:
                subprocess.run(["ip", "-n", netns, "neigh", "flush", "to", address], capture_output=True)
                subprocess.run(
                    ["ip", "netns", "exec", netns, "ping", "-c1", "-W1", address], capture_output=True
                )
