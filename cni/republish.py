"""The node's part of the NB written again after the NB was replaced by an empty one (issue 29 item 4).

The NB is derived state: what this agent wrote there is still known on the node. The management port
from its device (address, MAC, gateway kept), with the cluster router, the node's default route,
egress set and reroute policy (cni/management.py); the platform guard; then every pod port from the
node's own records, the OVS Interfaces' external_ids (container, namespace, pod, netns, interface)
and the pod's interface in its network namespace (MAC, addresses, gateway): each namespace switch
with the pod's subnet and gateway (so no other subnet is carved for it), each port with the pod's
own address, so pods keep their addresses and IPAM sees them taken again.

Pod ports come back *held* (K_HELD, `enabled=false`: OVN drops all their traffic) and
netpol-controller enables each in the transaction that puts it in its port groups, so no pod is
reachable before its policies are in the NB again (docs/nb-rebuild.md).
"""

from __future__ import annotations

import ipaddress
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from cni.attachment import Attachment
from cni.links import LinkState, NetnsGone
from cni.ovn import OvsPort
from cni.ovn_nb import Northbound
from cni.settings import AgentSettings

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Republished:
    ports: int
    skipped: int
    """OVS ports whose pod interface is gone (GC removes them)"""
    seconds: float


def republish(
    s: AgentSettings, nb: Northbound, ports: list[OvsPort], pod_link: Callable[[str, str], LinkState | None]
) -> Republished:
    """Every pod port of `ports` (this node's OVS Interfaces of pods) written again, held."""
    t0, done, skipped = time.monotonic(), 0, 0
    for port in ports:
        att = Attachment.from_ids(port.external_ids)
        try:
            state = pod_link(att.netns, att.ifname)
        except NetnsGone:
            state = None
        addresses = [
            i for i in map(ipaddress.ip_interface, state.addresses if state else ()) if i.version == 4
        ]
        if state is None or not addresses:
            log.warning("not republishing %s: its pod interface is gone", att.lsp)
            skipped += 1
            continue
        first = ipaddress.IPv4Interface(addresses[0])
        gateway = next(
            (gw for dst, gw in state.routes if gw and _default(dst)), str(next(first.network.hosts()))
        )
        carved = (
            first.network.prefixlen == s.subnet_prefix
            and first.network.subnet_of(s.cluster_network)
            and gateway == str(next(first.network.hosts()))
        )
        nb.ensure_switch(
            att.switch, s.cluster_network, s.subnet_prefix, first.network, gateway, as_carved=carved
        )
        entry = " ".join([state.mac, *(str(i.ip) for i in addresses)])
        nb.add_port(att.switch, att.lsp, [entry], [entry], att.external_ids(), address_set=att.egress_set,
                    held=True)  # fmt: skip
        done += 1
    return Republished(done, skipped, time.monotonic() - t0)


def _default(dst: str) -> bool:
    return dst in ("", "default", "0.0.0.0/0")
