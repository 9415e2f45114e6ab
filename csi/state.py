"""Driver state that survives restarts: one JSON document, replaced atomically.

Writes go to a temp file in the same directory, are fsync'ed, renamed over the old
file and the directory is fsync'ed, so a crash leaves either the old or the new state.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")
Document = dict[str, dict[str, dict[str, Any]]]


class StateFile:
    """A JSON document of named tables {table: {key: record}} guarded by one lock."""

    def __init__(self, path: Path, tables: tuple[str, ...]) -> None:
        self._path = path
        self._tables = tables
        self._lock = threading.RLock()
        self._doc: Document = self._load()

    def _load(self) -> Document:
        try:
            raw = json.loads(self._path.read_text())
        except FileNotFoundError:
            raw = {}
        return {t: dict(raw.get(t, {})) for t in self._tables}

    def read(self, fn: Callable[[Document], T]) -> T:
        with self._lock:
            return fn(self._doc)

    def update(self, fn: Callable[[Document], T]) -> T:
        """Apply `fn` to a copy of the document and persist it; the copy becomes current."""
        with self._lock:
            doc = {t: dict(rows) for t, rows in self._doc.items()}
            result = fn(doc)
            self._write(doc)
            self._doc = doc
            return result

    def _write(self, doc: Document) -> None:
        tmp = self._path.with_name(f".{self._path.name}.{os.getpid()}.tmp")
        data = json.dumps(doc, indent=1, sort_keys=True).encode()
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self._path)
        dfd = os.open(self._path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
