"""Response rate limiting (RRL) for UDP answers, per client network, as BIND's and Knot's RRL do:
a spoofed-source flood cannot turn the server into an amplifier aimed at one network.

Each client network (the /24 of an IPv4 address, the /56 of an IPv6 one) has a token bucket of
`rate` responses per second (burst: one second's worth). Past it, one limited response in `slip`
is sent as a truncated, empty reply (TC set: a real client retries over TCP, which is never
limited since its source cannot be spoofed); the others are dropped. slip=0 drops them all,
slip=1 truncates them all. TCP is not limited.
"""

from __future__ import annotations

import ipaddress
import time
from dataclasses import dataclass, field
from enum import Enum

MAX_NETWORKS = 100_000
"""Buckets kept; beyond, the table is emptied (a flood from many networks costs memory, not state)."""


class Verdict(Enum):
    SEND = 0
    SLIP = 1
    DROP = 2


SEND = Verdict.SEND
_monotonic = time.monotonic


@dataclass
class ResponseRateLimit:
    rate: float = 0.0
    """Responses per second per client network; 0 disables the limit."""
    slip: int = 2
    ipv4_prefix: int = 24
    ipv6_prefix: int = 56
    limited: int = 0
    """Responses limited so far (slipped or dropped)."""
    slipped: int = 0
    _buckets: dict[str, list[float]] = field(default_factory=dict)
    _v6_mask: int = 0
    _v4_24: bool = True

    def __post_init__(self) -> None:
        if (
            self.rate < 0
            or self.slip < 0
            or not 8 <= self.ipv4_prefix <= 32
            or not 16 <= self.ipv6_prefix <= 128
        ):
            raise ValueError(
                "RRL: rate and slip must not be negative, prefixes 8-32 (IPv4) and 16-128 (IPv6)"
            )
        self._v6_mask = ((1 << self.ipv6_prefix) - 1) << (128 - self.ipv6_prefix)
        self._v4_24 = self.ipv4_prefix == 24

    @property
    def enabled(self) -> bool:
        return self.rate > 0

    def network(self, host: str) -> str:
        """The bucket key of a client address."""
        if ":" not in host:
            if self.ipv4_prefix == 24:  # the common case, without ipaddress (the UDP hot path)
                return host.rpartition(".")[0]
            n = int(ipaddress.IPv4Address(host)) >> (32 - self.ipv4_prefix)
            return f"4/{n}"
        n = int(ipaddress.IPv6Address(host.partition("%")[0])) & self._v6_mask
        return f"6/{n:x}"

    def check(self, host: str, now: float | None = None) -> Verdict:
        """May a response go to `host` now? (Counts it when it may.) The UDP hot path: the common
        case (a known IPv4 /24 with tokens left) is a few local operations."""
        if now is None:
            now = _monotonic()
        key = host.rpartition(".")[0] if self._v4_24 and ":" not in host else self.network(host)
        bucket = self._buckets.get(key)
        if bucket is not None:
            tokens = bucket[0] + (now - bucket[1]) * self.rate
            bucket[1] = now
            if tokens >= 1.0:
                bucket[0] = (tokens if tokens < self.rate else self.rate) - 1.0
                return SEND
            bucket[0] = tokens
            return self._limited()
        if len(self._buckets) >= MAX_NETWORKS:
            self._buckets.clear()
        self._buckets[key] = [self.rate - 1.0, now]
        return SEND if self.rate >= 1.0 else self._limited()

    def _limited(self) -> Verdict:
        self.limited += 1
        if self.slip and self.limited % self.slip == 0:
            self.slipped += 1
            return Verdict.SLIP
        return Verdict.DROP


def truncated(reply: bytes) -> bytes:
    """The header and question of `reply` with TC set and no records (the slip answer)."""
    qdcount = int.from_bytes(reply[4:6], "big")
    end = 12
    for _ in range(qdcount):  # skip each question's name, then its type and class
        while end < len(reply):
            size = reply[end]
            end += 2 if size >= 0xC0 else 1 + size
            if size == 0 or size >= 0xC0:
                break
        end += 4
    flags = bytes((reply[2] | 0x02, reply[3]))
    return reply[:2] + flags + reply[4:6] + b"\0" * 6 + reply[12:end]
