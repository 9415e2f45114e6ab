"""The volume backend interface the servicers talk to, and the records it deals in.

Two implementations: `local` (sparse files + loop devices on this node) and
`lightningstor` (the PlasmaCloud VolumeService over gRPC). Backends raise
csi.errors; they never see gRPC requests of the CSI protocol.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, Protocol

from csi.qos import IoLimits

AccessType = Literal["mount", "block"]
VolumeAccess = Literal["mount", "block", "any"]
"""What a volume can be used as; "any" for backends that only know block storage (LightningStor)."""
MIB = 1 << 20
GIB = 1 << 30


@dataclass(frozen=True, slots=True, kw_only=True)
class VolumeSpec:
    """What CreateVolume asks for, after the servicer validated the request."""

    name: str
    size_bytes: int
    access_type: AccessType
    fs_type: str
    volume_type: str = ""
    replication: int = 0
    org_id: str = ""
    project_id: str = ""
    source_snapshot_id: str = ""
    source_volume_id: str = ""
    qos: IoLimits = field(default_factory=IoLimits)
    """From the VolumeAttributesClass (mutable_parameters); changed later by modify_volume."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Volume:
    id: str
    name: str
    size_bytes: int
    access_type: VolumeAccess
    fs_type: str
    node_id: str = ""
    """The node the volume is accessible from ("" = any node)."""
    source_snapshot_id: str = ""
    source_volume_id: str = ""
    published: Mapping[str, bool] = field(default_factory=dict)
    """node id -> published read-only."""
    abnormal: str = ""
    """Non-empty: what is wrong with the volume (VolumeCondition)."""
    qos: IoLimits = field(default_factory=IoLimits)


@dataclass(frozen=True, slots=True, kw_only=True)
class Snapshot:
    id: str
    name: str
    source_volume_id: str
    size_bytes: int
    created_at: float
    ready: bool = True
    group_snapshot_id: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupSnapshot:
    """Snapshots of several volumes taken at one instant (crash-consistent)."""

    id: str
    name: str
    snapshots: tuple[Snapshot, ...]
    created_at: float

    @property
    def ready(self) -> bool:
        return all(s.ready for s in self.snapshots)


@dataclass(frozen=True, slots=True, kw_only=True)
class Capacity:
    total_bytes: int
    available_bytes: int
    max_volume_bytes: int


class VolumeBackend(Protocol):
    """Every method is idempotent; `delete_*` succeeds when the thing is absent."""

    name: str
    reports_publications: bool
    reports_capacity: bool
    """Whether capacity() knows real figures (GET_CAPACITY is claimed only then)."""
    topology_node: str
    """The only node volumes are accessible from ("" = every node)."""
    """Whether Volume.published is known (ListVolumes/ControllerGetVolume published_node_ids)."""
    node_side_attach: bool
    """True when the node itself attaches the device (local loop devices), so the controller's
    expansion already reached the device; False when the node must refresh it."""
    supports_group_snapshots: bool
    """Whether the *_group_snapshot methods work (GROUP_CONTROLLER_SERVICE is claimed only then)."""

    def probe(self) -> None:
        """Raise BackendUnavailable unless the backend answers."""

    def capacity(self) -> Capacity: ...

    def create_volume(self, spec: VolumeSpec) -> Volume:
        """Same name and compatible spec -> the existing volume; incompatible -> AlreadyExists."""

    def find_volume_by_name(self, name: str) -> Volume | None: ...

    def delete_volume(self, volume_id: str) -> None: ...

    def get_volume(self, volume_id: str) -> Volume:
        """Raise VolumeNotFound."""

    def list_volumes(self) -> list[Volume]: ...

    def expand_volume(self, volume_id: str, size_bytes: int) -> Volume: ...

    def modify_volume(self, volume_id: str, qos: IoLimits) -> Volume:
        """ControllerModifyVolume: new I/O limits, in force on the node once this returns."""

    def create_snapshot(self, name: str, source_volume_id: str) -> Snapshot: ...

    def delete_snapshot(self, snapshot_id: str) -> None: ...

    def get_snapshot(self, snapshot_id: str) -> Snapshot:
        """Raise SnapshotNotFound."""

    def list_snapshots(self) -> list[Snapshot]: ...

    def create_group_snapshot(self, name: str, volume_ids: list[str]) -> GroupSnapshot:
        """Same name and same volumes -> the existing group; other volumes -> AlreadyExists."""

    def delete_group_snapshot(self, group_id: str, snapshot_ids: list[str]) -> None:
        """Deletes the group and its member snapshots; FailedPrecondition if `snapshot_ids` mismatch."""

    def get_group_snapshot(self, group_id: str) -> GroupSnapshot:
        """Raise NotFound."""

    def known_node(self, node_id: str) -> bool: ...

    def attach(self, volume_id: str, node_id: str, readonly: bool) -> dict[str, str]:
        """ControllerPublish: make the volume available on the node; returns the publish_context."""

    def detach(self, volume_id: str, node_id: str) -> None: ...

    def node_device(self, volume_id: str, publish_context: Mapping[str, str]) -> str:
        """Node side: the block device of the volume on this node (attaching it if the backend can)."""

    def node_release(self, volume_id: str) -> None:
        """Node side, after unstage: let go of what node_device set up on its own."""

    def node_devices(self, volume_id: str) -> frozenset[str] | None:
        """Node side: the block devices (real paths) the volume has on this node now, never attaching
        one: unstage/unpublish check a mount is the volume's before unmounting it. None when the
        backend cannot tell; raise VolumeNotFound for a volume that does not exist."""

    def node_refresh(self, volume_id: str, device: str) -> int:
        """Node side, after an expansion: make the device see its new size; returns it in bytes."""

    def close(self) -> None: ...
