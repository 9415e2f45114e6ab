"""Pure record generation: a Service (+ its EndpointSlices) or a Pod → the DNS records it owns.

Follows the Kubernetes DNS-Based Service Discovery specification v1.1.0 plus the hosting
spec's extras (section 4: a LoadBalancer Service's first ingress IP beside its ClusterIP, and
`<a-b-c-d>.pod.<domain>` beside the deprecated `<a-b-c-d>.<ns>.pod.<domain>`):

- ClusterIP Service: `<svc>.<ns>.svc.<zone>` A/AAAA per cluster IP (dual-stack), SRV
  `_<port>._<proto>.<svc>.<ns>.svc.<zone>` per *named* port, PTR per cluster IP.
- Headless Service: A/AAAA per ready endpoint address (every endpoint with
  `publishNotReadyAddresses` or the tolerate-unready annotation), `<host>.<svc>.<ns>.svc.<zone>`
  per endpoint where host is the EndpointSlice hostname or the dashed IP, SRV per named port and
  endpoint host, PTR per endpoint address to its host name. No ready endpoint: no record, so the
  name answers NXDOMAIN.
- ExternalName Service: CNAME to the external name.
- Pod: A/AAAA at `<dashed-ip>.<ns>.pod.<zone>` and `<dashed-ip>.pod.<zone>`, PTR to the former.

Names are lower-case, absolute (trailing dot); values are in presentation form (what the
FlashDNS gRPC API carries). Nothing here does I/O.
"""

from __future__ import annotations

import ipaddress
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from controllers.resources import EndpointSlice, Pod, Service

SCHEMA_VERSION = "1.1.0"
TOLERATE_UNREADY = "service.alpha.kubernetes.io/tolerate-unready-endpoints"
SRV_PRIORITY = 0
IP_TYPES = ("IPv4", "IPv6")


@dataclass(frozen=True, slots=True, order=True)
class Record:
    name: str
    """Absolute, lower-case, with the trailing dot: `web.default.svc.cluster.local.`"""
    type: str
    """A, AAAA, SRV, PTR, CNAME or TXT."""
    value: str
    """Presentation form: `10.96.0.10`, `0 100 80 web.default.svc.cluster.local.`, `"1.1.0"`."""


RecordSet = frozenset[Record]


def fqdn(*labels: str) -> str:
    return ".".join(x.strip(".").lower() for x in labels if x.strip(".")) + "."


def dashed(ip: str) -> str:
    """`10.244.1.5` → `10-244-1-5`; IPv6 `fd00::5` → `fd00--5` (the form kube-dns/CoreDNS use)."""
    return ip.replace(".", "-").replace(":", "-").lower()


def reverse_name(ip: str) -> str:
    """`10.96.0.10` → `10.0.96.10.in-addr.arpa.`; IPv6 → its nibble name in ip6.arpa."""
    return ipaddress.ip_address(ip).reverse_pointer + "."


def address_type(ip: str) -> str | None:
    """ "A" or "AAAA", or None when `ip` is not an IP address (never trust the API blindly)."""
    try:
        return "A" if ipaddress.ip_address(ip).version == 4 else "AAAA"
    except ValueError:
        return None


def version_records(domain: str) -> RecordSet:
    """`dns-version.<zone>` TXT with the schema version (spec 2.2)."""
    return frozenset({Record(fqdn("dns-version", domain), "TXT", f'"{SCHEMA_VERSION}"')})


def service_records(svc: Service, slices: Sequence[EndpointSlice], domain: str) -> RecordSet:
    """Every record the Service owns, given the EndpointSlices labelled with its name."""
    name = fqdn(svc.name, svc.namespace, "svc", domain)
    if svc.type == "ExternalName":
        return _external_name(name, svc.external_name)
    if svc.headless:
        return _headless(svc, name, slices)
    if not svc.cluster_ips:
        return frozenset()  # not allocated yet
    return _cluster_ip(svc, name)


def _external_name(name: str, external: str) -> RecordSet:
    target = external.strip().rstrip(".")
    if not target or address_type(target):
        return frozenset()  # the API refuses both; an IP is not a valid CNAME target
    return frozenset({Record(name, "CNAME", target + ".")})


def _cluster_ip(svc: Service, name: str) -> RecordSet:
    out: set[Record] = set()
    ingress = svc.ingress_ips[:1] if svc.type == "LoadBalancer" else ()
    for ip in (*svc.cluster_ips, *ingress):
        if rtype := address_type(ip):
            out.add(Record(name, rtype, _canonical(ip)))
    for ip in svc.cluster_ips:
        if address_type(ip):
            out.add(Record(reverse_name(ip), "PTR", name))
    named = [(p.name, p.protocol, p.port) for p in svc.ports if p.name]
    out.update(_srv(name, [(port_name, proto, port, name) for port_name, proto, port in named]))
    return frozenset(out)


def _publishes(svc: Service) -> bool:
    return svc.publish_not_ready_addresses or svc.annotations.get(TOLERATE_UNREADY, "").lower() == "true"


def _headless(svc: Service, name: str, slices: Sequence[EndpointSlice]) -> RecordSet:
    out: set[Record] = set()
    srv: list[tuple[str, str, int, str]] = []
    everyone = _publishes(svc)
    for sl in slices:
        if sl.address_type not in IP_TYPES:
            continue  # FQDN slices are not addresses
        for ep in sl.endpoints:
            if not (ep.ready or everyone):
                continue
            for ip in ep.addresses:
                rtype = address_type(ip)
                if rtype is None:
                    continue
                host = fqdn(ep.hostname or dashed(_canonical(ip)), name)
                out.add(Record(name, rtype, _canonical(ip)))
                out.add(Record(host, rtype, _canonical(ip)))
                out.add(Record(reverse_name(ip), "PTR", host))
                srv.extend((p.name, p.protocol, p.port, host) for p in sl.ports if p.name and p.port)
    out.update(_srv(name, srv))
    return frozenset(out)


def _srv(name: str, entries: Iterable[tuple[str, str, int, str]]) -> set[Record]:
    """One SRV per (port name, protocol, port, target); weights share 100 per SRV name (RFC 2782)."""
    keyed = {
        (fqdn(f"_{port_name}", f"_{proto}", name), port, target) for port_name, proto, port, target in entries
    }
    per_name = Counter(srv_name for srv_name, _, _ in keyed)
    return {
        Record(srv_name, "SRV", f"{SRV_PRIORITY} {max(1, 100 // per_name[srv_name])} {port} {target}")
        for srv_name, port, target in keyed
    }


def pod_records(pod: Pod, domain: str) -> RecordSet:
    """A/AAAA for each pod IP at `<dashed>.<ns>.pod.<zone>` and `<dashed>.pod.<zone>`, and a PTR.

    Host-network pods share the node's address, and finished pods have given theirs back: neither
    gets records.
    """
    if pod.host_network or pod.phase in ("Succeeded", "Failed"):
        return frozenset()
    out: set[Record] = set()
    for ip in pod.ips:
        rtype = address_type(ip)
        if rtype is None:
            continue
        ip = _canonical(ip)
        with_ns = fqdn(dashed(ip), pod.namespace, "pod", domain)
        out.add(Record(with_ns, rtype, ip))
        out.add(Record(fqdn(dashed(ip), "pod", domain), rtype, ip))
        out.add(Record(reverse_name(ip), "PTR", with_ns))
    return frozenset(out)


def _canonical(ip: str) -> str:
    return str(ipaddress.ip_address(ip))
