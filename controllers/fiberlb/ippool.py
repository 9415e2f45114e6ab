"""External IP allocation from `--external-ip-pool` (CIDRs or ranges, several pools).

The allocator holds no state of its own worth keeping: the backend's objects are the record (never
a Service's status, which a tenant may write). At the start of each leadership term the controller
calls `restore()` for every allocation the backend holds *before* it allocates anything, so no IP
ever moves (MetalLB's most reported bug). An IP held by a Service stays held even when an edited
pool no longer contains it.

Two Services share an IP only when both carry the same sharing key (the controller scopes keys to
the Service's namespace) and their (protocol, port) sets are disjoint.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from controllers.fiberlb.annotations import ServiceConfigError

PortSet = frozenset[tuple[str, int]]


class PoolExhausted(ServiceConfigError):
    reason = "IPPoolExhausted"


class RequestedIPUnavailable(ServiceConfigError):
    reason = "RequestedIPUnavailable"


@dataclass(frozen=True, slots=True)
class IpRange:
    first: int
    last: int

    def __contains__(self, ip: int) -> bool:
        return self.first <= ip <= self.last

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.first, self.last + 1))


def parse_pools(text: str) -> tuple[IpRange, ...]:
    """ "192.168.100.0/24,10.0.0.10-10.0.0.20" → ranges (a CIDR loses its network and broadcast
    addresses when it is longer than two addresses)."""
    out = []
    for item in (p.strip() for p in text.split(",")):
        if not item:
            continue
        try:
            if "-" in item:
                lo, hi = (int(ipaddress.IPv4Address(x.strip())) for x in item.split("-", 1))
                if lo > hi:
                    raise ValueError(f"{item}: the first address is after the last")
                out.append(IpRange(lo, hi))
            else:
                net = ipaddress.IPv4Network(item, strict=False)
                lo, hi = int(net.network_address), int(net.broadcast_address)
                out.append(IpRange(lo + 1, hi - 1) if net.prefixlen < 31 else IpRange(lo, hi))
        except ValueError as e:
            raise ValueError(f"bad external IP pool {item!r}: {e}") from None
    return tuple(out)


@dataclass(slots=True)
class _Holder:
    sharing_key: str
    ports: PortSet


@dataclass(frozen=True, slots=True, kw_only=True)
class Request:
    requested_ip: str = ""
    sharing_key: str = ""
    ports: PortSet = frozenset()


@dataclass
class IpPool:
    ranges: tuple[IpRange, ...]
    _by_ip: dict[int, dict[str, _Holder]] = field(default_factory=dict)
    _by_service: dict[str, int] = field(default_factory=dict)

    @classmethod
    def from_text(cls, text: str) -> IpPool:
        return cls(parse_pools(text))

    def contains(self, ip: str) -> bool:
        n = int(ipaddress.IPv4Address(ip))
        return any(n in r for r in self.ranges)

    @property
    def size(self) -> int:
        return sum(r.last - r.first + 1 for r in self.ranges)

    def in_use(self) -> int:
        return len(self._by_ip)

    def lookup(self, service: str) -> str:
        n = self._by_service.get(service)
        return "" if n is None else str(ipaddress.IPv4Address(n))

    def holders(self, ip: str) -> list[str]:
        return sorted(self._by_ip.get(int(ipaddress.IPv4Address(ip)), {}))

    def clear(self) -> None:
        self._by_ip.clear()
        self._by_service.clear()

    def restore(self, service: str, ip: str, req: Request) -> bool:
        """Record an allocation read from the backend (also outside the pools).
        False when it conflicts with one restored before (that Service must get a new IP)."""
        n = int(ipaddress.IPv4Address(ip))
        if not self._compatible(n, service, req):
            return False
        self._hold(service, n, req)
        return True

    def assign(self, service: str, req: Request) -> str:
        """The Service's IP: the one it holds if still acceptable, else the requested or a free one."""
        held = self._by_service.get(service)
        want = int(ipaddress.IPv4Address(req.requested_ip)) if req.requested_ip else None
        if held is not None and (want is None or want == held) and self._compatible(held, service, req):
            self._hold(service, held, req)
            return str(ipaddress.IPv4Address(held))
        if want is not None:
            if not any(want in r for r in self.ranges):
                raise RequestedIPUnavailable(
                    f"requested IP {req.requested_ip} is not in any external IP pool"
                )
            if not self._compatible(want, service, req):
                ns = service.split("/", 1)[0] + "/"  # another namespace's Service is not named to a tenant
                others = [h for h in self._by_ip.get(want, {}) if h != service]
                mine = ", ".join(h for h in others if h.startswith(ns)) or "a Service of another namespace"
                raise RequestedIPUnavailable(f"requested IP {req.requested_ip} is in use by {mine}")
            return self._take(service, want, req)
        for n in self._candidates(req):
            if self._compatible(n, service, req):
                return self._take(service, n, req)
        raise PoolExhausted(f"no free IP in the external IP pools ({self.in_use()} of {self.size} in use)")

    def release(self, service: str) -> str:
        """Free the Service's IP (shared IPs stay held by the others); returns it ('' if none)."""
        n = self._by_service.pop(service, None)
        if n is None:
            return ""
        holders = self._by_ip.get(n, {})
        holders.pop(service, None)
        if not holders:
            self._by_ip.pop(n, None)
        return str(ipaddress.IPv4Address(n))

    def _take(self, service: str, n: int, req: Request) -> str:
        self.release(service)
        self._hold(service, n, req)
        return str(ipaddress.IPv4Address(n))

    def _hold(self, service: str, n: int, req: Request) -> None:
        self._by_service[service] = n
        self._by_ip.setdefault(n, {})[service] = _Holder(req.sharing_key, req.ports)

    def _compatible(self, n: int, service: str, req: Request) -> bool:
        for name, h in self._by_ip.get(n, {}).items():
            if name == service:
                continue
            if not req.sharing_key or h.sharing_key != req.sharing_key or h.ports & req.ports:
                return False
        return True

    def _candidates(self, req: Request) -> Iterable[int]:
        if req.sharing_key:  # join a group of the same key first, as MetalLB does
            yield from sorted(
                n
                for n, hs in self._by_ip.items()
                if any(h.sharing_key == req.sharing_key for h in hs.values())
            )
        for r in self.ranges:
            for n in r:
                if n not in self._by_ip:
                    yield n
