"""ClusterIP and NodePort allocators, as kube-apiserver's bitmap allocators with a static band.

The real allocators reserve the low part of the range for static (requested) values and hand out
dynamic values from the upper part first (KEP-3070 for ClusterIPs, KEP-3668 for NodePorts): the band
is min(max(16, size/16), 256) (ClusterIP) or min(max(16, size/32), 128) (NodePort). The real ones
pick at random within the band; this one walks it with a cursor (deterministic, O(1) amortised).
"""

from __future__ import annotations

import contextlib
import ipaddress


class RangeFull(Exception):
    pass


class OutOfRange(Exception):
    pass


class InUse(Exception):
    pass


class IntAllocator:
    """Values first..last inclusive."""

    def __init__(self, first: int, last: int, band: int) -> None:
        self.first, self.last = first, last
        self.used: set[int] = set()
        self._static_end = first + band  # values below this are the static band
        self._cursor = self._static_end

    def __contains__(self, v: int) -> bool:
        return v in self.used

    def reserve(self, v: int) -> None:
        if not self.first <= v <= self.last:
            raise OutOfRange(str(v))
        if v in self.used:
            raise InUse(str(v))
        self.used.add(v)

    def release(self, v: int) -> None:
        self.used.discard(v)

    def allocate(self) -> int:
        size = self.last - self.first + 1
        if len(self.used) >= size:
            raise RangeFull()
        for lo, hi in ((self._static_end, self.last), (self.first, self._static_end - 1)):
            v = self._scan(lo, hi)
            if v is not None:
                self.used.add(v)
                return v
        raise RangeFull()

    def _scan(self, lo: int, hi: int) -> int | None:
        if hi < lo:
            return None
        n = hi - lo + 1
        start = self._cursor if lo <= self._cursor <= hi else lo
        for i in range(n):
            v = lo + (start - lo + i) % n
            if v not in self.used:
                self._cursor = v + 1
                return v
        return None


class ClusterIPs:
    """ClusterIPs of one service CIDR (network and broadcast addresses are never handed out)."""

    def __init__(self, cidr: str) -> None:
        self.net = ipaddress.ip_network(cidr)
        first, last = int(self.net.network_address) + 1, int(self.net.broadcast_address) - 1
        size = last - first + 1
        self.ints = IntAllocator(first, last, min(max(16, size // 16), 256))

    def reserve(self, ip: str) -> None:
        try:
            addr = ipaddress.ip_address(ip)
        except ValueError as e:
            raise OutOfRange(ip) from e
        if addr not in self.net:
            raise OutOfRange(ip)
        self.ints.reserve(int(addr))

    def allocate(self) -> str:
        return str(ipaddress.ip_address(self.ints.allocate()))

    def release(self, ip: str) -> None:
        with contextlib.suppress(ValueError):  # "None" or garbage: nothing was allocated
            self.ints.release(int(ipaddress.ip_address(ip)))

    def nth(self, n: int) -> str:
        return str(self.net.network_address + n)


class NodePorts(IntAllocator):
    def __init__(self, first: int = 30000, last: int = 32767) -> None:
        size = last - first + 1
        super().__init__(first, last, min(max(16, size // 32), 128))
