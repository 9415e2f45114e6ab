"""Generated DNS packets (Hypothesis) to the FlashDNS server over UDP and TCP: random bytes and
valid queries mutated (bytes flipped, inserted, cut, header counts and flags rewritten).

Every packet gets a reply carrying its id with QR set and a DNS rcode, or is dropped
(not a query); the server logs no crash, and a valid query is still answered after each.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Iterator

import pytest
from dnslib import DNSRecord
from hypothesis import example, given
from hypothesis import strategies as st

from controllers.flashdns.records import Record
from controllers.flashdns.server import DnsServer
from controllers.flashdns.zone import Zone
from tests.bad_input import edge_settings
from tests.unit.controllers.flashdns.dns_kit import ServerThread, ask, make_query, tcp_raw, udp_raw, values

WEB = "web.default.svc.cluster.local."
RCODES = {0, 1, 2, 3, 4, 5}  # NOERROR FORMERR SERVFAIL NXDOMAIN NOTIMP REFUSED
QUERIES = [
    make_query(WEB).pack(),
    make_query(WEB, "AAAA", edns=1232).pack(),
    make_query("_http._tcp.web.default.svc.cluster.local.", "SRV").pack(),
    make_query("100.0.96.10.in-addr.arpa.", "PTR").pack(),
    make_query("cluster.local.", "SOA", edns=4096).pack(),
]


class Crashes(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture(scope="module")
def dns() -> Iterator[tuple[ServerThread, Crashes]]:
    zone = Zone("cluster.local")
    zone.replace("service/default/web", [Record(WEB, "A", "10.96.0.100")])
    crashes = Crashes()
    logging.getLogger("controllers.flashdns").addHandler(crashes)
    server = ServerThread(DnsServer(zone, None))
    try:
        yield server, crashes
    finally:
        server.close()
        logging.getLogger("controllers.flashdns").removeHandler(crashes)


@st.composite
def mutated_queries(draw: st.DrawFn) -> bytes:
    data = bytearray(draw(st.sampled_from(QUERIES)))
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["flip", "insert", "delete", "cut", "count", "flags"]))
        at = draw(st.integers(0, max(len(data) - 1, 0)))
        if op == "flip" and data:
            data[at] ^= draw(st.integers(1, 255))
        elif op == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=8))
        elif op == "delete" and data:
            del data[at : at + draw(st.integers(1, 4))]
        elif op == "cut":
            del data[at:]
        elif op == "count" and len(data) >= 12:
            slot = draw(st.integers(2, 5))
            data[slot * 2 : slot * 2 + 2] = struct.pack("!H", draw(st.sampled_from([0, 2, 3, 255, 65535])))
        elif op == "flags" and len(data) >= 4:
            data[2:4] = struct.pack("!H", draw(st.integers(0, 0xFFFF)) & 0x7FFF)  # still a query
    return bytes(data)


PACKETS = mutated_queries() | st.binary(min_size=12, max_size=600).map(
    lambda b: b[:2] + bytes([b[2] & 0x7F]) + b[3:]
)


def _check(data: bytes, reply: bytes | None) -> None:
    if reply is None:
        return  # dropped
    assert reply[:2] == data[:2] and reply[2] & 0x80, reply[:12]
    assert reply[3] & 0x0F in RCODES, reply[:12]
    parsed = DNSRecord.parse(reply)  # a well-formed message
    if parsed.rr:  # an answer is NOERROR, whatever the query's header said
        assert parsed.header.rcode == 0, parsed.header


@edge_settings(max_examples=150)
@given(data=PACKETS)
# a query whose header carries rcode 6 was answered with rcode 6 (YXDOMAIN) and the address
@example(data=b"\x10\x92\x00\x06" + QUERIES[0][4:])
def test_generated_datagrams_get_a_dns_answer_or_are_dropped(
    dns: tuple[ServerThread, Crashes], data: bytes
) -> None:
    server, crashes = dns
    _check(data, udp_raw(server.port, data, timeout=0.15))
    assert not crashes.records, crashes.records[0].getMessage()
    assert values(ask(server.port, WEB)) == {"10.96.0.100"}


@edge_settings(max_examples=40)
@given(data=PACKETS)
def test_generated_tcp_messages_get_a_dns_answer_or_a_close(
    dns: tuple[ServerThread, Crashes], data: bytes
) -> None:
    server, crashes = dns
    try:
        reply: bytes | None = tcp_raw(server.port, data, timeout=0.5)
    except (TimeoutError, ConnectionError):
        reply = None
    _check(data, reply)
    assert not crashes.records, crashes.records[0].getMessage()
    assert values(ask(server.port, WEB, tcp=True)) == {"10.96.0.100"}
