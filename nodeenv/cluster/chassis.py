"""A cluster node's OVS and ovn-controller: Geneve through OVS userspace tunnelling.

There is no kernel datapath (no OVS or geneve module), so the tunnel is the userspace one:
ovs-vswitchd's `br-phy` bridge (userspace datapath) takes the node's uplink `eth0`, the node's
underlay address sits on br-phy's internal port, and vswitchd learns the route to the other nodes
(`ovs-appctl ovs/route/show`) and their MACs (`tnl/arp/show`) from that. ovn-controller (chassis
= node name) encapsulates from that address (`ovn-encap-ip`) and reaches the SB over the same
underlay: a node's own SB connection rides its br-phy, over TLS with the node's own certificate
(`ovn-controller-<node>`, from the cluster's OVN PKI; nodeenv/ovn_pki.py).
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Mapping
from pathlib import Path

from nodeenv.cluster.underlay import NODE_UPLINK
from nodeenv.daemons import DaemonError, in_netns, run_checked, wait_for
from nodeenv.node import Node
from nodeenv.ovn_central import rundirs
from nodeenv.ovn_pki import client_tls
from nodeenv.ovn_stack import require_prerequisites, start_controller, start_switch, wait_for_bridge

PHYS_BRIDGE = "br-phy"


class NodeChassis:
    """Component: the node's ovsdb-server, ovs-vswitchd (br-phy, br-int) and ovn-controller."""

    name = "ovn-chassis"

    def __init__(
        self, central: Mapping[str, str], prefixlen: int, node_name: str = "", *, registered: bool = True
    ) -> None:
        self.central, self.prefixlen = dict(central), prefixlen
        """The cluster's central endpoints (OVN_NB_DB_SSL, OVN_SB_DB_SSL: the underlay's remotes;
        OVN_PKI_DIR: the cluster's OVN PKI)."""
        self.node_name, self.registered = node_name, registered
        """The node's hostname (its Node's name; '' = its system-id): the Chassis' `hostname`, as
        a hostNetwork ovn-controller reports it; and whether start waits for its Chassis row."""

    def start(self, node: Node) -> dict[str, str]:
        require_prerequisites()
        ovs_db, vswitchd = start_switch(node)
        self._uplink(node, ovs_db)
        hostname = self.node_name or node.settings.system_id  # the namespaces share the machine's UTS
        env = {**node.process_env(), **rundirs(node.path("ovs", "x").parent)}
        run_checked(["ovs-vsctl", f"--db={ovs_db}", "--timeout=10", "set", "Open_vSwitch", ".",
                     f"external_ids:hostname={hostname}"], env)  # fmt: skip
        tls = client_tls(self.central, "ovn-controller", node.settings.system_id)
        self._reach_central(node, tls.ctl_flags() if tls else [])
        try:
            out = start_controller(
                node, ovs_db, self.central["OVN_SB_DB_SSL"], tls, registered=self.registered
            )
        except DaemonError as e:
            raise DaemonError(f"{node.settings.system_id} cannot join the cluster: {e}") from e
        # as this node's daemons reach OVN central: over the underlay (see cluster.env for the
        # unix-socket remotes usable from the machine's own namespace)
        return {
            **out,
            **vswitchd.endpoints(),
            "OVN_NB_DB": self.central["OVN_NB_DB_SSL"],
            "OVN_SB_DB": self.central["OVN_SB_DB_SSL"],
            # each of the node's programs takes its own certificate from here (nodeenv/ovn_pki.py)
            "OVN_PKI_DIR": self.central["OVN_PKI_DIR"],
            "K8SHOST_NODE_IP": node.settings.encap_ip,
        }

    def _uplink(self, node: Node, ovs_db: str) -> None:
        s, ovs_dir = node.settings, node.path("ovs", "x").parent
        env = {**node.process_env(), **rundirs(ovs_dir)}
        ctl, log = str(ovs_dir / "ovs-vswitchd.ctl"), ovs_dir / "ovs-vswitchd.log"
        attach_uplink(s.netns, f"{s.encap_ip}/{self.prefixlen}", ovs_db, env, ctl, log)

    def _reach_central(self, node: Node, tls_flags: list[str], timeout: float = 5.0) -> None:
        """At least one SB member answers from the node over the underlay, or the node cannot join:
        say which remotes failed and how (before ovn-controller would retry it silently)."""
        s, remotes = node.settings, self.central["OVN_SB_DB_SSL"].split(",")
        argv = [in_netns(s.netns, ["ovsdb-client", *tls_flags, "list-dbs", r]) for r in remotes]
        tries = [
            subprocess.Popen(a, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for a in argv
        ]
        deadline, errors = time.monotonic() + timeout, []
        for remote, proc in zip(remotes, tries, strict=True):  # all at once: one timeout, not one each
            try:
                err = proc.communicate(timeout=max(deadline - time.monotonic(), 0.01))[1]
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()
                err = f"no answer within {timeout:.0f} s"
            if proc.returncode == 0:
                return
            errors.append(f"{remote}: {err.strip().removeprefix('ovsdb-client: ')}")
        raise DaemonError(
            f"{s.system_id} cannot join the cluster: no OVN southbound member answers from "
            f"{s.encap_ip} ({s.netns}) over the underlay: {'; '.join(errors)}"
        )

    def cleanup(self, node: Node) -> None:
        """Nothing: the bridges' devices go with the node's network namespace."""


def _output(argv: list[str], env: Mapping[str, str] | None = None) -> str:
    try:
        return run_checked(argv, env)
    except DaemonError:
        return ""


def attach_uplink(
    netns: str, address: str, ovs_db: str, env: Mapping[str, str], vswitchd: str, vswitchd_log: Path
) -> None:
    """The node's uplink `eth0` into a userspace `br-phy` of the node's OVS (`ovs_db`), the node's
    underlay address (`address`, with its prefix length) on br-phy's internal port (moved there
    from eth0 if it was on it), and wait until ovs-vswitchd (its unixctl target `vswitchd`) has
    learned the route from it: what OVS userspace tunnelling needs of the host's network."""
    # eth0 is a port of br-phy, not an interface of the node's IP stack, but the userspace datapath
    # reads it with AF_PACKET, so the kernel sees every frame too: unless told not to (arp_ignore=8)
    # it answers ARP for br-phy's address with eth0's MAC, the other nodes' vswitchd may learn that
    # one (tnl/neigh/show), and br-phy never terminates the tunnels they send to it
    run_checked(["ip", "netns", "exec", netns, "sysctl", "-qw", f"net.ipv4.conf.{NODE_UPLINK}.arp_ignore=8"])
    run_checked(["ovs-vsctl", f"--db={ovs_db}", "--timeout=10", "--may-exist", "add-br", PHYS_BRIDGE,
                 "--", "set", "Bridge", PHYS_BRIDGE, "datapath_type=netdev",
                 "--", "--may-exist", "add-port", PHYS_BRIDGE, NODE_UPLINK], env)  # fmt: skip
    wait_for_bridge(PHYS_BRIDGE, vswitchd_log, netns)
    ns = ["ip", "-n", netns]
    run_checked([*ns, "addr", "replace", address, "dev", PHYS_BRIDGE])
    run_checked([*ns, "link", "set", PHYS_BRIDGE, "up"])
    subprocess.run([*ns, "addr", "del", address, "dev", NODE_UPLINK], capture_output=True)  # if it was there
    ip = address.split("/")[0]
    wait_for(
        lambda: ip in _output(["ovs-appctl", "-t", vswitchd, "ovs/route/show"], env),
        f"ovs-vswitchd to learn the route from {ip} on {PHYS_BRIDGE}",
        timeout=10,
    )
