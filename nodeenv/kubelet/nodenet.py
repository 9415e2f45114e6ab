"""The nodes of a multi-node boot (`boot --nodes N`, N >= 2): each a network namespace on an
underlay, made with cluster mode's code (nodeenv/cluster/underlay.py: `<prefix>-underlay` holding
`br-underlay` with the central address, `<prefix>-node<i>` joined to it by its `eth0`), and the
host setup a real node's network configuration does, which the runner's pods need of the node.

Before any pod: the node's underlay address on `eth0` (its Node's InternalIP: the node reaches the
API double's underlay listener and the other nodes), loopback up, IPv4 forwarding on (as kubelet
requires of a node: a pod's egress is forwarded and masqueraded by its node).

Once the node's own OVS is up (the ovs-node DaemonSet's containers: its ovsdb-server socket under
the node's root answers and br-int exists): `eth0` into a userspace `br-phy` and the address moved
onto br-phy's internal port (nodeenv/cluster/chassis.py's attach_uplink), which OVS userspace
tunnelling needs for Geneve between the nodes -- on a real node that is the host's network config
(an OVS bridge holding the uplink); then one ping from every node to every other, so each
vswitchd knows its tunnel neighbours before a pod's first packet.

Once the node's PrismNET management port is up (prismnet-agent): the Service CIDR routed through
it (nodeenv/cluster/control.py's route_vips), so the node reaches ClusterIPs -- the cluster DNS
for its ClusterFirstWithHostNet pods (ovn-central's members look their peers up there) -- through
OVN's load balancers, in place of kube-proxy's rules on a real node.
"""

from __future__ import annotations

import logging
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from nodeenv.cluster.chassis import PHYS_BRIDGE, attach_uplink
from nodeenv.cluster.control import route_vips
from nodeenv.cluster.settings import ClusterSettings
from nodeenv.cluster.underlay import NODE_UPLINK, Underlay, delete_netns, learn_neighbours, list_netns
from nodeenv.daemons import DaemonError, run_checked
from nodeenv.ovn_stack import link_exists

log = logging.getLogger(__name__)
MANAGEMENT_PORT = "pnm-br-int"
"""prismnet-agent's management port on br-int (cni/settings.py: `pnm-<bridge>`)."""


@dataclass(frozen=True, slots=True)
class BootNode:
    name: str
    index: int
    netns: str
    address: str
    prefixlen: int
    root: Path
    """The node's root (hostPath volumes, the CNI dirs; the runner's --node-root)."""

    @property
    def ovs_rundir(self) -> Path:
        return self.root / "run/openvswitch"

    def vswitchd_ctl(self) -> Path | None:
        """ovs-vswitchd's control socket, by its path. The ovs-node pod has no hostPID: its pidfile
        holds the PID in the pod's own PID namespace, which `ovs-appctl -t ovs-vswitchd` from the
        host would find dead (or another process) -- and delete the pidfile as stale."""
        pidfile = self.ovs_rundir / "ovs-vswitchd.pid"
        try:
            pid = int(pidfile.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None
        ctl = self.ovs_rundir / f"ovs-vswitchd.{pid}.ctl"
        return ctl if ctl.is_socket() else None


@dataclass
class BootNodes:
    prefix: str
    count: int
    run_dir: Path
    underlay_cidr: str = "10.250.0.0/24"
    done: dict[str, set[str]] = field(default_factory=dict)
    """Node name -> the host-setup steps done ("uplink", "routes")."""

    def __post_init__(self) -> None:
        self.cluster = ClusterSettings(run_dir=self.run_dir, nodes=self.count, prefix=self.prefix,
                                       underlay_cidr=self.underlay_cidr)  # fmt: skip
        self.cluster.validate()
        plen = self.cluster.underlay.prefixlen
        self.underlay = Underlay(self.prefix, self.cluster.central_address, plen)
        names = self.cluster.node_names()
        self.nodes = [self._node(i, name, plen) for i, name in enumerate(names, 1)]

    def _node(self, index: int, name: str, plen: int) -> BootNode:
        netns, address = self.underlay.node_netns(name), self.cluster.node_address(index)
        return BootNode(name, index, netns, address, plen, self.run_dir / name)

    @property
    def central_address(self) -> str:
        return self.cluster.central_address

    def existing(self) -> list[str]:
        return list_netns(self.prefix)

    def create(self, underlay: bool = True) -> None:
        """The nodes' namespaces on the underlay (made first unless `underlay` is False: kept)."""
        if underlay:
            self.underlay.create()
        for n in self.nodes:
            self.underlay.attach(n.index, n.name)
            run_checked(
                ["ip", "-n", n.netns, "addr", "add", f"{n.address}/{n.prefixlen}", "dev", NODE_UPLINK]
            )
            run_checked(["ip", "netns", "exec", n.netns, "sysctl", "-qw", "net.ipv4.ip_forward=1"])

    def destroy(self) -> list[str]:
        """Every namespace of the prefix (a listing can miss one being torn down: the nodes' own
        names are deleted too)."""
        gone = self.underlay.destroy()
        for name in (n.netns for n in self.nodes if n.netns not in gone):
            if Path(f"/run/netns/{name}").exists():
                delete_netns(name)
                gone.append(name)
        return gone

    def host_setup(self, service_cidr: str) -> list[str]:
        """The host-setup steps whose time has come, done once each; what was done, for the log."""
        did = []
        for n in self.nodes:
            done = self.done.setdefault(n.name, set())
            ctl = n.vswitchd_ctl() if "uplink" not in done else None
            if ctl is not None and self._ovs_up(n):
                db = f"unix:{n.ovs_rundir / 'db.sock'}"
                attach_uplink(n.netns, f"{n.address}/{n.prefixlen}", db, {"OVS_RUNDIR": str(n.ovs_rundir)},
                              str(ctl), n.ovs_rundir / "ovs-vswitchd.log")  # fmt: skip
                done.add("uplink")
                did.append(f"{n.name}: {NODE_UPLINK} into {PHYS_BRIDGE}, {n.address} on {PHYS_BRIDGE}")
                if all("uplink" in self.done.get(m.name, ()) for m in self.nodes):
                    learn_neighbours([(m.netns, m.address) for m in self.nodes])
            routed = "routes" not in done and link_exists(MANAGEMENT_PORT, n.netns)
            if routed and route_vips(n.netns, MANAGEMENT_PORT, [service_cidr]):
                done.add("routes")
                did.append(f"{n.name}: {service_cidr} through {MANAGEMENT_PORT}")
        return did

    def complete(self) -> bool:
        return all(self.done.get(n.name) == {"uplink", "routes"} for n in self.nodes)

    def _ovs_up(self, n: BootNode) -> bool:
        sock = n.ovs_rundir / "db.sock"
        if not sock.exists():
            return False
        argv = ["ovs-vsctl", f"--db=unix:{sock}", "--timeout=2", "br-exists", "br-int"]
        return subprocess.run(argv, capture_output=True).returncode == 0


def require_free(nodes: BootNodes) -> None:
    left = nodes.existing()
    if left:
        why = f"another boot with prefix {nodes.prefix!r}, or one that crashed"
        raise DaemonError(f"network namespaces {', '.join(left)} exist ({why})")
