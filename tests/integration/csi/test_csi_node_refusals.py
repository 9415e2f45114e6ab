"""What a node plugin refuses though kubelet (or whoever writes a VolumeAttachment's status, or answers
as the VolumeService) asks for it, through a gRPC client on the driver's real socket:
- a publish_context whose device_path names another volume's loop device, or a host block device,
  mounts nothing and formats nothing (FAILED_PRECONDITION): the device must carry the volume's identity;
- a mount flag outside the allow-list (`bind`, `remount`, a comma smuggling more options) is
  INVALID_ARGUMENT before anything is mounted;
- target and staging paths outside kubelet's directory (also through a symlink) are INVALID_ARGUMENT."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from nodeenv.lightningstor import FakeVolumeService
from nodeenv.plasmacloud_auth import DevPki
from protos import csi_pb2
from tests.integration.csi.conftest import (
    MIB,
    NODE_ID,
    Driver,
    create_req,
    lightningstor_driver,
    mount_cap,
    mounts_under,
    status_of,
)

pytestmark = pytest.mark.root


@pytest.fixture
def ls_driver(plasmacloud_pki: DevPki) -> Iterator[tuple[Driver, FakeVolumeService]]:
    with lightningstor_driver(plasmacloud_pki, own_kubelet_dir=True) as d:
        yield d


def _attach(driver: Driver, name: str) -> tuple[str, dict[str, str]]:
    vol = driver.controller.CreateVolume(create_req(name, 64 * MIB, mount_cap("ext4"))).volume
    pub = driver.controller.ControllerPublishVolume(
        csi_pb2.ControllerPublishVolumeRequest(
            volume_id=vol.volume_id, node_id=NODE_ID, volume_capability=mount_cap("ext4")
        )
    )
    return vol.volume_id, dict(pub.publish_context)


def _stage(driver: Driver, volume_id: str, ctx: dict[str, str], staging: Path,
           flags: tuple[str, ...] = ()) -> None:  # fmt: skip
    staging.mkdir(parents=True, exist_ok=True)
    driver.node.NodeStageVolume(
        csi_pb2.NodeStageVolumeRequest(
            volume_id=volume_id,
            staging_target_path=str(staging),
            volume_capability=mount_cap("ext4", flags=flags),
            publish_context=ctx,
        )
    )


def _blkid(device: str) -> str:
    return subprocess.run(["blkid", "-p", device], capture_output=True, text=True).stdout


def test_another_volumes_device_is_never_mounted_or_formatted(
    ls_driver: tuple[Driver, FakeVolumeService],
) -> None:
    driver, _ = ls_driver
    mine, ctx = _attach(driver, "pvc-mine")
    _, their_ctx = _attach(driver, "pvc-theirs")
    staging = driver.root / "kubelet" / "plugins" / "mine" / "globalmount"
    forged = {**ctx, "device_path": their_ctx["device_path"]}
    code = status_of(lambda: _stage(driver, mine, forged, staging))
    assert code == grpc.StatusCode.FAILED_PRECONDITION
    assert mounts_under(staging) == [] and _blkid(their_ctx["device_path"]) == ""  # not formatted
    host_disk = {**ctx, "device_path": _a_host_block_device()}
    assert status_of(lambda: _stage(driver, mine, host_disk, staging)) == grpc.StatusCode.FAILED_PRECONDITION
    assert mounts_under(staging) == []
    _stage(driver, mine, ctx, staging)  # its own device: staged
    assert mounts_under(staging)


def _a_host_block_device() -> str:
    for name in sorted(os.listdir("/sys/class/block")):
        if not name.startswith("loop") and os.path.exists(f"/dev/{name}"):
            return f"/dev/{name}"
    pytest.skip("no non-loop block device on this machine")


@pytest.mark.parametrize(
    "flag", ["bind", "remount", "rbind", "ro,bind", "suid", "x-mount.mkdir", "context=x"]
)
def test_mount_flags_outside_the_allow_list_are_invalid(
    ls_driver: tuple[Driver, FakeVolumeService], flag: str
) -> None:
    driver, _ = ls_driver
    volume_id, ctx = _attach(driver, f"pvc-flag-{abs(hash(flag)) % 10000}")
    staging = driver.root / "kubelet" / "plugins" / volume_id / "globalmount"
    code = status_of(lambda: _stage(driver, volume_id, ctx, staging, (flag,)))
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert mounts_under(staging) == []
    _stage(driver, volume_id, ctx, staging, ("noatime", "nosuid", "nodev", "data=ordered"))
    assert mounts_under(staging)


def test_paths_outside_kubelets_dir_are_invalid(ls_driver: tuple[Driver, FakeVolumeService]) -> None:
    driver, _ = ls_driver
    volume_id, ctx = _attach(driver, "pvc-paths")
    outside = driver.root / "outside"
    assert status_of(lambda: _stage(driver, volume_id, ctx, outside)) == grpc.StatusCode.INVALID_ARGUMENT
    link = driver.root / "kubelet" / "escape"
    link.symlink_to(outside)  # inside by name, outside once resolved
    escaped = link / "globalmount"
    assert status_of(lambda: _stage(driver, volume_id, ctx, escaped)) == grpc.StatusCode.INVALID_ARGUMENT
    assert mounts_under(outside) == []
    staging = driver.root / "kubelet" / "plugins" / volume_id / "globalmount"
    _stage(driver, volume_id, ctx, staging)
    target = Path("/etc") / f"k8shost-test-{volume_id}"
    req = csi_pb2.NodePublishVolumeRequest(
        volume_id=volume_id, staging_target_path=str(staging), target_path=str(target),
        volume_capability=mount_cap("ext4"), publish_context=ctx,
    )  # fmt: skip
    assert status_of(lambda: driver.node.NodePublishVolume(req)) == grpc.StatusCode.INVALID_ARGUMENT
    assert not target.exists()
