"""QoS limits really in force on the node, access-mode publish rules, small volumes, group snapshots.

Real driver process, real loop devices, mkfs, mounts, the kernel's cgroup throttle files
and fsfreeze. Throughput is measured with O_DIRECT dd from this (root-cgroup) process,
which the root blkio cgroup's rules cover on this cgroup-v1 machine.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import grpc
import pytest

from csi import freeze, iothrottle, loopdev
from csi.qos import IoLimits
from protos import csi_pb2
from tests.integration.csi.conftest import (
    MIB,
    Driver,
    block_cap,
    create_req,
    fs_of,
    loops_under,
    mount_cap,
    mounts_under,
    publish_all,
    status_of,
    teardown_all,
)

pytestmark = pytest.mark.root
Mode = csi_pb2.VolumeCapability.AccessMode


def throttle() -> iothrottle.DeviceThrottle:
    t = iothrottle.detect("auto")
    assert t is not None, "this machine has no cgroup I/O throttle files (v2 io.max or v1 blkio.throttle)"
    return t


def direct_write_seconds(path: Path, mib: int) -> float:
    t0 = time.perf_counter()
    subprocess.run(
        ["dd", "if=/dev/zero", f"of={path}", "bs=1M", f"count={mib}", "oflag=direct", "status=none"],
        check=True,
    )
    return time.perf_counter() - t0


def modify(driver: Driver, volume_id: str, **params: str) -> None:
    driver.controller.ControllerModifyVolume(
        csi_pb2.ControllerModifyVolumeRequest(volume_id=volume_id, mutable_parameters=params)
    )


def test_modify_volume_puts_a_write_limit_in_force_and_unlimited_lifts_it(driver: Driver) -> None:
    cap = mount_cap("ext4")
    vol = driver.controller.CreateVolume(create_req("qos-modify", 256 * MIB, cap)).volume
    staging, target = driver.root / "stage" / "q", driver.root / "pods" / "q" / "mount"
    device = publish_all(driver, vol.volume_id, cap, staging, target)["device_path"]
    assert throttle().current(device).unlimited

    modify(driver, vol.volume_id, writeBytesPerSecond="4Mi")
    assert throttle().current(device).numbers() == IoLimits(write_bps=4 * MIB).numbers()
    seconds = direct_write_seconds(target / "limited", 8)
    assert seconds >= 1.4, f"8 MiB at a 4 MiB/s limit took {seconds:.2f}s: the limit is not in force"

    modify(driver, vol.volume_id, qosClass="unlimited")
    assert throttle().current(device).unlimited

    teardown_all(driver, vol.volume_id, staging, target)
    assert loops_under(driver.root) == [] and mounts_under(driver.root) == []


def test_create_volume_limits_apply_on_attach_and_are_cleared_on_detach(driver: Driver) -> None:
    cap = block_cap()
    req = create_req("qos-create", 64 * MIB, cap)
    req.mutable_parameters.update({"qosClass": "bronze", "readIOPS": "100"})
    vol = driver.controller.CreateVolume(req).volume
    staging, target = driver.root / "stage" / "b", driver.root / "pods" / "b" / "dev"
    device = publish_all(driver, vol.volume_id, cap, staging, target)["device_path"]
    in_force = throttle().current(device)
    assert (in_force.read_iops, in_force.write_bps) == (100, 20 * MIB)
    teardown_all(driver, vol.volume_id, staging, target)
    if Path(device).exists():  # a reused number must not inherit the old volume's limits
        assert throttle().current(device).unlimited


def test_bad_mutable_parameters_change_nothing(driver: Driver) -> None:
    cap = block_cap()
    req = create_req("qos-bad", 64 * MIB, cap)
    req.mutable_parameters["qosClass"] = "bronze"
    vol = driver.controller.CreateVolume(req).volume
    staging, target = driver.root / "stage" / "x", driver.root / "pods" / "x" / "dev"
    device = publish_all(driver, vol.volume_id, cap, staging, target)["device_path"]
    before = throttle().current(device)
    bad: list[dict[str, str]] = [{"XXX_FakeKey": "v"}, {"type": "hdd"}, {"qosClass": "platinum"}]
    for params in bad:

        def call(p: dict[str, str] = params) -> None:
            modify(driver, vol.volume_id, **p)

        assert status_of(call) == grpc.StatusCode.INVALID_ARGUMENT
    assert throttle().current(device) == before and before.write_bps == 20 * MIB
    teardown_all(driver, vol.volume_id, staging, target)


@pytest.mark.parametrize("kind", ["mount", "block"])
def test_single_writer_publishes_once_multi_writer_many_times(driver: Driver, kind: str) -> None:
    def cap(mode: int) -> csi_pb2.VolumeCapability:
        return mount_cap("ext4", mode) if kind == "mount" else block_cap(mode)

    single, multi = cap(Mode.SINGLE_NODE_SINGLE_WRITER), cap(Mode.SINGLE_NODE_MULTI_WRITER)
    vol = driver.controller.CreateVolume(create_req(f"rwop-{kind}", 64 * MIB, single)).volume
    staging, first = driver.root / "stage" / kind, driver.root / "pods" / "a" / kind
    ctx = publish_all(driver, vol.volume_id, single, staging, first)

    def publish(target: Path, c: csi_pb2.VolumeCapability) -> None:
        driver.node.NodePublishVolume(
            csi_pb2.NodePublishVolumeRequest(
                volume_id=vol.volume_id, staging_target_path=str(staging), target_path=str(target),
                volume_capability=c, publish_context=ctx,
            )
        )  # fmt: skip

    second = driver.root / "pods" / "b" / kind
    second.parent.mkdir(parents=True)
    publish(first, single)  # the same target again: idempotent
    assert status_of(lambda: publish(second, single)) == grpc.StatusCode.FAILED_PRECONDITION
    assert not second.exists() or not any(m for m in mounts_under(second))
    publish(second, multi)  # ReadWriteOnce (SINGLE_NODE_MULTI_WRITER): a second pod on the node is fine
    driver.node.NodeUnpublishVolume(
        csi_pb2.NodeUnpublishVolumeRequest(volume_id=vol.volume_id, target_path=str(second))
    )
    teardown_all(driver, vol.volume_id, staging, first)
    assert loops_under(driver.root) == [] and mounts_under(driver.root) == []


def test_node_reports_the_loop_devices_it_can_hold() -> None:
    # 2**20 minors >> part_shift: devices beyond max_loop are created on demand (/dev/loop40 seen)
    assert (
        loopdev.node_capacity()
        == (1 << 20) >> int(Path("/sys/module/loop/parameters/max_part").read_text()).bit_length()
    )


def test_small_volumes_get_ext4_under_auto_and_explicit_xfs_names_its_minimum() -> None:
    from tests.integration.csi.conftest import make_root, teardown_root

    d = Driver(make_root(), ["--default-fs-type", "auto"])
    try:
        d.start()
        cap = mount_cap()
        vol = d.controller.CreateVolume(create_req("small", 100 * MIB, cap)).volume
        assert vol.capacity_bytes == 100 * MIB and vol.volume_context["fsType"] in ("ext4",)
        staging, target = d.root / "stage" / "s", d.root / "pods" / "s" / "mount"
        publish_all(d, vol.volume_id, cap, staging, target)
        assert fs_of(target) == "ext4"
        teardown_all(d, vol.volume_id, staging, target)
        with pytest.raises(grpc.RpcError) as info:
            d.controller.CreateVolume(create_req("small-xfs", 100 * MIB, mount_cap("xfs")))
        assert info.value.code() == grpc.StatusCode.OUT_OF_RANGE and "300 MiB" in (info.value.details() or "")
        big = d.controller.CreateVolume(create_req("big", 400 * MIB, cap)).volume
        assert big.volume_context["fsType"] == "xfs"  # what auto picks here (no CAP_SYS_RESOURCE)
        d.controller.DeleteVolume(csi_pb2.DeleteVolumeRequest(volume_id=big.volume_id))
    finally:
        d.stop()
        teardown_root(d.root)


def _frozen(mount_point: Path) -> bool:
    """fsfreeze --freeze on an already frozen filesystem fails with EBUSY."""
    probe = subprocess.run(["fsfreeze", "--freeze", str(mount_point)], capture_output=True, text=True)
    if probe.returncode == 0:
        subprocess.run(["fsfreeze", "--unfreeze", str(mount_point)], check=True)
        return False
    return True


def published_ext4_volumes(driver: Driver, prefix: str, n: int) -> tuple[list[str], list[tuple[Path, Path]]]:
    """n published ext4 volumes, each with a file `data` saying which it is."""
    cap = mount_cap("ext4")
    vols, targets = [], []
    for i in range(n):
        vol = driver.controller.CreateVolume(create_req(f"{prefix}-{i}", 64 * MIB, cap)).volume
        staging, target = driver.root / "stage" / f"{prefix}{i}", driver.root / "pods" / f"{prefix}{i}" / "m"
        publish_all(driver, vol.volume_id, cap, staging, target)
        (target / "data").write_text(f"volume {i}")
        vols.append(vol.volume_id)
        targets.append((staging, target))
    return vols, targets


def test_freeze_holds_every_member_at_once_and_always_thaws(driver: Driver) -> None:
    vols, targets = published_ext4_volumes(driver, "fr", 3)
    files = [driver.state_dir / "volumes" / f"{v}.img" for v in vols]
    with freeze.frozen(files) as points:
        assert len(points) == 3 and all(_frozen(Path(p)) for p in points)
    assert not any(_frozen(Path(p)) for p in points)
    with pytest.raises(RuntimeError), freeze.frozen(files):
        raise RuntimeError("copy failed")
    assert not any(_frozen(Path(p)) for p in points)
    for vol_id, (staging, target) in zip(vols, targets, strict=True):
        teardown_all(driver, vol_id, staging, target)


def test_group_snapshot_of_four_volumes_restores_each_and_thaws_on_error(driver: Driver) -> None:
    cap = mount_cap("ext4")
    vols, targets = published_ext4_volumes(driver, "grp", 4)
    group = driver.group
    req = csi_pb2.CreateVolumeGroupSnapshotRequest(name="g1", source_volume_ids=vols)
    made = group.CreateVolumeGroupSnapshot(req).group_snapshot
    assert made.ready_to_use and sorted(s.source_volume_id for s in made.snapshots) == sorted(vols)
    assert {s.group_snapshot_id for s in made.snapshots} == {made.group_snapshot_id}
    assert group.CreateVolumeGroupSnapshot(req).group_snapshot == made  # idempotent by name
    other = csi_pb2.CreateVolumeGroupSnapshotRequest(name="g1", source_volume_ids=vols[:2])
    assert status_of(lambda: group.CreateVolumeGroupSnapshot(other)) == grpc.StatusCode.ALREADY_EXISTS
    ids = [s.snapshot_id for s in made.snapshots]
    got = group.GetVolumeGroupSnapshot(
        csi_pb2.GetVolumeGroupSnapshotRequest(group_snapshot_id=made.group_snapshot_id, snapshot_ids=ids)
    ).group_snapshot
    assert got == made
    member = csi_pb2.DeleteSnapshotRequest(snapshot_id=ids[0])
    assert status_of(lambda: driver.controller.DeleteSnapshot(member)) == grpc.StatusCode.FAILED_PRECONDITION

    snap = next(s for s in made.snapshots if s.source_volume_id == vols[2])
    restore = create_req("grp-restore", 64 * MIB, cap)
    restore.volume_content_source.snapshot.snapshot_id = snap.snapshot_id
    restored = driver.controller.CreateVolume(restore).volume
    rs, rt = driver.root / "stage" / "r", driver.root / "pods" / "r" / "m"
    publish_all(driver, restored.volume_id, cap, rs, rt)
    assert (rt / "data").read_text() == "volume 2"
    teardown_all(driver, restored.volume_id, rs, rt)

    wrong = csi_pb2.DeleteVolumeGroupSnapshotRequest(
        group_snapshot_id=made.group_snapshot_id, snapshot_ids=ids[:1]
    )
    assert status_of(lambda: group.DeleteVolumeGroupSnapshot(wrong)) == grpc.StatusCode.FAILED_PRECONDITION
    group.DeleteVolumeGroupSnapshot(
        csi_pb2.DeleteVolumeGroupSnapshotRequest(group_snapshot_id=made.group_snapshot_id, snapshot_ids=ids)
    )
    assert not list(driver.controller.ListSnapshots(csi_pb2.ListSnapshotsRequest()).entries)

    # a member whose backing file vanished: the copy fails after the others were frozen; all are thawed
    (driver.state_dir / "volumes" / f"{vols[3]}.img").rename(driver.root / "moved.img")
    broken = csi_pb2.CreateVolumeGroupSnapshotRequest(name="g2", source_volume_ids=vols)
    assert status_of(lambda: group.CreateVolumeGroupSnapshot(broken)) == grpc.StatusCode.INTERNAL
    for _, target in targets[:3]:
        assert not _frozen(target)
        (target / "after").write_text("writable")
    assert not list((driver.state_dir / "snapshots").iterdir())  # nothing half-made left
    (driver.root / "moved.img").rename(driver.state_dir / "volumes" / f"{vols[3]}.img")
    for vol_id, (staging, target) in zip(vols, targets, strict=True):
        teardown_all(driver, vol_id, staging, target)
    assert loops_under(driver.root) == [] and mounts_under(driver.root) == []
