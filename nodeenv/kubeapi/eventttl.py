"""kube-apiserver's --event-ttl (default 1h): each Event is stored with an etcd lease of that TTL,
renewed by every write, so an Event not written for an hour is deleted (watchers see DELETED).
Events of both groups are one storage (core/v1 Event, views.py).
Simplified: expired Events are removed on the double's next write (a cluster writes every second),
checked at most every tenth of the TTL (10 s at most), not at the very second their lease ends.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from nodeenv.kubeapi.kinds import Kind
from nodeenv.kubeapi.objects import Obj

if TYPE_CHECKING:
    from nodeenv.kubeapi.crud import Resources


def _is_event(kind: Kind) -> bool:
    return kind.group == "" and kind.kind == "Event"


class EventLeases:
    def __init__(self, ttl: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl, self._clock = ttl, clock
        self._written: dict[tuple[str, str], float] = {}
        self._next_sweep = 0.0

    def on_stored(self, resources: Resources, kind: Kind, obj: Obj) -> None:
        if _is_event(kind):
            meta = obj["metadata"]
            self._written[(meta.get("namespace", ""), meta["name"])] = self._clock()
        self.sweep(resources)

    def on_removed(self, kind: Kind, obj: Obj) -> None:
        if _is_event(kind):
            self._written.pop((obj["metadata"].get("namespace", ""), obj["metadata"]["name"]), None)

    def sweep(self, resources: Resources) -> None:
        now = self._clock()
        if self.ttl <= 0 or now < self._next_sweep:
            return
        self._next_sweep = now + min(self.ttl / 10, 10.0)
        kind = resources.registry.lookup("", "v1", "events")
        assert kind is not None
        for (ns, name), written in list(self._written.items()):
            if now - written >= self.ttl:
                del self._written[(ns, name)]
                if (obj := resources.store.get(kind, ns, name)) is not None:
                    resources.store.remove(kind, obj)
