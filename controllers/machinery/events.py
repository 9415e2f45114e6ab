"""Events through events.k8s.io/v1, aggregated like client-go's tools/events.

The first occurrence creates an Event. A repeat (same regarding object, reason, action, type,
reporting controller) within `window` seconds of the previous one becomes a series: the count
and lastObservedTime are kept locally and written as one PATCH at most every `flush_interval`
(and on `flush()`), so a crash loop costs a few writes, not one per failure. New Events per
regarding object also draw from a token bucket (burst 25, one more per 5 minutes, like client-go's
spam filter); those over it are dropped and counted. Recording never raises: an API error is
logged and counted, and the controller goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from kubernetes_asyncio.client.exceptions import ApiException

from controllers.machinery.kinds import EVENTS
from controllers.machinery.metrics import MachineryMetrics
from controllers.machinery.ratelimit import TokenBucket
from controllers.machinery.rest import KubeClient
from controllers.machinery.store import KubeObject

log = logging.getLogger(__name__)

EventType = Literal["Normal", "Warning"]
MAX_NOTE = 1024  # the API server rejects longer notes


def micro_time(ts: float) -> str:
    """metav1.MicroTime: RFC 3339 with microseconds, UTC."""
    return datetime.datetime.fromtimestamp(ts, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def object_reference(obj: KubeObject) -> KubeObject:
    meta = obj.get("metadata", {})
    ref = {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"), "name": meta.get("name"),
           "namespace": meta.get("namespace"), "uid": meta.get("uid"),
           "resourceVersion": meta.get("resourceVersion")}  # fmt: skip
    return {k: v for k, v in ref.items() if v}


@dataclass(slots=True)
class _Series:
    namespace: str
    name: str
    count: int = 1
    written: int = 1
    last_seen: float = 0.0
    last_write: float = 0.0
    flush: asyncio.TimerHandle | None = field(default=None, repr=False)


class EventRecorder:
    def __init__(
        self,
        client: KubeClient,
        *,
        controller: str,
        instance: str,
        window: float = 360.0,
        flush_interval: float = 60.0,
        burst: int = 25,
        refill_seconds: float = 300.0,
        max_series: int = 4096,
        metrics: MachineryMetrics | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """`controller` is reportingController (e.g. "fiberlb.plasmacloud.io/controller"), `instance`
        reportingInstance (the pod name)."""
        self.client, self.controller, self.instance = client, controller, instance
        self.window, self.flush_interval = window, flush_interval
        self._burst, self._refill, self._max = burst, refill_seconds, max_series
        self._clock = clock
        self._series: OrderedDict[tuple[str, ...], _Series] = OrderedDict()
        self._buckets: OrderedDict[str, tuple[TokenBucket, float]] = OrderedDict()
        """regarding -> (its spam-filter bucket, when it was last used), least recently used first"""
        self._tasks: set[asyncio.Task[None]] = set()
        self._dropped = (metrics or MachineryMetrics()).events_dropped

    async def record(
        self,
        regarding: KubeObject,
        type_: EventType,
        reason: str,
        action: str,
        note: str,
        *,
        related: KubeObject | None = None,
    ) -> None:
        """Record that `action` happened to `regarding` (or was attempted) for `reason`."""
        ref = object_reference(regarding)
        key = (ref.get("uid") or f"{ref.get('namespace')}/{ref.get('name')}", ref.get("kind", ""),
               reason, action, type_, str(related and object_reference(related).get("uid")))  # fmt: skip
        now = self._clock()
        series = self._series.get(key)
        if series is not None and now - series.last_seen <= self.window:
            series.count += 1
            series.last_seen = now
            self._series.move_to_end(key)
            self._schedule_flush(series)
            return
        if not self._allow(str(key[0])):
            self._dropped.labels("spam").inc()
            return
        await self._create(key, ref, type_, reason, action, note[:MAX_NOTE], related, now)

    async def flush(self) -> None:
        """Write every pending series count now (on shutdown)."""
        for series in list(self._series.values()):
            if series.flush is not None:
                series.flush.cancel()
                series.flush = None
            if series.count != series.written:
                await self._write_series(series)
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def _allow(self, regarding: str) -> bool:
        now = self._clock()
        # a bucket unused for refill x burst seconds is full again: the same as a new one
        while self._buckets and now - next(iter(self._buckets.values()))[1] >= self._refill * self._burst:
            self._buckets.popitem(last=False)
        bucket = self._buckets.pop(regarding, (TokenBucket(1.0 / self._refill, self._burst), now))[0]
        self._buckets[regarding] = (bucket, now)
        if len(self._buckets) > self._max:
            self._buckets.popitem(last=False)
        return bucket.reserve() == 0.0

    async def _create(self, key: tuple[str, ...], ref: KubeObject, type_: EventType, reason: str,
                      action: str, note: str, related: KubeObject | None, now: float) -> None:  # fmt: skip
        namespace = ref.get("namespace") or "default"
        name = f"{ref.get('name', 'unknown')}.{time.time_ns():x}"
        event: KubeObject = {
            "apiVersion": EVENTS.api_version, "kind": "Event",
            "metadata": {"name": name, "namespace": namespace},
            "eventTime": micro_time(now), "reportingController": self.controller,
            "reportingInstance": self.instance, "action": action, "reason": reason, "note": note,
            "type": type_, "regarding": ref,
        }  # fmt: skip
        if related is not None:
            event["related"] = object_reference(related)
        # Registered before the create, so repeats while it is in flight join this series.
        series = self._replace_series(key, _Series(namespace, name, last_seen=now, last_write=now))
        try:
            await self.client.create(EVENTS, event, namespace)
        except (ApiException, OSError, TimeoutError) as e:
            self._dropped.labels("api_error").inc()
            log.warning("cannot record event %s on %s: %s", reason, ref.get("name"), e)
            if self._series.get(key) is series:
                self._replace_series(key, None)

    def _replace_series(self, key: tuple[str, ...], series: _Series | None) -> _Series | None:
        old = self._series.pop(key, None)
        if old is not None and old.flush is not None:
            old.flush.cancel()
        if series is not None:
            self._series[key] = series
        self._finish_series()
        while len(self._series) > self._max:
            _, evicted = self._series.popitem(last=False)
            if evicted.flush is not None:
                evicted.flush.cancel()
        return series

    def _finish_series(self) -> None:
        """Forget series not seen for a window and fully written (a repeat after the window starts a
        new Event anyway), as client-go's broadcaster finishes its series: their objects are often
        gone (a deleted namespace's), and the cache would otherwise hold them until max_series."""
        now = self._clock()
        while self._series:
            oldest = next(iter(self._series.values()))
            if (
                now - oldest.last_seen <= self.window
                or oldest.flush is not None
                or oldest.count != oldest.written
            ):
                return
            self._series.popitem(last=False)

    def _schedule_flush(self, series: _Series) -> None:
        if series.flush is not None:
            return
        delay = max(0.0, series.last_write + self.flush_interval - self._clock())
        series.flush = asyncio.get_running_loop().call_later(delay, self._spawn_write, series)

    def _spawn_write(self, series: _Series) -> None:
        series.flush = None
        task = asyncio.create_task(self._write_series(series))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _write_series(self, series: _Series) -> None:
        count, seen = series.count, series.last_seen
        patch = {"series": {"count": count, "lastObservedTime": micro_time(seen)}}
        try:
            await self.client.patch(EVENTS, series.namespace, series.name, patch)
        except (ApiException, OSError, TimeoutError) as e:
            self._dropped.labels("api_error").inc()
            log.warning("cannot update event series %s/%s: %s", series.namespace, series.name, e)
            return
        series.written, series.last_write = count, self._clock()
