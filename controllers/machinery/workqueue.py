"""A de-duplicating, rate-limited work queue of keys (client-go's workqueue, on asyncio).

- A key added many times before a worker takes it is processed once (`dirty` set).
- A key is never handed to two workers at once: added while processing, it is queued again
  only when the worker calls `done(key)`.
- `add_after` delays an add (the earliest pending deadline of a key wins); `add_rate_limited`
  delays by the key's exponential backoff; `forget` resets that backoff after a success.
- `shutdown()` stops accepting keys and wakes every waiting worker; `wait_idle()` waits for the
  keys being processed (the in-flight reconciles) to finish.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque

from controllers.machinery.metrics import MachineryMetrics
from controllers.machinery.ratelimit import RateLimiter


class WorkQueue:
    def __init__(
        self,
        name: str = "default",
        *,
        rate_limiter: RateLimiter | None = None,
        metrics: MachineryMetrics | None = None,
    ) -> None:
        self.name = name
        self.rate_limiter = rate_limiter or RateLimiter()
        metrics = metrics or MachineryMetrics()
        self._depth = metrics.queue_depth.labels(name)
        self._adds = metrics.queue_adds.labels(name)
        self._retries = metrics.queue_retries.labels(name)
        self._latency = metrics.queue_latency.labels(name)
        self._work = metrics.work_duration.labels(name)
        metrics.unfinished_work.labels(name).set_function(self._unfinished_seconds)
        metrics.longest_running.labels(name).set_function(self._longest_running_seconds)
        self._queue: deque[str] = deque()
        self._dirty: dict[str, float] = {}  # key -> when it was added (for the latency histogram)
        self._processing: dict[str, float] = {}  # key -> when a worker took it (work duration)
        self._timers: dict[str, tuple[float, asyncio.TimerHandle]] = {}
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._idle = asyncio.Event()
        self._idle.set()
        self._shutting_down = False
        self._drain = False

    def __len__(self) -> int:
        """Keys waiting (not counting those being processed or delayed)."""
        return len(self._queue)

    @property
    def shutting_down(self) -> bool:
        return self._shutting_down

    @property
    def processing(self) -> frozenset[str]:
        return frozenset(self._processing)

    def add(self, key: str) -> None:
        """Queue `key` unless it is already waiting; no-op after shutdown."""
        if self._shutting_down or key in self._dirty:
            return
        self._adds.inc()
        self._dirty[key] = time.monotonic()
        if key in self._processing:
            return  # done() queues it again
        self._queue.append(key)
        self._depth.set(len(self._queue))
        self._wake_one()

    def add_after(self, key: str, delay: float) -> None:
        """Queue `key` after `delay` seconds; an earlier pending deadline for the key is kept."""
        if self._shutting_down:
            return
        if delay <= 0:
            self.add(key)
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + delay
        pending = self._timers.get(key)
        if pending is not None:
            if pending[0] <= deadline:
                return
            pending[1].cancel()
        self._timers[key] = (deadline, loop.call_at(deadline, self._fire, key))

    def add_rate_limited(self, key: str) -> None:
        """Queue `key` after its backoff (5 ms doubling per failure, capped) and the overall bucket."""
        if self._shutting_down:
            return
        self._retries.inc()
        self.add_after(key, self.rate_limiter.when(key))

    def forget(self, key: str) -> None:
        """Reset the key's backoff (call after a successful reconcile)."""
        self.rate_limiter.forget(key)

    def num_requeues(self, key: str) -> int:
        return self.rate_limiter.retries(key)

    async def get(self) -> str | None:
        """The next key, now marked processing; None once the queue is shut down."""
        while not self._queue or (self._shutting_down and not self._drain):
            if self._shutting_down:
                return None
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled():
                    self._wake_one()  # pass the wake-up on: the key is not lost
                raise
            finally:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
        key = self._queue.popleft()
        self._depth.set(len(self._queue))
        self._latency.observe(time.monotonic() - self._dirty.pop(key))
        self._processing[key] = time.monotonic()
        self._idle.clear()
        return key

    def done(self, key: str) -> None:
        """The worker finished `key`; if it was added meanwhile, queue it again."""
        started = self._processing.pop(key, None)
        if started is not None:
            self._work.observe(time.monotonic() - started)
        if key in self._dirty and not self._shutting_down:
            self._queue.append(key)
            self._depth.set(len(self._queue))
            self._wake_one()
        if not self._processing:
            self._idle.set()

    def shutdown(self, *, drain: bool = False) -> None:
        """Stop accepting keys and cancel delayed adds. Workers get None at once, or after the keys
        already queued when `drain` is True; the keys being processed finish (see `wait_idle`)."""
        self._shutting_down, self._drain = True, drain
        for _, timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        if not drain:
            self._queue.clear()
            self._dirty.clear()
            self._depth.set(0)
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)

    async def wait_idle(self) -> None:
        """Until no key is being processed."""
        await self._idle.wait()

    def _unfinished_seconds(self) -> float:
        now = time.monotonic()
        return sum(now - t for t in list(self._processing.values()))

    def _longest_running_seconds(self) -> float:
        started = list(self._processing.values())
        return time.monotonic() - min(started) if started else 0.0

    def _fire(self, key: str) -> None:
        self._timers.pop(key, None)
        self.add(key)

    def _wake_one(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
