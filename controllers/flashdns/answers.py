"""One query in, one reply out: the authoritative logic of the embedded server (dnslib wire format).

`Answerer.answer(wire, tcp)` never raises on bad input. It returns the reply bytes, or says the
query is not ours (forward it), or that the datagram is to be dropped:
- shorter than a header, or a response (QR set): dropped (never answer an answer);
- unparseable, trailing bytes, not exactly one question, two OPT records: FORMERR;
- an opcode other than QUERY: NOTIMP; an EDNS version other than 0: BADVERS;
- a class other than IN/ANY, or a zone transfer (AXFR/IXFR): REFUSED; a question of type OPT: FORMERR.
In the cluster domain: NXDOMAIN when the name does not exist (empty non-terminals exist),
NODATA otherwise, both with the SOA in the authority section and its TTL the negative TTL.
Answers keep the query's spelling of the name (0x20 case). Over UDP a reply larger than the
client's EDNS0 size (512 without EDNS0), capped at the 1,232 bytes we advertise (a client claiming
65,535 gets no bigger answer: no amplification), loses its additional section, then is truncated
to the header and question with TC set; over TCP it is whole. ANY is answered minimally (RFC 8482):
an existing name gets one synthesized HINFO "RFC8482" record, not its RRsets.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from dnslib import EDNS0, QTYPE, RD, RR, DNSBuffer, DNSError, DNSHeader, DNSLabel, DNSQuestion, DNSRecord  # type: ignore[import-untyped]

from controllers.flashdns.zone import Node, Zone

log = logging.getLogger(__name__)

NOERROR, FORMERR, SERVFAIL, NXDOMAIN, NOTIMP, REFUSED = 0, 1, 2, 3, 4, 5
BADVERS = 16
PLAIN_UDP = 512
OUR_UDP = 1232
"""The EDNS0 buffer size we advertise (DNS flag day 2020)."""
MAX_CHAIN = 8
ANY, CNAME_T, SOA_T, OPT = QTYPE.ANY, QTYPE.CNAME, QTYPE.SOA, 41
ADDRESS_TYPES = (QTYPE.A, QTYPE.AAAA)
CLASS_IN, CLASS_ANY = 1, 255
MINIMAL_ANY = RD(b"\x07RFC8482\x00")
"""RFC 8482 section 4.2: the answer to ANY, HINFO "RFC8482" "" (dnslib has no HINFO class: raw rdata)."""
ZONE_TRANSFERS = (QTYPE.AXFR, QTYPE.IXFR)
"""Refused: the zone is rebuilt from the API on every replica, never transferred."""


@dataclass(frozen=True, slots=True)
class Answer:
    wire: bytes | None
    """The reply; None with forward=False means drop the datagram."""
    forward: bool = False
    """Not in our zone: relay the query to the upstreams unchanged."""
    chase: str = ""
    """A CNAME left the zone: resolve this name upstream and append its records to `wire`."""
    cacheable: bool = False
    """Depends only on the query bytes and the zone state (so it may be replayed with a new ID)."""


def header_error(data: bytes, rcode: int) -> bytes:
    """A header-only error reply for a query we could not parse: its ID, opcode and RD kept."""
    flags = 0x80 | (data[2] & 0x79)  # QR + opcode + RD
    return data[:2] + bytes((flags, rcode & 0xF)) + b"\0" * 8


class Answerer:
    def __init__(self, zone: Zone, *, recursion: bool) -> None:
        self.zone, self.recursion = zone, recursion

    def answer(self, data: bytes, tcp: bool) -> Answer:
        if len(data) < 12 or data[2] & 0x80:
            return Answer(None)
        try:
            query = _parse(data)
        except (DNSError, ValueError, UnicodeError, IndexError) as e:
            log.debug("FORMERR: %s", e)
            return Answer(header_error(data, FORMERR), cacheable=True)
        return self._answer(query, data, tcp)

    def _answer(self, query: DNSRecord, data: bytes, tcp: bool) -> Answer:
        opts = [rr for rr in query.ar if rr.rtype == OPT]
        if query.header.opcode != 0:
            return Answer(header_error(data, NOTIMP), cacheable=True)
        if len(query.questions) != 1 or len(opts) > 1:
            return Answer(header_error(data, FORMERR), cacheable=True)
        reply = DNSRecord(DNSHeader(id=query.header.id, bitmap=query.header.bitmap, qr=1, aa=1), q=query.q)
        # the query's bitmap gives opcode, RD and CD; its rcode, TC, Z and AD are not ours to echo
        # (a query with rcode 6 was answered YXDOMAIN with the address in it)
        reply.header.rcode = reply.header.tc = reply.header.z = reply.header.ad = 0
        reply.header.ra = int(self.recursion)
        limit = udp_limit(opts, tcp)
        if opts and (opts[0].ttl >> 16) & 0xFF:
            reply.header.aa = 0
            reply.add_ar(EDNS0(udp_len=OUR_UDP, ext_rcode=BADVERS >> 4))
            return Answer(reply.pack(), cacheable=True)
        q = query.q
        name = str(q.qname).lower()
        if q.qtype == OPT:  # a pseudo-type is no question (RFC 6891)
            return Answer(header_error(data, FORMERR), cacheable=True)
        if q.qclass not in (CLASS_IN, CLASS_ANY) or q.qtype in ZONE_TRANSFERS:
            return self._done(reply, REFUSED, opts, limit, aa=False)
        if not self.zone.authoritative(name):
            if self.recursion:
                return Answer(None, forward=True)
            return self._done(reply, REFUSED, opts, limit, aa=False)
        chase = self._fill(reply, q, name)
        out = self._done(reply, reply.header.rcode, opts, limit)
        return Answer(out.wire, chase=chase, cacheable=not chase)

    def _fill(self, reply: DNSRecord, q: DNSQuestion, name: str) -> str:
        """Answer from the zone; returns a CNAME target outside the zone to resolve upstream."""
        zone, owner, qtype = self.zone, q.qname, q.qtype
        for _ in range(MAX_CHAIN):
            node = zone.node(name)
            if node is None and name == zone.origin and qtype in (SOA_T, ANY):
                node = Node()
            if node is None:  # RFC 6604: the rcode speaks of the last name of a CNAME chain
                self._negative(reply, NOERROR if zone.exists(name) else NXDOMAIN)
                return ""
            self._add(reply, owner, node, qtype, name)
            cname = node.rrsets.get(CNAME_T)
            if not cname or qtype in (CNAME_T, ANY):
                if not reply.rr:
                    self._negative(reply, NOERROR)
                return ""
            target = str(cname[0].label)
            name, owner = target.lower(), DNSLabel(target)
            if not zone.authoritative(name):
                return target if self.recursion and qtype != CNAME_T else ""
        return ""

    def _add(self, reply: DNSRecord, owner: DNSLabel, node: Node, qtype: int, name: str) -> None:
        ttl, zone = self.zone.ttl, self.zone
        if qtype == ANY:  # RFC 8482: one synthesized record, not every RRset (no amplification)
            reply.add_answer(RR(owner, QTYPE.HINFO, rdata=MINIMAL_ANY, ttl=ttl))
            return
        types = [qtype if qtype in node.rrsets else CNAME_T]
        for t in types:
            for rd in node.rrsets.get(t, ()):
                reply.add_answer(RR(owner, t, rdata=rd, ttl=ttl))
        if name == zone.origin and qtype in (SOA_T, ANY):
            reply.add_answer(RR(owner, SOA_T, rdata=zone.soa(), ttl=ttl))
        if qtype == QTYPE.SRV:  # the spec's "may include" the targets' addresses
            for rd in node.rrsets.get(QTYPE.SRV, ()):
                target = zone.node(str(rd.target).lower())
                for t in ADDRESS_TYPES:
                    for addr in target.rrsets.get(t, ()) if target else ():
                        reply.add_ar(RR(rd.target, t, rdata=addr, ttl=ttl))

    def _negative(self, reply: DNSRecord, rcode: int) -> None:
        reply.header.rcode = rcode
        neg = self.zone.negative_ttl
        reply.add_auth(RR(self.zone.origin, SOA_T, rdata=self.zone.soa(), ttl=neg))

    def _done(self, reply: DNSRecord, rcode: int, opts: list[RR], limit: int, aa: bool = True) -> Answer:
        reply.header.rcode, reply.header.aa = rcode, int(aa)
        if opts:
            reply.add_ar(EDNS0(udp_len=OUR_UDP))
        return Answer(fit(reply, limit), cacheable=True)

    def with_chased(self, query: bytes, wire: bytes, chased: list[RR], tcp: bool) -> bytes:
        """Our reply (ending in a CNAME that leaves the zone) plus the upstream's records for it."""
        reply = DNSRecord.parse(wire)
        if chased:
            reply.header.rcode = NOERROR
            reply.auth = []
            for rr in chased:
                reply.add_answer(rr)
        opts = [rr for rr in DNSRecord.parse(query).ar if rr.rtype == OPT]
        return fit(reply, udp_limit(opts, tcp))


def udp_limit(opts: list[RR], tcp: bool) -> int:
    """The largest reply: whole over TCP; over UDP the client's EDNS0 size (512 without EDNS0),
    never more than the OUR_UDP we advertise."""
    if tcp:
        return 65535
    return min(max(PLAIN_UDP, opts[0].rclass), OUR_UDP) if opts else PLAIN_UDP


def capped(reply: bytes, query: bytes) -> bytes:
    """A forwarded UDP reply within the same limit (truncated with TC when the upstream sent more)."""
    if len(reply) <= PLAIN_UDP:
        return reply
    try:
        opts = [rr for rr in DNSRecord.parse(query).ar if rr.rtype == OPT]
        limit = udp_limit(opts, tcp=False)
        return reply if len(reply) <= limit else fit(DNSRecord.parse(reply), limit)
    except (DNSError, ValueError, UnicodeError, IndexError):
        return header_error(query, SERVFAIL)


def fit(reply: DNSRecord, limit: int) -> bytes:
    """Pack `reply` within `limit` bytes: drop additional data first, then truncate (TC)."""
    wire: bytes = reply.pack()
    if len(wire) > limit:
        reply.ar = [rr for rr in reply.ar if rr.rtype == OPT]
        wire = reply.pack()
    if len(wire) > limit:
        reply.rr, reply.auth, reply.header.tc = [], [], 1
        wire = reply.pack()
    return wire


def _parse(data: bytes) -> DNSRecord:
    """dnslib's parse, refusing trailing bytes after the last section."""
    buf = DNSBuffer(data)
    try:
        header = DNSHeader.parse(buf)
        questions = [DNSQuestion.parse(buf) for _ in range(header.q)]
        sections = [[RR.parse(buf) for _ in range(n)] for n in (header.a, header.auth, header.ar)]
    except DNSError:
        raise
    except Exception as e:  # dnslib's BufferError / BimapError and friends
        raise DNSError(f"unparseable query at offset {buf.offset}: {e}") from e
    if buf.remaining():
        raise DNSError(f"{buf.remaining()} trailing bytes")
    for q in questions:  # dnslib reads what it cannot write back
        labels = q.qname.label
        if any(len(label) > 63 for label in labels) or sum(len(x) + 1 for x in labels) > 254:
            raise DNSError("name too long")
    return DNSRecord(header, questions, sections[0], auth=sections[1], ar=sections[2])
