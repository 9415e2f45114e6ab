"""Pod address use of the PrismNET subnets, read from the NB replica for /metrics.

One pass over the ports (a scrape must stay cheap with thousands of ports): each held address is
counted in the subnet that contains it. `used` counts what no new pod can take (ports' addresses,
the gateway, exclude_ips) within the subnet's host range; `free` the rest of that range.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from cni.ovn import K_SUBNET
from ovnaccess.commands import table_rows


@dataclass(frozen=True, slots=True)
class SubnetUsage:
    subnet: str
    used: int
    free: int


def reserved_addresses(ls: Any) -> set[int]:
    """Addresses of a switch no port may take: its exclude_ips and its gateway."""
    used: set[int] = set()
    for text in ls.other_config.get("exclude_ips", "").split():
        lo, _, hi = text.partition("..")
        used.update(range(int(ipaddress.IPv4Address(lo)), int(ipaddress.IPv4Address(hi or lo)) + 1))
    if ls.external_ids.get("prismnet.gateway"):
        used.add(int(ipaddress.IPv4Address(ls.external_ids["prismnet.gateway"])))
    return used


def host_range(net: ipaddress.IPv4Network) -> tuple[int, int]:
    """First and last assignable address (network and broadcast excluded below /31)."""
    first, last = int(net.network_address), int(net.broadcast_address)
    return (first + 1, last - 1) if net.prefixlen < 31 else (first, last)


def subnet_usage(api: Any, held: Callable[[Any], Iterable[int]]) -> list[SubnetUsage]:
    """Every switch with a PrismNET subnet; `held(port)` gives a port's addresses as integers."""
    taken: dict[tuple[int, int], set[int]] = {}  # (network address, prefix) -> addresses taken
    for ls in table_rows(api, "Logical_Switch"):
        text = ls.external_ids.get(K_SUBNET)
        if text:
            net = ipaddress.IPv4Network(text, strict=False)
            taken[int(net.network_address), net.prefixlen] = reserved_addresses(ls)
    shifts = {32 - p for _, p in taken}
    for port in table_rows(api, "Logical_Switch_Port"):
        for ip in held(port):
            for shift in shifts:
                found = taken.get((ip >> shift << shift, 32 - shift))
                if found is not None:
                    found.add(ip)
    out = []
    for (address, prefix), used in sorted(taken.items()):
        net = ipaddress.IPv4Network((address, prefix))
        first, last = host_range(net)
        n = sum(1 for i in used if first <= i <= last)
        out.append(SubnetUsage(str(net), n, last - first + 1 - n))
    return out


def cluster_usage(
    subnets: Iterable[SubnetUsage], cluster: ipaddress.IPv4Network, prefix: int
) -> tuple[int, int]:
    """(used, free) over the cluster CIDR: the carved subnets' figures plus the uncarved space,
    counted in subnets of `prefix` as the agents will carve it."""
    first, last = host_range(ipaddress.IPv4Network(f"0.0.0.0/{prefix}"))
    per_subnet = last - first + 1
    total = (1 << (prefix - cluster.prefixlen)) * per_subnet
    used = sum(u.used for u in subnets if ipaddress.IPv4Network(u.subnet).subnet_of(cluster))
    return used, total - used
