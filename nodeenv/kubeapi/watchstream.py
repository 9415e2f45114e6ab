"""Watch: a chunked stream of newline-delimited `{"type": ..., "object": ...}` events.

Faithful: resourceVersion unset or "0" first sends the current objects as synthetic ADDED events;
resourceVersion N sends every change after N; a compacted N gets HTTP 200 and one ERROR event
carrying a 410 `Expired` Status (`too old resource version: N (floor)`), then the stream ends, as the
watch cache does; `allowWatchBookmarks=true` adds BOOKMARK events (object = the kind with only
metadata.resourceVersion) every `bookmark_interval`; `timeoutSeconds` ends the stream cleanly;
objects entering/leaving a label/field selector are ADDED/DELETED for that watch;
a resourceVersion the server has not reached is 504 `Too large resource version`;
`sendInitialEvents=true` (watch-list) sends the initial ADDED events followed by a BOOKMARK annotated
`k8s.io/initial-events-end: "true"`. Tables (`as=Table`, as `kubectl get -w` asks) wrap each object
in a one-row Table.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

from aiohttp import web

from nodeenv.kubeapi import audit, tables
from nodeenv.kubeapi.errors import ApiError, BadRequest
from nodeenv.kubeapi.kinds import Kind
from nodeenv.kubeapi.paging import exact_rv
from nodeenv.kubeapi.routing import RequestInfo
from nodeenv.kubeapi.state import ApiState
from nodeenv.kubeapi.store import Watch
from nodeenv.kubeapi.views import Views
from nodeenv.kubeapi.wire import encode, int_param, selector


class _Stream:
    def __init__(
        self, resp: web.StreamResponse, kind: Kind, as_table: bool, query: Any, views: Views
    ) -> None:
        self.resp, self.kind, self.as_table, self.query = resp, kind, as_table, query
        self.views = views

    async def send(self, type_: str, obj: dict[str, Any]) -> None:
        if type_ not in ("ERROR", "BOOKMARK"):
            obj = self.views.present(self.kind, obj)
        if self.as_table and type_ not in ("ERROR", "BOOKMARK"):
            obj = tables.table(self.kind, [obj], obj["metadata"].get("resourceVersion", ""), self.query)
        await self.resp.write(encode({"type": type_, "object": obj}))

    async def bookmark(self, rv: int, annotations: dict[str, str] | None = None) -> None:
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        if annotations:
            meta["annotations"] = annotations
        await self.send(
            "BOOKMARK", {"kind": self.kind.kind, "apiVersion": self.kind.api_version, "metadata": meta}
        )


def _since(q: Any) -> int | None:
    rv = q.get("resourceVersion")
    if rv in (None, "", "0"):
        return None
    try:
        return int(rv)
    except ValueError as e:
        raise BadRequest(f"invalid resource version: {rv}") from e


async def serve(request: web.Request, st: ApiState, info: RequestInfo, kind: Kind) -> web.StreamResponse:
    q = request.query
    sel = selector(q, kind, info.name)
    since = _since(q)
    timeout = int_param(q, "timeoutSeconds") or st.config.watch_timeout
    bookmarks = q.get("allowWatchBookmarks", "").lower() in ("1", "true")
    initial_end = q.get("sendInitialEvents", "").lower() == "true"
    ns = info.namespace or None
    if since is not None:
        exact_rv(st.store, str(since), None)  # 504 Too large resource version, before the stream starts
    if initial_end:
        since = None  # the initial events are the current state (NotOlderThan the given version)
    expired: ApiError | None = None
    try:
        w = st.store.watch(st.views.storage(kind), ns, sel, since)
    except ApiError as e:
        expired, w = e, None
    snapshot = st.store.list(st.views.storage(kind), ns, sel) if since is None and w else []
    snapshot_rv = st.store.rv
    resp = web.StreamResponse(headers={"Content-Type": "application/json", "Cache-Control": "no-cache"})
    resp.enable_chunked_encoding()
    await resp.prepare(request)
    audit.record(st, request, 200, "ResponseStarted")
    stream = _Stream(resp, kind, tables.wants_table(request.headers.get("Accept", "")), q, st.views)
    if w is None:
        assert expired is not None
        await stream.send("ERROR", expired.status())
        return resp
    try:
        for obj in snapshot:
            await stream.send("ADDED", obj)
        if initial_end:
            await stream.bookmark(snapshot_rv, {"k8s.io/initial-events-end": "true"})
        await _pump(stream, st, w, timeout, bookmarks)
    except (ConnectionResetError, asyncio.CancelledError):
        pass
    finally:
        st.store.unwatch(w)
    with contextlib.suppress(ConnectionResetError):
        await resp.write_eof()
    return resp


async def _pump(stream: _Stream, st: ApiState, w: Watch, timeout: float, bookmarks: bool) -> None:
    """Events until the deadline; a BOOKMARK every interval, idle or busy. Idle (queue empty) the
    bookmark carries the store's resourceVersion; busy, the version of the last event sent, so a
    client resuming from it never skips an event still queued."""
    deadline = time.monotonic() + timeout
    interval = st.config.bookmark_interval
    next_bookmark = time.monotonic() + interval
    last_sent = 0
    while True:
        now = time.monotonic()
        if now >= deadline:
            return
        if bookmarks and now >= next_bookmark:
            rv = st.store.rv if w.queue.empty() else last_sent
            if rv:
                await stream.bookmark(rv)
            next_bookmark = now + interval
        wait = min(deadline, next_bookmark) - now if bookmarks else deadline - now
        try:
            item = await asyncio.wait_for(w.queue.get(), max(0.0, wait))
        except TimeoutError:
            continue
        if item is None:
            return
        await stream.send(*item)
        last_sent = int(item[1]["metadata"]["resourceVersion"])
