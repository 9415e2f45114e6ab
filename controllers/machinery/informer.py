"""List+watch informer of one Kind, with a local cache (client-go's reflector + shared informer).

It lists (paginated with `limit`/`continue`), then watches from the list's resourceVersion with
`allowWatchBookmarks=true`, tracking the latest resourceVersion from events and bookmarks. The
watch is reopened from that version when the server ends it (its timeout) or the connection
breaks (exponential backoff with jitter); a 410 Gone (as an HTTP error or an ERROR event) means
the version was compacted, so it relists and delivers only the difference: adds for new objects,
updates for changed ones, deletes for objects gone meanwhile, nothing for the unchanged.

Handlers are plain callables run on the event loop; keep them quick (enqueue a key). An exception
in a handler is logged and never stops the informer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass

import aiohttp
from kubernetes_asyncio.client import ApiClient
from kubernetes_asyncio.client.exceptions import ApiException

from controllers.machinery.kinds import Kind, object_key
from controllers.machinery.metrics import MachineryMetrics
from controllers.machinery.ratelimit import Backoff
from controllers.machinery.rest import KubeClient
from controllers.machinery.store import IndexFunc, KubeObject, Store

log = logging.getLogger(__name__)

OnAdd = Callable[[KubeObject], None]
OnUpdate = Callable[[KubeObject, KubeObject], None]
OnDelete = Callable[[KubeObject], None]

RETRIABLE = (ApiException, aiohttp.ClientError, OSError, TimeoutError, ValueError)


class WatchExpired(Exception):
    """410 Gone: the resourceVersion we watch from was compacted; relist."""


@dataclass(frozen=True, slots=True)
class Handler:
    on_add: OnAdd | None = None
    on_update: OnUpdate | None = None
    on_delete: OnDelete | None = None


def resource_version(obj: KubeObject) -> str:
    return str(obj.get("metadata", {}).get("resourceVersion", ""))


class Informer:
    """Keeps `store` equal to the server's objects of `kind` and tells handlers what changed.

    `client` is the kubernetes_asyncio ApiClient (or a KubeClient around it). `resync_period`
    (seconds) re-delivers every cached object as an update (old is new) so level-triggered
    controllers re-check everything now and then; None disables it.
    """

    def __init__(
        self,
        client: ApiClient | KubeClient,
        kind: Kind,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        resync_period: float | None = None,
        page_size: int = 500,
        watch_timeout: int = 300,
        metrics: MachineryMetrics | None = None,
        backoff: Backoff | None = None,
    ) -> None:
        self.client = client if isinstance(client, KubeClient) else KubeClient(client)
        self.kind, self.namespace = kind, namespace
        self.label_selector, self.field_selector = label_selector, field_selector
        self.resync_period, self.page_size, self.watch_timeout = resync_period, page_size, watch_timeout
        self.store = Store()
        self.resource_version = ""
        self._handlers: list[Handler] = []
        self._synced = asyncio.Event()
        self._backoff = backoff or Backoff()
        self._task: asyncio.Task[None] | None = None
        metrics = metrics or MachineryMetrics()
        self._events = metrics.informer_events
        self._relists = metrics.informer_relists.labels(kind.plural)
        self._watch_errors = metrics.informer_watch_errors.labels(kind.plural)

    @property
    def has_synced(self) -> bool:
        """True once the first list is in the store."""
        return self._synced.is_set()

    @property
    def crashed(self) -> bool:
        """The background task ended (it only ends on a bug: errors are retried)."""
        return self._task is not None and self._task.done() and not self._task.cancelled()

    def add_handler(
        self,
        on_add: OnAdd | None = None,
        on_update: OnUpdate | None = None,
        on_delete: OnDelete | None = None,
    ) -> None:
        """Register callbacks. Added after the first sync, the handler gets an add per cached object."""
        handler = Handler(on_add, on_update, on_delete)
        self._handlers.append(handler)
        if self.has_synced and on_add is not None:
            for obj in self.store.list():
                self._call(on_add, obj)

    def add_index(self, name: str, func: IndexFunc) -> None:
        """A secondary index on the store (see Store.add_index)."""
        self.store.add_index(name, func)

    async def wait_synced(self) -> None:
        """Until the first list has been stored and delivered."""
        await self._synced.wait()

    def start(self) -> asyncio.Task[None]:
        """Run in a background task (idempotent)."""
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self.run(), name=f"informer-{self.kind.plural}")
        return self._task

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def run(self) -> None:
        """List, then watch forever (until cancelled), relisting on 410 and retrying on errors."""
        resync = asyncio.create_task(self._resync_loop()) if self.resync_period else None
        try:
            await self._list_and_watch()
        finally:
            if resync is not None:
                resync.cancel()

    async def _list_and_watch(self) -> None:
        need_list = not (self.has_synced and self.resource_version)  # restarted: resume the watch
        while True:
            try:
                if need_list:
                    await self.relist()
                    need_list = False
                started = time.monotonic()
                delivered = await self._watch()
                if delivered or time.monotonic() - started > 1.0:
                    self._backoff.reset()
                    continue  # the server ended a healthy watch (its timeout): reopen at once
                delay = self._backoff.next()
            except WatchExpired:
                log.info("%s: resourceVersion %s expired; relisting", self.kind.plural, self.resource_version)
                need_list = True
                continue
            except RETRIABLE as e:
                self._watch_errors.inc()
                if isinstance(e, ApiException):
                    need_list = True  # a refused watch (403, 500, ...): start again from a list
                delay = self._backoff.next()
                log.warning("%s: %s failed (%s); retrying in %.1fs", self.kind.plural,
                            "list" if need_list else "watch", _describe(e), delay)  # fmt: skip
            await asyncio.sleep(delay)

    async def relist(self) -> None:
        """List every page, replace the store and deliver the difference to the handlers."""
        items: dict[str, KubeObject] = {}
        token: str | None = None
        while True:
            page = await self.client.list(self.kind, self.namespace, label_selector=self.label_selector,
                                          field_selector=self.field_selector, limit=self.page_size,
                                          continue_=token)  # fmt: skip
            for obj in page.get("items") or []:
                obj.setdefault("kind", self.kind.kind)
                obj.setdefault("apiVersion", self.kind.api_version)
                items[object_key(obj)] = obj
            token = page.get("metadata", {}).get("continue") or None
            if token is None:
                break
        self._relists.inc()
        self._replace(items)
        self.resource_version = str(page.get("metadata", {}).get("resourceVersion", ""))
        self._synced.set()

    def _replace(self, items: dict[str, KubeObject]) -> None:
        for key in self.store:
            if key not in items:
                gone = self.store.remove(key)
                if gone is not None:
                    self._deliver_delete(gone)
        for obj in items.values():
            old = self.store.upsert(obj)
            if old is None:
                self._deliver_add(obj)
            elif resource_version(old) != resource_version(obj):
                self._deliver_update(old, obj)

    async def _watch(self) -> int:
        """One watch connection; returns how many events it delivered when the server ends it."""
        delivered = 0
        try:
            async for event in self.client.watch(self.kind, self.namespace,
                                                 resource_version=self.resource_version,
                                                 label_selector=self.label_selector,
                                                 field_selector=self.field_selector,
                                                 timeout_seconds=self._watch_seconds()):  # fmt: skip
                self._apply(event)
                delivered += 1
        except ApiException as e:
            if e.status == 410:
                raise WatchExpired() from e
            raise
        return delivered

    def _watch_seconds(self) -> int:
        """The server-side watch timeout, stretched by up to 100 % (as client-go's reflector does) so
        the informers of many replicas do not all reconnect at the same moment."""
        return int(self.watch_timeout * (1.0 + random.random()))

    def _apply(self, event: KubeObject) -> None:
        kind, obj = event.get("type"), event.get("object") or {}
        self._events.labels(self.kind.plural, str(kind)).inc()
        if kind == "ERROR":
            code = int(obj.get("code", 500))
            if code == 410:
                raise WatchExpired()
            raise ApiException(status=code, reason=f"{obj.get('reason')}: {obj.get('message')}")
        if kind not in ("ADDED", "MODIFIED", "DELETED", "BOOKMARK"):
            raise ValueError(f"unknown watch event type {kind!r}")
        if kind != "BOOKMARK":
            obj.setdefault("kind", self.kind.kind)
            obj.setdefault("apiVersion", self.kind.api_version)
            if kind == "DELETED":
                if self.store.remove(object_key(obj)) is not None:
                    self._deliver_delete(obj)
            else:
                old = self.store.upsert(obj)
                if old is None:
                    self._deliver_add(obj)
                else:
                    self._deliver_update(old, obj)
        self.resource_version = resource_version(obj) or self.resource_version

    async def _resync_loop(self) -> None:
        assert self.resync_period is not None
        await self.wait_synced()
        while True:
            await asyncio.sleep(self.resync_period)
            for obj in self.store.list():
                self._deliver_update(obj, obj)

    def _deliver_add(self, obj: KubeObject) -> None:
        for h in self._handlers:
            if h.on_add is not None:
                self._call(h.on_add, obj)

    def _deliver_update(self, old: KubeObject, new: KubeObject) -> None:
        for h in self._handlers:
            if h.on_update is not None:
                self._call(h.on_update, old, new)

    def _deliver_delete(self, obj: KubeObject) -> None:
        for h in self._handlers:
            if h.on_delete is not None:
                self._call(h.on_delete, obj)

    def _call(self, fn: Callable[..., None], *args: KubeObject) -> None:
        try:
            fn(*args)
        except Exception:
            log.exception("%s: event handler %r raised", self.kind.plural, fn)


def _describe(e: BaseException) -> str:
    if isinstance(e, ApiException):
        return f"HTTP {e.status} {e.reason}"
    return f"{type(e).__name__}: {e}"
