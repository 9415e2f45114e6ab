"""CSI Controller service: provisioning, attach/detach, snapshots, expansion.

Thin: it validates the request (InvalidArgument before anything else, as csi-sanity
expects), takes the operation lock of the volume/name, and asks the backend.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import grpc
from google.protobuf import timestamp_pb2, wrappers_pb2

from csi import qos, wire
from csi.backends.base import Snapshot, Volume, VolumeBackend, VolumeSpec
from csi.errors import (
    AlreadyExists,
    InvalidArgument,
    OutOfRange,
    ResourceExhausted,
    Unimplemented,
    VolumeNotFound,
)
from csi.locks import KeyedLocks
from csi.rpc import rpc
from csi.settings import TOPOLOGY_KEY
from protos import csi_pb2, csi_pb2_grpc

log = logging.getLogger(__name__)

Rpc = csi_pb2.ControllerServiceCapability.RPC
BASE_CAPABILITIES = (
    Rpc.CREATE_DELETE_VOLUME,
    Rpc.PUBLISH_UNPUBLISH_VOLUME,
    Rpc.LIST_VOLUMES,
    Rpc.GET_CAPACITY,
    Rpc.CREATE_DELETE_SNAPSHOT,
    Rpc.LIST_SNAPSHOTS,
    Rpc.CLONE_VOLUME,
    Rpc.PUBLISH_READONLY,
    Rpc.EXPAND_VOLUME,
    Rpc.GET_VOLUME,
    Rpc.VOLUME_CONDITION,
    Rpc.SINGLE_NODE_MULTI_WRITER,
    Rpc.MODIFY_VOLUME,
    Rpc.GET_SNAPSHOT,
)


class ControllerServicer(csi_pb2_grpc.ControllerServicer):
    def __init__(
        self, backend: VolumeBackend, locks: KeyedLocks, default_fs: str = "ext4", small_fs: str = ""
    ) -> None:
        """small_fs: the filesystem for requests below the default's minimum size ("" = refuse them)."""
        self._backend = backend
        self._locks = locks
        self._default_fs = default_fs
        self._small_fs = small_fs

    # -- volumes --------------------------------------------------------------------

    @rpc
    def CreateVolume(
        self, request: csi_pb2.CreateVolumeRequest, context: grpc.ServicerContext
    ) -> csi_pb2.CreateVolumeResponse:
        wire.require(name=request.name)
        caps = wire.capabilities(request.volume_capabilities)
        spec_source = self._content_source(request)
        self._check_topology(request.accessibility_requirements)
        with self._locks.hold(f"name:{request.name}", spec_source[1] or spec_source[0]):
            existing = self._backend.find_volume_by_name(request.name)
            if existing is not None:
                return self._existing(existing, request, caps, spec_source)
            spec = self._spec(request, caps, spec_source)
            volume = self._backend.create_volume(spec)
        return csi_pb2.CreateVolumeResponse(volume=self._volume_message(volume))

    def _content_source(self, request: csi_pb2.CreateVolumeRequest) -> tuple[str, str]:
        """(source snapshot id, source volume id) of the request, validated."""
        if not request.HasField("volume_content_source"):
            return "", ""
        src = request.volume_content_source
        if src.HasField("snapshot"):
            wire.require(snapshot_id=src.snapshot.snapshot_id)
            return src.snapshot.snapshot_id, ""
        if src.HasField("volume"):
            wire.require(volume_id=src.volume.volume_id)
            return "", src.volume.volume_id
        raise InvalidArgument("volume_content_source needs a snapshot or a volume")

    def _check_topology(self, req: csi_pb2.TopologyRequirement) -> None:
        segments = [t.segments for t in [*req.requisite, *req.preferred]]
        node = self._backend.topology_node
        if not segments or not node:
            return
        if not any(s.get(TOPOLOGY_KEY) in (None, node) for s in segments):
            raise ResourceExhausted(f"this driver can only provision on node {node!r}")

    def _spec(
        self, request: csi_pb2.CreateVolumeRequest, caps: list[wire.Capability], source: tuple[str, str]
    ) -> VolumeSpec:
        rng = request.capacity_range if request.HasField("capacity_range") else None
        requested = (rng.required_bytes or rng.limit_bytes) if rng is not None else 0
        fs_type = wire.volume_fs_type(
            caps, self._default_fs, small_fallback=self._small_fs, requested=requested
        )
        limits = qos.limits_from(request.mutable_parameters)
        floor = 0
        if source[0]:
            floor = self._backend.get_snapshot(source[0]).size_bytes
        elif source[1]:
            floor = self._backend.get_volume(source[1]).size_bytes
        max_bytes = self._backend.capacity().max_volume_bytes
        size = wire.size_from_range(rng, fs_type=fs_type, max_bytes=max_bytes, floor=floor)
        params = request.parameters
        try:
            replication = int(params.get("replication", "0") or 0)
        except ValueError as e:
            raise InvalidArgument(
                f"parameter replication must be an integer, got {params['replication']!r}"
            ) from e
        unknown = set(params) - {"type", "replication", "org_id", "project_id"}
        unknown = {k for k in unknown if not k.startswith("csi.storage.k8s.io/")}
        if unknown:
            raise InvalidArgument(f"unknown parameters: {', '.join(sorted(unknown))}")
        return VolumeSpec(
            name=request.name,
            size_bytes=size,
            access_type=caps[0].access_type,
            fs_type=fs_type,
            volume_type=params.get("type", ""),
            replication=replication,
            org_id=params.get("org_id", ""),
            project_id=params.get("project_id", ""),
            source_snapshot_id=source[0],
            source_volume_id=source[1],
            qos=limits,
        )

    def _existing(
        self,
        volume: Volume,
        request: csi_pb2.CreateVolumeRequest,
        caps: list[wire.Capability],
        source: tuple[str, str],
    ) -> csi_pb2.CreateVolumeResponse:
        qos.check_keys(request.mutable_parameters)
        rng = request.capacity_range if request.HasField("capacity_range") else None
        if not wire.in_range(volume.size_bytes, rng):
            raise AlreadyExists(f"volume {request.name!r} exists with {volume.size_bytes} bytes")
        if volume.access_type not in ("any", caps[0].access_type):
            raise AlreadyExists(f"volume {request.name!r} exists as a {volume.access_type} volume")
        if (volume.source_snapshot_id, volume.source_volume_id) != source:
            raise AlreadyExists(f"volume {request.name!r} exists with another content source")
        return csi_pb2.CreateVolumeResponse(volume=self._volume_message(volume))

    @rpc
    def DeleteVolume(
        self, request: csi_pb2.DeleteVolumeRequest, context: grpc.ServicerContext
    ) -> csi_pb2.DeleteVolumeResponse:
        wire.require(volume_id=request.volume_id)
        with self._locks.hold(request.volume_id):
            self._backend.delete_volume(request.volume_id)
        return csi_pb2.DeleteVolumeResponse()

    @rpc
    def ControllerPublishVolume(
        self, request: csi_pb2.ControllerPublishVolumeRequest, context: grpc.ServicerContext
    ) -> csi_pb2.ControllerPublishVolumeResponse:
        wire.require(volume_id=request.volume_id, node_id=request.node_id)
        wire.require(volume_capability=request.HasField("volume_capability"))
        cap = wire.capability(request.volume_capability)
        with self._locks.hold(request.volume_id):
            volume = self._backend.get_volume(request.volume_id)
            if volume.access_type not in ("any", cap.access_type):
                raise InvalidArgument(f"volume {volume.id} is a {volume.access_type} volume")
            readonly = request.readonly or cap.readonly
            ctx = self._backend.attach(request.volume_id, request.node_id, readonly)
        return csi_pb2.ControllerPublishVolumeResponse(publish_context=ctx)

    @rpc
    def ControllerUnpublishVolume(
        self, request: csi_pb2.ControllerUnpublishVolumeRequest, context: grpc.ServicerContext
    ) -> csi_pb2.ControllerUnpublishVolumeResponse:
        wire.require(volume_id=request.volume_id)
        with self._locks.hold(request.volume_id):
            nodes = [request.node_id]
            if not request.node_id and self._backend.reports_publications:
                try:
                    nodes = list(self._backend.get_volume(request.volume_id).published)
                except VolumeNotFound:
                    nodes = []
            for node in nodes:
                self._backend.detach(request.volume_id, node)
        return csi_pb2.ControllerUnpublishVolumeResponse()

    @rpc
    def ValidateVolumeCapabilities(
        self, request: csi_pb2.ValidateVolumeCapabilitiesRequest, context: grpc.ServicerContext
    ) -> csi_pb2.ValidateVolumeCapabilitiesResponse:
        wire.require(volume_id=request.volume_id, volume_capabilities=len(request.volume_capabilities))
        for cap in request.volume_capabilities:
            wire.capability(cap, strict=False)  # malformed (no access type/mode) -> InvalidArgument
        volume = self._backend.get_volume(request.volume_id)
        bad = [c for c in request.volume_capabilities if not wire.supported(c, volume.access_type)]
        if bad:
            return csi_pb2.ValidateVolumeCapabilitiesResponse(
                message=f"{len(bad)} capabilities not supported by {volume.access_type} volume {volume.id}"
            )
        confirmed = csi_pb2.ValidateVolumeCapabilitiesResponse.Confirmed(
            volume_context=request.volume_context,
            volume_capabilities=request.volume_capabilities,
            parameters=request.parameters,
            mutable_parameters=request.mutable_parameters,
        )
        return csi_pb2.ValidateVolumeCapabilitiesResponse(confirmed=confirmed)

    @rpc
    def ListVolumes(
        self, request: csi_pb2.ListVolumesRequest, context: grpc.ServicerContext
    ) -> csi_pb2.ListVolumesResponse:
        volumes = sorted(self._backend.list_volumes(), key=lambda v: v.id)
        start, end, token = wire.paginate(
            [v.id for v in volumes], request.max_entries, request.starting_token
        )
        entries = [
            csi_pb2.ListVolumesResponse.Entry(
                volume=self._volume_message(v),
                status=csi_pb2.ListVolumesResponse.VolumeStatus(
                    published_node_ids=sorted(v.published), volume_condition=_condition(v)
                ),
            )
            for v in volumes[start:end]
        ]
        return csi_pb2.ListVolumesResponse(entries=entries, next_token=token)

    @rpc
    def ControllerGetVolume(
        self, request: csi_pb2.ControllerGetVolumeRequest, context: grpc.ServicerContext
    ) -> csi_pb2.ControllerGetVolumeResponse:
        wire.require(volume_id=request.volume_id)
        volume = self._backend.get_volume(request.volume_id)
        return csi_pb2.ControllerGetVolumeResponse(
            volume=self._volume_message(volume),
            status=csi_pb2.ControllerGetVolumeResponse.VolumeStatus(
                published_node_ids=sorted(volume.published), volume_condition=_condition(volume)
            ),
        )

    @rpc
    def GetCapacity(
        self, request: csi_pb2.GetCapacityRequest, context: grpc.ServicerContext
    ) -> csi_pb2.GetCapacityResponse:
        if not self._backend.reports_capacity:
            raise Unimplemented(f"the {self._backend.name} backend does not report capacity")
        cap = self._backend.capacity()
        usable = all(wire.is_supported(c) for c in request.volume_capabilities)
        node = self._backend.topology_node
        if request.HasField("accessible_topology") and node:
            usable = usable and request.accessible_topology.segments.get(TOPOLOGY_KEY, node) == node
        return csi_pb2.GetCapacityResponse(
            available_capacity=cap.available_bytes if usable else 0,
            maximum_volume_size=wrappers_pb2.Int64Value(value=min(cap.max_volume_bytes, cap.available_bytes)),
            minimum_volume_size=wrappers_pb2.Int64Value(value=wire.MIN_SIZE[""]),
        )

    @rpc
    def ControllerExpandVolume(
        self, request: csi_pb2.ControllerExpandVolumeRequest, context: grpc.ServicerContext
    ) -> csi_pb2.ControllerExpandVolumeResponse:
        wire.require(volume_id=request.volume_id, capacity_range=request.HasField("capacity_range"))
        rng = request.capacity_range
        wire.require(capacity_range_bytes=rng.required_bytes or rng.limit_bytes)
        with self._locks.hold(request.volume_id):
            volume = self._backend.get_volume(request.volume_id)
            if rng.limit_bytes and volume.size_bytes > rng.limit_bytes:
                raise OutOfRange(f"volume is already {volume.size_bytes} bytes, above limit_bytes")
            size = wire.size_from_range(
                rng, fs_type="", max_bytes=self._backend.capacity().max_volume_bytes, floor=volume.size_bytes
            )
            volume = self._backend.expand_volume(volume.id, size)
        node_needed = volume.access_type == "mount" or not self._backend.node_side_attach
        return csi_pb2.ControllerExpandVolumeResponse(
            capacity_bytes=volume.size_bytes, node_expansion_required=node_needed
        )

    @rpc
    def ControllerModifyVolume(
        self, request: csi_pb2.ControllerModifyVolumeRequest, context: grpc.ServicerContext
    ) -> csi_pb2.ControllerModifyVolumeResponse:
        """New VolumeAttributesClass parameters; for the local backend the limits are in force on return."""
        wire.require(volume_id=request.volume_id)
        qos.check_keys(request.mutable_parameters)  # INVALID_ARGUMENT before NOT_FOUND, as csi-sanity expects
        with self._locks.hold(request.volume_id):
            volume = self._backend.get_volume(request.volume_id)
            limits = qos.limits_from(request.mutable_parameters, base=volume.qos)
            if limits != volume.qos:
                self._backend.modify_volume(volume.id, limits)
        return csi_pb2.ControllerModifyVolumeResponse()

    # -- snapshots ------------------------------------------------------------------

    @rpc
    def CreateSnapshot(
        self, request: csi_pb2.CreateSnapshotRequest, context: grpc.ServicerContext
    ) -> csi_pb2.CreateSnapshotResponse:
        wire.require(name=request.name, source_volume_id=request.source_volume_id)
        with self._locks.hold(f"snapshot:{request.name}", request.source_volume_id):
            snapshot = self._backend.create_snapshot(request.name, request.source_volume_id)
        return csi_pb2.CreateSnapshotResponse(snapshot=snapshot_message(snapshot))

    @rpc
    def DeleteSnapshot(
        self, request: csi_pb2.DeleteSnapshotRequest, context: grpc.ServicerContext
    ) -> csi_pb2.DeleteSnapshotResponse:
        wire.require(snapshot_id=request.snapshot_id)
        with self._locks.hold(request.snapshot_id):
            self._backend.delete_snapshot(request.snapshot_id)
        return csi_pb2.DeleteSnapshotResponse()

    @rpc
    def GetSnapshot(
        self, request: csi_pb2.GetSnapshotRequest, context: grpc.ServicerContext
    ) -> csi_pb2.GetSnapshotResponse:
        wire.require(snapshot_id=request.snapshot_id)
        return csi_pb2.GetSnapshotResponse(
            snapshot=snapshot_message(self._backend.get_snapshot(request.snapshot_id))
        )

    @rpc
    def ListSnapshots(
        self, request: csi_pb2.ListSnapshotsRequest, context: grpc.ServicerContext
    ) -> csi_pb2.ListSnapshotsResponse:
        snapshots = sorted(self._backend.list_snapshots(), key=lambda s: s.id)
        if request.snapshot_id:
            snapshots = [s for s in snapshots if s.id == request.snapshot_id]
        if request.source_volume_id:
            snapshots = [s for s in snapshots if s.source_volume_id == request.source_volume_id]
        start, end, token = wire.paginate(
            [s.id for s in snapshots], request.max_entries, request.starting_token
        )
        entries = [
            csi_pb2.ListSnapshotsResponse.Entry(snapshot=snapshot_message(s)) for s in snapshots[start:end]
        ]
        return csi_pb2.ListSnapshotsResponse(entries=entries, next_token=token)

    @rpc
    def ControllerGetCapabilities(
        self, request: csi_pb2.ControllerGetCapabilitiesRequest, context: grpc.ServicerContext
    ) -> csi_pb2.ControllerGetCapabilitiesResponse:
        return csi_pb2.ControllerGetCapabilitiesResponse(capabilities=_capabilities(self._backend))

    def _volume_message(self, volume: Volume) -> csi_pb2.Volume:
        source = None
        if volume.source_snapshot_id:
            source = csi_pb2.VolumeContentSource(
                snapshot=csi_pb2.VolumeContentSource.SnapshotSource(snapshot_id=volume.source_snapshot_id)
            )
        elif volume.source_volume_id:
            source = csi_pb2.VolumeContentSource(
                volume=csi_pb2.VolumeContentSource.VolumeSource(volume_id=volume.source_volume_id)
            )
        topology = [csi_pb2.Topology(segments={TOPOLOGY_KEY: volume.node_id})] if volume.node_id else []
        return csi_pb2.Volume(
            volume_id=volume.id,
            capacity_bytes=volume.size_bytes,
            volume_context={"accessType": volume.access_type, "fsType": volume.fs_type},
            content_source=source,
            accessible_topology=topology,
        )


def _capabilities(backend: VolumeBackend) -> Sequence[csi_pb2.ControllerServiceCapability]:
    types = [t for t in BASE_CAPABILITIES if t != Rpc.GET_CAPACITY or backend.reports_capacity]
    if backend.reports_publications:
        types.append(Rpc.LIST_VOLUMES_PUBLISHED_NODES)
    return [csi_pb2.ControllerServiceCapability(rpc=Rpc(type=t)) for t in types]


def _condition(volume: Volume) -> csi_pb2.VolumeCondition:
    return csi_pb2.VolumeCondition(abnormal=bool(volume.abnormal), message=volume.abnormal or "healthy")


def snapshot_message(snapshot: Snapshot) -> csi_pb2.Snapshot:
    created = timestamp_pb2.Timestamp()
    created.FromNanoseconds(int(snapshot.created_at * 1e9))
    return csi_pb2.Snapshot(
        snapshot_id=snapshot.id,
        source_volume_id=snapshot.source_volume_id,
        size_bytes=snapshot.size_bytes,
        creation_time=created,
        ready_to_use=snapshot.ready,
        group_snapshot_id=snapshot.group_snapshot_id,
    )
