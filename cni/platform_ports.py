"""The platform's ports a pod must never reach (`--platform-ports`): stdlib only, so the agent's
settings check them before anything connects."""

from __future__ import annotations

from dataclasses import dataclass

PROTOCOLS = ("tcp", "udp")


@dataclass(frozen=True, slots=True)
class PortRange:
    protocol: str
    first: int
    last: int

    def match(self) -> str:
        if self.first == self.last:
            return f"{self.protocol}.dst == {self.first}"
        return f"({self.protocol}.dst >= {self.first} && {self.protocol}.dst <= {self.last})"


def parse_ports(text: str) -> tuple[PortRange, ...]:
    """`tcp:6640-6644,udp:4789` -> port ranges; ValueError names a malformed entry."""
    out = []
    for entry in filter(None, (e.strip() for e in text.split(","))):
        proto, _, ports = entry.partition(":")
        first, _, last = ports.partition("-")
        try:
            lo, hi = int(first), int(last or first)
        except ValueError:
            raise ValueError(
                f"platform port {entry!r}: expected tcp:PORT[-PORT] or udp:PORT[-PORT]"
            ) from None
        if proto not in PROTOCOLS or not 0 < lo <= hi < 65536:
            raise ValueError(f"platform port {entry!r}: expected tcp:PORT[-PORT] or udp:PORT[-PORT]")
        out.append(PortRange(proto, lo, hi))
    return tuple(out)


PLATFORM_PORTS = ",".join((
    "tcp:2379-2380",  # etcd (k3s servers)
    "tcp:3000-3001",  # iam-webhook, host network: kube-apiserver only (mTLS)
    "tcp:6640-6644",  # OVSDB: Open_vSwitch, OVN NB and SB, their RAFT ports
    "tcp:7641-7644",  # cluster mode: the further RAFT members' client ports (+1000 each)
    "tcp:8641-8644",
    "tcp:9153",  # flashdns-controller /metrics
    "tcp:9465",  # prismnet-agent /metrics, host network
    "tcp:9808-9811",  # CSI healthz and /metrics
    "tcp:9830-9835",  # the controllers' /metrics, host network
    "udp:4789",  # VXLAN: OVN's tunnels are terminated by the node, never sent by a pod
    "udp:6081",  # Geneve: a pod's packet would be decapsulated into any logical port
))  # fmt: skip
"""The default of `--platform-ports`: docs/security.md, "The platform guard", gives each its reason."""
