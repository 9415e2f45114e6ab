"""A stub resolver for the tests: dnslib queries over real UDP/TCP sockets on loopback."""

from __future__ import annotations

import asyncio
import socket
import struct
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from dnslib import EDNS0, QTYPE, RR, DNSRecord
from dnslib.server import BaseResolver, DNSLogger, DNSServer

from controllers.flashdns.server import DnsServer

T = TypeVar("T")


def make_query(name: str, qtype: str = "A", *, edns: int | None = None, qid: int = 4242) -> DNSRecord:
    q = DNSRecord.question(name, qtype)
    q.header.id = qid
    if edns is not None:
        q.add_ar(EDNS0(udp_len=edns))
    return q


def udp_raw(port: int, data: bytes, *, host: str = "127.0.0.1", timeout: float = 2.0) -> bytes | None:
    """One datagram out, one back (None on timeout: the server dropped it)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as s:
        s.settimeout(timeout)
        s.sendto(data, (host, port))
        try:
            return s.recv(65535)
        except TimeoutError:
            return None


def tcp_raw(port: int, data: bytes, *, host: str = "127.0.0.1", timeout: float = 2.0) -> bytes:
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(struct.pack("!H", len(data)) + data)
        size = struct.unpack("!H", _exactly(s, 2))[0]
        return _exactly(s, size)


def _exactly(s: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return buf


def ask(
    port: int,
    name: str,
    qtype: str = "A",
    *,
    tcp: bool = False,
    edns: int | None = None,
    host: str = "127.0.0.1",
) -> DNSRecord:
    q = make_query(name, qtype, edns=edns)
    wire = tcp_raw(port, q.pack(), host=host) if tcp else udp_raw(port, q.pack(), host=host)
    assert wire is not None, f"no answer for {name} {qtype}"
    reply = DNSRecord.parse(wire)
    assert reply.header.id == q.header.id
    return reply


def values(reply: DNSRecord, qtype: str | None = None) -> set[str]:
    return {str(rr.rdata) for rr in reply.rr if qtype is None or rr.rtype == getattr(QTYPE, qtype)}


class ServerThread:
    """A DnsServer on its own event loop in a background thread, as the controller runs it."""

    def __init__(self, server: DnsServer, address: str = "127.0.0.1:0") -> None:
        self.server = server
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()
        self.port = self.run(server.start(address))

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(10)

    def close(self) -> None:
        self.run(self.server.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)
        self.loop.close()


class StaticUpstream(BaseResolver):  # type: ignore[misc]
    """A local upstream resolver (dnslib's own server): fixed records for names outside the zone."""

    def __init__(self, records: str) -> None:
        self.rrs = RR.fromZone(records)
        self.queries: list[str] = []

    def resolve(self, request: DNSRecord, handler: object) -> DNSRecord:
        self.queries.append(str(request.q.qname))
        reply = request.reply()
        for rr in self.rrs:
            if rr.rname == request.q.qname and rr.rtype in (request.q.qtype, QTYPE.CNAME):
                reply.add_answer(rr)
        if not reply.rr:
            reply.header.rcode = 3
        return reply


def start_upstream(records: str) -> tuple[StaticUpstream, list[DNSServer], int]:
    resolver = StaticUpstream(records)
    quiet = DNSLogger("-request,-reply,-truncated,-recv,-send")
    udp = DNSServer(resolver, port=0, address="127.0.0.1", logger=quiet)
    port = udp.server.server_address[1]
    tcp = DNSServer(resolver, port=port, address="127.0.0.1", tcp=True, logger=quiet)
    for s in (udp, tcp):
        s.start_thread()
    return resolver, [udp, tcp], port
