"""The in-memory zone the embedded server answers from, replaced atomically per owner.

An *owner* is a Service (`service/<ns>/<name>`), a Pod (`pod/<ns>/<name>`) or the zone itself;
`replace(owner, records)` swaps everything that owner contributes in one synchronous call. Names
shared by several owners (a PTR for a pod IP that is also a headless endpoint) hold the union.

Readers (the UDP thread, the TCP handlers) only do `dict.get` on `_nodes` and `_exists`; a
writer assigns each name's new immutable `Node` in one step and adds names before it removes
any, so a name present before and after an update never reads as absent in between. After
every change `on_change` callbacks run (the server drops its answer cache).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from dnslib import AAAA, CNAME, NS, PTR, QTYPE, RD, SOA, SRV, TXT, A  # type: ignore[import-untyped]

from controllers.flashdns.records import Record, RecordSet, address_type, fqdn, version_records

ZONE_OWNER = "zone"
REVERSE_SUFFIXES = (".in-addr.arpa.", ".ip6.arpa.")


@dataclass(frozen=True, slots=True)
class Node:
    """The records of one name: qtype number → rdata tuple (dnslib objects, packed per answer)."""

    rrsets: dict[int, tuple[RD, ...]] = field(default_factory=dict)


def rdata(rec: Record) -> RD:
    """A record's presentation value as dnslib rdata."""
    if rec.type == "A":
        return A(rec.value)
    if rec.type == "AAAA":
        return AAAA(rec.value)
    if rec.type == "PTR":
        return PTR(rec.value)
    if rec.type == "CNAME":
        return CNAME(rec.value)
    if rec.type == "NS":
        return NS(rec.value)
    if rec.type == "TXT":
        return TXT(rec.value.strip('"'))
    if rec.type == "SRV":
        prio, weight, port, target = rec.value.split()
        return SRV(int(prio), int(weight), int(port), target)
    raise ValueError(f"unsupported record type {rec.type}")


class Zone:
    def __init__(self, domain: str, *, ttl: int = 30, negative_ttl: int = 5) -> None:
        self.origin = fqdn(domain)
        self.ttl, self.negative_ttl = ttl, negative_ttl
        self.nameserver = fqdn("ns.dns", domain)
        self.generation = 0
        self.on_change: list[Callable[[], None]] = []
        self._owned: dict[str, RecordSet] = {}
        self._contrib: dict[str, dict[str, frozenset[Record]]] = {}
        self._nodes: dict[str, Node] = {}
        self._exists: dict[str, int] = {}
        """Name → how many names with records are at or below it (empty non-terminals count)."""
        self._serial = int(time.time()) & 0xFFFFFFFF

    # ---- reads (any thread) ----
    def node(self, name: str) -> Node | None:
        return self._nodes.get(name)

    def exists(self, name: str) -> bool:
        return name in self._exists

    def authoritative(self, name: str) -> bool:
        """The cluster domain; reverse names only where we hold records (the rest fall through)."""
        if name == self.origin or name.endswith("." + self.origin):
            return True
        return name.endswith(REVERSE_SUFFIXES) and name in self._nodes

    def soa(self) -> SOA:
        times = (self._serial, 7200, 1800, 86400, self.negative_ttl)
        return SOA(self.nameserver, fqdn("hostmaster", self.origin), times)

    def owners(self) -> set[str]:
        return set(self._owned)

    def records(self, owner: str) -> RecordSet:
        return self._owned.get(owner, frozenset())

    def __len__(self) -> int:
        return len(self._nodes)

    def record_count(self) -> int:
        """Records over every owner (a record two owners contribute counts twice)."""
        return sum(len(r) for r in list(self._owned.values()))

    # ---- writes (one thread: the controller's event loop) ----
    def replace(self, owner: str, records: Iterable[Record]) -> bool:
        """Make `records` exactly what `owner` contributes; False when nothing changed."""
        new = frozenset(records)
        old = self._owned.get(owner, frozenset())
        if new == old:
            return False
        by_name: dict[str, set[Record]] = {}
        for rec in new:
            by_name.setdefault(rec.name, set()).add(rec)
        added = [n for n in by_name if n not in self._nodes]
        for name in added:  # existence first: an ancestor never reads as absent
            self._count(name, +1)
        for name, recs in by_name.items():
            self._set(name, owner, frozenset(recs))
        for name in {r.name for r in old} - by_name.keys():
            self._set(name, owner, frozenset())
        if new:
            self._owned[owner] = new
        else:
            self._owned.pop(owner, None)
        self._changed()
        return True

    def remove(self, owner: str) -> bool:
        return self.replace(owner, ())

    def _set(self, name: str, owner: str, recs: frozenset[Record]) -> None:
        contrib = self._contrib.setdefault(name, {})
        if recs:
            contrib[owner] = recs
        else:
            contrib.pop(owner, None)
        if contrib:
            self._nodes[name] = _node(contrib.values())
            return
        del self._contrib[name]
        if self._nodes.pop(name, None) is not None:
            self._count(name, -1)

    def _count(self, name: str, delta: int) -> None:
        """Adjust the existence count of `name` and its ancestors up to the origin (or the root)."""
        while name:
            left = self._exists.get(name, 0) + delta
            if left > 0:
                self._exists[name] = left
            else:
                self._exists.pop(name, None)
            if name == self.origin or "." not in name[:-1]:
                return
            name = name.split(".", 1)[1]

    def _changed(self) -> None:
        self.generation += 1
        self._serial = (self._serial + 1) & 0xFFFFFFFF
        for fn in self.on_change:
            fn()


def _node(groups: Iterable[frozenset[Record]]) -> Node:
    by_type: dict[int, list[Record]] = {}
    for recs in groups:
        for rec in recs:
            by_type.setdefault(getattr(QTYPE, rec.type), []).append(rec)
    return Node({t: tuple(rdata(r) for r in sorted(set(rs))) for t, rs in by_type.items()})


def apex_records(zone: Zone, nameserver_ip: str = "") -> RecordSet:
    """What the zone owns itself: NS at the apex, the nameserver's address, the schema version."""
    out = {Record(zone.origin, "NS", zone.nameserver), *version_records(zone.origin)}
    if nameserver_ip and (rtype := address_type(nameserver_ip)):
        out.add(Record(zone.nameserver, rtype, nameserver_ip))
    return frozenset(out)
