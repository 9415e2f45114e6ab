"""Whole volume lifecycles over real gRPC against real loop devices, mkfs and mounts."""

from __future__ import annotations

import os

import grpc
import pytest

from protos import csi_pb2
from tests.integration.csi.conftest import (
    MIB,
    NODE_ID,
    Driver,
    block_cap,
    create_req,
    fs_bytes,
    fs_of,
    has_cap_sys_resource,
    loops_under,
    mount_cap,
    mounts_under,
    publish_all,
    status_of,
    teardown_all,
)

pytestmark = pytest.mark.root


@pytest.mark.parametrize("fs_type", ["ext4", "xfs"])
def test_mount_volume_lifecycle_writes_survive_restage_and_expand_online(
    driver: Driver, fs_type: str
) -> None:
    cap = mount_cap(fs_type)
    vol = driver.controller.CreateVolume(create_req(f"life-{fs_type}", 320 * MIB, cap)).volume
    assert vol.capacity_bytes == 320 * MIB
    assert vol.accessible_topology[0].segments["topology.stor.plasmacloud.io/node"] == NODE_ID
    staging, target = driver.root / "stage" / fs_type, driver.root / "pods" / fs_type / "mount"
    ctx = publish_all(driver, vol.volume_id, cap, staging, target)
    assert ctx["device_path"].startswith("/dev/loop")
    assert fs_of(target) == fs_type
    (target / "hello.txt").write_text("persist me")

    # a fresh stage never reformats: unstage, stage again, the file is still there
    driver.node.NodeUnpublishVolume(
        csi_pb2.NodeUnpublishVolumeRequest(volume_id=vol.volume_id, target_path=str(target))
    )
    assert not target.exists()
    driver.node.NodeUnstageVolume(
        csi_pb2.NodeUnstageVolumeRequest(volume_id=vol.volume_id, staging_target_path=str(staging))
    )
    publish_all(driver, vol.volume_id, cap, staging, target)
    assert (target / "hello.txt").read_text() == "persist me"

    exp = driver.controller.ControllerExpandVolume(
        csi_pb2.ControllerExpandVolumeRequest(
            volume_id=vol.volume_id, capacity_range=csi_pb2.CapacityRange(required_bytes=640 * MIB)
        )
    )
    assert exp.capacity_bytes == 640 * MIB and exp.node_expansion_required
    before = fs_bytes(target)
    expand = csi_pb2.NodeExpandVolumeRequest(
        volume_id=vol.volume_id, volume_path=str(target), volume_capability=cap
    )
    if fs_type == "ext4" and not has_cap_sys_resource():
        # The kernel refuses online ext4 growth without CAP_SYS_RESOURCE (absent on this VM):
        # a clear FAILED_PRECONDITION, and the next stage grows the filesystem offline.
        assert status_of(lambda: driver.node.NodeExpandVolume(expand)) == grpc.StatusCode.FAILED_PRECONDITION
        driver.node.NodeUnpublishVolume(
            csi_pb2.NodeUnpublishVolumeRequest(volume_id=vol.volume_id, target_path=str(target))
        )
        driver.node.NodeUnstageVolume(
            csi_pb2.NodeUnstageVolumeRequest(volume_id=vol.volume_id, staging_target_path=str(staging))
        )
        publish_all(driver, vol.volume_id, cap, staging, target)
        assert (
            driver.node.NodeExpandVolume(expand).capacity_bytes == 640 * MIB
        )  # kubelet's retry: now a no-op
    else:
        assert driver.node.NodeExpandVolume(expand).capacity_bytes == 640 * MIB
    after = fs_bytes(target)
    assert after > before + 200 * MIB
    assert (target / "hello.txt").read_text() == "persist me"

    stats = driver.node.NodeGetVolumeStats(
        csi_pb2.NodeGetVolumeStatsRequest(volume_id=vol.volume_id, volume_path=str(target))
    )
    units = {u.unit: u for u in stats.usage}
    assert units[csi_pb2.VolumeUsage.BYTES].total == after
    assert units[csi_pb2.VolumeUsage.INODES].used > 0
    assert not stats.volume_condition.abnormal

    teardown_all(driver, vol.volume_id, staging, target)
    assert loops_under(driver.root) == []
    assert mounts_under(driver.root) == []
    assert list((driver.state_dir / "volumes").iterdir()) == []


def test_block_volume_is_published_as_a_device_file(driver: Driver) -> None:
    cap = block_cap()
    vol = driver.controller.CreateVolume(create_req("life-block", 32 * MIB, cap)).volume
    staging, target = driver.root / "stage" / "blk", driver.root / "pods" / "blk" / "dev"
    publish_all(driver, vol.volume_id, cap, staging, target)
    assert os.path.exists(target) and os.major(os.stat(target).st_rdev) == 7  # a loop device node
    with open(target, "r+b") as dev:
        dev.seek(5 * MIB)
        dev.write(b"raw-bytes")
        dev.flush()
        os.fsync(dev.fileno())
    with open(target, "rb") as dev:
        dev.seek(5 * MIB)
        assert dev.read(9) == b"raw-bytes"
    stats = driver.node.NodeGetVolumeStats(
        csi_pb2.NodeGetVolumeStatsRequest(volume_id=vol.volume_id, volume_path=str(target))
    )
    assert stats.usage[0].total == 32 * MIB

    exp = driver.controller.ControllerExpandVolume(
        csi_pb2.ControllerExpandVolumeRequest(
            volume_id=vol.volume_id, capacity_range=csi_pb2.CapacityRange(required_bytes=48 * MIB)
        )
    )
    assert exp.capacity_bytes == 48 * MIB and not exp.node_expansion_required
    with open(target, "rb") as dev:
        assert dev.seek(0, os.SEEK_END) == 48 * MIB

    teardown_all(driver, vol.volume_id, staging, target)
    assert not target.exists()
    assert loops_under(driver.root) == [] and mounts_under(driver.root) == []


def test_readonly_publish_refuses_writes(driver: Driver) -> None:
    cap = mount_cap("ext4")
    vol = driver.controller.CreateVolume(create_req("life-ro", 32 * MIB, cap)).volume
    staging, target = driver.root / "stage" / "ro", driver.root / "pods" / "ro" / "mount"
    publish_all(driver, vol.volume_id, cap, staging, target, readonly=True)
    with pytest.raises(OSError):
        (target / "nope").write_text("x")
    # the same target published read-write is an incompatible second publish
    assert (
        status_of(
            lambda: driver.node.NodePublishVolume(
                csi_pb2.NodePublishVolumeRequest(
                    volume_id=vol.volume_id,
                    staging_target_path=str(staging),
                    target_path=str(target),
                    volume_capability=cap,
                )
            )
        )
        == grpc.StatusCode.ALREADY_EXISTS
    )
    teardown_all(driver, vol.volume_id, staging, target)


@pytest.mark.parametrize("fs_type", ["ext4", "xfs"])
def test_snapshot_restore_and_clone_carry_the_data_and_stay_sparse(driver: Driver, fs_type: str) -> None:
    cap = mount_cap(fs_type)
    vol = driver.controller.CreateVolume(create_req("snap-src", 320 * MIB, cap)).volume
    staging, target = driver.root / "stage" / "src", driver.root / "pods" / "src" / "mount"
    publish_all(driver, vol.volume_id, cap, staging, target)
    (target / "data.txt").write_text("snapshot me")
    snap = driver.controller.CreateSnapshot(
        csi_pb2.CreateSnapshotRequest(name="snap-1", source_volume_id=vol.volume_id)
    ).snapshot
    assert snap.ready_to_use and snap.size_bytes == 320 * MIB and snap.creation_time.seconds > 0
    (target / "data.txt").write_text("changed after the snapshot")

    for name, source in (
        (
            "restored",
            csi_pb2.VolumeContentSource(
                snapshot=csi_pb2.VolumeContentSource.SnapshotSource(snapshot_id=snap.snapshot_id)
            ),
        ),
        (
            "cloned",
            csi_pb2.VolumeContentSource(
                volume=csi_pb2.VolumeContentSource.VolumeSource(volume_id=vol.volume_id)
            ),
        ),
    ):
        req = create_req(name, 640 * MIB, cap)
        req.volume_content_source.CopyFrom(source)
        new = driver.controller.CreateVolume(req).volume
        assert new.content_source == source and new.capacity_bytes == 640 * MIB
        img = driver.state_dir / "volumes" / f"{new.volume_id}.img"
        assert img.stat().st_blocks * 512 < 64 * MIB, "restore/clone inflated the sparse file"
        s2, t2 = driver.root / "stage" / name, driver.root / "pods" / name / "mount"
        publish_all(driver, new.volume_id, cap, s2, t2)
        expected = "snapshot me" if name == "restored" else "changed after the snapshot"
        assert (t2 / "data.txt").read_text() == expected
        teardown_all(driver, new.volume_id, s2, t2)

    driver.controller.DeleteSnapshot(csi_pb2.DeleteSnapshotRequest(snapshot_id=snap.snapshot_id))
    teardown_all(driver, vol.volume_id, staging, target)
    assert list((driver.state_dir / "snapshots").iterdir()) == []
    assert loops_under(driver.root) == [] and mounts_under(driver.root) == []
