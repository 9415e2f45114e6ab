"""The embedded DNS server over real UDP and TCP on loopback, with a local upstream (dnslib's server)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from dnslib import QTYPE, DNSRecord
from prometheus_client import CollectorRegistry
from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from controllers.flashdns.forwarder import Forwarder, Upstream
from controllers.flashdns.records import service_records
from controllers.flashdns.server import DnsServer
from controllers.flashdns.zone import Zone, apex_records
from controllers.resources import EndpointSlice, Service
from tests.unit.controllers.flashdns.dns_kit import (
    ServerThread,
    ask,
    make_query,
    start_upstream,
    udp_raw,
    values,
)

WEB = "web.default.svc.cluster.local."
UPSTREAM_ZONE = """
www.example.com. 60 IN A 192.0.2.80
alias.example.com. 60 IN CNAME www.example.com.
"""


def service(name: str, **spec: Any) -> Service:
    return Service.from_dict({"metadata": {"name": name, "namespace": "default"}, "spec": spec})


def big_slice(n: int) -> EndpointSlice:
    endpoints = [{"addresses": [f"10.244.{i // 250}.{i % 250 + 1}"]} for i in range(n)]
    return EndpointSlice.from_dict(
        {
            "metadata": {
                "name": "big-1",
                "namespace": "default",
                "labels": {"kubernetes.io/service-name": "big"},
            },
            "addressType": "IPv4",
            "endpoints": endpoints,
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
        }
    )


@pytest.fixture(scope="module")
def upstream() -> Iterator[tuple[Any, int]]:
    resolver, servers, port = start_upstream(UPSTREAM_ZONE)
    yield resolver, port
    for s in servers:
        s.stop()


@pytest.fixture(scope="module")
def dns(upstream: tuple[Any, int]) -> Iterator[ServerThread]:
    zone = Zone("cluster.local", ttl=30, negative_ttl=5)
    zone.replace("zone", apex_records(zone, "10.96.0.10"))
    http = [{"name": "http", "port": 80, "protocol": "TCP"}]
    zone.replace(
        "service/default/web",
        service_records(service("web", clusterIP="10.96.0.100", ports=http), [], "cluster.local"),
    )
    zone.replace(
        "service/default/big",
        service_records(service("big", clusterIP="None", ports=http), [big_slice(300)], "cluster.local"),
    )
    ext = service("ext", type="ExternalName", externalName="www.example.com")
    zone.replace("service/default/ext", service_records(ext, [], "cluster.local"))
    st = ServerThread(DnsServer(zone, Forwarder([Upstream("127.0.0.1", upstream[1])], timeout=1.0)))
    yield st
    st.close()


@pytest.mark.parametrize("tcp", [False, True], ids=["udp", "tcp"])
def test_a_record_with_case_preserved(dns: ServerThread, tcp: bool) -> None:
    reply = ask(dns.port, "WeB.Default.SVC.cluster.local", tcp=tcp)
    assert reply.header.rcode == 0 and reply.header.aa == 1
    assert values(reply, "A") == {"10.96.0.100"}
    assert str(reply.rr[0].rname) == "WeB.Default.SVC.cluster.local."
    assert reply.rr[0].ttl == 30


def test_srv_with_target_addresses_in_additional(dns: ServerThread) -> None:
    reply = ask(dns.port, "_http._tcp." + WEB, "SRV")
    assert values(reply, "SRV") == {f"0 100 80 {WEB}"}
    assert {str(rr.rdata) for rr in reply.ar} == {"10.96.0.100"}


def test_nxdomain_with_soa_and_negative_ttl(dns: ServerThread) -> None:
    reply = ask(dns.port, "nope.default.svc.cluster.local")
    assert reply.header.rcode == 3 and not reply.rr
    assert reply.auth[0].rtype == QTYPE.SOA and reply.auth[0].ttl == 5
    assert reply.auth[0].rdata.times[4] == 5


@pytest.mark.parametrize(
    ("name", "qtype"),
    [(WEB, "AAAA"), (WEB, "TXT"), ("default.svc.cluster.local.", "A"), ("svc.cluster.local.", "A")],
    ids=["AAAA of a v4 service", "TXT", "namespace (empty non-terminal)", "svc (empty non-terminal)"],
)
def test_nodata_is_noerror_with_soa(dns: ServerThread, name: str, qtype: str) -> None:
    reply = ask(dns.port, name, qtype)
    assert reply.header.rcode == 0 and not reply.rr
    assert reply.auth[0].rtype == QTYPE.SOA


def test_search_path_expansion_is_nxdomain_without_forwarding(
    dns: ServerThread, upstream: tuple[Any, int]
) -> None:
    resolver, _ = upstream
    before = len(resolver.queries)
    reply = ask(dns.port, "web.default.svc.cluster.local.default.svc.cluster.local")
    assert reply.header.rcode == 3 and reply.auth[0].rtype == QTYPE.SOA
    assert len(resolver.queries) == before


def test_apex_soa_ns_and_schema_version(dns: ServerThread) -> None:
    assert ask(dns.port, "cluster.local", "SOA").rr[0].rtype == QTYPE.SOA
    assert values(ask(dns.port, "cluster.local", "NS")) == {"ns.dns.cluster.local."}
    assert values(ask(dns.port, "dns-version.cluster.local", "TXT")) == {'"1.1.0"'}


def test_ptr(dns: ServerThread) -> None:
    assert values(ask(dns.port, "100.0.96.10.in-addr.arpa", "PTR")) == {WEB}


def test_300_endpoints_truncated_over_udp_whole_over_tcp(dns: ServerThread) -> None:
    udp = ask(dns.port, "big.default.svc.cluster.local")
    assert udp.header.tc == 1 and not udp.rr
    with_edns = ask(dns.port, "big.default.svc.cluster.local", edns=4096)
    assert with_edns.header.tc == 1, "300 A records are 4.8 kB: over 4096 too"
    assert with_edns.ar and with_edns.ar[0].rtype == 41
    tcp = ask(dns.port, "big.default.svc.cluster.local", tcp=True)
    assert tcp.header.tc == 0 and len(values(tcp, "A")) == 300


def test_edns_size_is_honoured(dns: ServerThread) -> None:
    small = ask(dns.port, "_http._tcp.big.default.svc.cluster.local", "SRV", edns=1232)
    assert small.header.tc == 1
    claimed = ask(dns.port, "_http._tcp.big.default.svc.cluster.local", "SRV", edns=65000)
    assert claimed.header.tc == 1 and len(claimed.pack()) <= 1232  # capped at what we advertise
    smaller = ask(dns.port, "_http._tcp.big.default.svc.cluster.local", "SRV", edns=1000)
    assert smaller.header.tc == 1 and len(smaller.pack()) <= 1000
    assert ask(dns.port, WEB, edns=1232).ar[-1].rtype == 41


def test_edns_version_1_is_badvers(dns: ServerThread) -> None:
    q = make_query(WEB, edns=1232)
    q.ar[0].ttl = 1 << 16
    reply = DNSRecord.parse(udp_raw(dns.port, q.pack()) or b"")
    assert reply.header.rcode == 0 and (reply.ar[0].ttl >> 24) == 1  # extended rcode 16 = BADVERS


@pytest.mark.parametrize("tcp", [False, True], ids=["udp", "tcp"])
def test_other_names_are_forwarded_to_the_upstream(
    dns: ServerThread, upstream: tuple[Any, int], tcp: bool
) -> None:
    resolver, _ = upstream
    resolver.queries.clear()
    reply = ask(dns.port, "www.example.com", tcp=tcp)
    assert values(reply, "A") == {"192.0.2.80"} and resolver.queries == ["www.example.com."]
    assert ask(dns.port, "missing.example.com", tcp=tcp).header.rcode == 3


def test_external_name_cname_is_chased_upstream(dns: ServerThread) -> None:
    reply = ask(dns.port, "ext.default.svc.cluster.local")
    assert [QTYPE[rr.rtype] for rr in reply.rr] == ["CNAME", "A"]
    assert values(reply) == {"www.example.com.", "192.0.2.80"}


def test_answers_follow_zone_changes(dns: ServerThread) -> None:
    zone = dns.server.zone
    assert values(ask(dns.port, WEB)) == {"10.96.0.100"}  # now cached
    new = service_records(service("web", clusterIP="10.96.0.101"), [], "cluster.local")
    dns.loop.call_soon_threadsafe(zone.replace, "service/default/web", new)
    dns.run(_noop())
    assert values(ask(dns.port, WEB)) == {"10.96.0.101"}


async def _noop() -> None:
    return None


def test_ipv6_listen_address() -> None:
    zone = Zone("cluster.local")
    zone.replace(
        "service/default/web", service_records(service("web", clusterIP="fd00:96::10"), [], "cluster.local")
    )
    st = ServerThread(DnsServer(zone, None), "[::1]:0")
    try:
        for tcp in (False, True):
            reply = ask(st.port, WEB, "AAAA", tcp=tcp, host="::1")
            assert values(reply) == {"fd00:96::10"}
    finally:
        st.close()


def test_external_name_into_the_zone_is_followed_in_the_zone(dns: ServerThread) -> None:
    zone = dns.server.zone
    alias = service_records(service("alias", type="ExternalName", externalName=WEB), [], "cluster.local")
    dns.loop.call_soon_threadsafe(zone.replace, "service/default/alias", alias)
    dns.run(_noop())
    reply = ask(dns.port, "alias.default.svc.cluster.local")
    assert [QTYPE[rr.rtype] for rr in reply.rr] == ["CNAME", "A"] and reply.header.aa == 1
    dns.loop.call_soon_threadsafe(zone.remove, "service/default/alias")
    dns.run(_noop())


def test_silent_upstream_gives_servfail_not_silence() -> None:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as black_hole:
        black_hole.bind(("127.0.0.1", 0))
        silent = Upstream("127.0.0.1", black_hole.getsockname()[1])
        st = ServerThread(DnsServer(Zone("cluster.local"), Forwarder([silent], timeout=0.3)))
        try:
            for tcp in (False, True):
                assert ask(st.port, "www.example.org", tcp=tcp).header.rcode == 2
            assert st.server.stats.forward_failures == 2
        finally:
            st.close()


def test_forwarding_flood_is_refused_beyond_the_limit() -> None:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as black_hole:
        black_hole.bind(("127.0.0.1", 0))
        silent = Upstream("127.0.0.1", black_hole.getsockname()[1])
        st = ServerThread(DnsServer(Zone("cluster.local"), Forwarder([silent], timeout=1.0), max_forwards=2))
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as c:
                c.settimeout(0.5)
                for i in range(5):
                    c.sendto(make_query(f"n{i}.example.org", qid=i).pack(), ("127.0.0.1", st.port))
                refused = [DNSRecord.parse(c.recv(512)) for _ in range(3)]
            assert sorted(r.header.id for r in refused) == [2, 3, 4]
            assert all(r.header.rcode == 5 for r in refused)
        finally:
            st.close()


class Figures(Collector):
    def __init__(self, server: DnsServer) -> None:
        self.server = server

    def collect(self) -> Iterator[Metric]:
        return iter(list(self.server.responses.families()))


def test_responses_are_counted_by_rcode_and_timed_per_transport() -> None:
    zone = Zone("cluster.local")
    zone.replace(
        "service/default/web", service_records(service("web", clusterIP="10.96.0.100"), [], "cluster.local")
    )
    st = ServerThread(DnsServer(zone, None))
    try:
        for _ in range(2):  # the second answer comes from the reply cache: counted all the same
            assert ask(st.port, WEB).header.rcode == 0
        assert ask(st.port, "nope.default.svc.cluster.local").header.rcode == 3
        assert ask(st.port, WEB, tcp=True).header.rcode == 0
        reg = CollectorRegistry()
        reg.register(Figures(st.server))
        assert reg.get_sample_value("flashdns_dns_responses_total", {"rcode": "NOERROR"}) == 3
        assert reg.get_sample_value("flashdns_dns_responses_total", {"rcode": "NXDOMAIN"}) == 1
        assert reg.get_sample_value("flashdns_dns_responses_total", {"rcode": "SERVFAIL"}) == 0
        udp, tcp = {"transport": "udp"}, {"transport": "tcp"}
        assert reg.get_sample_value("flashdns_dns_request_duration_seconds_count", udp) == 3
        assert reg.get_sample_value("flashdns_dns_request_duration_seconds_count", tcp) == 1
        under_5s = reg.get_sample_value("flashdns_dns_request_duration_seconds_bucket", {**udp, "le": "5.0"})
        assert under_5s == 3
        assert zone.record_count() == len(zone.records("service/default/web")) >= 1
    finally:
        st.close()
