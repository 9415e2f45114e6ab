"""A corpus of malformed, oversized and truncated queries: FORMERR/NOTIMP or dropped, never a crash."""

from __future__ import annotations

import random
import struct
from collections.abc import Iterator

import pytest
from dnslib import DNSRecord

from controllers.flashdns.records import Record
from controllers.flashdns.server import DnsServer
from controllers.flashdns.zone import Zone
from tests.unit.controllers.flashdns.dns_kit import ServerThread, ask, make_query, tcp_raw, udp_raw, values

WEB = "web.default.svc.cluster.local."
GOOD = make_query(WEB).pack()
FORMERR, NOTIMP = 1, 4


def header(qid: int = 7, flags: int = 0x0100, qd: int = 1, an: int = 0, ns: int = 0, ar: int = 0) -> bytes:
    return struct.pack("!6H", qid, flags, qd, an, ns, ar)


def with_opt() -> bytes:
    return make_query(WEB, edns=1232).pack()


CORPUS: list[tuple[str, bytes, int | None]] = [
    ("empty", b"", None),
    ("shorter than a header", b"\x12\x34\x01", None),
    ("a response (QR set)", GOOD[:2] + bytes([GOOD[2] | 0x80]) + GOOD[3:], None),
    ("header says one question, none follows", header(), FORMERR),
    ("no question", header(qd=0), FORMERR),
    ("two questions", header(qd=2) + GOOD[12:] + GOOD[12:], FORMERR),
    ("question cut inside a label", GOOD[:20], FORMERR),
    ("question without qtype/qclass", GOOD[:-4], FORMERR),
    ("trailing garbage", GOOD + b"\xde\xad\xbe\xef", FORMERR),
    ("compression pointer to itself", header() + b"\xc0\x0c" + b"\x00\x01\x00\x01", FORMERR),
    ("label longer than 63", header() + b"\x50" + b"a" * 80 + b"\x00\x00\x01\x00\x01", FORMERR),
    ("additional count larger than the data", header(ar=3) + GOOD[12:], FORMERR),
    ("two OPT records", with_opt()[:11] + b"\x02" + with_opt()[12:] + with_opt()[-11:], FORMERR),
    ("question of type OPT", make_query(WEB, "OPT").pack(), FORMERR),
    ("zone transfer over UDP", make_query("cluster.local", "AXFR").pack(), 5),
    ("class CHAOS", GOOD[:-2] + b"\x00\x03", 5),
    ("opcode STATUS", GOOD[:2] + bytes([0x10 | 0x01]) + GOOD[3:], NOTIMP),
    ("opcode UPDATE", GOOD[:2] + bytes([0x28]) + GOOD[3:], NOTIMP),
    ("oversized: 60 kB of zeros after a header", header() + b"\x00" * 60000, FORMERR),
]


@pytest.fixture(scope="module")
def dns() -> Iterator[ServerThread]:
    zone = Zone("cluster.local")
    zone.replace("service/default/web", [Record(WEB, "A", "10.96.0.100")])
    st = ServerThread(DnsServer(zone, None))
    yield st
    st.close()


@pytest.mark.parametrize(("data", "rcode"), [c[1:] for c in CORPUS], ids=[c[0] for c in CORPUS])
def test_corpus_over_udp(dns: ServerThread, data: bytes, rcode: int | None) -> None:
    reply = udp_raw(dns.port, data, timeout=0.3 if rcode is None else 2.0)
    if rcode is None:
        assert reply is None
    else:
        assert reply is not None and reply[:2] == data[:2] and reply[2] & 0x80
        assert reply[3] & 0x0F == rcode
    assert values(ask(dns.port, WEB)) == {"10.96.0.100"}, "the server must still answer"


@pytest.mark.parametrize(
    ("data", "rcode"), [c[1:] for c in CORPUS if c[2]], ids=[c[0] for c in CORPUS if c[2]]
)
def test_corpus_over_tcp(dns: ServerThread, data: bytes, rcode: int) -> None:
    reply = tcp_raw(dns.port, data)
    assert reply[3] & 0x0F == rcode


def test_random_datagrams_never_crash_it(dns: ServerThread) -> None:
    rng = random.Random(11)
    for _ in range(300):
        size = rng.choice([12, 13, 17, 29, 40, 64, 300, 1500])
        data = bytes(rng.getrandbits(8) for _ in range(size))
        data = data[:2] + bytes([data[2] & 0x7F]) + data[3:]  # queries, not responses
        reply = udp_raw(dns.port, data, timeout=0.5)
        if reply is not None:
            assert reply[:2] == data[:2] and reply[2] & 0x80
    # one byte flipped at a time in a good query
    for i in range(12, len(GOOD)):
        flipped = GOOD[:i] + bytes([GOOD[i] ^ 0xFF]) + GOOD[i + 1 :]
        udp_raw(dns.port, flipped, timeout=0.3)
    assert values(ask(dns.port, WEB)) == {"10.96.0.100"}
    assert values(ask(dns.port, WEB, tcp=True)) == {"10.96.0.100"}


def test_tcp_connection_closed_mid_message_is_harmless(dns: ServerThread) -> None:
    import socket

    with socket.create_connection(("127.0.0.1", dns.port)) as s:
        s.sendall(struct.pack("!H", 500) + b"\x00" * 10)
    reply = DNSRecord.parse(tcp_raw(dns.port, GOOD))
    assert values(reply) == {"10.96.0.100"}
