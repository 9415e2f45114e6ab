"""NodeUnpublishVolume / NodeUnstageVolume unmount only what is the named volume's own (issue 20).

A kubelet (or a bad request) naming volume A with volume B's path, an unknown volume, or a path
holding some other filesystem must get a gRPC error and leave that mount in place: unmounting it
would pull a live volume out from under another pod.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import grpc
import pytest

from protos import csi_pb2
from tests.integration.csi.conftest import (
    MIB,
    Driver,
    block_cap,
    create_req,
    mount_cap,
    mounts_under,
    publish_all,
    status_of,
    teardown_all,
)

pytestmark = pytest.mark.root
UNKNOWN = "vol-" + "0" * 32  # well-formed, never issued


def mounted(path: Path) -> bool:
    return any(f" {path} " in line for line in mounts_under(path.parent))


def unpublish(driver: Driver, volume_id: str, target: Path) -> grpc.StatusCode:
    return status_of(
        lambda: driver.node.NodeUnpublishVolume(
            csi_pb2.NodeUnpublishVolumeRequest(volume_id=volume_id, target_path=str(target))
        )
    )


def unstage(driver: Driver, volume_id: str, staging: Path) -> grpc.StatusCode:
    return status_of(
        lambda: driver.node.NodeUnstageVolume(
            csi_pb2.NodeUnstageVolumeRequest(volume_id=volume_id, staging_target_path=str(staging))
        )
    )


def test_another_volumes_mounts_are_refused_and_left_mounted(driver: Driver) -> None:
    fs, blk = mount_cap("ext4"), block_cap()
    a = driver.controller.CreateVolume(create_req("own-a", 32 * MIB, fs)).volume.volume_id
    b = driver.controller.CreateVolume(create_req("own-b", 32 * MIB, fs)).volume.volume_id
    c = driver.controller.CreateVolume(create_req("own-c", 32 * MIB, blk)).volume.volume_id
    paths = {v: (driver.root / "stage" / v, driver.root / "pods" / v / "mnt") for v in (a, b, c)}
    publish_all(driver, a, fs, *paths[a])
    publish_all(driver, b, fs, *paths[b])
    publish_all(driver, c, blk, *paths[c])
    b_stage, b_target = paths[b]
    (b_target / "data").write_text("b's")

    assert unpublish(driver, a, b_target) == grpc.StatusCode.FAILED_PRECONDITION
    assert unpublish(driver, a, paths[c][1]) == grpc.StatusCode.FAILED_PRECONDITION  # block bind
    assert unstage(driver, a, b_stage) == grpc.StatusCode.FAILED_PRECONDITION
    assert unpublish(driver, UNKNOWN, b_target) == grpc.StatusCode.NOT_FOUND
    assert unstage(driver, UNKNOWN, b_stage) == grpc.StatusCode.NOT_FOUND
    assert mounted(b_target) and mounted(b_stage) and mounted(paths[c][1])
    assert (b_target / "data").read_text() == "b's"

    other = driver.root / "pods" / "tmpfs"
    other.mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "tmpfs", str(other)], check=True)
    try:
        assert unpublish(driver, a, other) == grpc.StatusCode.FAILED_PRECONDITION
        assert mounted(other)
    finally:
        subprocess.run(["umount", str(other)], check=True)

    # the owners' own calls still work, twice (idempotent), and an unknown volume with nothing
    # mounted is success: pods never hang in Terminating
    for v in (a, b, c):
        teardown_all(driver, v, *paths[v])
        driver.node.NodeUnpublishVolume(
            csi_pb2.NodeUnpublishVolumeRequest(volume_id=v, target_path=str(paths[v][1]))
        )
    driver.node.NodeUnpublishVolume(
        csi_pb2.NodeUnpublishVolumeRequest(volume_id=UNKNOWN, target_path=str(b_target))
    )
    assert mounts_under(driver.root) == []
