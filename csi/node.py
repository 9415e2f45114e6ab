"""CSI Node service: stage (format if blank, mount), publish (bind mount), stats, expansion.

Unpublish and unstage succeed when the target is already gone, so pods never hang
in Terminating because of us, and unmount only what is the volume's own (its device, a bind
of it): a target holding anything else is answered, never unmounted.
"""

from __future__ import annotations

import logging
import os

import grpc

from csi import mount_flags, mounts, wire
from csi.backends.base import VolumeBackend
from csi.errors import AlreadyExists, FailedPrecondition, NotFound
from csi.locks import KeyedLocks
from csi.node_paths import KubeletPaths
from csi.rpc import rpc
from csi.settings import TOPOLOGY_KEY
from protos import csi_pb2, csi_pb2_grpc

log = logging.getLogger(__name__)

NodeRpc = csi_pb2.NodeServiceCapability.RPC
Usage = csi_pb2.VolumeUsage


def _device_of(path: str) -> str:
    """The block device behind a device-file bind mount: /dev/<name> from the node's rdev."""
    rdev = os.stat(path).st_rdev
    name = os.path.basename(os.path.realpath(f"/sys/dev/block/{os.major(rdev)}:{os.minor(rdev)}"))
    return f"/dev/{name}"


class NodeServicer(csi_pb2_grpc.NodeServicer):
    def __init__(
        self,
        backend: VolumeBackend,
        locks: KeyedLocks,
        node_id: str,
        max_volumes: int,
        default_fs: str = "ext4",
        paths: KubeletPaths | None = None,
    ) -> None:
        self._paths = paths or KubeletPaths.of(["/var/lib/kubelet"])
        self._default_fs = default_fs
        self._backend = backend
        self._locks = locks
        self._node_id = node_id
        self._max_volumes = max_volumes

    @rpc
    def NodeStageVolume(
        self, request: csi_pb2.NodeStageVolumeRequest, context: grpc.ServicerContext
    ) -> csi_pb2.NodeStageVolumeResponse:
        wire.require(volume_id=request.volume_id, staging_target_path=request.staging_target_path)
        wire.require_paths(staging_target_path=request.staging_target_path)
        wire.require(volume_capability=request.HasField("volume_capability"))
        cap = wire.capability(request.volume_capability)
        mount_flags.check(cap.mount_flags)  # they reach mount(8)
        staging = request.staging_target_path
        with self._locks.hold(request.volume_id):
            volume = self._backend.get_volume(request.volume_id)
            self._paths.confine("staging_target_path", staging)
            device = self._backend.node_device(volume.id, request.publish_context)
            if cap.access_type == "block":
                return csi_pb2.NodeStageVolumeResponse()
            current = mounts.find_mount(staging)
            if current is not None:
                if current.source != os.path.realpath(device):
                    raise AlreadyExists(f"{staging} already has {current.source} mounted")
                return csi_pb2.NodeStageVolumeResponse()
            fs_type = cap.fs_type or volume.fs_type or self._default_fs
            if not mounts.ensure_filesystem(device, fs_type) and fs_type == "ext4":
                mounts.grow_ext4_offline(device, _block_size(device))
            mounts.ensure_dir(staging)
            options = list(cap.mount_flags)
            if fs_type == "xfs":
                options.append("nouuid")  # restored/cloned copies share their source's UUID
            if request.publish_context.get("readonly") == "true" or cap.readonly:
                options.append("ro")
            mounts.mount(device, staging, fs_type, options)
        log.info("staged %s (%s) at %s", volume.id, device, staging)
        return csi_pb2.NodeStageVolumeResponse()

    @rpc
    def NodeUnstageVolume(
        self, request: csi_pb2.NodeUnstageVolumeRequest, context: grpc.ServicerContext
    ) -> csi_pb2.NodeUnstageVolumeResponse:
        wire.require(volume_id=request.volume_id, staging_target_path=request.staging_target_path)
        wire.require_paths(staging_target_path=request.staging_target_path)
        with self._locks.hold(request.volume_id):
            self._unmount_own(request.volume_id, request.staging_target_path)
            self._backend.node_release(request.volume_id)
        return csi_pb2.NodeUnstageVolumeResponse()

    @rpc
    def NodePublishVolume(
        self, request: csi_pb2.NodePublishVolumeRequest, context: grpc.ServicerContext
    ) -> csi_pb2.NodePublishVolumeResponse:
        wire.require(volume_id=request.volume_id, target_path=request.target_path)
        wire.require_paths(target_path=request.target_path)
        wire.require(volume_capability=request.HasField("volume_capability"))
        cap = wire.capability(request.volume_capability)
        mount_flags.check(cap.mount_flags)  # they reach mount(8)
        wire.require(staging_target_path=request.staging_target_path)
        wire.require_paths(staging_target_path=request.staging_target_path)
        readonly = request.readonly or cap.readonly
        target = request.target_path
        with self._locks.hold(request.volume_id):
            volume = self._backend.get_volume(request.volume_id)
            if cap.access_type == "block":
                source = self._backend.node_device(volume.id, request.publish_context)
            else:
                self._paths.confine("staging_target_path", request.staging_target_path)
                staged = mounts.find_mount(request.staging_target_path)
                if staged is None:
                    raise FailedPrecondition(
                        f"volume {volume.id} is not staged at {request.staging_target_path}"
                    )
                source = request.staging_target_path
            self._paths.confine("target_path", target)
            if self._already_published(target, cap.access_type, source, readonly):
                return csi_pb2.NodePublishVolumeResponse()
            if cap.mode == wire.Mode.SINGLE_NODE_SINGLE_WRITER:
                elsewhere = _published_elsewhere(cap.access_type, source, target)
                if elsewhere:
                    raise FailedPrecondition(
                        f"volume {volume.id} is SINGLE_NODE_SINGLE_WRITER (ReadWriteOncePod) and already "
                        f"published at {elsewhere[0]}"
                    )
            if cap.access_type == "block":
                mounts.ensure_file(target)
            else:
                mounts.ensure_dir(target)
            mounts.bind_mount(source, target, readonly=readonly, options=cap.mount_flags)
        log.info("published %s at %s (readonly=%s)", volume.id, target, readonly)
        return csi_pb2.NodePublishVolumeResponse()

    def _already_published(self, target: str, access_type: str, source: str, readonly: bool) -> bool:
        current = mounts.find_mount(target)
        if current is None:
            return False
        if access_type == "block":
            same = mounts.is_device_bind(current, source)
        else:
            staged = mounts.find_mount(source)
            same = staged is not None and (current.source, current.root) == (staged.source, staged.root)
        if not same:
            raise AlreadyExists(f"{target} already has another volume mounted")
        if current.readonly != readonly:
            raise AlreadyExists(f"{target} is already published with readonly={current.readonly}")
        return True

    @rpc
    def NodeUnpublishVolume(
        self, request: csi_pb2.NodeUnpublishVolumeRequest, context: grpc.ServicerContext
    ) -> csi_pb2.NodeUnpublishVolumeResponse:
        wire.require(volume_id=request.volume_id, target_path=request.target_path)
        wire.require_paths(target_path=request.target_path)
        with self._locks.hold(request.volume_id):
            self._unmount_own(request.volume_id, request.target_path)
            mounts.remove_path(request.target_path)
        return csi_pb2.NodeUnpublishVolumeResponse()

    def _unmount_own(self, volume_id: str, target: str) -> None:
        """Unmount `target` only if what is mounted there is this volume's (its device, a bind of it);
        nothing mounted is success (idempotent). Someone else's mount is never touched: a volume that
        does not exist is NOT_FOUND, another volume or filesystem is FAILED_PRECONDITION."""
        stacked = mounts.mounts_at(target)
        if not stacked:
            return
        devices = self._backend.node_devices(volume_id)  # VolumeNotFound: NOT_FOUND, nothing touched
        foreign = [m for m in stacked if devices is not None and not _of_devices(m, devices)]
        if foreign:
            raise FailedPrecondition(
                f"{target} holds {foreign[0].source} ({foreign[0].fstype}), not volume {volume_id}; "
                "left mounted"
            )
        mounts.unmount(target)

    @rpc
    def NodeGetVolumeStats(
        self, request: csi_pb2.NodeGetVolumeStatsRequest, context: grpc.ServicerContext
    ) -> csi_pb2.NodeGetVolumeStatsResponse:
        wire.require(volume_id=request.volume_id, volume_path=request.volume_path)
        wire.require_paths(volume_path=request.volume_path)
        self._backend.get_volume(request.volume_id)
        path = request.volume_path
        if not os.path.exists(path):
            raise NotFound(f"volume path {path} does not exist")
        if mounts.is_block_device(path):
            size = _block_size(_device_of(path))
            return csi_pb2.NodeGetVolumeStatsResponse(
                usage=[Usage(unit=Usage.BYTES, total=size)], volume_condition=_healthy()
            )
        if mounts.find_mount(path) is None:
            return csi_pb2.NodeGetVolumeStatsResponse(
                volume_condition=csi_pb2.VolumeCondition(abnormal=True, message=f"{path} is not mounted")
            )
        st = os.statvfs(path)
        return csi_pb2.NodeGetVolumeStatsResponse(
            usage=[
                Usage(
                    unit=Usage.BYTES,
                    total=st.f_blocks * st.f_frsize,
                    available=st.f_bavail * st.f_frsize,
                    used=(st.f_blocks - st.f_bfree) * st.f_frsize,
                ),
                Usage(
                    unit=Usage.INODES, total=st.f_files, available=st.f_favail, used=st.f_files - st.f_ffree
                ),
            ],
            volume_condition=_healthy(),
        )

    @rpc
    def NodeExpandVolume(
        self, request: csi_pb2.NodeExpandVolumeRequest, context: grpc.ServicerContext
    ) -> csi_pb2.NodeExpandVolumeResponse:
        wire.require(volume_id=request.volume_id, volume_path=request.volume_path)
        wire.require_paths(volume_path=request.volume_path, staging_target_path=request.staging_target_path)
        path = request.volume_path
        with self._locks.hold(request.volume_id):
            volume = self._backend.get_volume(request.volume_id)
            if not os.path.exists(path):
                raise NotFound(f"volume path {path} does not exist")
            if mounts.is_block_device(path):
                size = self._backend.node_refresh(volume.id, _device_of(path))
                return csi_pb2.NodeExpandVolumeResponse(capacity_bytes=size)
            entry = mounts.find_mount(path)
            if entry is None:
                raise NotFound(f"volume {volume.id} is not mounted at {path}")
            size = self._backend.node_refresh(volume.id, entry.source)
            mounts.grow_filesystem(entry.source, path, entry.fstype)
        log.info("expanded filesystem of %s at %s to %d bytes", volume.id, path, size)
        return csi_pb2.NodeExpandVolumeResponse(capacity_bytes=size)

    @rpc
    def NodeGetCapabilities(
        self, request: csi_pb2.NodeGetCapabilitiesRequest, context: grpc.ServicerContext
    ) -> csi_pb2.NodeGetCapabilitiesResponse:
        types = (
            NodeRpc.STAGE_UNSTAGE_VOLUME,
            NodeRpc.GET_VOLUME_STATS,
            NodeRpc.EXPAND_VOLUME,
            NodeRpc.VOLUME_CONDITION,
            NodeRpc.SINGLE_NODE_MULTI_WRITER,
        )
        return csi_pb2.NodeGetCapabilitiesResponse(
            capabilities=[csi_pb2.NodeServiceCapability(rpc=NodeRpc(type=t)) for t in types]
        )

    @rpc
    def NodeGetInfo(
        self, request: csi_pb2.NodeGetInfoRequest, context: grpc.ServicerContext
    ) -> csi_pb2.NodeGetInfoResponse:
        return csi_pb2.NodeGetInfoResponse(
            node_id=self._node_id,
            max_volumes_per_node=self._max_volumes,
            accessible_topology=csi_pb2.Topology(segments={TOPOLOGY_KEY: self._node_id}),
        )


def _published_elsewhere(access_type: str, source: str, target: str) -> list[str]:
    """Target paths other than `target` where the volume (staging dir or device `source`) is bound."""
    table = mounts.mount_table()
    here = {os.path.realpath(target), os.path.realpath(source)}
    if access_type == "block":
        binds = [e for e in table if mounts.is_device_bind(e, source)]
    else:
        staged = mounts.find_mount(source)
        binds = [
            e for e in table if staged is not None and (e.source, e.root) == (staged.source, staged.root)
        ]
    return [e.mount_point for e in binds if e.mount_point not in here]


def _of_devices(entry: mounts.MountEntry, devices: frozenset[str]) -> bool:
    """A mount of one of `devices`: the filesystem on it (or a bind of a directory in it), or a bind
    of the device file itself (block volumes)."""
    return entry.source in devices or any(mounts.is_device_bind(entry, d) for d in devices)


def _healthy() -> csi_pb2.VolumeCondition:
    return csi_pb2.VolumeCondition(abnormal=False, message="mounted")


def _block_size(device: str) -> int:
    name = os.path.basename(os.path.realpath(device))
    with open(f"/sys/class/block/{name}/size") as f:
        return int(f.read()) * 512
