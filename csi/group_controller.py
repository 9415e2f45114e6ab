"""CSI GroupController service: crash-consistent snapshots of several volumes (VolumeGroupSnapshot).

Thin like the Controller: validate (INVALID_ARGUMENT first), take the locks of the
group name and of every member volume, ask the backend. Registered on the socket, and
GROUP_CONTROLLER_SERVICE claimed, only when the backend supports group snapshots.
"""

from __future__ import annotations

import logging

import grpc
from google.protobuf import timestamp_pb2

from csi import wire
from csi.backends.base import GroupSnapshot, VolumeBackend
from csi.controller import snapshot_message
from csi.errors import FailedPrecondition
from csi.locks import KeyedLocks
from csi.rpc import rpc
from protos import csi_pb2, csi_pb2_grpc

log = logging.getLogger(__name__)

GroupRpc = csi_pb2.GroupControllerServiceCapability.RPC


class GroupControllerServicer(csi_pb2_grpc.GroupControllerServicer):
    def __init__(self, backend: VolumeBackend, locks: KeyedLocks) -> None:
        self._backend = backend
        self._locks = locks

    @rpc
    def GroupControllerGetCapabilities(
        self, request: csi_pb2.GroupControllerGetCapabilitiesRequest, context: grpc.ServicerContext
    ) -> csi_pb2.GroupControllerGetCapabilitiesResponse:
        cap = csi_pb2.GroupControllerServiceCapability(
            rpc=GroupRpc(type=GroupRpc.CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT)
        )
        return csi_pb2.GroupControllerGetCapabilitiesResponse(capabilities=[cap])

    @rpc
    def CreateVolumeGroupSnapshot(
        self, request: csi_pb2.CreateVolumeGroupSnapshotRequest, context: grpc.ServicerContext
    ) -> csi_pb2.CreateVolumeGroupSnapshotResponse:
        wire.require(name=request.name, source_volume_ids=len(request.source_volume_ids))
        for volume_id in request.source_volume_ids:
            wire.require(source_volume_id=volume_id)
        volumes = list(dict.fromkeys(request.source_volume_ids))
        with self._locks.hold(f"group:{request.name}", *volumes):
            group = self._backend.create_group_snapshot(request.name, volumes)
        return csi_pb2.CreateVolumeGroupSnapshotResponse(group_snapshot=_group_message(group))

    @rpc
    def DeleteVolumeGroupSnapshot(
        self, request: csi_pb2.DeleteVolumeGroupSnapshotRequest, context: grpc.ServicerContext
    ) -> csi_pb2.DeleteVolumeGroupSnapshotResponse:
        wire.require(group_snapshot_id=request.group_snapshot_id)
        with self._locks.hold(request.group_snapshot_id):
            self._backend.delete_group_snapshot(request.group_snapshot_id, list(request.snapshot_ids))
        return csi_pb2.DeleteVolumeGroupSnapshotResponse()

    @rpc
    def GetVolumeGroupSnapshot(
        self, request: csi_pb2.GetVolumeGroupSnapshotRequest, context: grpc.ServicerContext
    ) -> csi_pb2.GetVolumeGroupSnapshotResponse:
        wire.require(group_snapshot_id=request.group_snapshot_id)
        group = self._backend.get_group_snapshot(request.group_snapshot_id)
        members = sorted(s.id for s in group.snapshots)
        if request.snapshot_ids and sorted(request.snapshot_ids) != members:
            raise FailedPrecondition(f"snapshot_ids are not the members of {group.id}: {members}")
        return csi_pb2.GetVolumeGroupSnapshotResponse(group_snapshot=_group_message(group))


def _group_message(group: GroupSnapshot) -> csi_pb2.VolumeGroupSnapshot:
    created = timestamp_pb2.Timestamp()
    created.FromNanoseconds(int(group.created_at * 1e9))
    return csi_pb2.VolumeGroupSnapshot(
        group_snapshot_id=group.id,
        snapshots=[snapshot_message(s) for s in group.snapshots],
        creation_time=created,
        ready_to_use=group.ready,
    )
