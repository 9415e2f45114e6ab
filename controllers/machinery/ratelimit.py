"""Retry delays for the work queue, after client-go's DefaultControllerRateLimiter.

The delay of a failed key is the larger of its own exponential backoff (5 ms, 10 ms, 20 ms, ...
capped at 1000 s) and an overall token bucket (10 per second, burst 100) that keeps many failing
keys together from hammering the API server.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class RateLimits:
    base_delay: float = 0.005
    max_delay: float = 1000.0
    qps: float = 10.0
    burst: int = 100


class TokenBucket:
    """Reservations always succeed; the answer is how long to wait for one's token."""

    def __init__(self, qps: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        self._qps, self._burst, self._clock = qps, burst, clock
        self._tokens = float(burst)
        self._last = clock()

    def reserve(self) -> float:
        now = self._clock()
        self._tokens = min(self._burst, self._tokens + (now - self._last) * self._qps)
        self._last = now
        self._tokens -= 1.0
        return 0.0 if self._tokens >= 0 else -self._tokens / self._qps


class RateLimiter:
    """Per-key exponential backoff combined with an overall token bucket."""

    def __init__(self, limits: RateLimits | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.limits = limits or RateLimits()
        self._failures: dict[str, int] = {}
        self._bucket = TokenBucket(self.limits.qps, self.limits.burst, clock)

    def when(self, key: str) -> float:
        """Seconds to wait before retrying `key`; each call counts one more failure."""
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        backoff = self.limits.max_delay
        if failures < 64:  # 2**64 * base overflows any useful cap
            backoff = min(self.limits.max_delay, self.limits.base_delay * 2.0**failures)
        return max(backoff, self._bucket.reserve())

    def retries(self, key: str) -> int:
        return self._failures.get(key, 0)

    def forget(self, key: str) -> None:
        """The key succeeded: its next failure starts again at the base delay."""
        self._failures.pop(key, None)


class Backoff:
    """Exponential backoff with jitter for reconnects (client-go's reflector: 0.8 s doubling to 30 s,
    each delay stretched by up to 100 %)."""

    def __init__(
        self,
        initial: float = 0.8,
        cap: float = 30.0,
        factor: float = 2.0,
        jitter: float = 1.0,
        rand: Callable[[], float] = random.random,
    ) -> None:
        self.initial, self.cap, self.factor, self.jitter = initial, cap, factor, jitter
        self._rand = rand
        self._next = initial

    def next(self) -> float:
        """The delay before the next attempt; grows until `reset`."""
        delay = self._next * (1.0 + self.jitter * self._rand())
        self._next = min(self.cap, self._next * self.factor)
        return delay

    def reset(self) -> None:
        self._next = self.initial
