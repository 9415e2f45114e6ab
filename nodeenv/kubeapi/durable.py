"""The double's objects on disk (`--data-dir`), as k3s keeps the API's in kine/sqlite, so the API
comes back with them after a restart or a power loss.

- Every write (put or delete) is appended to `journal.jsonl` as one JSON line (resourceVersion,
  storage key, namespace, name, the object or null) and fsynced before the store returns, so a
  write the API answered survives the power going.
- Every `snapshot_every` writes the whole state is written to `snapshot.json` (a temporary file,
  fsynced, renamed over the old one, the directory fsynced: a crash leaves the old or the new
  snapshot, never half of one) and the journal starts anew after it.
- At start `load` reads the snapshot and replays the journal; a torn last line (the power went in
  the middle of an append, before the write was answered) is dropped. The resourceVersion counter
  resumes at the highest version seen, so versions keep growing across restarts.
- The files are 0600 in a 0700 directory: Secrets are in them. So is `tokens.json`, the bearer
  token of every user a kubeconfig was written for (`save_tokens`): with the PKI kept in --dir, the
  kubeconfigs handed out before a restart still work after it.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import IO, Any

from common.secretfile import write_secret

log = logging.getLogger(__name__)

Obj = dict[str, Any]
Objects = dict[str, dict[str, dict[str, Obj]]]
"""storage key -> namespace -> name -> object, as the store holds them"""

SNAPSHOT, JOURNAL, TOKENS = "snapshot.json", "journal.jsonl", "tokens.json"


def load_tokens(directory: Path) -> dict[str, str]:
    """username -> bearer token, as `save_tokens` left them ({} for none)."""
    path = directory / TOKENS
    return dict(json.loads(path.read_text())) if path.exists() else {}


def save_tokens(directory: Path, by_name: dict[str, str]) -> None:
    write_secret(directory / TOKENS, json.dumps(by_name, sort_keys=True).encode())


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _open_private(path: Path, flags: int) -> int:
    return os.open(path, flags | os.O_CLOEXEC, 0o600)


class Journal:
    def __init__(self, directory: Path, snapshot_every: int = 10_000) -> None:
        self.dir = directory
        self.snapshot_every = snapshot_every
        self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(self.dir, 0o700)
        self._out: IO[bytes] | None = None
        self._written = 0

    @property
    def snapshot_path(self) -> Path:
        return self.dir / SNAPSHOT

    @property
    def journal_path(self) -> Path:
        return self.dir / JOURNAL

    def load(self) -> tuple[Objects, int]:
        """The state on disk and its resourceVersion (({}, 0) for an empty directory)."""
        objs: Objects = {}
        rv = 0
        if self.snapshot_path.exists():
            doc = json.loads(self.snapshot_path.read_text())
            objs, rv = doc["objects"], int(doc["rv"])
        replayed = 0
        if self.journal_path.exists():
            lines, good = self.journal_path.read_bytes().split(b"\n"), 0
            for i, line in enumerate(lines):
                if not line.strip():
                    good += len(line) + 1
                    continue
                try:
                    rec = json.loads(line)
                except ValueError:
                    if any(rest.strip() for rest in lines[i + 1 :]):
                        raise ValueError(f"{self.journal_path}: line {i + 1} is not JSON") from None
                    log.warning("dropped the journal's torn last line (%d bytes)", len(line))
                    self._truncate(good)  # the next append starts a line of its own
                    break
                good += len(line) + 1
                if rec["rv"] <= rv:
                    continue  # already in the snapshot
                by_ns = objs.setdefault(rec["key"], {})
                if rec["obj"] is None:
                    by_ns.get(rec["ns"], {}).pop(rec["name"], None)
                    if rec["ns"] in by_ns and not by_ns[rec["ns"]]:
                        del by_ns[rec["ns"]]
                else:
                    by_ns.setdefault(rec["ns"], {})[rec["name"]] = rec["obj"]
                rv, replayed = rec["rv"], replayed + 1
        self._written = replayed
        log.info("loaded %d objects at resourceVersion %d (%d journal entries replayed)",
                 sum(len(o) for n in objs.values() for o in n.values()), rv, replayed)  # fmt: skip
        return objs, rv

    def _truncate(self, size: int) -> None:
        with open(self.journal_path, "r+b") as f:
            f.truncate(size)
            f.flush()
            os.fsync(f.fileno())

    def record(self, rv: int, key: str, ns: str, name: str, obj: Obj | None, state: Objects) -> None:
        """One write (already in `state`), durable when this returns; every `snapshot_every`
        writes, a snapshot of `state` instead of a longer journal."""
        if self._out is None:
            fd = _open_private(self.journal_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
            self._out = os.fdopen(fd, "ab")
        line = json.dumps({"rv": rv, "key": key, "ns": ns, "name": name, "obj": obj}, separators=(",", ":"))
        self._out.write(line.encode() + b"\n")
        self._out.flush()
        os.fsync(self._out.fileno())
        self._written += 1
        if self._written >= self.snapshot_every:
            self.snapshot(state, rv)

    def snapshot(self, state: Objects, rv: int) -> None:
        """The whole state at `rv` written atomically; the journal emptied after it."""
        tmp = self.dir / f".{SNAPSHOT}.tmp"
        with os.fdopen(_open_private(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), "w") as f:
            json.dump({"rv": rv, "objects": state}, f, separators=(",", ":"))
            f.flush()
            os.fsync(f.fileno())
        tmp.replace(self.snapshot_path)
        _fsync_dir(self.dir)
        if self._out is not None:
            self._out.close()
            self._out = None
        self.journal_path.unlink(missing_ok=True)
        _fsync_dir(self.dir)
        self._written = 0

    def close(self) -> None:
        if self._out is not None:
            self._out.close()
            self._out = None
