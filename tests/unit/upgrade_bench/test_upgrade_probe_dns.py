"""The upgrade bench's DNS probe says why a query failed (a timeout, or the rcode the server answered),
against a DNS server on loopback, and the table counts the failures of each window by that reason."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest
from dnslib import QTYPE, RCODE, RR, A, DNSRecord  # type: ignore[import-untyped]  # no stubs

from bench.bench_upgrade import Window, print_table, report
from bench.upgrade_probe import ask

NAME = "echo.upgrade-bench.svc.cluster.local"


@pytest.fixture
def server() -> Iterator[tuple[socket.socket, list[str]]]:
    """A UDP DNS server answering each query as the next entry of its script: an IP (an A record),
    an rcode name, or `silent` (no reply)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    script: list[str] = []

    def serve() -> None:
        while True:
            try:
                data, peer = sock.recvfrom(512)
            except OSError:
                return
            what = script.pop(0) if script else "silent"
            if what == "silent":
                continue
            q = DNSRecord.parse(data)
            r = q.reply()
            if what[0].isdigit():
                r.add_answer(RR(q.q.qname, QTYPE.A, rdata=A(what), ttl=30))
            else:
                r.header.rcode = getattr(RCODE, what)
            sock.sendto(r.pack(), peer)

    threading.Thread(target=serve, daemon=True).start()
    yield sock, script
    sock.close()


def test_each_failure_says_why(server: tuple[socket.socket, list[str]]) -> None:
    sock, script = server
    port = sock.getsockname()[1]
    script.extend(["10.96.0.20", "NXDOMAIN", "SERVFAIL", "silent"])
    assert ask("127.0.0.1", NAME, port, timeout=0.5) == ""
    assert ask("127.0.0.1", NAME, port, timeout=0.5) == "rcode NXDOMAIN"
    assert ask("127.0.0.1", NAME, port, timeout=0.5) == "rcode SERVFAIL"
    assert ask("127.0.0.1", NAME, port, timeout=0.5) == "timeout"


def test_the_table_counts_dns_failures_by_reason(capsys: pytest.CaptureFixture[str]) -> None:
    events = [
        {"t": 1, "kind": "dns_fail", "name": NAME, "first": "timeout", "retry": "timeout"},
        {"t": 2, "kind": "dns_fail", "name": NAME, "first": "timeout", "retry": "timeout"},
        {"t": 3, "kind": "dns_fail", "name": NAME, "first": "rcode NXDOMAIN", "retry": "rcode NXDOMAIN"},
        {"t": 12, "kind": "dns_fail", "name": NAME, "first": "timeout", "retry": "timeout"},
    ]
    rows = report([Window("baseline", 0, 10), Window("daemonset/x", 10, 20)], events, [], [])
    assert rows[0]["dns_failures"] == 3 and rows[0]["dns_why"] == {"timeout": 2, "rcode NXDOMAIN": 1}
    assert rows[1]["dns_why"] == {"timeout": 1}
    print_table(rows)
    assert "dns: 2 timeout, 1 rcode NXDOMAIN" in capsys.readouterr().out
