"""The `lightningstor` backend: PlasmaCloud's VolumeService over gRPC (protos/lightningstor.proto).

The controller side maps CSI calls 1:1 onto VolumeService RPCs; AttachVolume's
`device_path` travels to the node in the publish_context. Status codes of the
service become the CSI errors of the same meaning; UNAUTHENTICATED (the service refused our IAM token)
becomes UNAUTHENTICATED naming the token file, so kubelet and the sidecars report what to fix. Calls go
over TLS with an IAM token (common/plasmacloud_grpc.py).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Iterator, Mapping
from typing import TypeVar

import grpc

from common.plasmacloud_grpc import PlasmaCloudAuth, secure_channel
from csi import mounts
from csi.backends.base import Capacity, GroupSnapshot, Snapshot, Volume, VolumeSpec
from csi.errors import (
    AlreadyExists,
    BackendUnauthenticated,
    BackendUnavailable,
    CsiError,
    FailedPrecondition,
    InvalidArgument,
    NodeNotFound,
    NotFound,
    OutOfRange,
    ResourceExhausted,
    SnapshotNotFound,
    Unimplemented,
    VolumeNotFound,
)
from csi.qos import IoLimits
from protos import lightningstor_pb2 as ls
from protos import lightningstor_pb2_grpc as ls_grpc

log = logging.getLogger(__name__)

T = TypeVar("T")
PAGE = 500
MAX_VOLUME_BYTES = 64 << 40
_CODES: dict[grpc.StatusCode, type[CsiError]] = {
    grpc.StatusCode.NOT_FOUND: NotFound,
    grpc.StatusCode.ALREADY_EXISTS: AlreadyExists,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhausted,
    grpc.StatusCode.OUT_OF_RANGE: OutOfRange,
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgument,
    grpc.StatusCode.FAILED_PRECONDITION: FailedPrecondition,
    grpc.StatusCode.UNAVAILABLE: BackendUnavailable,
    grpc.StatusCode.DEADLINE_EXCEEDED: BackendUnavailable,
    grpc.StatusCode.UNAUTHENTICATED: BackendUnauthenticated,
}


class LightningStorBackend:
    name = "lightningstor"
    reports_publications = False
    reports_capacity = False
    node_side_attach = False
    supports_group_snapshots = False
    topology_node = ""

    def __init__(self, endpoint: str, auth: PlasmaCloudAuth, *, timeout: float = 10.0) -> None:
        # host:port, or unix:///path (grpc's own syntax) for a unix socket
        self._auth = auth
        self._channel = secure_channel(endpoint, auth)
        self._stub = ls_grpc.VolumeServiceStub(self._channel)
        self._timeout = timeout

    def _call(self, method: Callable[..., T], request: object, *, timeout: float | None = None) -> T:
        try:
            return method(request, timeout=timeout or self._timeout)
        except grpc.RpcError as e:
            code, details = e.code(), e.details() or ""
            err = _CODES.get(code, CsiError)
            if err is BackendUnauthenticated:
                details += f" (the IAM token in {self._auth.token_file} was refused)"
            raise err(
                f"lightningstor {type(request).__name__.removesuffix('Request')}: {code.name}: {details}"
            ) from e

    # -- controller side ----------------------------------------------------------------

    def probe(self) -> None:
        self._call(self._stub.ListVolumes, ls.ListVolumesRequest(page_size=1), timeout=0.8)

    def capacity(self) -> Capacity:
        return Capacity(total_bytes=0, available_bytes=0, max_volume_bytes=MAX_VOLUME_BYTES)

    def find_volume_by_name(self, name: str) -> Volume | None:
        return next((_volume(v) for v in self._volumes() if v.name == name), None)

    def create_volume(self, spec: VolumeSpec) -> Volume:
        req = ls.CreateVolumeRequest(
            name=spec.name,
            size_bytes=spec.size_bytes,
            volume_type=spec.volume_type,
            replication_factor=spec.replication,
            org_id=spec.org_id,
            project_id=spec.project_id,
            source_snapshot_id=spec.source_snapshot_id,
            source_volume_id=spec.source_volume_id,
            qos=_qos_policy(spec.qos) if not spec.qos.unlimited or spec.qos.qos_class else None,
        )
        try:
            vol = self._call(self._stub.CreateVolume, req)
        except NotFound as e:
            if spec.source_snapshot_id:
                raise SnapshotNotFound(spec.source_snapshot_id) from e
            if spec.source_volume_id:
                raise VolumeNotFound(spec.source_volume_id) from e
            raise
        if vol.size_bytes < spec.size_bytes:
            raise AlreadyExists(f"volume {spec.name!r} exists with {vol.size_bytes} bytes")
        return _volume(vol)

    def delete_volume(self, volume_id: str) -> None:
        with contextlib.suppress(NotFound):
            self._call(self._stub.DeleteVolume, ls.DeleteVolumeRequest(volume_id=volume_id))

    def get_volume(self, volume_id: str) -> Volume:
        try:
            return _volume(self._call(self._stub.GetVolume, ls.GetVolumeRequest(volume_id=volume_id)))
        except NotFound as e:
            raise VolumeNotFound(volume_id) from e

    def _volumes(self) -> Iterator[ls.Volume]:
        token = ""
        while True:
            page = self._call(self._stub.ListVolumes, ls.ListVolumesRequest(page_size=PAGE, page_token=token))
            yield from page.volumes
            token = page.next_page_token
            if not token:
                return

    def list_volumes(self) -> list[Volume]:
        return [_volume(v) for v in self._volumes()]

    def expand_volume(self, volume_id: str, size_bytes: int) -> Volume:
        current = self.get_volume(volume_id)
        if size_bytes <= current.size_bytes:
            return current
        req = ls.ExpandVolumeRequest(volume_id=volume_id, new_size_bytes=size_bytes)
        return _volume(self._call(self._stub.ExpandVolume, req))

    def modify_volume(self, volume_id: str, qos: IoLimits) -> Volume:
        req = ls.ModifyVolumeRequest(volume_id=volume_id, qos=_qos_policy(qos))
        try:
            return _volume(self._call(self._stub.ModifyVolume, req))
        except NotFound as e:
            raise VolumeNotFound(volume_id) from e

    def create_snapshot(self, name: str, source_volume_id: str) -> Snapshot:
        existing = next((s for s in self._snapshots("") if s.name == name), None)
        if existing is not None and existing.source_volume_id != source_volume_id:
            raise AlreadyExists(f"snapshot {name!r} exists for volume {existing.source_volume_id}")
        self.get_volume(source_volume_id)
        req = ls.CreateSnapshotRequest(name=name, source_volume_id=source_volume_id)
        return _snapshot(self._call(self._stub.CreateSnapshot, req))

    def delete_snapshot(self, snapshot_id: str) -> None:
        with contextlib.suppress(NotFound):
            self._call(self._stub.DeleteSnapshot, ls.DeleteSnapshotRequest(snapshot_id=snapshot_id))

    def get_snapshot(self, snapshot_id: str) -> Snapshot:
        try:
            return _snapshot(
                self._call(self._stub.GetSnapshot, ls.GetSnapshotRequest(snapshot_id=snapshot_id))
            )
        except NotFound as e:
            raise SnapshotNotFound(snapshot_id) from e

    def _snapshots(self, source_volume_id: str) -> Iterator[ls.Snapshot]:
        token = ""
        while True:
            req = ls.ListSnapshotsRequest(page_size=PAGE, page_token=token, source_volume_id=source_volume_id)
            page = self._call(self._stub.ListSnapshots, req)
            yield from page.snapshots
            token = page.next_page_token
            if not token:
                return

    def list_snapshots(self) -> list[Snapshot]:
        return [_snapshot(s) for s in self._snapshots("")]

    def create_group_snapshot(self, name: str, volume_ids: list[str]) -> GroupSnapshot:
        raise Unimplemented("the LightningStor VolumeService has no group snapshots")

    def delete_group_snapshot(self, group_id: str, snapshot_ids: list[str]) -> None:
        raise Unimplemented("the LightningStor VolumeService has no group snapshots")

    def get_group_snapshot(self, group_id: str) -> GroupSnapshot:
        raise Unimplemented("the LightningStor VolumeService has no group snapshots")

    # -- attach / detach ----------------------------------------------------------------

    def known_node(self, node_id: str) -> bool:
        return True  # the service answers NOT_FOUND for nodes it does not know

    def attach(self, volume_id: str, node_id: str, readonly: bool) -> dict[str, str]:
        self.get_volume(volume_id)
        mode = "read-only" if readonly else "read-write"
        req = ls.AttachVolumeRequest(volume_id=volume_id, node_id=node_id, attach_mode=mode)
        try:
            att = self._call(self._stub.AttachVolume, req)
        except NotFound as e:
            raise NodeNotFound(node_id) from e
        return {
            "device_path": att.device_path,
            "attachment_id": att.id,
            "readonly": "true" if readonly else "false",
        }

    def detach(self, volume_id: str, node_id: str) -> None:
        with contextlib.suppress(NotFound):
            self._call(self._stub.DetachVolume, ls.DetachVolumeRequest(volume_id=volume_id, node_id=node_id))

    def node_device(self, volume_id: str, publish_context: Mapping[str, str]) -> str:
        device = publish_context.get("device_path", "")
        if not device:
            raise FailedPrecondition(
                f"volume {volume_id} is not attached: publish_context has no device_path"
            )
        if not mounts.is_block_device(device):
            raise FailedPrecondition(
                f"device {device} of volume {volume_id} is not a block device on this node"
            )
        return device

    def node_release(self, volume_id: str) -> None:
        """Nothing: the attachment belongs to ControllerUnpublishVolume (DetachVolume)."""

    def node_devices(self, volume_id: str) -> frozenset[str] | None:
        """None: the device path only travels in the publish_context, which unstage/unpublish lack."""
        return None

    def node_refresh(self, volume_id: str, device: str) -> int:
        """The service resizes the attached device itself; read the size the kernel now sees."""
        name = os.path.basename(os.path.realpath(device))
        with open(f"/sys/class/block/{name}/size") as f:
            return int(f.read()) * 512

    def close(self) -> None:
        self._channel.close()


def _volume(v: ls.Volume) -> Volume:
    return Volume(
        id=v.id,
        name=v.name,
        size_bytes=v.size_bytes,
        access_type="any",
        fs_type="",
        source_snapshot_id=v.source_snapshot_id,
        source_volume_id=v.source_volume_id,
        abnormal="lightningstor reports status error" if v.status == "error" else "",
        qos=IoLimits(
            read_bps=v.qos.read_bytes_per_second,
            write_bps=v.qos.write_bytes_per_second,
            read_iops=v.qos.read_iops,
            write_iops=v.qos.write_iops,
            qos_class=v.qos.qos_class,
        ),
    )


def _qos_policy(qos: IoLimits) -> ls.QosPolicy:
    return ls.QosPolicy(
        qos_class=qos.qos_class,
        read_bytes_per_second=qos.read_bps,
        write_bytes_per_second=qos.write_bps,
        read_iops=qos.read_iops,
        write_iops=qos.write_iops,
    )


def _snapshot(s: ls.Snapshot) -> Snapshot:
    return Snapshot(
        id=s.id,
        name=s.name,
        source_volume_id=s.source_volume_id,
        size_bytes=s.size_bytes,
        created_at=s.created_at.ToNanoseconds() / 1e9,
        ready=s.ready,
    )
