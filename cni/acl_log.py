"""ovn-controller's ACL log lines (vlog module `acl_log`) read into verdicts (pure).

ovn-controller writes one line per logged packet (OVN lib/acl-log.c; rate-limited by the ACL's
meter), for example:

    2026-11-27T17:40:01.123Z|00023|acl_log(ovn_pinctrl0)|INFO|name="np-deny/t1/Ingress",
    verdict=drop, severity=alert, direction=to-lport: tcp,vlan_tci=0x0000,dl_src=..,dl_dst=..,
    nw_src=10.244.1.5,nw_dst=10.244.2.7,nw_tos=0,nw_ecn=0,nw_ttl=63,nw_frag=no,tp_src=40112,
    tp_dst=8080,tcp_flags=syn

(one line in the file). The ACL name is the policy reference netpol-controller wrote
(controllers.netpol.acl_logging).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from controllers.netpol.acl_logging import parse_reference

_LINE = re.compile(
    r"^(?P<ts>[^|]*)\|[^|]*\|acl_log\([^)]*\)\|[A-Z]+\|"
    r'(?:name="(?P<name>[^"]*)", )?verdict=(?P<verdict>[a-z-]+), severity=(?P<severity>[a-z]+), '
    r"direction=(?P<direction>[a-z-]+): (?P<flow>.*)$"
)
PROTOCOLS = {"tcp", "udp", "sctp", "icmp", "icmp6", "tcp6", "udp6", "sctp6", "ip", "ipv6", "arp"}


@dataclass(frozen=True, slots=True)
class Verdict:
    """One logged packet: the policy that judged it and what it was."""

    ts: str
    acl: str
    """The ACL name as logged (the policy reference)."""
    kind: str
    """np, np-deny, anp, banp; "" when the ACL is not one of ours."""
    namespace: str
    policy: str
    verdict: str
    """allow, drop, reject (OVN's words)."""
    severity: str
    direction: str
    """ingress (to-lport: judged at the destination pod) or egress (from-lport: at the source)."""
    protocol: str
    src: str
    dst: str
    sport: int | None
    dport: int | None

    def fields(self) -> dict[str, Any]:
        """The JSON log's fields."""
        return {
            "ovn_ts": self.ts, "acl": self.acl, "kind": self.kind, "namespace": self.namespace,
            "policy": self.policy, "verdict": self.verdict, "severity": self.severity,
            "direction": self.direction, "protocol": self.protocol, "src": self.src, "dst": self.dst,
            "sport": self.sport, "dport": self.dport,
        }  # fmt: skip


def parse_line(line: str) -> Verdict | None:
    """The verdict of an `acl_log` line; None for any other line of the log."""
    m = _LINE.match(line.rstrip("\n"))
    if m is None:
        return None
    head, *pairs = m["flow"].split(",")
    flow = dict(p.split("=", 1) for p in pairs if "=" in p)
    protocol = head if head in PROTOCOLS else flow.get("nw_proto", head)
    name = m["name"] or ""
    ref = parse_reference(name)
    src = flow.get("nw_src") or flow.get("ipv6_src", "")
    dst = flow.get("nw_dst") or flow.get("ipv6_dst", "")
    return Verdict(
        ts=m["ts"], acl=name, kind=ref.kind if ref else "", namespace=ref.namespace if ref else "",
        policy=ref.name if ref else name, verdict=m["verdict"], severity=m["severity"],
        direction="ingress" if m["direction"] == "to-lport" else "egress",
        protocol=protocol.removesuffix("6"), src=src, dst=dst,
        sport=_port(flow.get("tp_src")), dport=_port(flow.get("tp_dst")),
    )  # fmt: skip


def _port(value: str | None) -> int | None:
    return int(value) if value is not None and value.isdigit() else None
