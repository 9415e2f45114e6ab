"""QoS parameters (csi/qos.py), ControllerModifyVolume/CreateVolume with them, GetSnapshot,
ListSnapshots' cursor, and the cgroup files csi/iothrottle.py writes (no root: a temp cgroup dir)."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from csi import qos
from csi.controller import ControllerServicer
from csi.errors import InvalidArgument
from csi.iothrottle import DeviceThrottle, detect, device_number
from csi.locks import KeyedLocks
from csi.qos import IoLimits
from protos import csi_pb2
from tests.unit.csi.test_csi_controller import GIB, Ctx, MemoryBackend, Rpc, code, req

MIB = 1 << 20


def test_class_then_overrides_then_partial_changes_keep_the_rest() -> None:
    silver = qos.limits_from({"qosClass": "silver", "writeIOPS": "300"})
    assert (silver.read_bps, silver.write_bps, silver.write_iops, silver.qos_class) == (
        100 * MIB, 100 * MIB, 300, "silver",
    )  # fmt: skip
    changed = qos.limits_from({"readBytesPerSecond": "5Mi"}, base=silver)
    assert changed.read_bps == 5 * MIB and changed.write_iops == 300 and changed.write_bps == 100 * MIB
    assert qos.limits_from({"qosClass": "unlimited"}).unlimited
    assert qos.limits_from({"writeBytesPerSecond": "10M"}).write_bps == 10_000_000


@pytest.mark.parametrize(
    "params",
    [
        {"XXX_FakeKey": "XXX_FakeValue"},
        {"type": "hdd"},  # StorageClass parameter: immutable
        {"replication": "2"},
        {"qosClass": "platinum"},
        {"readIOPS": "-5"},
        {"readIOPS": "lots"},
    ],
)
def test_bad_mutable_parameters_are_invalid_argument(params: dict[str, str]) -> None:
    with pytest.raises(InvalidArgument):
        qos.limits_from(params)


@pytest.fixture
def ctrl(backend: MemoryBackend) -> ControllerServicer:
    return ControllerServicer(backend, KeyedLocks(), default_fs="ext4")


@pytest.fixture
def backend() -> MemoryBackend:
    return MemoryBackend()


def modify(volume_id: str, **params: str) -> csi_pb2.ControllerModifyVolumeRequest:
    return csi_pb2.ControllerModifyVolumeRequest(volume_id=volume_id, mutable_parameters=params)


def test_create_volume_honours_mutable_parameters(ctrl: ControllerServicer, backend: MemoryBackend) -> None:
    r = req("q", GIB)
    r.mutable_parameters["qosClass"] = "bronze"
    ctrl.CreateVolume(r, Ctx())
    bronze = qos.QOS_CLASSES["bronze"]
    assert backend.specs[0].qos.numbers() == bronze.numbers() and backend.specs[0].qos.qos_class == "bronze"
    bad = req("q2", GIB)
    bad.mutable_parameters["XXX_FakeKey"] = "x"
    assert code(lambda ctx: ctrl.CreateVolume(bad, ctx)) == grpc.StatusCode.INVALID_ARGUMENT
    assert len(backend.specs) == 1  # nothing created


def test_modify_volume_codes_and_effect(ctrl: ControllerServicer, backend: MemoryBackend) -> None:
    vol = ctrl.CreateVolume(req("m", GIB), Ctx()).volume
    assert code(lambda ctx: ctrl.ControllerModifyVolume(modify("", qosClass="gold"), ctx)) == (
        grpc.StatusCode.INVALID_ARGUMENT
    )
    assert code(lambda ctx: ctrl.ControllerModifyVolume(modify("nope", qosClass="gold"), ctx)) == (
        grpc.StatusCode.NOT_FOUND
    )
    for bad in ({"XXX_FakeKey": "v"}, {"project_id": "p2"}):
        assert code(lambda ctx, b=bad: ctrl.ControllerModifyVolume(modify(vol.volume_id, **b), ctx)) == (
            grpc.StatusCode.INVALID_ARGUMENT
        )
    assert backend.modified == []
    ctrl.ControllerModifyVolume(modify(vol.volume_id, writeBytesPerSecond="8Mi"), Ctx())
    ctrl.ControllerModifyVolume(modify(vol.volume_id, writeBytesPerSecond="8Mi"), Ctx())  # same: no change
    ctrl.ControllerModifyVolume(modify(vol.volume_id), Ctx())  # nothing named: nothing changes
    assert backend.modified == [(vol.volume_id, IoLimits(write_bps=8 * MIB))]


def test_get_snapshot_and_capabilities(ctrl: ControllerServicer) -> None:
    vol = ctrl.CreateVolume(req("s", GIB), Ctx()).volume
    snap = ctrl.CreateSnapshot(
        csi_pb2.CreateSnapshotRequest(name="s1", source_volume_id=vol.volume_id), Ctx()
    )
    got = ctrl.GetSnapshot(csi_pb2.GetSnapshotRequest(snapshot_id=snap.snapshot.snapshot_id), Ctx())
    assert got.snapshot == snap.snapshot
    assert (
        code(lambda ctx: ctrl.GetSnapshot(csi_pb2.GetSnapshotRequest(), ctx))
        == grpc.StatusCode.INVALID_ARGUMENT
    )
    missing = csi_pb2.GetSnapshotRequest(snapshot_id="snap-x")
    assert code(lambda ctx: ctrl.GetSnapshot(missing, ctx)) == grpc.StatusCode.NOT_FOUND
    caps = {
        c.rpc.type
        for c in ctrl.ControllerGetCapabilities(
            csi_pb2.ControllerGetCapabilitiesRequest(), Ctx()
        ).capabilities
    }
    assert {Rpc.GET_SNAPSHOT, Rpc.MODIFY_VOLUME, Rpc.SINGLE_NODE_MULTI_WRITER} <= caps


def test_list_snapshots_pages_stay_right_when_snapshots_come_and_go(ctrl: ControllerServicer) -> None:
    vol = ctrl.CreateVolume(req("src", GIB), Ctx()).volume
    for i in range(4):
        ctrl.CreateSnapshot(
            csi_pb2.CreateSnapshotRequest(name=f"n{i}", source_volume_id=vol.volume_id), Ctx()
        )
    first = ctrl.ListSnapshots(csi_pb2.ListSnapshotsRequest(max_entries=2), Ctx())
    seen = [e.snapshot.snapshot_id for e in first.entries]
    ctrl.DeleteSnapshot(csi_pb2.DeleteSnapshotRequest(snapshot_id=seen[-1]), Ctx())  # the cursor itself
    ctrl.CreateSnapshot(csi_pb2.CreateSnapshotRequest(name="late", source_volume_id=vol.volume_id), Ctx())
    rest = ctrl.ListSnapshots(csi_pb2.ListSnapshotsRequest(starting_token=first.next_token), Ctx())
    later = [e.snapshot.snapshot_id for e in rest.entries]
    assert not set(later) & set(seen) and later == ["snap-2", "snap-3", "snap-4"] and not rest.next_token


def test_v2_io_max_line_and_readback(tmp_path: Path) -> None:
    (tmp_path / "io.max").write_text("")
    throttle = DeviceThrottle(tmp_path)
    throttle.apply("/dev/null", IoLimits(read_bps=MIB, write_iops=50))
    number = device_number("/dev/null")
    assert (tmp_path / "io.max").read_text() == f"{number} rbps={MIB} wbps=max riops=max wiops=50\n"
    assert throttle.current("/dev/null").numbers() == IoLimits(read_bps=MIB, write_iops=50).numbers()


def test_v1_files_and_detect(tmp_path: Path) -> None:
    for name in ("read_bps", "write_bps", "read_iops", "write_iops"):
        (tmp_path / f"blkio.throttle.{name}_device").write_text("")
    assert detect(str(tmp_path)) == DeviceThrottle(tmp_path)
    DeviceThrottle(tmp_path).apply("/dev/null", IoLimits(write_bps=7))
    assert (tmp_path / "blkio.throttle.write_bps_device").read_text() == f"{device_number('/dev/null')} 7\n"
    with pytest.raises(ValueError):
        detect(str(tmp_path / "nothing-here"))
