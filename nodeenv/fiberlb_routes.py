"""Node routes to the load-balancer addresses: external IP pools and the service CIDR through the
node's management port (the CNI's `pnm-*`), so traffic from the node to a VIP enters OVN on the
node's management switch, where the `fiberlb` load-balancer group DNATs it to a pod.

On a k3s node the same routes come from the node setup (or kube-proxy answers ClusterIPs on the
node itself); here node-up, the sandbox scenario and the integration tests add them."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable

from pyroute2 import IPRoute  # type: ignore[import-untyped]

from controllers.fiberlb.ippool import parse_pools


def pool_prefixes(pools: str) -> list[str]:
    """The CIDRs covering `--external-ip-pool`: each CIDR as written, each range summarised."""
    out: list[str] = []
    for item in (p.strip() for p in pools.split(",")):
        if "/" in item:
            out.append(str(ipaddress.IPv4Network(item, strict=False)))
        elif item:
            (r,) = parse_pools(item)
            lo, hi = ipaddress.IPv4Address(r.first), ipaddress.IPv4Address(r.last)
            out += [str(n) for n in ipaddress.summarize_address_range(lo, hi)]
    return out


def _gateway(ipr: IPRoute, index: int) -> str:
    for route in ipr.get_routes(family=socket.AF_INET, oif=index):
        gw = route.get_attr("RTA_GATEWAY")
        if gw:
            return str(gw)
    raise RuntimeError("the management port has no route through the cluster router yet")


def ensure_host_routes(prefixes: Iterable[str], management_if: str) -> list[str]:
    """Route each prefix via the cluster router on the management port; returns those it added
    (a route that was already there is someone else's to remove)."""
    added = []
    with IPRoute() as ipr:
        links = ipr.link_lookup(ifname=management_if)
        if not links:
            raise RuntimeError(f"no management port {management_if} (is prismnet-agent running?)")
        gw = _gateway(ipr, links[0])
        have = {
            f"{r.get_attr('RTA_DST')}/{r['dst_len']}"
            for r in ipr.get_routes(family=socket.AF_INET, oif=links[0])
            if r.get_attr("RTA_DST")
        }
        for prefix in prefixes:
            if prefix in have:
                continue
            ipr.route("add", dst=prefix, gateway=gw, oif=links[0])
            added.append(prefix)
    return added


def delete_host_routes(prefixes: Iterable[str], management_if: str) -> None:
    with IPRoute() as ipr:
        links = ipr.link_lookup(ifname=management_if)
        for prefix in prefixes:
            try:
                if links:
                    ipr.route("del", dst=prefix, oif=links[0])
                else:
                    ipr.route("del", dst=prefix)
            except Exception:  # already gone (the device went with its routes)
                continue
