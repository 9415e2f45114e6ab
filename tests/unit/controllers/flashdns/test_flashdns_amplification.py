"""FlashDNS is no amplifier, checked with dig (the real caller) against the server on loopback:
- a client claiming a 4,096-byte EDNS buffer gets at most the 1,232 bytes we advertise, TC set, and
  dig retries over TCP, which gets the whole answer;
- ANY is answered minimally (RFC 8482: one HINFO "RFC8482" record);
- a flood from one client network is rate-limited (some slipped as TC, the rest dropped, counted),
  while a client in another network still gets answers."""

from __future__ import annotations

import re
import socket
import subprocess
from collections.abc import Iterator

import pytest
from dnslib import DNSRecord  # type: ignore[import-untyped]

from controllers.flashdns.ratelimit import ResponseRateLimit, Verdict, truncated
from controllers.flashdns.records import service_records
from controllers.flashdns.server import DnsServer
from controllers.flashdns.zone import Zone, apex_records
from controllers.resources import EndpointSlice, Service
from tests.unit.controllers.flashdns.dns_kit import ServerThread, make_query

BIG = "big.default.svc.cluster.local"
OTHER_NETWORK = "127.0.1.1"
"""A loopback source in another /24 than 127.0.0.1."""


def _headless(zone: Zone, name: str, n: int) -> None:
    http = [{"name": "http", "port": 80, "protocol": "TCP"}]
    svc = Service.from_dict({"metadata": {"name": name, "namespace": "default"},
                             "spec": {"clusterIP": "None", "ports": http}})  # fmt: skip
    eps = EndpointSlice.from_dict({
        "metadata": {"name": f"{name}-1", "namespace": "default",
                     "labels": {"kubernetes.io/service-name": name}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": [f"10.244.{i // 250}.{i % 250 + 1}"], "conditions": {"ready": True}}
                      for i in range(n)],
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
    })  # fmt: skip
    zone.replace(f"service/default/{name}", service_records(svc, [eps], "cluster.local"))


def _zone() -> Zone:
    zone = Zone("cluster.local", ttl=30, negative_ttl=5)
    zone.replace("zone", apex_records(zone, "10.96.0.10"))
    _headless(zone, "big", 150)  # 150 A records: ~2.5 kB, within a 4,096-byte buffer
    return zone


@pytest.fixture
def dns() -> Iterator[ServerThread]:
    st = ServerThread(DnsServer(_zone(), None))
    yield st
    st.close()


def dig(port: int, *args: str) -> str:
    argv = ["dig", "@127.0.0.1", "-p", str(port), "+time=2", "+tries=1", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=20).stdout


def size(out: str) -> int:
    m = re.search(r"MSG SIZE\s+rcvd: (\d+)", out)
    assert m, out
    return int(m.group(1))


def test_a_big_edns_buffer_gets_1232_bytes_with_tc_then_dig_retries_over_tcp(dns: ServerThread) -> None:
    udp = dig(dns.port, "+bufsize=4096", "+ignore", BIG, "A")
    assert size(udp) <= 1232 and re.search(r"flags: [a-z ]*\btc\b", udp), udp
    retried = dig(dns.port, "+bufsize=4096", BIG, "A")
    assert "Truncated, retrying in TCP mode" in retried
    assert len(re.findall(r"\sIN\s+A\s+10\.244\.", retried)) == 150


def test_any_is_minimal(dns: ServerThread) -> None:
    out = dig(dns.port, "+bufsize=4096", BIG, "ANY")
    answers = re.findall(r"^big\.default\.svc\.cluster\.local\.\s+\d+\s+IN\s+(\S+)\s+(.*)$", out, re.M)
    assert answers == [("HINFO", '"RFC8482" ""')], out
    assert size(out) < 200


def _flood(port: int, n: int) -> tuple[int, int]:
    """n queries from 127.0.0.1 as fast as possible: (full answers, TC answers) received."""
    query = make_query("ns.dns.cluster.local", "A", edns=1232).pack()
    full = tc = 0
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        for _ in range(n):
            s.sendto(query, ("127.0.0.1", port))
        s.settimeout(0.5)
        try:
            while True:
                reply = DNSRecord.parse(s.recv(65535))
                tc += reply.header.tc and not reply.rr
                full += bool(reply.rr)
        except TimeoutError:
            pass
    return full, tc


def test_a_flood_from_one_network_is_limited_another_network_still_answered() -> None:
    rrl = ResponseRateLimit(rate=20, slip=2)
    st = ServerThread(DnsServer(_zone(), None, rrl=rrl))
    try:
        full, tc = _flood(st.port, 400)
        assert full <= 40 and tc >= 100, (full, tc)  # ~20 of burst, then one in two limited slips
        assert rrl.limited >= 300 and rrl.slipped == tc
        other = subprocess.run(["dig", "@127.0.0.1", "-p", str(st.port), "-b", OTHER_NETWORK, "+short",
                                "+tries=1", "+time=2", "ns.dns.cluster.local", "A"],
                               capture_output=True, text=True, timeout=10).stdout  # fmt: skip
        assert other.strip() == "10.96.0.10"
    finally:
        st.close()


def test_rate_limit_buckets_refill_and_keys() -> None:
    rrl = ResponseRateLimit(rate=2, slip=1)
    assert [rrl.check("192.0.2.7", now=0.0) for _ in range(3)] == [Verdict.SEND, Verdict.SEND, Verdict.SLIP]
    assert rrl.check("192.0.2.200", now=0.0) is Verdict.SLIP  # the same /24
    assert rrl.check("198.51.100.1", now=0.0) is Verdict.SEND
    assert rrl.check("192.0.2.7", now=1.0) is Verdict.SEND  # refilled
    assert (
        rrl.network("2001:db8:0:ff::1") == rrl.network("2001:db8:0:aa::2") != rrl.network("2001:db8:0:100::1")
    )
    assert not ResponseRateLimit().enabled


def test_truncated_keeps_header_and_question_only() -> None:
    q = make_query(BIG, "A", edns=1232)
    reply = q.reply()
    reply.add_answer(*DNSRecord.question(BIG).reply().rr)
    out = DNSRecord.parse(truncated(reply.pack()))
    assert out.header.tc == 1 and out.header.id == q.header.id and str(out.q.qname).rstrip(".") == BIG
    assert not out.rr and not out.ar
