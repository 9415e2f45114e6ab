"""ControllerServicer request handling against an in-memory backend (no root, no gRPC server)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

import grpc
import pytest

from csi.backends.base import Capacity, GroupSnapshot, Snapshot, Volume, VolumeSpec
from csi.controller import ControllerServicer
from csi.errors import SnapshotNotFound, Unimplemented, VolumeNotFound
from csi.locks import KeyedLocks
from csi.qos import IoLimits
from protos import csi_pb2

MIB, GIB = 1 << 20, 1 << 30
KEY = "topology.stor.plasmacloud.io/node"
Rpc = csi_pb2.ControllerServiceCapability.RPC


class Aborted(Exception):
    pass


class Ctx:
    code: grpc.StatusCode | None = None

    def abort(self, code: grpc.StatusCode, details: str) -> None:
        self.code, self.details = code, details
        raise Aborted


class MemoryBackend:
    """Implements csi.backends.base.VolumeBackend in memory."""

    name = "memory"
    reports_publications = True
    reports_capacity = True
    node_side_attach = True
    supports_group_snapshots = False
    topology_node = "n1"

    def __init__(self) -> None:
        self.volumes: dict[str, Volume] = {}
        self.specs: list[VolumeSpec] = []
        self.snapshots: dict[str, Snapshot] = {}
        self.modified: list[tuple[str, IoLimits]] = []
        self.snap_seq = 0

    def probe(self) -> None: ...

    def capacity(self) -> Capacity:
        used = sum(v.size_bytes for v in self.volumes.values())
        return Capacity(total_bytes=10 * GIB, available_bytes=10 * GIB - used, max_volume_bytes=10 * GIB)

    def find_volume_by_name(self, name: str) -> Volume | None:
        return next((v for v in self.volumes.values() if v.name == name), None)

    def create_volume(self, spec: VolumeSpec) -> Volume:
        self.specs.append(spec)
        vol = Volume(
            id=f"vol-{len(self.volumes)}", name=spec.name, size_bytes=spec.size_bytes,
            access_type=spec.access_type, fs_type=spec.fs_type, node_id="n1", qos=spec.qos,
        )  # fmt: skip
        self.volumes[vol.id] = vol
        return vol

    def delete_volume(self, volume_id: str) -> None:
        self.volumes.pop(volume_id, None)

    def get_volume(self, volume_id: str) -> Volume:
        if volume_id not in self.volumes:
            raise VolumeNotFound(volume_id)
        return self.volumes[volume_id]

    def list_volumes(self) -> list[Volume]:
        return list(self.volumes.values())

    def expand_volume(self, volume_id: str, size_bytes: int) -> Volume:
        self.volumes[volume_id] = replace(self.volumes[volume_id], size_bytes=size_bytes)
        return self.volumes[volume_id]

    def modify_volume(self, volume_id: str, qos: IoLimits) -> Volume:
        self.modified.append((volume_id, qos))
        self.volumes[volume_id] = replace(self.volumes[volume_id], qos=qos)
        return self.volumes[volume_id]

    def create_snapshot(self, name: str, source_volume_id: str) -> Snapshot:
        self.snap_seq += 1
        snap = Snapshot(id=f"snap-{self.snap_seq - 1}", name=name, source_volume_id=source_volume_id,
                        size_bytes=GIB, created_at=1.5)  # fmt: skip
        self.snapshots[snap.id] = snap
        return snap

    def delete_snapshot(self, snapshot_id: str) -> None:
        self.snapshots.pop(snapshot_id, None)

    def get_snapshot(self, snapshot_id: str) -> Snapshot:
        if snapshot_id not in self.snapshots:
            raise SnapshotNotFound(snapshot_id)
        return self.snapshots[snapshot_id]

    def list_snapshots(self) -> list[Snapshot]:
        return list(self.snapshots.values())

    def create_group_snapshot(self, name: str, volume_ids: list[str]) -> GroupSnapshot:
        raise Unimplemented("memory")

    def delete_group_snapshot(self, group_id: str, snapshot_ids: list[str]) -> None:
        raise Unimplemented("memory")

    def get_group_snapshot(self, group_id: str) -> GroupSnapshot:
        raise Unimplemented("memory")

    def known_node(self, node_id: str) -> bool:
        return node_id == "n1"

    def attach(self, volume_id: str, node_id: str, readonly: bool) -> dict[str, str]:
        return {}

    def detach(self, volume_id: str, node_id: str) -> None: ...

    def node_device(self, volume_id: str, publish_context: Mapping[str, str]) -> str:
        return "/dev/null"

    def node_release(self, volume_id: str) -> None: ...

    def node_devices(self, volume_id: str) -> frozenset[str] | None:
        return None

    def node_refresh(self, volume_id: str, device: str) -> int:
        return 0

    def close(self) -> None: ...


@pytest.fixture
def backend() -> MemoryBackend:
    return MemoryBackend()


@pytest.fixture
def ctrl(backend: MemoryBackend) -> ControllerServicer:
    return ControllerServicer(backend, KeyedLocks(), default_fs="xfs")


def mount(fs: str = "") -> csi_pb2.VolumeCapability:
    c = csi_pb2.VolumeCapability(access_mode=csi_pb2.VolumeCapability.AccessMode(mode=1))
    c.mount.fs_type = fs
    return c


def block() -> csi_pb2.VolumeCapability:
    c = csi_pb2.VolumeCapability(access_mode=csi_pb2.VolumeCapability.AccessMode(mode=1))
    c.block.SetInParent()
    return c


def req(name: str = "v", size: int = 0, **params: str) -> csi_pb2.CreateVolumeRequest:
    r = csi_pb2.CreateVolumeRequest(name=name, volume_capabilities=[mount()], parameters=params)
    if size:
        r.capacity_range.required_bytes = size
    return r


def code(call: object) -> grpc.StatusCode | None:
    ctx = Ctx()
    with pytest.raises(Aborted):
        call(ctx)  # type: ignore[operator]
    return ctx.code


def test_parameters_reach_the_backend_and_default_fs_applies(
    ctrl: ControllerServicer, backend: MemoryBackend
) -> None:
    r = req("p", 5 * GIB, type="ssd", replication="3", org_id="org-123", project_id="proj-456")
    r.parameters["csi.storage.k8s.io/pvc/name"] = "data"
    vol = ctrl.CreateVolume(r, Ctx()).volume
    spec = backend.specs[0]
    assert (spec.volume_type, spec.replication, spec.org_id, spec.project_id) == (
        "ssd",
        3,
        "org-123",
        "proj-456",
    )
    assert spec.fs_type == "xfs" and vol.capacity_bytes == 5 * GIB
    assert vol.accessible_topology[0].segments[KEY] == "n1"


@pytest.mark.parametrize("params", [{"replication": "three"}, {"colour": "blue"}])
def test_bad_parameters_are_invalid_argument(ctrl: ControllerServicer, params: dict[str, str]) -> None:
    assert code(lambda ctx: ctrl.CreateVolume(req(**params), ctx)) == grpc.StatusCode.INVALID_ARGUMENT


def test_same_name_other_access_type_already_exists(ctrl: ControllerServicer) -> None:
    ctrl.CreateVolume(req("same"), Ctx())
    r = req("same")
    r.volume_capabilities[0].CopyFrom(block())
    assert code(lambda ctx: ctrl.CreateVolume(r, ctx)) == grpc.StatusCode.ALREADY_EXISTS


def test_topology_elsewhere_is_resource_exhausted(ctrl: ControllerServicer) -> None:
    r = req("far")
    r.accessibility_requirements.requisite.add().segments[KEY] = "n2"
    assert code(lambda ctx: ctrl.CreateVolume(r, ctx)) == grpc.StatusCode.RESOURCE_EXHAUSTED
    r.accessibility_requirements.preferred.add().segments[KEY] = "n1"
    assert ctrl.CreateVolume(r, Ctx()).volume.volume_id


def test_validate_reports_unsupported_capabilities_without_confirming(ctrl: ControllerServicer) -> None:
    vol = ctrl.CreateVolume(req("val"), Ctx()).volume
    v = csi_pb2.ValidateVolumeCapabilitiesRequest(volume_id=vol.volume_id, volume_capabilities=[block()])
    res = ctrl.ValidateVolumeCapabilities(v, Ctx())
    assert not res.HasField("confirmed") and res.message
    multi = mount()
    multi.access_mode.mode = csi_pb2.VolumeCapability.AccessMode.MULTI_NODE_MULTI_WRITER
    v = csi_pb2.ValidateVolumeCapabilitiesRequest(volume_id=vol.volume_id, volume_capabilities=[multi])
    assert not ctrl.ValidateVolumeCapabilities(v, Ctx()).HasField("confirmed")


def test_publish_checks_the_access_type(ctrl: ControllerServicer) -> None:
    vol = ctrl.CreateVolume(req("pub"), Ctx()).volume
    p = csi_pb2.ControllerPublishVolumeRequest(
        volume_id=vol.volume_id, node_id="n1", volume_capability=block()
    )
    assert code(lambda ctx: ctrl.ControllerPublishVolume(p, ctx)) == grpc.StatusCode.INVALID_ARGUMENT


def test_expand_rules(ctrl: ControllerServicer) -> None:
    vol = ctrl.CreateVolume(req("exp", 2 * GIB), Ctx()).volume

    def expand(required: int, limit: int = 0) -> csi_pb2.ControllerExpandVolumeRequest:
        return csi_pb2.ControllerExpandVolumeRequest(
            volume_id=vol.volume_id,
            capacity_range=csi_pb2.CapacityRange(required_bytes=required, limit_bytes=limit),
        )

    assert ctrl.ControllerExpandVolume(expand(GIB), Ctx()).capacity_bytes == 2 * GIB  # never shrinks
    assert (
        code(lambda ctx: ctrl.ControllerExpandVolume(expand(GIB, GIB), ctx)) == grpc.StatusCode.OUT_OF_RANGE
    )
    assert (
        code(lambda ctx: ctrl.ControllerExpandVolume(expand(20 * GIB), ctx)) == grpc.StatusCode.OUT_OF_RANGE
    )
    grown = ctrl.ControllerExpandVolume(expand(3 * GIB + 1), Ctx())
    assert grown.capacity_bytes == 3 * GIB + MIB and grown.node_expansion_required
    missing = csi_pb2.ControllerExpandVolumeRequest(
        volume_id="nope", capacity_range=csi_pb2.CapacityRange(required_bytes=GIB)
    )
    assert code(lambda ctx: ctrl.ControllerExpandVolume(missing, ctx)) == grpc.StatusCode.NOT_FOUND


def test_list_volumes_pages_and_get_capacity(ctrl: ControllerServicer) -> None:
    for i in range(5):
        ctrl.CreateVolume(req(f"l{i}", GIB), Ctx())
    seen, token = [], ""
    while True:
        page = ctrl.ListVolumes(csi_pb2.ListVolumesRequest(max_entries=2, starting_token=token), Ctx())
        assert len(page.entries) <= 2
        seen += [e.volume.volume_id for e in page.entries]
        token = page.next_token
        if not token:
            break
    assert sorted(seen) == sorted(f"vol-{i}" for i in range(5)) and len(seen) == 5
    cap = ctrl.GetCapacity(csi_pb2.GetCapacityRequest(), Ctx())
    assert cap.available_capacity == 5 * GIB
    elsewhere = csi_pb2.GetCapacityRequest(accessible_topology=csi_pb2.Topology(segments={KEY: "n2"}))
    assert ctrl.GetCapacity(elsewhere, Ctx()).available_capacity == 0


def test_capabilities_follow_the_backend(ctrl: ControllerServicer, backend: MemoryBackend) -> None:
    caps = {
        c.rpc.type
        for c in ctrl.ControllerGetCapabilities(
            csi_pb2.ControllerGetCapabilitiesRequest(), Ctx()
        ).capabilities
    }
    assert {Rpc.GET_CAPACITY, Rpc.LIST_VOLUMES_PUBLISHED_NODES} <= caps
    backend.reports_capacity = backend.reports_publications = False
    caps = {
        c.rpc.type
        for c in ctrl.ControllerGetCapabilities(
            csi_pb2.ControllerGetCapabilitiesRequest(), Ctx()
        ).capabilities
    }
    assert not {Rpc.GET_CAPACITY, Rpc.LIST_VOLUMES_PUBLISHED_NODES} & caps
    assert (
        code(lambda ctx: ctrl.GetCapacity(csi_pb2.GetCapacityRequest(), ctx)) == grpc.StatusCode.UNIMPLEMENTED
    )
