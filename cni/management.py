"""The node's management port: an OVS internal port bound to an LSP on the node's own switch.

It gives the node an address on the pod network, so the node reaches pods (kubelet
probes) and pods reach the node; the cluster router's default route points at it and
the node masquerades pod traffic leaving the cluster CIDR (egress). Everything created
outside OVSDB (the rule, the device) is named from the settings so `teardown_host` removes
exactly it.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import subprocess
import time
from dataclasses import dataclass

from cni.links import Links
from cni.ovn import OvsPorts
from cni.ovn_nb import Northbound
from cni.settings import AgentSettings

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ManagementPort:
    ifname: str
    lsp: str
    address: str
    """CIDR of the node on its management switch."""
    gateway: str


K_CHASSIS = "prismnet.chassis"
"""On the node's management port: the node's OVN chassis now (its OVS system-id). node-controller
removes any other chassis of the node's name (a reinstalled node's stale one), as ovn-kubernetes'
cluster manager does from its node-chassis-id annotation."""


def management_names(node: str) -> tuple[str, str]:
    """(switch, lsp): a dot cannot appear in a namespace name, so these never collide with pods."""
    return f"k8s-mgmt.{node}", f"mgmt.{node}"


def ensure_management_port(
    s: AgentSettings, nb: Northbound, ovs: OvsPorts, links: Links, node: str
) -> ManagementPort:
    switch, lsp = management_names(node)
    existing = nb.port(lsp)
    kept = None if existing and existing.addresses else _kept_address(links, s.management_if)
    # MAC-only port security: the node forwards (DNAT, masquerade) traffic of other sources.
    ids = {"prismnet.node": node, "prismnet.role": "management"}
    if kept is not None:  # the NB was lost, the device kept its address: written back as it was
        mac, address, gateway = kept
        ip, plen = str(address.ip), address.network.prefixlen
        info = nb.ensure_switch(switch, s.cluster_network, s.subnet_prefix, address.network, gateway,
                                as_carved=True)  # fmt: skip
        nb.add_port(switch, lsp, [f"{mac} {ip}"], [mac], ids)
        log.warning("management port %s written again to a new NB with its address %s", lsp, address)
    else:
        info = nb.ensure_switch(switch, s.cluster_network, s.subnet_prefix)
    if existing and existing.addresses:
        mac, ip = existing.addresses[0].split()[:2]
        plen = ipaddress.ip_network(info.subnet).prefixlen
    elif kept is None:
        mac, ip, plen, _ = nb.allocate_port(switch, lsp, ids, mac_only_security=True)
    if chassis := ovs.system_id():  # before the wait below: a stale chassis can block this one's
        nb.set_port_ids(lsp, {K_CHASSIS: chassis})
    if ovs.port(s.management_if) is not None and not links.exists(s.management_if):
        # the device was deleted (node-down, by hand) but the OVS port stayed: ovs-vswitchd
        # re-creates an internal port's tap only when the port is added again
        log.info("management port %s has no device; re-adding it to OVS", s.management_if)
        ovs.unbind(s.management_if)
    with ovs.expect_installed(s.management_if) as installed:
        ovs.bind(s.management_if, lsp, {"prismnet.role": "management"}, internal=True)
        _wait_device(links, s.management_if)
        links.configure_host_port(
            s.management_if, mac, s.mtu, f"{ip}/{plen}", ((s.cluster_cidr, info.gateway),)
        )
        already = (p := ovs.port(s.management_if)) is not None and p.installed  # agent restart
        if not already and not installed.wait(s.port_up_timeout):
            raise RuntimeError(f"ovn-controller did not install the management port {lsp}")
    port = ManagementPort(s.management_if, lsp, f"{ip}/{plen}", info.gateway)
    if s.masquerade:
        nb.ensure_default_route(ip)  # the fallback; each node's pods are rerouted to their node:
        pods = nb.egress().ensure(node, ip, s.cluster_cidr)
        log.info("egress of node %s (%d pod addresses) leaves through %s", node, pods, ip)
        _write(f"/proc/sys/net/ipv4/conf/{s.management_if}/forwarding", "1")
        _ensure_masquerade(s)
    log.info("management port %s is %s on %s", s.management_if, port.address, switch)
    return port


def _kept_address(links: Links, ifname: str) -> tuple[str, ipaddress.IPv4Interface, str] | None:
    """(MAC, address, gateway) the management device still has while its NB port is gone (the NB
    lost and created again); None for a device without an address (a new node)."""
    state = links.host_link(ifname)
    found = [i for i in map(ipaddress.ip_interface, state.addresses if state else ()) if i.version == 4]
    if state is None or not found:
        return None
    address = ipaddress.IPv4Interface(found[0])
    gateway = next((gw for _dst, gw in state.routes if gw), str(next(address.network.hosts())))
    return state.mac, address, gateway


def _wait_device(links: Links, ifname: str, timeout: float = 5.0) -> None:
    # ovs-vswitchd creates the tap asynchronously; there is no OVSDB column to watch for it.
    deadline = time.monotonic() + timeout
    while not links.exists(ifname):
        if time.monotonic() > deadline:
            raise RuntimeError(f"ovs-vswitchd did not create {ifname}")
        time.sleep(0.01)


def _write(path: str, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


def masquerade_rule(s: AgentSettings) -> list[str]:
    return [
        "POSTROUTING",
        "-s",
        s.cluster_cidr,
        "!",
        "-d",
        s.cluster_cidr,
        "-m",
        "comment",
        "--comment",
        f"prismnet:{s.management_if}",
        "-j",
        "MASQUERADE",
    ]


def _iptables(op: str, rule: list[str]) -> bool:
    proc = subprocess.run(["iptables", "-w", "5", "-t", "nat", op, *rule], capture_output=True, text=True)
    return proc.returncode == 0


def _ensure_masquerade(s: AgentSettings) -> None:
    rule = masquerade_rule(s)
    if not _iptables("-C", rule) and not _iptables("-A", rule):
        raise RuntimeError(f"cannot add iptables rule {' '.join(rule)}")


def teardown_host(s: AgentSettings) -> None:
    """Remove what the management port created in the kernel: its masquerade rule and device."""
    rule = masquerade_rule(s)
    while _iptables("-C", rule):
        _iptables("-D", rule)
    if os.path.exists(f"/sys/class/net/{s.management_if}"):
        Links().delete(s.management_if)


def teardown_ovn(s: AgentSettings, nb: Northbound, ovs: OvsPorts, node: str, mgmt_ip: str = "") -> None:
    """Remove the management port from OVSDB (for a node leaving the cluster)."""
    _, lsp = management_names(node)
    ovs.unbind(s.management_if)
    nb.delete_port(lsp)
    nb.egress().delete(node)
    nb.guard().delete(node)
    if mgmt_ip:
        nb.delete_default_route(mgmt_ip)
