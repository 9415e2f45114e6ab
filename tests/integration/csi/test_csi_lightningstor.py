"""The `lightningstor` backend: the real driver process against an in-process VolumeService over gRPC.

The fake speaks the real wire protocol on a unix socket and attaches real loop
devices, so the node side stages, mounts, expands and reads data for real.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import grpc
import pytest

from nodeenv.lightningstor import FakeVolumeService, serve
from nodeenv.plasmacloud_auth import DevPki
from protos import csi_pb2
from tests.conftest import require_root
from tests.integration.csi.conftest import (
    MIB,
    NODE_ID,
    Driver,
    create_req,
    fs_bytes,
    loops_under,
    make_root,
    mount_cap,
    mounts_under,
    publish_all,
    status_of,
    teardown_all,
    teardown_root,
)

pytestmark = pytest.mark.root


@pytest.fixture
def ls_driver(plasmacloud_pki: DevPki) -> Iterator[tuple[Driver, FakeVolumeService]]:
    require_root()
    root = make_root()
    server, service, endpoint = serve(root / "ls", [NODE_ID], plasmacloud_pki)
    d = Driver(root, ["--backend", "lightningstor", "--lightningstor-endpoint", endpoint,
                      *plasmacloud_pki.client_flags()])  # fmt: skip
    try:
        d.start()
        yield d, service
    finally:
        d.stop()
        server.stop(None)
        teardown_root(root)


def test_lightningstor_backend_full_lifecycle(ls_driver: tuple[Driver, FakeVolumeService]) -> None:
    driver, service = ls_driver
    c = driver.controller
    info = driver.identity.GetPluginInfo(csi_pb2.GetPluginInfoRequest())
    assert info.manifest["backend"] == "lightningstor"
    caps = {
        x.rpc.type
        for x in c.ControllerGetCapabilities(csi_pb2.ControllerGetCapabilitiesRequest()).capabilities
    }
    assert csi_pb2.ControllerServiceCapability.RPC.GET_CAPACITY not in caps  # the service reports none

    cap = mount_cap("xfs")
    req = create_req("pvc-ls-1", 320 * MIB, cap)
    req.parameters.update({"type": "hdd", "replication": "2", "org_id": "org-123", "project_id": "proj-456"})
    vol = c.CreateVolume(req).volume
    assert c.CreateVolume(req).volume.volume_id == vol.volume_id
    remote = service.volumes[vol.volume_id]
    assert (remote.volume_type, remote.replication_factor, remote.org_id, remote.project_id) == (
        "hdd",
        2,
        "org-123",
        "proj-456",
    )
    assert not vol.accessible_topology  # reachable from every node

    staging, target = driver.root / "stage" / "ls", driver.root / "pods" / "ls" / "mount"
    ctx = publish_all(driver, vol.volume_id, cap, staging, target)
    assert ctx["device_path"] == service.attachments[(vol.volume_id, NODE_ID)].device_path
    with open(target / "f.txt", "w") as f:  # a remote snapshot is crash-consistent: the app fsyncs
        f.write("over lightningstor")
        f.flush()
        os.fsync(f.fileno())

    exp = c.ControllerExpandVolume(
        csi_pb2.ControllerExpandVolumeRequest(
            volume_id=vol.volume_id, capacity_range=csi_pb2.CapacityRange(required_bytes=640 * MIB)
        )
    )
    assert exp.capacity_bytes == 640 * MIB and exp.node_expansion_required
    grown = driver.node.NodeExpandVolume(
        csi_pb2.NodeExpandVolumeRequest(volume_id=vol.volume_id, volume_path=str(target))
    )
    assert grown.capacity_bytes == 640 * MIB and fs_bytes(target) > 500 * MIB

    snap = c.CreateSnapshot(
        csi_pb2.CreateSnapshotRequest(name="ls-snap", source_volume_id=vol.volume_id)
    ).snapshot
    assert snap.snapshot_id in service.snapshots and snap.ready_to_use
    restore = create_req("pvc-ls-2", 640 * MIB, cap)
    restore.volume_content_source.snapshot.snapshot_id = snap.snapshot_id
    vol2 = c.CreateVolume(restore).volume
    s2, t2 = driver.root / "stage" / "ls2", driver.root / "pods" / "ls2" / "mount"
    publish_all(driver, vol2.volume_id, cap, s2, t2)
    assert (t2 / "f.txt").read_text() == "over lightningstor"

    listed = c.ListVolumes(csi_pb2.ListVolumesRequest(max_entries=1))
    rest = c.ListVolumes(csi_pb2.ListVolumesRequest(starting_token=listed.next_token))
    assert {e.volume.volume_id for e in [*listed.entries, *rest.entries]} == {vol.volume_id, vol2.volume_id}

    teardown_all(driver, vol2.volume_id, s2, t2)
    teardown_all(driver, vol.volume_id, staging, target)
    c.DeleteSnapshot(csi_pb2.DeleteSnapshotRequest(snapshot_id=snap.snapshot_id))
    assert service.volumes == {} and service.attachments == {} and service.snapshots == {}
    assert "DetachVolume" in service.calls
    assert loops_under(driver.root) == [] and mounts_under(driver.root) == []


def test_lightningstor_errors_map_to_csi_codes(ls_driver: tuple[Driver, FakeVolumeService]) -> None:
    driver, _ = ls_driver
    c = driver.controller
    vol = c.CreateVolume(create_req("pvc-ls-err", 64 * MIB)).volume
    pub = csi_pb2.ControllerPublishVolumeRequest(
        volume_id=vol.volume_id, node_id="no-such-node", volume_capability=mount_cap()
    )
    assert status_of(lambda: c.ControllerPublishVolume(pub)) == grpc.StatusCode.NOT_FOUND
    pub.volume_id, pub.node_id = "ls-missing", NODE_ID
    assert status_of(lambda: c.ControllerPublishVolume(pub)) == grpc.StatusCode.NOT_FOUND
    assert status_of(lambda: c.CreateVolume(create_req("pvc-ls-err", 128 * MIB, limit=128 * MIB))) == (
        grpc.StatusCode.ALREADY_EXISTS
    )
    missing_snap = create_req("pvc-ls-from-nothing", 64 * MIB)
    missing_snap.volume_content_source.snapshot.snapshot_id = "lss-missing"
    assert status_of(lambda: c.CreateVolume(missing_snap)) == grpc.StatusCode.NOT_FOUND
    stage = csi_pb2.NodeStageVolumeRequest(
        volume_id=vol.volume_id, staging_target_path=str(driver.root / "s"), volume_capability=mount_cap()
    )
    # no ControllerPublish happened: the node has no device to stage
    assert status_of(lambda: driver.node.NodeStageVolume(stage)) == grpc.StatusCode.FAILED_PRECONDITION
    c.DeleteVolume(csi_pb2.DeleteVolumeRequest(volume_id=vol.volume_id))
    c.DeleteVolume(csi_pb2.DeleteVolumeRequest(volume_id=vol.volume_id))


def test_probe_is_not_ready_while_lightningstor_is_down(plasmacloud_pki: DevPki) -> None:
    require_root()
    root = make_root()
    server, _, endpoint = serve(root / "ls", [NODE_ID], plasmacloud_pki)
    d = Driver(root, ["--backend", "lightningstor", "--lightningstor-endpoint", endpoint,
                      *plasmacloud_pki.client_flags()])  # fmt: skip
    try:
        d.start()
        server.stop(None)
        assert d.identity.Probe(csi_pb2.ProbeRequest(), timeout=2).ready.value is False
    finally:
        d.stop()
        teardown_root(root)


def test_mutable_parameters_and_get_snapshot_reach_the_volume_service(
    ls_driver: tuple[Driver, FakeVolumeService],
) -> None:
    driver, service = ls_driver
    req = create_req("ls-qos", 64 * MIB)
    req.mutable_parameters["qosClass"] = "bronze"
    vol = driver.controller.CreateVolume(req).volume
    stored = service.volumes[vol.volume_id].qos
    assert (stored.qos_class, stored.write_bytes_per_second, stored.read_iops) == ("bronze", 20 * MIB, 500)

    modify = csi_pb2.ControllerModifyVolumeRequest(
        volume_id=vol.volume_id, mutable_parameters={"qosClass": "gold", "writeIOPS": "123"}
    )
    driver.controller.ControllerModifyVolume(modify)
    stored = service.volumes[vol.volume_id].qos
    assert (stored.qos_class, stored.read_bytes_per_second, stored.write_iops) == ("gold", 400 * MIB, 123)
    calls = len(service.calls)
    bad = csi_pb2.ControllerModifyVolumeRequest(volume_id=vol.volume_id, mutable_parameters={"type": "hdd"})
    assert (
        status_of(lambda: driver.controller.ControllerModifyVolume(bad)) == grpc.StatusCode.INVALID_ARGUMENT
    )
    assert "ModifyVolume" not in service.calls[calls:]

    snap = driver.controller.CreateSnapshot(
        csi_pb2.CreateSnapshotRequest(name="ls-snap", source_volume_id=vol.volume_id)
    ).snapshot
    got = driver.controller.GetSnapshot(csi_pb2.GetSnapshotRequest(snapshot_id=snap.snapshot_id)).snapshot
    assert got == snap and "GetSnapshot" in service.calls
    missing = csi_pb2.GetSnapshotRequest(snapshot_id="lss-missing")
    assert status_of(lambda: driver.controller.GetSnapshot(missing)) == grpc.StatusCode.NOT_FOUND
    caps = driver.identity.GetPluginCapabilities(csi_pb2.GetPluginCapabilitiesRequest()).capabilities
    group = csi_pb2.PluginCapability.Service.GROUP_CONTROLLER_SERVICE
    assert group not in {c.service.type for c in caps}  # the VolumeService has no group snapshots
    info = driver.node.NodeGetInfo(csi_pb2.NodeGetInfoRequest())
    assert info.max_volumes_per_node == 0  # no loop devices of ours to count: unlimited
    driver.controller.DeleteSnapshot(csi_pb2.DeleteSnapshotRequest(snapshot_id=snap.snapshot_id))
    driver.controller.DeleteVolume(csi_pb2.DeleteVolumeRequest(volume_id=vol.volume_id))


def test_a_refused_token_is_unauthenticated_to_the_sidecars_and_a_renewed_one_is_used(
    plasmacloud_pki: DevPki,
) -> None:
    """LightningStor refuses the driver's token: CreateVolume answers UNAUTHENTICATED with the
    service's reason and the token file's path (no INTERNAL, no traceback in the driver's log);
    the renewed token is used on the next call, the driver not restarted."""
    require_root()
    root = make_root()
    server, service, endpoint = serve(root / "ls", [NODE_ID], plasmacloud_pki)
    token = root / "token"
    token.write_text(plasmacloud_pki.mint())
    creds = ["--plasmacloud-ca", str(plasmacloud_pki.ca), "--plasmacloud-token-file", str(token)]
    d = Driver(root, ["--backend", "lightningstor", "--lightningstor-endpoint", endpoint, *creds])
    try:
        d.start()
        token.write_text(plasmacloud_pki.mint(audience="somebody-else"))
        with pytest.raises(grpc.RpcError) as e:
            d.controller.CreateVolume(create_req("pvc-refused", 64 * MIB))
        assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert "not for audience plasmacloud" in e.value.details()
        assert str(token) in e.value.details()
        assert "CreateVolume" not in service.calls
        token.write_text(plasmacloud_pki.mint())
        assert d.controller.CreateVolume(create_req("pvc-accepted", 64 * MIB)).volume.volume_id
        log = (root / "driver.log").read_text()
        assert "Traceback" not in log and plasmacloud_pki.token.read_text() not in log
    finally:
        d.stop()
        server.stop(None)
        teardown_root(root)
