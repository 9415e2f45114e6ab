"""Per-key operation locks: a second in-flight call on the same volume gets ABORTED, as CSI allows."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from csi.errors import OperationPending


class KeyedLocks:
    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._held: set[str] = set()

    @contextmanager
    def hold(self, *keys: str) -> Iterator[None]:
        """Hold every key for the duration, or raise OperationPending if one is busy."""
        wanted = {k for k in keys if k}
        with self._mutex:
            busy = wanted & self._held
            if busy:
                raise OperationPending(f"an operation on {', '.join(sorted(busy))} is already in progress")
            self._held |= wanted
        try:
            yield
        finally:
            with self._mutex:
                self._held -= wanted
