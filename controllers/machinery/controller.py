"""N workers reconciling keys from a WorkQueue (client-go's controller loop).

`reconcile(key)` is level-triggered: it reads the current state from the informers' stores and
makes the world match; it may return a number of seconds to be called again after (periodic
checks), or None. An exception is logged, counted, reported as a Warning Event on the object
(when the controller has an EventRecorder and can look the key up) and the key is retried with
its exponential backoff; success resets the backoff. A 409 Conflict is the normal outcome of
optimistic concurrency: it is retried the same way and logged without a traceback.

The queue lives as long as the controller, so a follower's informers keep filling it (each key
once); `start()` (on becoming leader) runs the workers over everything queued meanwhile, and
`stop()` stops them: gracefully (in-flight reconciles finish) or at once (they are cancelled and
their keys queued again).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from kubernetes_asyncio.client.exceptions import ApiException

from controllers.machinery.events import EventRecorder
from controllers.machinery.kinds import object_key
from controllers.machinery.metrics import MachineryMetrics
from controllers.machinery.store import KubeObject
from controllers.machinery.workqueue import WorkQueue

log = logging.getLogger(__name__)

Reconcile = Callable[[str], Awaitable[float | None]]
Lookup = Callable[[str], KubeObject | None]


class ReconcileError(Exception):
    """A failure worth telling the object's owner: recorded as a Warning Event with this reason."""

    def __init__(self, reason: str, note: str, *, regarding: KubeObject | None = None) -> None:
        super().__init__(note)
        self.reason, self.note, self.regarding = reason, note, regarding


class Controller:
    def __init__(
        self,
        name: str,
        reconcile: Reconcile,
        *,
        workers: int = 2,
        queue: WorkQueue | None = None,
        metrics: MachineryMetrics | None = None,
        events: EventRecorder | None = None,
        lookup: Lookup | None = None,
    ) -> None:
        """`lookup(key)` (e.g. an informer's `store.get_by_key`) finds the object an error Event is
        about; a ReconcileError may name it itself."""
        self.name, self.reconcile, self.workers = name, reconcile, workers
        self.metrics = metrics or MachineryMetrics()
        self.queue = queue or WorkQueue(name, metrics=self.metrics)
        self.events, self.lookup = events, lookup
        self._duration = self.metrics.reconcile_duration.labels(name)
        self._errors = self.metrics.reconcile_errors.labels(name)
        self._tasks: list[asyncio.Task[None]] = []
        self._busy: dict[int, str] = {}
        self._stopping = False

    @property
    def running(self) -> bool:
        return bool(self._tasks)

    def enqueue(self, key: str) -> None:
        self.queue.add(key)

    def enqueue_object(self, obj: KubeObject) -> None:
        """Handler-shaped: queue the object's own "namespace/name"."""
        self.queue.add(object_key(obj))

    def start(self) -> None:
        """Start the workers (idempotent)."""
        if self._tasks:
            return
        self._stopping = False
        self._tasks = [
            asyncio.create_task(self._worker(i), name=f"{self.name}-worker-{i}") for i in range(self.workers)
        ]
        log.info("controller %s started %d workers", self.name, self.workers)

    async def stop(self, *, graceful: bool = True) -> None:
        """Stop the workers. Graceful: in-flight reconciles finish; else they are cancelled at once."""
        self._stopping = True
        tasks, self._tasks = self._tasks, []
        for i, task in enumerate(tasks):
            if not graceful or i not in self._busy:
                task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        log.info("controller %s stopped (%s)", self.name, "graceful" if graceful else "cancelled")

    def shutdown(self) -> None:
        """Final: the queue accepts nothing more (after stop)."""
        self.queue.shutdown()

    async def _worker(self, index: int) -> None:
        while not self._stopping:
            key = await self.queue.get()
            if key is None:
                return
            self._busy[index] = key
            try:
                await self._process(key)
            except asyncio.CancelledError:
                self.queue.done(key)
                self.queue.add(key)  # interrupted: whoever leads next reconciles it
                raise
            finally:
                self._busy.pop(index, None)
            self.queue.done(key)

    async def _process(self, key: str) -> None:
        started = time.monotonic()
        try:
            after = await self.reconcile(key)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            self._errors.inc()
            self._log_failure(key, e)
            await self._report(key, e)
            self.queue.add_rate_limited(key)
        else:
            self.queue.forget(key)
            if after is not None:
                self.queue.add_after(key, after)
        finally:
            self._duration.observe(time.monotonic() - started)

    def _log_failure(self, key: str, e: Exception) -> None:
        retries = self.queue.num_requeues(key)
        if isinstance(e, ApiException) and e.status == 409:
            log.info("%s: %s: conflict, retrying (%d)", self.name, key, retries, extra={"key": key})
        elif isinstance(e, ReconcileError):
            log.warning("%s: %s: %s: %s", self.name, key, e.reason, e.note, extra={"key": key})
        else:
            log.error("%s: reconcile of %s failed (retry %d)", self.name, key, retries, exc_info=e,
                      extra={"key": key})  # fmt: skip

    async def _report(self, key: str, e: Exception) -> None:
        if self.events is None or (isinstance(e, ApiException) and e.status == 409):
            return
        regarding = e.regarding if isinstance(e, ReconcileError) else None
        if regarding is None and self.lookup is not None:
            regarding = self.lookup(key)
        if regarding is None:
            return
        reason = e.reason if isinstance(e, ReconcileError) else "ReconcileFailed"
        note = e.note if isinstance(e, ReconcileError) else f"{type(e).__name__}: {e}"
        await self.events.record(regarding, "Warning", reason, "Reconcile", note)
