"""The embedded default backend: sparse files on this node, attached as loop devices.

Layout under the state dir: `volumes/<id>.img`, `snapshots/<id>.img`, `state.json`
(csi.state.StateFile). Snapshots and clones are sparse copies (reflinks where the
filesystem supports them), taken with the source filesystem frozen if it is mounted;
group snapshots freeze every member's filesystem together (csi.freeze). A volume's
I/O limits (csi.qos) are in force on its loop device (csi.iothrottle).
A volume is accessible only from this node (its topology segment).
"""

from __future__ import annotations

import logging
import os
import re
import time
import uuid
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from csi import freeze, loopdev, mounts
from csi.backends.base import Capacity, Snapshot, Volume, VolumeSpec
from csi.backends.local_devices import LocalDevices
from csi.backends.local_groups import GroupSnapshots, by_name, copy_sparse
from csi.errors import (
    AlreadyExists,
    BackendUnavailable,
    FailedPrecondition,
    NodeNotFound,
    ResourceExhausted,
    SnapshotNotFound,
    VolumeNotFound,
)
from csi.iothrottle import DeviceThrottle
from csi.qos import IoLimits
from csi.state import Document, StateFile

log = logging.getLogger(__name__)
_ISSUED_ID = re.compile(r"(vol|snap)-[0-9a-f]{32}")
"""The ids this backend issues (and so the only ones with a file)."""


class LocalBackend(GroupSnapshots):
    name = "local"
    reports_publications = True
    reports_capacity = True
    node_side_attach = True
    supports_group_snapshots = True

    def __init__(
        self,
        state_dir: Path,
        node_id: str,
        *,
        capacity_bytes: int = 0,
        max_volumes_per_node: int = 0,
        writer: bool = True,
        throttle: DeviceThrottle | None = None,
    ) -> None:
        """writer=False (a node-only process beside a controller process on the same state dir):
        follow the controller's state file, never write it, never clean up what looks orphaned."""
        self._dir = state_dir
        self._node_id = node_id
        self.topology_node = node_id
        self._max_per_node = max_volumes_per_node
        self._devices = LocalDevices(throttle)
        for sub in ("volumes", "snapshots"):
            (state_dir / sub).mkdir(parents=True, exist_ok=True, mode=0o700)
        self._capacity = capacity_bytes or _fs_size(state_dir)
        tables = ("volumes", "snapshots", "groups")
        self._state = StateFile(state_dir / "state.json", tables, follow=not writer)
        if writer:
            self._recover()

    # -- paths and records ------------------------------------------------------------

    def volume_file(self, volume_id: str) -> Path:
        if not _ISSUED_ID.fullmatch(volume_id):  # never a path of the client's choosing
            raise VolumeNotFound(volume_id)
        return self._dir / "volumes" / f"{volume_id}.img"

    def snapshot_file(self, snapshot_id: str) -> Path:
        if not _ISSUED_ID.fullmatch(snapshot_id):
            raise SnapshotNotFound(snapshot_id)
        return self._dir / "snapshots" / f"{snapshot_id}.img"

    def _recover(self) -> None:
        """Drop what a crash left half-done: records not ready, files without a record, temp files."""

        def drop(doc: Document) -> list[str]:
            broken = [k for k, v in doc["volumes"].items() if v.get("state") != "ready"]
            for k in broken:
                del doc["volumes"][k]
            return broken

        self._state.update(drop)
        known = self._state.read(lambda d: (set(d["volumes"]), set(d["snapshots"])))
        for table, ids in zip(("volumes", "snapshots"), known, strict=True):
            for path in (self._dir / table).iterdir():
                if path.suffix == ".tmp" or path.stem not in ids:
                    log.warning("removing %s left behind by an interrupted operation", path)
                    path.unlink(missing_ok=True)

    def _volume(self, rec: Mapping[str, Any]) -> Volume:
        missing = "" if self.volume_file(rec["id"]).exists() else "backing file is missing"
        return Volume(
            id=rec["id"],
            name=rec["name"],
            size_bytes=rec["size_bytes"],
            access_type=rec["access_type"],
            fs_type=rec["fs_type"],
            node_id=self._node_id,
            source_snapshot_id=rec.get("source_snapshot_id", ""),
            source_volume_id=rec.get("source_volume_id", ""),
            published=dict(rec.get("published", {})),
            abnormal=missing,
            qos=IoLimits.from_dict(rec.get("qos", {})),
        )

    @staticmethod
    def snapshot_of(rec: Mapping[str, Any]) -> Snapshot:
        keys = ("id", "name", "source_volume_id", "size_bytes", "created_at")
        return Snapshot(**{k: rec[k] for k in keys}, group_snapshot_id=rec.get("group_snapshot_id", ""))

    # -- controller side ----------------------------------------------------------------

    def probe(self) -> None:
        if not os.access(self._dir / "volumes", os.W_OK):
            raise BackendUnavailable(f"state dir {self._dir} is not writable")

    def capacity(self) -> Capacity:
        used = self._state.read(_used_bytes)
        return Capacity(
            total_bytes=self._capacity,
            available_bytes=max(0, self._capacity - used),
            max_volume_bytes=self._capacity,
        )

    def find_volume_by_name(self, name: str) -> Volume | None:
        rec = self._state.read(lambda d: by_name(d["volumes"], name))
        return self._volume(rec) if rec and rec.get("state") == "ready" else None

    def create_volume(self, spec: VolumeSpec) -> Volume:
        existing = self.find_volume_by_name(spec.name)
        if existing is not None:
            if existing.size_bytes != spec.size_bytes:
                raise AlreadyExists(f"volume {spec.name!r} exists with {existing.size_bytes} bytes")
            return existing
        self._devices.check_enforceable(spec.qos)
        source = self._source_file(spec)
        volume_id = f"vol-{uuid.uuid4().hex}"
        rec = {
            "id": volume_id,
            "name": spec.name,
            "size_bytes": spec.size_bytes,
            "access_type": spec.access_type,
            "fs_type": spec.fs_type,
            "parameters": {"type": spec.volume_type, "replication": spec.replication},
            "org_id": spec.org_id,
            "project_id": spec.project_id,
            "source_snapshot_id": spec.source_snapshot_id,
            "source_volume_id": spec.source_volume_id,
            "qos": spec.qos.as_dict(),
            "published": {},
            "state": "ready",
            "created_at": time.time(),
        }
        self._state.read(lambda d: self.check_room(d, spec.size_bytes))  # fail fast, before copying
        path = self.volume_file(volume_id)
        try:
            self._make_file(path, spec.size_bytes, source)
            self._state.update(lambda d: self._reserve(d, "volumes", rec))
        except BaseException:
            path.unlink(missing_ok=True)
            path.with_suffix(".tmp").unlink(missing_ok=True)
            raise
        log.info("created volume %s (%s, %d bytes)", volume_id, spec.name, spec.size_bytes)
        return self._volume(rec)

    def check_room(self, doc: Document, size: int) -> None:
        used = _used_bytes(doc)
        if used + size > self._capacity:
            raise ResourceExhausted(
                f"not enough capacity for {size} bytes ({self._capacity - used} of {self._capacity} left)"
            )

    def _reserve(self, doc: Document, table: str, rec: dict[str, Any]) -> None:
        """Commit a record if its bytes still fit (checked again: creations run concurrently)."""
        self.check_room(doc, rec["size_bytes"])
        doc[table][rec["id"]] = rec

    def _source_file(self, spec: VolumeSpec) -> Path | None:
        if spec.source_snapshot_id:
            self.get_snapshot(spec.source_snapshot_id)
            return self.snapshot_file(spec.source_snapshot_id)
        if spec.source_volume_id:
            self.get_volume(spec.source_volume_id)
            return self.volume_file(spec.source_volume_id)
        return None

    def _make_file(self, path: Path, size: int, source: Path | None) -> None:
        """The volume's sparse file (a fresh id: O_EXCL; a crash leaves an orphan the next start removes)."""
        if source is None:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                os.ftruncate(fd, size)
            finally:
                os.close(fd)
            return
        tmp = path.with_suffix(".tmp")
        self._copy_consistent(source, tmp)
        os.truncate(tmp, max(size, tmp.stat().st_size))
        os.replace(tmp, path)

    def _copy_consistent(self, source: Path, dest: Path) -> None:
        """Sparse/reflink copy of a volume file; a mounted filesystem on it is frozen meanwhile."""
        with freeze.frozen([source]):
            copy_sparse(source, dest)

    def delete_volume(self, volume_id: str) -> None:
        rec = self._state.read(lambda d: d["volumes"].get(volume_id))
        if rec is None:
            return
        if rec.get("published"):
            raise FailedPrecondition(f"volume {volume_id} is still published to {sorted(rec['published'])}")
        path = self.volume_file(volume_id)
        for device in loopdev.find(path):
            if mounts.mounts_of(device):
                raise FailedPrecondition(f"volume {volume_id} is still mounted on this node")
            self._devices.detach(device)
        self._state.update(lambda d: d["volumes"].pop(volume_id, None))
        path.unlink(missing_ok=True)  # after the record: a crash in between leaves an orphan file,
        log.info("deleted volume %s", volume_id)  # which the next start removes

    def get_volume(self, volume_id: str) -> Volume:
        rec = self._state.read(lambda d: d["volumes"].get(volume_id))
        if rec is None or rec.get("state") != "ready":
            raise VolumeNotFound(volume_id)
        return self._volume(rec)

    def list_volumes(self) -> list[Volume]:
        recs = self._state.read(lambda d: [v for v in d["volumes"].values() if v.get("state") == "ready"])
        return [self._volume(r) for r in recs]

    def expand_volume(self, volume_id: str, size_bytes: int) -> Volume:
        volume = self.get_volume(volume_id)
        if size_bytes <= volume.size_bytes:
            return volume

        def grow(doc: Document) -> None:
            if _used_bytes(doc) + size_bytes - volume.size_bytes > self._capacity:
                raise ResourceExhausted(f"not enough capacity to grow {volume_id} to {size_bytes} bytes")
            doc["volumes"][volume_id] = {**doc["volumes"][volume_id], "size_bytes": size_bytes}

        self._state.update(grow)
        os.truncate(self.volume_file(volume_id), size_bytes)
        for device in loopdev.find(self.volume_file(volume_id)):
            loopdev.refresh(device)
        log.info("expanded volume %s to %d bytes", volume_id, size_bytes)
        return replace(volume, size_bytes=size_bytes)

    def modify_volume(self, volume_id: str, qos: IoLimits) -> Volume:
        volume = self.get_volume(volume_id)
        self._devices.check_enforceable(qos)

        def change(doc: Document) -> None:
            if volume_id not in doc["volumes"]:
                raise VolumeNotFound(volume_id)
            doc["volumes"][volume_id] = {**doc["volumes"][volume_id], "qos": qos.as_dict()}

        self._state.update(change)
        devices = self._devices.limit_attached(self.volume_file(volume_id), qos)
        log.info("I/O limits of %s now %s (in force on %s)", volume_id, qos, devices or "no device yet")
        return replace(volume, qos=qos)

    def create_snapshot(self, name: str, source_volume_id: str) -> Snapshot:
        existing = self._state.read(lambda d: by_name(d["snapshots"], name))
        if existing is not None:
            if existing["source_volume_id"] != source_volume_id:
                raise AlreadyExists(f"snapshot {name!r} exists for volume {existing['source_volume_id']}")
            return self.snapshot_of(existing)
        volume = self.get_volume(source_volume_id)
        self._state.read(lambda d: self.check_room(d, volume.size_bytes))
        snapshot_id = f"snap-{uuid.uuid4().hex}"
        final = self.snapshot_file(snapshot_id)
        tmp = final.with_suffix(".tmp")
        rec = {
            "id": snapshot_id,
            "name": name,
            "source_volume_id": source_volume_id,
            "size_bytes": volume.size_bytes,
            "created_at": time.time(),
        }
        try:
            self._copy_consistent(self.volume_file(source_volume_id), tmp)
            os.replace(tmp, final)
            self._state.update(lambda d: self._reserve(d, "snapshots", rec))
        except BaseException:
            tmp.unlink(missing_ok=True)
            final.unlink(missing_ok=True)
            raise
        log.info("created snapshot %s of %s", snapshot_id, source_volume_id)
        return self.snapshot_of(rec)

    def delete_snapshot(self, snapshot_id: str) -> None:
        def drop(doc: Document) -> bool:
            if snapshot_id not in doc["snapshots"]:
                return False
            group = doc["snapshots"][snapshot_id].get("group_snapshot_id")
            if group and group in doc["groups"]:
                raise FailedPrecondition(
                    f"snapshot {snapshot_id} belongs to group snapshot {group}; delete the group snapshot"
                )
            del doc["snapshots"][snapshot_id]
            return True

        # only a snapshot we know has a file to delete (an orphan after a crash goes at the next start);
        # an unknown id was taken as a file name: "../volumes/<id>" deleted a live volume's data
        if self._state.update(drop):
            self.snapshot_file(snapshot_id).unlink(missing_ok=True)

    def get_snapshot(self, snapshot_id: str) -> Snapshot:
        rec = self._state.read(lambda d: d["snapshots"].get(snapshot_id))
        if rec is None:
            raise SnapshotNotFound(snapshot_id)
        return self.snapshot_of(rec)

    def list_snapshots(self) -> list[Snapshot]:
        return [self.snapshot_of(r) for r in self._state.read(lambda d: list(d["snapshots"].values()))]

    # -- attach / detach ----------------------------------------------------------------

    def known_node(self, node_id: str) -> bool:
        return node_id == self._node_id

    def attach(self, volume_id: str, node_id: str, readonly: bool) -> dict[str, str]:
        if not self.known_node(node_id):
            raise NodeNotFound(node_id)

        def publish(doc: Document) -> None:
            rec = doc["volumes"].get(volume_id)
            if rec is None or rec.get("state") != "ready":
                raise VolumeNotFound(volume_id)
            published = dict(rec.get("published", {}))
            if node_id in published and published[node_id] != readonly:
                raise AlreadyExists(
                    f"volume {volume_id} is published to {node_id} with readonly={not readonly}"
                )
            on_node = sum(1 for v in doc["volumes"].values() if node_id in v.get("published", {}))
            if node_id not in published and self._max_per_node and on_node >= self._max_per_node:
                raise ResourceExhausted(f"node {node_id} already has {on_node} volumes published")
            published[node_id] = readonly
            doc["volumes"][volume_id] = {**rec, "published": published}

        self._state.update(publish)
        device = self._devices.attach(self.volume_file(volume_id), self.get_volume(volume_id).qos)
        return {"device_path": device, "readonly": "true" if readonly else "false"}

    def detach(self, volume_id: str, node_id: str) -> None:
        def unpublish(doc: Document) -> bool:
            rec = doc["volumes"].get(volume_id)
            if rec is None or node_id not in rec.get("published", {}):
                return False
            published = {k: v for k, v in rec["published"].items() if k != node_id}
            doc["volumes"][volume_id] = {**rec, "published": published}
            return True

        if self._state.update(unpublish) or self.known_node(node_id):
            self._devices.detach_all(self.volume_file(volume_id))

    def node_device(self, volume_id: str, publish_context: Mapping[str, str]) -> str:
        volume = self.get_volume(volume_id)
        return self._devices.attach(self.volume_file(volume_id), volume.qos)

    def node_release(self, volume_id: str) -> None:
        rec = self._state.read(lambda d: d["volumes"].get(volume_id))
        if rec is not None and not rec.get("published"):
            self._devices.detach_all(self.volume_file(volume_id))

    def node_devices(self, volume_id: str) -> frozenset[str] | None:
        self.get_volume(volume_id)
        return frozenset(os.path.realpath(d) for d in loopdev.find(self.volume_file(volume_id)))

    def node_refresh(self, volume_id: str, device: str) -> int:
        return loopdev.refresh(device)

    def close(self) -> None:
        pass


def _used_bytes(doc: Document) -> int:
    volumes = sum(int(v["size_bytes"]) for v in doc["volumes"].values())
    return volumes + sum(int(s["size_bytes"]) for s in doc["snapshots"].values())


def _fs_size(path: Path) -> int:
    st = os.statvfs(path)
    return st.f_blocks * st.f_frsize
