"""The local backend's bookkeeping without root: files, capacity, names, snapshots, restarts.

(Attaching loop devices needs root and is covered by tests/integration/csi.)
"""

from __future__ import annotations

from pathlib import Path

import pytest

from csi.backends.base import VolumeSpec
from csi.backends.local import LocalBackend
from csi.errors import (
    AlreadyExists,
    NodeNotFound,
    ResourceExhausted,
    SnapshotNotFound,
    VolumeNotFound,
)

MIB = 1 << 20


def spec(name: str, size: int = 8 * MIB, **kw: str) -> VolumeSpec:
    return VolumeSpec(name=name, size_bytes=size, access_type="mount", fs_type="ext4", **kw)


@pytest.fixture
def backend(tmp_path: Path) -> LocalBackend:
    return LocalBackend(tmp_path, "node-a", capacity_bytes=64 * MIB)


def test_create_is_idempotent_by_name_and_sparse(backend: LocalBackend, tmp_path: Path) -> None:
    v1 = backend.create_volume(spec("a"))
    assert backend.create_volume(spec("a")).id == v1.id
    with pytest.raises(AlreadyExists):
        backend.create_volume(spec("a", 16 * MIB))
    img = backend.volume_file(v1.id)
    assert img.stat().st_size == 8 * MIB and img.stat().st_blocks == 0
    assert v1.node_id == "node-a" and backend.find_volume_by_name("a") == v1


def test_capacity_is_enforced_and_released(backend: LocalBackend) -> None:
    v = backend.create_volume(spec("big", 60 * MIB))
    with pytest.raises(ResourceExhausted):
        backend.create_volume(spec("more", 8 * MIB))
    with pytest.raises(ResourceExhausted):
        backend.expand_volume(v.id, 80 * MIB)
    assert backend.capacity().available_bytes == 4 * MIB
    backend.delete_volume(v.id)
    backend.delete_volume(v.id)
    assert backend.capacity().available_bytes == 64 * MIB
    assert list((backend.volume_file("vol-" + "0" * 32).parent).iterdir()) == []


def test_state_survives_a_new_backend_and_interrupted_creations_are_dropped(tmp_path: Path) -> None:
    b1 = LocalBackend(tmp_path, "node-a", capacity_bytes=64 * MIB)
    v = b1.create_volume(spec("kept"))
    b1._state.update(lambda d: d["volumes"].update(ghost={"id": "ghost", "name": "g", "size_bytes": MIB}))
    (tmp_path / "volumes" / "ghost.img").touch()
    b2 = LocalBackend(tmp_path, "node-a", capacity_bytes=64 * MIB)
    assert [x.id for x in b2.list_volumes()] == [v.id]
    assert not (tmp_path / "volumes" / "ghost.img").exists()


def test_snapshot_restore_and_clone(backend: LocalBackend) -> None:
    v = backend.create_volume(spec("src"))
    backend.volume_file(v.id).write_bytes(b"payload".ljust(8 * MIB, b"\0"))
    snap = backend.create_snapshot("s1", v.id)
    assert backend.create_snapshot("s1", v.id).id == snap.id
    other = backend.create_volume(spec("other"))
    with pytest.raises(AlreadyExists):
        backend.create_snapshot("s1", other.id)
    with pytest.raises(VolumeNotFound):
        backend.create_snapshot("s2", "vol-missing")
    restored = backend.create_volume(spec("restored", 16 * MIB, source_snapshot_id=snap.id))
    assert backend.volume_file(restored.id).read_bytes()[:7] == b"payload"
    assert backend.volume_file(restored.id).stat().st_size == 16 * MIB
    with pytest.raises(SnapshotNotFound):
        backend.create_volume(spec("nothing", source_snapshot_id="snap-missing"))
    backend.delete_snapshot(snap.id)
    backend.delete_snapshot(snap.id)
    assert backend.list_snapshots() == []


def test_publish_bookkeeping_without_attaching(backend: LocalBackend) -> None:
    v = backend.create_volume(spec("pub"))
    with pytest.raises(NodeNotFound):
        backend.attach(v.id, "node-b", False)
    with pytest.raises(VolumeNotFound):
        backend.attach("vol-missing", "node-a", False)
