"""Objects, the one resourceVersion counter, the event history and watch fan-out.

Like etcd behind kube-apiserver: every write of any kind takes the next resourceVersion, and a
bounded history of events lets a watch start from any version not older than the history's
floor; older ones get 410 Expired (`compact()` moves the floor to now, as etcd compaction does).
Objects are indexed kind -> namespace -> name. Stored dicts are never mutated: writers store a
fresh dict, so readers and watch queues share them without copying. One event is built per write
and handed to the watches of that kind only (O(watches of the kind), not O(objects)).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from nodeenv.kubeapi.durable import Journal, Objects
from nodeenv.kubeapi.errors import Expired
from nodeenv.kubeapi.kinds import Kind
from nodeenv.kubeapi.selectors import Selector

Obj = dict[str, Any]
ObjList = list[Obj]  # `list` is shadowed inside Store by its method


@dataclass(frozen=True, slots=True)
class Event:
    type: str  # ADDED, MODIFIED, DELETED
    rv: int
    kind: Kind
    obj: Obj
    old: Obj | None  # the previous state, for selector transitions


def namespace_of(obj: Obj) -> str:
    return str(obj["metadata"].get("namespace") or "")


@dataclass(eq=False)
class Watch:
    """One watch connection's subscription. The queue carries (type, object); None ends it."""

    kind: Kind
    namespace: str | None
    selector: Selector
    queue: asyncio.Queue[tuple[str, Obj] | None] = field(default_factory=asyncio.Queue)
    closed: bool = False

    def offer(self, ev: Event) -> None:
        if self.closed or (self.namespace and namespace_of(ev.obj) != self.namespace):
            return
        new_ok = self.selector.matches(ev.obj)
        old_ok = ev.old is not None and self.selector.matches(ev.old)
        if ev.type == "MODIFIED" and not self.selector.everything and new_ok != old_ok:
            # an object entering or leaving the selection is ADDED/DELETED for this watcher
            self.queue.put_nowait(("ADDED" if new_ok else "DELETED", ev.obj))
        elif new_ok:
            self.queue.put_nowait((ev.type, ev.obj))

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.queue.put_nowait(None)


class Store:
    def __init__(
        self,
        history_limit: int = 100_000,
        compaction_interval: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.rv = 0
        self._objs: dict[str, dict[str, dict[str, Obj]]] = {}
        self._history: deque[Event] = deque()
        self._history_limit = history_limit
        self._interval, self._clock = compaction_interval, clock
        self._compacted_at, self._mark = clock(), 0
        """kube-apiserver compacts etcd every 5 minutes up to the revision it saw at the previous
        compaction, so history spans one to two intervals; without it the double kept its last
        100,000 events (the soak saw it grow by ~65 MB/h)."""
        self.floor = 0  # a watch may start from any rv >= floor
        self._watches: dict[str, set[Watch]] = {}
        self.journal: Journal | None = None
        """Where every write is made durable (--data-dir); None: in memory only."""

    def load(self, objs: Objects, rv: int) -> None:
        """Start from a state read back from disk: its objects, the counter at `rv`, no history (a
        watch or continue token from before gets 410 Gone and its client relists)."""
        self._objs, self.rv, self.floor = objs, rv, rv
        self._history.clear()
        self._mark = rv

    def keys(self) -> list[str]:
        """The storage keys that hold objects."""
        return [k for k, by_ns in self._objs.items() if by_ns]

    def items_of(self, key: str) -> Iterator[Obj]:
        for objs in self._objs.get(key, {}).values():
            yield from objs.values()

    # reads
    def get(self, kind: Kind, namespace: str, name: str) -> Obj | None:
        return self._objs.get(kind.key, {}).get(namespace, {}).get(name)

    def items(self, kind: Kind, namespace: str | None = None) -> Iterator[Obj]:
        """Unsorted; namespace None means all namespaces."""
        by_ns = self._objs.get(kind.key, {})
        if namespace is not None:
            yield from by_ns.get(namespace, {}).values()
            return
        for objs in by_ns.values():
            yield from objs.values()

    def size(self) -> int:
        return sum(len(objs) for by_ns in self._objs.values() for objs in by_ns.values())

    def watch_count(self) -> int:
        return sum(len(ws) for ws in self._watches.values())

    def count(self, kind: Kind, namespace: str) -> int:
        return len(self._objs.get(kind.key, {}).get(namespace, {}))

    def list(self, kind: Kind, namespace: str | None, selector: Selector) -> list[Obj]:
        """Sorted by (namespace, name), as etcd returns keys."""
        name = selector.exact_name()
        if name is not None and namespace is not None:
            one = self.get(kind, namespace, name)
            found = [one] if one is not None and selector.matches(one) else []
            return found
        objs = (o for o in self.items(kind, namespace) if selector.matches(o))
        return sorted(objs, key=lambda o: (namespace_of(o), o["metadata"]["name"]))

    def list_at(self, kind: Kind, namespace: str | None, selector: Selector, rv: int) -> ObjList:
        """The list as it was at `rv` (the current state with the newer events undone); 410 if compacted."""
        self.check_rv(rv)
        state = {(namespace_of(o), o["metadata"]["name"]): o for o in self.items(kind, namespace)}
        for ev in reversed(self._history):
            if ev.rv <= rv:
                break
            key = (namespace_of(ev.obj), ev.obj["metadata"]["name"])
            if ev.kind.key != kind.key or (namespace is not None and key[0] != namespace):
                continue
            if ev.type == "ADDED" or ev.old is None:
                state.pop(key, None)
            else:
                state[key] = ev.old
        return sorted(
            (o for o in state.values() if selector.matches(o)),
            key=lambda o: (namespace_of(o), o["metadata"]["name"]),
        )

    # writes: `obj` is a fresh dict owned by the store from now on
    def put(self, kind: Kind, obj: Obj, old: Obj | None) -> Obj:
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        meta = obj["metadata"]
        self._objs.setdefault(kind.key, {}).setdefault(namespace_of(obj), {})[meta["name"]] = obj
        if self.journal is not None:
            self.journal.record(self.rv, kind.key, namespace_of(obj), meta["name"], obj, self._objs)
        self._emit(Event("ADDED" if old is None else "MODIFIED", self.rv, kind, obj, old))
        return obj

    def remove(self, kind: Kind, obj: Obj) -> Obj:
        """Deletes the object; the DELETED event carries its last state with a new resourceVersion."""
        ns, name = namespace_of(obj), obj["metadata"]["name"]
        by_ns = self._objs.get(kind.key, {})
        old = by_ns.get(ns, {}).pop(name, None)
        if ns in by_ns and not by_ns[ns]:
            del by_ns[ns]
        self.rv += 1
        if self.journal is not None:
            self.journal.record(self.rv, kind.key, ns, name, None, self._objs)
        gone = {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(self.rv)}}
        self._emit(Event("DELETED", self.rv, kind, gone, old))
        return gone

    def _emit(self, ev: Event) -> None:
        self._history.append(ev)
        while len(self._history) > self._history_limit:
            self.floor = self._history.popleft().rv
        now = self._clock()
        if self._interval > 0 and now - self._compacted_at >= self._interval:
            while self._history and self._history[0].rv <= self._mark:
                self.floor = self._history.popleft().rv
            self._compacted_at, self._mark = now, self.rv
        for w in self._watches.get(ev.kind.key, ()):
            w.offer(ev)

    # watch
    def check_rv(self, rv: int) -> None:
        if rv < self.floor:
            raise Expired(f"too old resource version: {rv} ({self.floor})")

    def watch(self, kind: Kind, namespace: str | None, selector: Selector, since: int | None) -> Watch:
        """Subscribe; with `since`, replay the kind's events newer than it first (410 if compacted).
        Without `since` the caller sends the current state itself (synthetic ADDED)."""
        w = Watch(kind, namespace, selector)
        if since is not None:
            self.check_rv(since)
            newer: list[Event] = []
            for ev in reversed(self._history):
                if ev.rv <= since:
                    break
                if ev.kind.key == kind.key:
                    newer.append(ev)
            for ev in reversed(newer):
                w.offer(ev)
        self._watches.setdefault(kind.key, set()).add(w)
        return w

    def unwatch(self, w: Watch) -> None:
        self._watches.get(w.kind.key, set()).discard(w)

    def close_watches(self, kind: Kind) -> None:
        """End the watches of one kind (its CRD is gone)."""
        for w in self._watches.pop(kind.key, set()):
            w.close()

    def drop_watches(self) -> int:
        """Close every open watch server-side (clients see the stream end)."""
        n = 0
        for ws in self._watches.values():
            for w in list(ws):
                w.close()
                n += 1
            ws.clear()
        return n

    def compact(self) -> int:
        """Forget all history: a watch or continue token from an older resourceVersion gets 410."""
        self._history.clear()
        self.floor = self.rv
        return self.rv
