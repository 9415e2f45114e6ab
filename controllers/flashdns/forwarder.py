"""Names outside the cluster domain go to upstream resolvers (from /etc/resolv.conf by default).

The query is relayed unchanged (its EDNS0 size, its DO bit) over the transport it came in on;
the first upstream that answers with the query's ID wins. Our own listening address is never
an upstream (a pod's resolv.conf names the cluster DNS itself: that would be a loop).
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from dnslib import QTYPE, RR, DNSRecord  # type: ignore[import-untyped]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Upstream:
    host: str
    port: int = 53

    @classmethod
    def parse(cls, text: str) -> Upstream:
        """`1.1.1.1`, `1.1.1.1:5353`, `fd00::1`, `[fd00::1]:5353`."""
        text = text.strip()
        if text.startswith("["):
            host, _, port = text[1:].partition("]")
            return cls(str(ipaddress.ip_address(host)), int(port.lstrip(":") or 53))
        if text.count(":") == 1:
            host, port = text.split(":")
            return cls(str(ipaddress.ip_address(host)), int(port))
        return cls(str(ipaddress.ip_address(text)))

    @property
    def family(self) -> socket.AddressFamily:
        return socket.AF_INET6 if ":" in self.host else socket.AF_INET


def upstreams_from_resolv_conf(path: Path, exclude: Iterable[Upstream] = ()) -> tuple[Upstream, ...]:
    """The `nameserver` lines of a resolv.conf, minus `exclude` (ourselves)."""
    skip = set(exclude)
    out: list[Upstream] = []
    try:
        lines = path.read_text().splitlines()
    except OSError as e:
        log.warning("cannot read %s: %s; no upstream resolvers", path, e)
        return ()
    for line in lines:
        parts = line.split()
        if len(parts) >= 2 and parts[0] == "nameserver":
            try:
                up = Upstream(str(ipaddress.ip_address(parts[1].split("%")[0])))
            except ValueError:
                continue
            if up not in skip and up not in out:
                out.append(up)
    return tuple(out)


class Forwarder:
    def __init__(self, upstreams: Iterable[Upstream], *, timeout: float = 2.0) -> None:
        self.upstreams, self.timeout = tuple(upstreams), timeout

    async def forward(self, data: bytes, *, tcp: bool) -> bytes | None:
        """The first upstream's reply to `data`, or None when none answered in time."""
        for up in self.upstreams:
            try:
                reply = await asyncio.wait_for(
                    self._tcp(up, data) if tcp else self._udp(up, data), self.timeout
                )
            except (OSError, TimeoutError, asyncio.IncompleteReadError) as e:
                log.warning("upstream %s:%d failed: %s", up.host, up.port, e or type(e).__name__)
                continue
            if reply[:2] == data[:2]:
                return reply
        return None

    async def lookup(self, name: str, qtype: int) -> list[RR]:
        """The answer records for `name` (a CNAME target outside the zone); [] when none."""
        query = DNSRecord.question(name, QTYPE.get(qtype))
        wire = query.pack()
        reply = await self.forward(wire, tcp=False)
        if reply is not None and DNSRecord.parse(reply).header.tc:
            reply = await self.forward(wire, tcp=True)
        return list(DNSRecord.parse(reply).rr) if reply else []

    async def _udp(self, up: Upstream, data: bytes) -> bytes:
        loop = asyncio.get_running_loop()
        with socket.socket(up.family, socket.SOCK_DGRAM) as s:
            s.setblocking(False)
            await loop.sock_connect(s, (up.host, up.port))  # only the upstream's replies get through
            await loop.sock_sendall(s, data)
            while True:
                reply = await loop.sock_recv(s, 65535)
                if reply[:2] == data[:2]:
                    return reply

    async def _tcp(self, up: Upstream, data: bytes) -> bytes:
        reader, writer = await asyncio.open_connection(up.host, up.port)
        try:
            writer.write(len(data).to_bytes(2, "big") + data)
            await writer.drain()
            size = int.from_bytes(await reader.readexactly(2), "big")
            return await reader.readexactly(size)
        finally:
            writer.close()
