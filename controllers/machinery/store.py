"""The informer's cache: objects keyed "namespace/name", with secondary indexes.

All access is from one asyncio event loop, and no method awaits, so every call is atomic with
respect to the other tasks (the asyncio equivalent of client-go's thread-safe store).
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from controllers.machinery.kinds import object_key

KubeObject = dict[str, Any]
"""An API object exactly as the server serves it (parsed JSON)."""

IndexFunc = Callable[[KubeObject], Iterable[str]]
"""Returns the index values of an object (none, one or several)."""


def by_namespace(obj: KubeObject) -> list[str]:
    """Index function: the object's namespace (client-go's cache.MetaNamespaceIndexFunc)."""
    namespace = obj.get("metadata", {}).get("namespace")
    return [namespace] if namespace else []


def by_label(label: str) -> IndexFunc:
    """Index function factory: the value of one label, e.g. `kubernetes.io/service-name`."""

    def index(obj: KubeObject) -> list[str]:
        value = (obj.get("metadata", {}).get("labels") or {}).get(label)
        return [value] if isinstance(value, str) else []

    return index


class Store:
    """Objects by key plus named indexes (value → keys). Objects are shared: never mutate them."""

    def __init__(self) -> None:
        self.generation = 0
        """Counts the writes (upsert, remove): a caller that saw the same generation sees the same objects."""
        self._items: dict[str, KubeObject] = {}
        self._index_funcs: dict[str, IndexFunc] = {}
        self._indexes: dict[str, dict[str, set[str]]] = {}

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._items))

    def get(self, namespace: str | None, name: str) -> KubeObject | None:
        """The cached object, or None. `namespace` is None for cluster-scoped kinds."""
        return self._items.get(f"{namespace}/{name}" if namespace else name)

    def get_by_key(self, key: str) -> KubeObject | None:
        return self._items.get(key)

    def list(self, namespace: str | None = None) -> list[KubeObject]:
        """Every cached object, or those of one namespace (through the index when there is one)."""
        if namespace is None:
            return list(self._items.values())
        if "namespace" in self._indexes:
            return self.by_index("namespace", namespace)
        return [o for o in self._items.values() if o.get("metadata", {}).get("namespace") == namespace]

    def keys(self) -> builtins.list[str]:
        return list(self._items)

    def add_index(self, name: str, func: IndexFunc) -> None:
        """Register an index; existing objects are indexed at once. Re-registering a name is an error."""
        if name in self._index_funcs:
            raise ValueError(f"index {name!r} already exists")
        self._index_funcs[name] = func
        self._indexes[name] = {}
        for key, obj in self._items.items():
            self._index_one(name, key, obj)

    def by_index(self, name: str, value: str) -> builtins.list[KubeObject]:
        """Objects whose index function returned `value` (KeyError for an unknown index)."""
        keys = self._indexes[name].get(value, ())
        return [self._items[k] for k in sorted(keys)]

    def index_keys(self, name: str, value: str) -> builtins.list[str]:
        return sorted(self._indexes[name].get(value, ()))

    def upsert(self, obj: KubeObject) -> KubeObject | None:
        """Add or replace an object; returns the one it replaced."""
        key = object_key(obj)
        self.generation += 1
        old = self._items.get(key)
        if old is not None:
            self._unindex(key, old)
        self._items[key] = obj
        for name in self._index_funcs:
            self._index_one(name, key, obj)
        return old

    def remove(self, key: str) -> KubeObject | None:
        """Drop an object; returns it (None if it was not there)."""
        old = self._items.pop(key, None)
        if old is not None:
            self.generation += 1
            self._unindex(key, old)
        return old

    def _index_one(self, name: str, key: str, obj: KubeObject) -> None:
        for value in self._index_funcs[name](obj):
            self._indexes[name].setdefault(value, set()).add(key)

    def _unindex(self, key: str, obj: KubeObject) -> None:
        for name, func in self._index_funcs.items():
            index = self._indexes[name]
            for value in func(obj):
                keys = index.get(value)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del index[value]
