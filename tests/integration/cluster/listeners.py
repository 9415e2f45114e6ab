"""The platform's listeners as `ss` shows them at run time in a node's or OVN central's namespace, what
a pod would connect to for each, and docs/security.md's must-answer list."""

from __future__ import annotations

import ipaddress
import re
import subprocess
from dataclasses import dataclass

MUST_ANSWER = {
    ("tcp", 6443): "Kubernetes API: TLS; a token, else only /version, /healthz, /livez, /readyz",
    ("udp", 53): "cluster DNS (node-local FlashDNS): answers the cluster zone, no credentials",
    ("tcp", 53): "cluster DNS over TCP (node-local FlashDNS)",
}
"""(protocol, port) -> why a pod must reach it and how it authenticates."""
LOOPBACK = "unreachable: bound to loopback, a pod's 127/8 never leaves the pod"


@dataclass(frozen=True, slots=True)
class Listener:
    proto: str
    address: str
    port: int
    process: str

    @property
    def loopback(self) -> bool:
        return self.address not in ("*", "0.0.0.0", "::") and ipaddress.ip_address(self.address).is_loopback

    @property
    def wildcard(self) -> bool:
        return self.address in ("*", "0.0.0.0", "::")


def listening(netns: str) -> list[Listener]:
    """Every TCP/UDP listening socket in `netns` (`ss -lntupH`), IPv4 and IPv6."""
    out = subprocess.run(
        ["ip", "netns", "exec", netns, "ss", "-lntupH"], capture_output=True, text=True, check=True
    ).stdout
    found = set()
    for line in out.splitlines():
        cols = line.split()
        address, _, port = cols[4].rpartition(":")
        address = address.strip("[]").split("%")[0]
        process = m.group(1) if (m := re.search(r'users:\(\("([^"]+)"', line)) else "?"
        found.add(Listener(cols[0], address, int(port), process))
    return sorted(found, key=lambda x: (x.proto, x.port, x.address))


def addresses(netns: str) -> list[str]:
    """The IPv4 addresses of `netns` but loopback's."""
    out = subprocess.run(
        ["ip", "-n", netns, "-4", "-o", "addr", "show"], capture_output=True, text=True, check=True
    ).stdout
    found = {line.split()[3].split("/")[0] for line in out.splitlines()}
    return sorted(a for a in found if not ipaddress.ip_address(a).is_loopback)


def targets(listener: Listener, own: list[str]) -> list[str]:
    """`proto:ip:port` a pod would try: the bound address, or each of the namespace's own for a wildcard
    (an IPv6-only listener: none, pods have no IPv6 route)."""
    if listener.loopback:
        return []
    if listener.wildcard:
        return [f"{listener.proto}:{ip}:{listener.port}" for ip in own]
    if ipaddress.ip_address(listener.address).version == 6:
        return []
    return [f"{listener.proto}:{listener.address}:{listener.port}"]
