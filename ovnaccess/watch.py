"""Row updates from an IDL's thread, matched against callers waiting for them by (table, name).

Waiting for ovn-controller (`Interface.external_ids:ovn-installed`) or ovn-northd is a wait on a
`threading.Event` that the update itself sets: we watch the database, never poll it.
Expectations are registered *before* the write that triggers them, so no update is missed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

RowHook = Callable[[str, Any], None]
"""Called on the IDL thread with ("create"|"update"|"delete", row) for every change of a table."""


class Expectation:
    def __init__(self, predicate: Callable[[Any], Any]) -> None:
        self.predicate, self.event, self.value = predicate, threading.Event(), None
        self.fired_at = 0.0
        """time.perf_counter() when the matching update arrived."""

    def wait(self, timeout: float) -> Any:
        """The predicate's first truthy value, or None on timeout."""
        return self.value if self.event.wait(timeout) else None


class Watcher:
    """Row updates from the IDL thread, matched against waiting callers by (table, name)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waits: dict[tuple[str, str], list[Expectation]] = {}

    @contextmanager
    def expect(self, table: str, name: str, predicate: Callable[[Any], Any]) -> Iterator[Expectation]:
        exp, key = Expectation(predicate), (table, name)
        with self._lock:
            self._waits.setdefault(key, []).append(exp)
        try:
            yield exp
        finally:
            with self._lock:
                waits = self._waits.get(key, [])
                if exp in waits:
                    waits.remove(exp)
                if not waits:
                    self._waits.pop(key, None)

    def notify(self, table: str, row: Any) -> None:
        key = (table, str(getattr(row, "name", "")))
        with self._lock:
            waits = list(self._waits.get(key, ()))
        for exp in waits:
            if exp.event.is_set():
                continue
            try:
                value = exp.predicate(row)
            except (AttributeError, KeyError, TypeError):
                continue
            if value:
                exp.value, exp.fired_at = value, time.perf_counter()
                exp.event.set()
