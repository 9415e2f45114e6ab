"""Service + its EndpointSlices → the load balancer it should have. Pure: no I/O.

Endpoints follow kube-proxy's rules: ready endpoints (all of them with
publishNotReadyAddresses); when a port has none, endpoints that are serving *and* terminating, so
a rolling update drains gracefully instead of rejecting. A Service port's target port comes from
the EndpointSlice port of the same name (that is how a named targetPort is resolved), or from
its numeric targetPort.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from controllers.fiberlb.annotations import LbOptions, ServiceConfigError
from controllers.resources import EndpointSlice, Service, ServicePort

PROTOCOLS = ("TCP", "UDP", "SCTP")


class NoPorts(ServiceConfigError):
    reason = "NoPorts"


@dataclass(frozen=True, slots=True, order=True)
class Backend:
    ip: str
    port: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Listener:
    name: str
    protocol: str
    port: int
    backends: tuple[Backend, ...]
    """Sorted; empty means reject."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DesiredLB:
    service: str
    """namespace/name"""
    uid: str
    namespace: str
    vips: tuple[str, ...]
    """Addresses the listeners answer on: external IPs and/or the ClusterIP."""
    external_ips: tuple[str, ...] = ()
    """The external IPs among `vips` (what the backend records as this Service's allocation)."""
    listeners: tuple[Listener, ...]
    options: LbOptions

    @property
    def protocols(self) -> tuple[str, ...]:
        return tuple(sorted({lst.protocol for lst in self.listeners}))


def desired_lb(
    svc: Service,
    slices: Iterable[EndpointSlice],
    vips: Iterable[str],
    options: LbOptions,
    external_ips: Iterable[str] = (),
) -> DesiredLB:
    """The load balancer for `svc` answering on `vips` (raises NoPorts for a Service without ports)."""
    if not svc.ports:
        raise NoPorts(f"Service {svc.key} has no ports: nothing to load-balance")
    ipv4 = [s for s in slices if s.address_type == "IPv4" and s.service_name == svc.name]
    listeners = tuple(
        Listener(name=p.name, protocol=p.protocol, port=p.port, backends=backends_for(svc, p, ipv4))
        for p in svc.ports
        if p.protocol in PROTOCOLS
    )
    return DesiredLB(
        service=svc.key,
        uid=svc.uid,
        namespace=svc.namespace,
        vips=tuple(dict.fromkeys(v for v in vips if v)),
        external_ips=tuple(v for v in external_ips if v),
        listeners=listeners,
        options=options,
    )


def backends_for(svc: Service, port: ServicePort, slices: Iterable[EndpointSlice]) -> tuple[Backend, ...]:
    ready: set[Backend] = set()
    draining: set[Backend] = set()
    for sl in slices:
        target = _target_port(port, sl)
        if not target:
            continue
        for ep in sl.endpoints:
            if ep.ready or svc.publish_not_ready_addresses:
                ready.update(Backend(a, target) for a in ep.addresses)
            elif ep.serving and ep.terminating:
                draining.update(Backend(a, target) for a in ep.addresses)
    return tuple(sorted(ready or draining))


def _target_port(port: ServicePort, sl: EndpointSlice) -> int:
    for p in sl.ports:
        if p.name == port.name and p.protocol == port.protocol:
            return p.port
    if not sl.ports and isinstance(port.target_port, int):
        return port.target_port
    return 0
