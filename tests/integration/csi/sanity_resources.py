"""What csi-sanity's TestContext and Resources (pkg/sanity/sanity.go, resources.go) do, in Python.

`Resources` wraps the CSI clients, remembers every volume, snapshot, publication, stage
and node publish a spec made, and `cleanup()` undoes them in reverse after each spec.
Defaults are csi-sanity's: 10 GiB test volumes, +1 GiB expansion, idempotent count 10.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from pathlib import Path

from protos import csi_pb2, csi_pb2_grpc

TEST_VOLUME_SIZE = 10 << 30
EXPAND_SIZE = TEST_VOLUME_SIZE + (1 << 30)
IDEMPOTENT_COUNT = 10
MAX_NAME_LENGTH = 128
TEST_VOLUME_MUTABLE_PARAMETERS = {"qosClass": "silver"}
"""What `--csi.testvolumemutableparameters` would pass: a VolumeAttributesClass's parameters."""
Mode = csi_pb2.VolumeCapability.AccessMode


def unique_string(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(8)}"


def unique_string_with_length(prefix: str, length: int) -> str:
    name = unique_string(prefix)
    return name + "x" * (length - len(name))


def sanity_capability(mode: int = Mode.SINGLE_NODE_WRITER) -> csi_pb2.VolumeCapability:
    return csi_pb2.VolumeCapability(
        mount=csi_pb2.VolumeCapability.MountVolume(),
        access_mode=csi_pb2.VolumeCapability.AccessMode(mode=mode),
    )


def make_modify_volume_req(volume_id: str) -> csi_pb2.ControllerModifyVolumeRequest:
    return csi_pb2.ControllerModifyVolumeRequest(
        volume_id=volume_id, mutable_parameters=TEST_VOLUME_MUTABLE_PARAMETERS
    )


def make_create_volume_req(name: str) -> csi_pb2.CreateVolumeRequest:
    return csi_pb2.CreateVolumeRequest(
        name=name,
        volume_capabilities=[sanity_capability()],
        capacity_range=csi_pb2.CapacityRange(required_bytes=TEST_VOLUME_SIZE, limit_bytes=TEST_VOLUME_SIZE),
    )


@dataclass
class SanityContext:
    """sc: the endpoints and the per-spec target/staging directories (created by the test, like sanity)."""

    controller: csi_pb2_grpc.ControllerStub
    node: csi_pb2_grpc.NodeStub
    identity: csi_pb2_grpc.IdentityStub
    target_path: str
    staging_path: str
    group: csi_pb2_grpc.GroupControllerStub | None = None


@dataclass
class Resources:
    sc: SanityContext
    volumes: list[str] = field(default_factory=list)
    snapshots: list[str] = field(default_factory=list)
    controller_published: list[tuple[str, str]] = field(default_factory=list)
    staged: list[tuple[str, str]] = field(default_factory=list)
    node_published: list[tuple[str, str]] = field(default_factory=list)

    def create_volume(self, req: csi_pb2.CreateVolumeRequest) -> csi_pb2.CreateVolumeResponse:
        resp = self.sc.controller.CreateVolume(req)
        if resp.volume.volume_id not in self.volumes:
            self.volumes.append(resp.volume.volume_id)
        return resp

    must_create_volume = create_volume

    def create_snapshot(self, req: csi_pb2.CreateSnapshotRequest) -> csi_pb2.CreateSnapshotResponse:
        resp = self.sc.controller.CreateSnapshot(req)
        if resp.snapshot.snapshot_id not in self.snapshots:
            self.snapshots.append(resp.snapshot.snapshot_id)
        return resp

    must_create_snapshot = create_snapshot

    def must_create_snapshot_from_volume_request(
        self, vol_req: csi_pb2.CreateVolumeRequest, snap_name: str
    ) -> tuple[csi_pb2.CreateSnapshotResponse, csi_pb2.CreateVolumeResponse]:
        vol = self.must_create_volume(vol_req)
        snap = self.must_create_snapshot(
            csi_pb2.CreateSnapshotRequest(name=snap_name, source_volume_id=vol.volume.volume_id)
        )
        return snap, vol

    def controller_publish_volume(
        self, req: csi_pb2.ControllerPublishVolumeRequest
    ) -> csi_pb2.ControllerPublishVolumeResponse:
        resp = self.sc.controller.ControllerPublishVolume(req)
        self.controller_published.append((req.volume_id, req.node_id))
        return resp

    must_controller_publish_volume = controller_publish_volume

    def node_stage_volume(self, req: csi_pb2.NodeStageVolumeRequest) -> csi_pb2.NodeStageVolumeResponse:
        resp = self.sc.node.NodeStageVolume(req)
        self.staged.append((req.volume_id, req.staging_target_path))
        return resp

    def node_publish_volume(self, req: csi_pb2.NodePublishVolumeRequest) -> csi_pb2.NodePublishVolumeResponse:
        resp = self.sc.node.NodePublishVolume(req)
        self.node_published.append((req.volume_id, req.target_path))
        return resp

    def node_get_info(self) -> csi_pb2.NodeGetInfoResponse:
        return self.sc.node.NodeGetInfo(csi_pb2.NodeGetInfoRequest())

    def cleanup(self) -> None:
        """Undo everything, newest first, as csi-sanity's Resources.Cleanup does; errors fail the spec."""
        for volume_id, target in reversed(dict.fromkeys(self.node_published)):
            self.sc.node.NodeUnpublishVolume(
                csi_pb2.NodeUnpublishVolumeRequest(volume_id=volume_id, target_path=target)
            )
        for volume_id, staging in reversed(dict.fromkeys(self.staged)):
            self.sc.node.NodeUnstageVolume(
                csi_pb2.NodeUnstageVolumeRequest(volume_id=volume_id, staging_target_path=staging)
            )
        for volume_id, node_id in reversed(dict.fromkeys(self.controller_published)):
            self.sc.controller.ControllerUnpublishVolume(
                csi_pb2.ControllerUnpublishVolumeRequest(volume_id=volume_id, node_id=node_id)
            )
        for snapshot_id in reversed(self.snapshots):
            self.sc.controller.DeleteSnapshot(csi_pb2.DeleteSnapshotRequest(snapshot_id=snapshot_id))
        for volume_id in reversed(self.volumes):
            self.sc.controller.DeleteVolume(csi_pb2.DeleteVolumeRequest(volume_id=volume_id))
        self.volumes.clear()
        self.snapshots.clear()


def check_path_gone(path: str) -> bool:
    return not Path(path).exists()
