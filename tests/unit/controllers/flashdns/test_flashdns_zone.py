"""The in-memory zone: per-owner replacement, unions, empty non-terminals, change callbacks."""

from __future__ import annotations

from dnslib import QTYPE

from controllers.flashdns.records import Record
from controllers.flashdns.zone import Zone, apex_records

WEB = "web.default.svc.cluster.local."


def a(name: str, ip: str) -> Record:
    return Record(name, "A", ip)


def test_replace_swaps_exactly_one_owner() -> None:
    z = Zone("cluster.local")
    z.replace("service/default/web", [a(WEB, "10.96.0.1")])
    z.replace("service/default/db", [a("db.default.svc.cluster.local.", "10.96.0.2")])
    z.replace("service/default/web", [a(WEB, "10.96.0.3")])
    node = z.node(WEB)
    assert node is not None
    assert [str(r) for r in node.rrsets[QTYPE.A]] == ["10.96.0.3"]
    z.remove("service/default/web")
    assert z.node(WEB) is None and not z.exists(WEB)
    assert z.node("db.default.svc.cluster.local.") is not None
    assert z.owners() == {"service/default/db"}


def test_shared_name_holds_the_union_and_survives_one_owner_leaving() -> None:
    z = Zone("cluster.local")
    ptr = "5.1.244.10.in-addr.arpa."
    z.replace("pod/ns/p", [Record(ptr, "PTR", "10-244-1-5.ns.pod.cluster.local.")])
    z.replace("service/ns/h", [Record(ptr, "PTR", "h-0.h.ns.svc.cluster.local.")])
    node = z.node(ptr)
    assert node is not None and len(node.rrsets[QTYPE.PTR]) == 2
    z.remove("pod/ns/p")
    node = z.node(ptr)
    assert node is not None and [str(r) for r in node.rrsets[QTYPE.PTR]] == ["h-0.h.ns.svc.cluster.local."]
    assert z.authoritative(ptr) and not z.authoritative("9.9.9.9.in-addr.arpa.")


def test_empty_non_terminals_exist_until_their_last_descendant_goes() -> None:
    z = Zone("cluster.local")
    z.replace("service/default/web", [a(WEB, "10.96.0.1")])
    assert z.exists("default.svc.cluster.local.") and z.exists("svc.cluster.local.")
    assert not z.exists("other.svc.cluster.local.")
    z.remove("service/default/web")
    assert not z.exists("default.svc.cluster.local.")


def test_change_callbacks_run_only_on_change() -> None:
    z = Zone("cluster.local")
    calls: list[int] = []
    z.on_change.append(lambda: calls.append(z.generation))
    assert z.replace("o", [a(WEB, "10.0.0.1")])
    assert not z.replace("o", [a(WEB, "10.0.0.1")])
    assert calls == [1]


def test_apex_records() -> None:
    z = Zone("cluster.local")
    recs = apex_records(z, "10.96.0.10")
    assert Record("cluster.local.", "NS", "ns.dns.cluster.local.") in recs
    assert Record("ns.dns.cluster.local.", "A", "10.96.0.10") in recs
    assert Record("dns-version.cluster.local.", "TXT", '"1.1.0"') in recs


def test_a_kept_name_never_reads_absent_while_its_owner_is_replaced() -> None:
    """A reader thread, switched in every microsecond, during 3,000 whole-set replacements."""
    import sys
    import threading

    z = Zone("cluster.local")
    srv = "_http._tcp." + WEB
    z.replace("o", [a(WEB, "10.0.0.1"), Record(srv, "SRV", f"0 100 80 {WEB}")])
    gaps: list[str] = []
    stop = threading.Event()

    def reader() -> None:
        while not stop.is_set():
            if z.node(WEB) is None or not z.exists("default.svc.cluster.local."):
                gaps.append("name or its parent absent")

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    t = threading.Thread(target=reader)
    t.start()
    try:
        for i in range(3000):  # every record changes each time; the SRV name comes and goes
            extra = [Record(srv, "SRV", f"0 100 {i} {WEB}")] if i % 2 else []
            z.replace("o", [a(WEB, f"10.0.{i // 250}.{i % 250 + 1}"), *extra])
    finally:
        stop.set()
        t.join()
        sys.setswitchinterval(old)
    assert gaps == []
