"""Driver state that survives restarts: one JSON document, replaced atomically.

Writes go to a temp file in the same directory, are fsync'ed, renamed over the old
file and the directory is fsync'ed, so a crash leaves either the old or the new state.
`update()` returns only once its change is durable. Concurrent updates share one write
(group commit): whoever flushes writes the newest document, covering every change made
before it, so 8 parallel CreateVolume calls cost far fewer than 8 fsync pairs.
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
    """A JSON document of named tables {table: {key: record}}; records are replaced, never mutated."""

    def __init__(self, path: Path, tables: tuple[str, ...], *, follow: bool = False) -> None:
        """follow=True: a read-only view of a file another process writes (reloaded when replaced)."""
        self._path = path
        self._tables = tables
        self._follow = follow
        self._seen: tuple[int, int] | None = None
        self._lock = threading.Lock()  # guards _doc and _version
        self._flush_lock = threading.Lock()  # one writer at a time
        self._doc: Document = self._load()
        self._version = 0
        self._durable = 0
        self._lost = 0  # changes up to this version were dropped by a failed write

    def _load(self) -> Document:
        try:
            with self._path.open("rb") as f:
                st = os.fstat(f.fileno())
                raw = json.loads(f.read())
            self._seen = (st.st_ino, st.st_mtime_ns)
        except FileNotFoundError:
            raw = {}
        return {t: dict(raw.get(t, {})) for t in self._tables}

    def read(self, fn: Callable[[Document], T]) -> T:
        with self._lock:
            if self._follow:
                self._refresh()
            return fn(self._doc)

    def _refresh(self) -> None:
        try:
            st = os.stat(self._path)
        except FileNotFoundError:
            return
        if (st.st_ino, st.st_mtime_ns) != self._seen:
            self._doc = self._load()

    def update(self, fn: Callable[[Document], T]) -> T:
        """Apply `fn` to a copy of the document; on success it becomes current and is made durable."""
        if self._follow:
            raise PermissionError(f"{self._path} is written by another process")
        with self._lock:
            doc = {t: dict(rows) for t, rows in self._doc.items()}
            result = fn(doc)
            self._doc = doc
            self._version += 1
            mine = self._version
        self._flush(mine)
        return result

    def _flush(self, version: int) -> None:
        with self._flush_lock:
            if self._durable >= version:
                return  # another thread's write already carried this change
            if self._lost >= version:
                raise OSError(f"writing {self._path} failed; the change was not saved")
            with self._lock:
                latest = self._version
                data = json.dumps(self._doc, separators=(",", ":"), sort_keys=True).encode()
            try:
                self._write(data)
            except OSError:
                with self._lock:  # the disk refused: fall back to what is durable
                    self._doc = self._load()
                    self._lost = self._version
                raise
            self._durable = latest

    def _write(self, data: bytes) -> None:
        tmp = self._path.with_name(f".{self._path.name}.{os.getpid()}.tmp")
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
