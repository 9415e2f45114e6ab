"""Group snapshots of the local backend: every member copied while all their filesystems are frozen.

Mixed into LocalBackend (csi/backends/local.py), whose state file holds a `groups` table
beside `volumes` and `snapshots`; member snapshots are ordinary snapshot records carrying
their `group_snapshot_id`, so ListSnapshots/GetSnapshot show them and restores use them.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from csi import freeze
from csi.backends.base import GroupSnapshot, Snapshot, Volume
from csi.commands import run
from csi.errors import AlreadyExists, FailedPrecondition, GroupSnapshotNotFound
from csi.state import Document, StateFile

log = logging.getLogger(__name__)


class _Store(Protocol):
    """What the mixin needs from LocalBackend."""

    _state: StateFile

    def get_volume(self, volume_id: str) -> Volume: ...

    def volume_file(self, volume_id: str) -> Path: ...

    def snapshot_file(self, snapshot_id: str) -> Path: ...

    def check_room(self, doc: Document, size: int) -> None: ...

    @staticmethod
    def snapshot_of(rec: Mapping[str, Any]) -> Snapshot: ...


def copy_sparse(source: Path, dest: Path) -> None:
    run(["cp", "--sparse=always", "--reflink=auto", str(source), str(dest)])


def by_name(table: Mapping[str, Mapping[str, Any]], name: str) -> Mapping[str, Any] | None:
    return next((r for r in table.values() if r["name"] == name), None)


class GroupSnapshots:
    def create_group_snapshot(self: _Store, name: str, volume_ids: list[str]) -> GroupSnapshot:
        sources = list(dict.fromkeys(volume_ids))
        existing = self._state.read(lambda d: by_name(d["groups"], name))
        if existing is not None:
            if sorted(existing["source_volume_ids"]) != sorted(sources):
                raise AlreadyExists(
                    f"group snapshot {name!r} exists for volumes {existing['source_volume_ids']}"
                )
            return _group(self, existing)
        volumes = [self.get_volume(v) for v in sources]
        self._state.read(lambda d: self.check_room(d, sum(v.size_bytes for v in volumes)))
        group_id, now = f"group-{uuid.uuid4().hex}", time.time()
        recs: list[dict[str, Any]] = [
            {"id": f"snap-{uuid.uuid4().hex}", "name": f"{name}/{v.id}", "source_volume_id": v.id,
             "size_bytes": v.size_bytes, "created_at": now, "group_snapshot_id": group_id}
            for v in volumes
        ]  # fmt: skip
        group = {"id": group_id, "name": name, "source_volume_ids": sources, "created_at": now,
                 "snapshot_ids": [r["id"] for r in recs]}  # fmt: skip
        try:
            _copy_group(self, volumes, recs)
            self._state.update(lambda d: _reserve_group(self, d, recs, group))
        except BaseException:
            for rec in recs:
                self.snapshot_file(rec["id"]).unlink(missing_ok=True)
                self.snapshot_file(rec["id"]).with_suffix(".tmp").unlink(missing_ok=True)
            raise
        log.info("created group snapshot %s of %s", group_id, sources)
        return _group(self, group)

    def delete_group_snapshot(self: _Store, group_id: str, snapshot_ids: list[str]) -> None:
        def drop(doc: Document) -> list[str]:
            rec = doc["groups"].get(group_id)
            if rec is None:
                return []
            if snapshot_ids and sorted(snapshot_ids) != sorted(rec["snapshot_ids"]):
                raise FailedPrecondition(
                    f"snapshot_ids {sorted(snapshot_ids)} are not the members of {group_id}: "
                    f"{sorted(rec['snapshot_ids'])}"
                )
            for snapshot_id in rec["snapshot_ids"]:
                doc["snapshots"].pop(snapshot_id, None)
            del doc["groups"][group_id]
            return list(rec["snapshot_ids"])

        for snapshot_id in self._state.update(drop):
            self.snapshot_file(snapshot_id).unlink(missing_ok=True)

    def get_group_snapshot(self: _Store, group_id: str) -> GroupSnapshot:
        rec = self._state.read(lambda d: d["groups"].get(group_id))
        if rec is None:
            raise GroupSnapshotNotFound(group_id)
        return _group(self, rec)


def _group(store: _Store, rec: Mapping[str, Any]) -> GroupSnapshot:
    members = store._state.read(lambda d: [d["snapshots"][s] for s in rec["snapshot_ids"]])
    snapshots = tuple(store.snapshot_of(m) for m in members)
    return GroupSnapshot(id=rec["id"], name=rec["name"], snapshots=snapshots, created_at=rec["created_at"])


def _copy_group(store: _Store, volumes: list[Volume], recs: list[dict[str, Any]]) -> None:
    """Copy every member while all their filesystems are frozen together (one point in time)."""
    with freeze.frozen([store.volume_file(v.id) for v in volumes]):
        for volume, rec in zip(volumes, recs, strict=True):
            copy_sparse(store.volume_file(volume.id), store.snapshot_file(rec["id"]).with_suffix(".tmp"))
    for rec in recs:
        final = store.snapshot_file(rec["id"])
        os.replace(final.with_suffix(".tmp"), final)


def _reserve_group(store: _Store, doc: Document, recs: list[dict[str, Any]], group: dict[str, Any]) -> None:
    store.check_room(doc, sum(r["size_bytes"] for r in recs))
    for rec in recs:
        doc["snapshots"][rec["id"]] = rec
    doc["groups"][group["id"]] = group
