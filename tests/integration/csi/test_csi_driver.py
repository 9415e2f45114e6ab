"""Driver behaviour beyond the sanity suite: restarts, races, capacity, gone targets, secrets, ops."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from protos import csi_pb2
from tests.conftest import require_root
from tests.integration.csi.conftest import (
    GIB,
    MIB,
    NODE_ID,
    Driver,
    create_req,
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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _own_driver(*args: str) -> Driver:
    require_root()
    d = Driver(make_root(), list(args))
    d.start()
    return d


def test_restart_keeps_volumes_snapshots_publications_and_data(driver: Driver) -> None:
    cap = mount_cap("ext4")
    vol = driver.controller.CreateVolume(create_req("keep-me", 64 * MIB, cap)).volume
    snap = driver.controller.CreateSnapshot(
        csi_pb2.CreateSnapshotRequest(name="keep-snap", source_volume_id=vol.volume_id)
    ).snapshot
    staging, target = driver.root / "stage" / "keep", driver.root / "pods" / "keep" / "mount"
    publish_all(driver, vol.volume_id, cap, staging, target)
    (target / "f").write_text("still here")

    assert driver.stop() == 0  # graceful SIGTERM
    driver.start()

    again = driver.controller.CreateVolume(create_req("keep-me", 64 * MIB, cap)).volume
    assert again.volume_id == vol.volume_id  # the provisioner's retry finds the same volume
    got = driver.controller.ControllerGetVolume(csi_pb2.ControllerGetVolumeRequest(volume_id=vol.volume_id))
    assert list(got.status.published_node_ids) == [NODE_ID]
    listed = driver.controller.ListSnapshots(csi_pb2.ListSnapshotsRequest(snapshot_id=snap.snapshot_id))
    assert [e.snapshot.snapshot_id for e in listed.entries] == [snap.snapshot_id]
    publish_all(driver, vol.volume_id, cap, staging, target)  # idempotent after the restart
    assert (target / "f").read_text() == "still here"
    teardown_all(driver, vol.volume_id, staging, target)
    driver.controller.DeleteSnapshot(csi_pb2.DeleteSnapshotRequest(snapshot_id=snap.snapshot_id))
    assert loops_under(driver.root) == [] and mounts_under(driver.root) == []


def test_concurrent_create_volume_of_one_name_creates_one_volume(driver: Driver) -> None:
    ids: list[str] = []
    codes: list[grpc.StatusCode] = []
    barrier = threading.Barrier(12)

    def create() -> None:
        barrier.wait()
        try:
            ids.append(driver.controller.CreateVolume(create_req("raced", 16 * MIB)).volume.volume_id)
        except grpc.RpcError as e:
            codes.append(e.code())

    threads = [threading.Thread(target=create) for _ in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert ids and len(set(ids)) == 1
    assert set(codes) <= {grpc.StatusCode.ABORTED}  # losers are told to retry, never given a twin
    assert driver.controller.CreateVolume(create_req("raced", 16 * MIB)).volume.volume_id == ids[0]
    entries = driver.controller.ListVolumes(csi_pb2.ListVolumesRequest()).entries
    assert [e.volume.volume_id for e in entries] == ids[:1]
    assert len(list((driver.state_dir / "volumes").iterdir())) == 1


def test_capacity_limits_give_the_spec_codes_and_leave_nothing_behind() -> None:
    d = _own_driver("--capacity-bytes", str(100 * MIB))
    try:
        c = d.controller
        c.CreateVolume(create_req("fits", 64 * MIB))
        assert status_of(lambda: c.CreateVolume(create_req("too-much", 64 * MIB))) == (
            grpc.StatusCode.RESOURCE_EXHAUSTED
        )
        cap = c.GetCapacity(csi_pb2.GetCapacityRequest())
        assert cap.available_capacity == 36 * MIB
        assert cap.maximum_volume_size.value == 36 * MIB
        # bigger than the backend can ever provision, or unsatisfiable ranges
        assert status_of(lambda: c.CreateVolume(create_req("huge", 2 * GIB))) == grpc.StatusCode.OUT_OF_RANGE
        xfs_tiny = create_req("xfs-tiny", 10 * MIB, mount_cap("xfs"), limit=20 * MIB)
        assert status_of(lambda: c.CreateVolume(xfs_tiny)) == grpc.StatusCode.OUT_OF_RANGE
        bad = create_req("backwards", 30 * MIB, limit=20 * MIB)
        assert status_of(lambda: c.CreateVolume(bad)) == grpc.StatusCode.INVALID_ARGUMENT
        assert status_of(lambda: c.CreateVolume(create_req("fits", 32 * MIB, limit=32 * MIB))) == (
            grpc.StatusCode.ALREADY_EXISTS
        )
        assert len(list((d.state_dir / "volumes").iterdir())) == 1
        assert len(c.ListVolumes(csi_pb2.ListVolumesRequest()).entries) == 1
    finally:
        d.stop()
        teardown_root(d.root)


def test_unpublish_and_unstage_succeed_when_targets_are_already_gone(driver: Driver) -> None:
    n = driver.node
    gone = str(driver.root / "never" / "there")
    n.NodeUnpublishVolume(csi_pb2.NodeUnpublishVolumeRequest(volume_id="vol-unknown", target_path=gone))
    n.NodeUnstageVolume(csi_pb2.NodeUnstageVolumeRequest(volume_id="vol-unknown", staging_target_path=gone))

    cap = mount_cap("ext4")
    vol = driver.controller.CreateVolume(create_req("gone", 32 * MIB, cap)).volume
    staging, target = driver.root / "stage" / "gone", driver.root / "pods" / "gone" / "mount"
    publish_all(driver, vol.volume_id, cap, staging, target)
    # something else (a node reboot, an admin) unmounted both behind the driver's back
    subprocess.run(["umount", str(target)], check=True)
    stats = n.NodeGetVolumeStats(
        csi_pb2.NodeGetVolumeStatsRequest(volume_id=vol.volume_id, volume_path=str(target))
    )
    assert stats.volume_condition.abnormal and "not mounted" in stats.volume_condition.message
    subprocess.run(["umount", str(staging)], check=True)
    teardown_all(driver, vol.volume_id, staging, target)
    teardown_all(driver, vol.volume_id, staging, target)  # and all of it again: still OK
    assert not target.exists()
    assert loops_under(driver.root) == [] and mounts_under(driver.root) == []


def test_a_volume_with_another_filesystem_is_never_reformatted(driver: Driver) -> None:
    xfs = mount_cap("xfs")
    vol = driver.controller.CreateVolume(create_req("keep-fs", 320 * MIB, xfs)).volume
    staging, target = driver.root / "stage" / "fs", driver.root / "pods" / "fs" / "mount"
    publish_all(driver, vol.volume_id, xfs, staging, target)
    (target / "precious").write_text("do not format")
    teardown_all_but_delete(driver, vol.volume_id, staging, target)
    ext4 = mount_cap("ext4")
    req = csi_pb2.NodeStageVolumeRequest(
        volume_id=vol.volume_id, staging_target_path=str(staging), volume_capability=ext4
    )
    assert status_of(lambda: driver.node.NodeStageVolume(req)) == grpc.StatusCode.FAILED_PRECONDITION
    publish_all(driver, vol.volume_id, xfs, staging, target)
    assert (target / "precious").read_text() == "do not format"
    teardown_all(driver, vol.volume_id, staging, target)


def teardown_all_but_delete(driver: Driver, volume_id: str, staging: Path, target: Path) -> None:
    driver.node.NodeUnpublishVolume(
        csi_pb2.NodeUnpublishVolumeRequest(volume_id=volume_id, target_path=str(target))
    )
    driver.node.NodeUnstageVolume(
        csi_pb2.NodeUnstageVolumeRequest(volume_id=volume_id, staging_target_path=str(staging))
    )
    driver.controller.ControllerUnpublishVolume(
        csi_pb2.ControllerUnpublishVolumeRequest(volume_id=volume_id, node_id=NODE_ID)
    )


def test_deleting_a_published_volume_is_refused_and_missing_ones_are_fine(driver: Driver) -> None:
    c = driver.controller
    vol = c.CreateVolume(create_req("busy", 16 * MIB)).volume
    c.ControllerPublishVolume(
        csi_pb2.ControllerPublishVolumeRequest(
            volume_id=vol.volume_id, node_id=NODE_ID, volume_capability=mount_cap()
        )
    )
    delete = csi_pb2.DeleteVolumeRequest(volume_id=vol.volume_id)
    assert status_of(lambda: c.DeleteVolume(delete)) == grpc.StatusCode.FAILED_PRECONDITION
    c.ControllerUnpublishVolume(csi_pb2.ControllerUnpublishVolumeRequest(volume_id=vol.volume_id))
    c.DeleteVolume(delete)
    c.DeleteVolume(delete)
    c.ControllerUnpublishVolume(
        csi_pb2.ControllerUnpublishVolumeRequest(volume_id=vol.volume_id, node_id=NODE_ID)
    )
    assert status_of(
        lambda: c.ControllerGetVolume(csi_pb2.ControllerGetVolumeRequest(volume_id=vol.volume_id))
    ) == (grpc.StatusCode.NOT_FOUND)
    assert loops_under(driver.root) == []


def test_secrets_and_mount_flags_never_reach_the_log() -> None:
    d = _own_driver("--log-level", "debug")
    try:
        req = create_req("secretive", 16 * MIB, mount_cap("ext4", flags=("opt=mount-flag-secret",)))
        req.secrets["password"] = "hunter2-create-secret"
        vol = d.controller.CreateVolume(req).volume
        bad = csi_pb2.NodeStageVolumeRequest(
            volume_id=vol.volume_id, secrets={"token": "hunter2-stage-secret"}
        )
        assert status_of(lambda: d.node.NodeStageVolume(bad)) == grpc.StatusCode.INVALID_ARGUMENT
        d.controller.DeleteVolume(
            csi_pb2.DeleteVolumeRequest(volume_id=vol.volume_id, secrets={"k": "hunter2-del"})
        )
    finally:
        d.stop()
        log = d.log_text()
        teardown_root(d.root)
    assert "CreateVolume request" in log and "***stripped***" in log  # the debug log did run
    assert "hunter2" not in log and "mount-flag-secret" not in log


def test_metrics_health_and_graceful_stop() -> None:
    port = _free_port()
    d = _own_driver("--metrics-address", f"127.0.0.1:{port}")
    try:
        health = health_pb2_grpc.HealthStub(d.channel)
        for service in ("", "csi.v1.Identity", "csi.v1.Controller", "csi.v1.Node"):
            resp = health.Check(health_pb2.HealthCheckRequest(service=service))
            assert resp.status == health_pb2.HealthCheckResponse.SERVING
        d.controller.CreateVolume(create_req("metered", 16 * MIB))
        assert status_of(lambda: d.controller.CreateVolume(csi_pb2.CreateVolumeRequest())) == (
            grpc.StatusCode.INVALID_ARGUMENT
        )
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
        assert 'csi_rpc_total{code="OK",method="CreateVolume"} 1.0' in text
        assert 'csi_rpc_total{code="INVALID_ARGUMENT",method="CreateVolume"} 1.0' in text
        assert 'csi_rpc_duration_seconds_count{method="Probe"}' in text
        assert d.socket.exists()
    finally:
        code = d.stop()
        teardown_root(d.root)
    assert code == 0
    assert not d.socket.exists()


def test_bad_flags_exit_2_with_a_message() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "csi.main", "--endpoint", "tcp://0.0.0.0:1"],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[3],
    )
    assert proc.returncode == 2 and "unix:///" in proc.stderr


def test_split_controller_and_node_processes_share_one_local_state_dir() -> None:
    """The DaemonSet/Deployment split with the local backend: the node process follows the
    controller's state file (read-only) and sees volumes created after it started."""
    ctrl = _own_driver("--mode", "controller")
    node = Driver(make_root(), ["--mode", "node", "--state-dir", str(ctrl.state_dir)])
    try:
        node.start()
        assert (
            status_of(lambda: node.controller.CreateVolume(create_req("x"))) == grpc.StatusCode.UNIMPLEMENTED
        )
        cap = mount_cap("ext4")
        vol = ctrl.controller.CreateVolume(create_req("split", 32 * MIB, cap)).volume
        ctx = ctrl.controller.ControllerPublishVolume(
            csi_pb2.ControllerPublishVolumeRequest(
                volume_id=vol.volume_id, node_id=NODE_ID, volume_capability=cap
            )
        ).publish_context
        staging, target = node.root / "stage", node.root / "pods" / "split" / "mount"
        staging.mkdir()
        node.node.NodeStageVolume(
            csi_pb2.NodeStageVolumeRequest(
                volume_id=vol.volume_id,
                staging_target_path=str(staging),
                volume_capability=cap,
                publish_context=ctx,
            )
        )
        node.node.NodePublishVolume(
            csi_pb2.NodePublishVolumeRequest(
                volume_id=vol.volume_id,
                staging_target_path=str(staging),
                target_path=str(target),
                volume_capability=cap,
            )
        )
        (target / "f").write_text("split")
        node.node.NodeUnpublishVolume(
            csi_pb2.NodeUnpublishVolumeRequest(volume_id=vol.volume_id, target_path=str(target))
        )
        node.node.NodeUnstageVolume(
            csi_pb2.NodeUnstageVolumeRequest(volume_id=vol.volume_id, staging_target_path=str(staging))
        )
        ctrl.controller.ControllerUnpublishVolume(
            csi_pb2.ControllerUnpublishVolumeRequest(volume_id=vol.volume_id, node_id=NODE_ID)
        )
        ctrl.controller.DeleteVolume(csi_pb2.DeleteVolumeRequest(volume_id=vol.volume_id))
        assert loops_under(ctrl.root) == [] and mounts_under(node.root) == []
    finally:
        node.stop()
        ctrl.stop()
        teardown_root(node.root)
        teardown_root(ctrl.root)


def test_controller_reports_an_abnormal_volume_whose_file_vanished(driver: Driver) -> None:
    c = driver.controller
    vol = c.CreateVolume(create_req("vanishing", 16 * MIB)).volume
    healthy = c.ControllerGetVolume(csi_pb2.ControllerGetVolumeRequest(volume_id=vol.volume_id))
    assert not healthy.status.volume_condition.abnormal
    (driver.state_dir / "volumes" / f"{vol.volume_id}.img").unlink()
    sick = c.ControllerGetVolume(csi_pb2.ControllerGetVolumeRequest(volume_id=vol.volume_id))
    assert sick.status.volume_condition.abnormal and "missing" in sick.status.volume_condition.message
    listed = c.ListVolumes(csi_pb2.ListVolumesRequest()).entries
    assert [e.status.volume_condition.abnormal for e in listed] == [True]
    c.DeleteVolume(csi_pb2.DeleteVolumeRequest(volume_id=vol.volume_id))
    assert c.ListVolumes(csi_pb2.ListVolumesRequest()).entries == []
