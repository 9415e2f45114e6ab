"""Golden field table of csi.proto: every message field (number, name, type, oneof) and enum value.

The table was checked line by line against the official CSI Go bindings' struct tags
(`protobuf:"bytes,N,..."`) of the container-storage-interface/spec `lib/go/csi/csi.pb.go`
(a build newer than v1.12, minus the post-v1.12 volume-health additions). Any edit of
csi.proto that changes the wire format (a renumbered, retyped, renamed, added or dropped
field or enum value) breaks this test.
"""

from google.protobuf.descriptor import Descriptor, EnumDescriptor, FieldDescriptor

from protos import csi_pb2

_SCALARS = {v: k[5:].lower() for k, v in vars(FieldDescriptor).items() if k.startswith("TYPE_")}

GOLDEN = """
GetPluginInfoRequest -
GetPluginInfoResponse 1 name string
GetPluginInfoResponse 2 vendor_version string
GetPluginInfoResponse 3 manifest map<string,string>
GetPluginCapabilitiesRequest -
GetPluginCapabilitiesResponse 1 capabilities repeated PluginCapability
PluginCapability 1 service PluginCapability.Service oneof=type
PluginCapability 2 volume_expansion PluginCapability.VolumeExpansion oneof=type
PluginCapability.Service 1 type PluginCapability.Service.Type
PluginCapability.Service.Type UNKNOWN=0
PluginCapability.Service.Type CONTROLLER_SERVICE=1
PluginCapability.Service.Type VOLUME_ACCESSIBILITY_CONSTRAINTS=2
PluginCapability.Service.Type GROUP_CONTROLLER_SERVICE=3
PluginCapability.Service.Type SNAPSHOT_METADATA_SERVICE=4
PluginCapability.VolumeExpansion 1 type PluginCapability.VolumeExpansion.Type
PluginCapability.VolumeExpansion.Type UNKNOWN=0
PluginCapability.VolumeExpansion.Type ONLINE=1
PluginCapability.VolumeExpansion.Type OFFLINE=2
ProbeRequest -
ProbeResponse 1 ready google.protobuf.BoolValue
CreateVolumeRequest 1 name string
CreateVolumeRequest 2 capacity_range CapacityRange
CreateVolumeRequest 3 volume_capabilities repeated VolumeCapability
CreateVolumeRequest 4 parameters map<string,string>
CreateVolumeRequest 5 secrets map<string,string>
CreateVolumeRequest 6 volume_content_source VolumeContentSource
CreateVolumeRequest 7 accessibility_requirements TopologyRequirement
CreateVolumeRequest 8 mutable_parameters map<string,string>
VolumeContentSource 1 snapshot VolumeContentSource.SnapshotSource oneof=type
VolumeContentSource 2 volume VolumeContentSource.VolumeSource oneof=type
VolumeContentSource.SnapshotSource 1 snapshot_id string
VolumeContentSource.VolumeSource 1 volume_id string
CreateVolumeResponse 1 volume Volume
VolumeCapability 1 block VolumeCapability.BlockVolume oneof=access_type
VolumeCapability 2 mount VolumeCapability.MountVolume oneof=access_type
VolumeCapability 3 access_mode VolumeCapability.AccessMode
VolumeCapability.BlockVolume -
VolumeCapability.MountVolume 1 fs_type string
VolumeCapability.MountVolume 2 mount_flags repeated string
VolumeCapability.MountVolume 3 volume_mount_group string
VolumeCapability.AccessMode 1 mode VolumeCapability.AccessMode.Mode
VolumeCapability.AccessMode.Mode UNKNOWN=0
VolumeCapability.AccessMode.Mode SINGLE_NODE_WRITER=1
VolumeCapability.AccessMode.Mode SINGLE_NODE_READER_ONLY=2
VolumeCapability.AccessMode.Mode MULTI_NODE_READER_ONLY=3
VolumeCapability.AccessMode.Mode MULTI_NODE_SINGLE_WRITER=4
VolumeCapability.AccessMode.Mode MULTI_NODE_MULTI_WRITER=5
VolumeCapability.AccessMode.Mode SINGLE_NODE_SINGLE_WRITER=6
VolumeCapability.AccessMode.Mode SINGLE_NODE_MULTI_WRITER=7
CapacityRange 1 required_bytes int64
CapacityRange 2 limit_bytes int64
Volume 1 capacity_bytes int64
Volume 2 volume_id string
Volume 3 volume_context map<string,string>
Volume 4 content_source VolumeContentSource
Volume 5 accessible_topology repeated Topology
TopologyRequirement 1 requisite repeated Topology
TopologyRequirement 2 preferred repeated Topology
Topology 1 segments map<string,string>
DeleteVolumeRequest 1 volume_id string
DeleteVolumeRequest 2 secrets map<string,string>
DeleteVolumeResponse -
ControllerPublishVolumeRequest 1 volume_id string
ControllerPublishVolumeRequest 2 node_id string
ControllerPublishVolumeRequest 3 volume_capability VolumeCapability
ControllerPublishVolumeRequest 4 readonly bool
ControllerPublishVolumeRequest 5 secrets map<string,string>
ControllerPublishVolumeRequest 6 volume_context map<string,string>
ControllerPublishVolumeResponse 1 publish_context map<string,string>
ControllerUnpublishVolumeRequest 1 volume_id string
ControllerUnpublishVolumeRequest 2 node_id string
ControllerUnpublishVolumeRequest 3 secrets map<string,string>
ControllerUnpublishVolumeResponse -
ValidateVolumeCapabilitiesRequest 1 volume_id string
ValidateVolumeCapabilitiesRequest 2 volume_context map<string,string>
ValidateVolumeCapabilitiesRequest 3 volume_capabilities repeated VolumeCapability
ValidateVolumeCapabilitiesRequest 4 parameters map<string,string>
ValidateVolumeCapabilitiesRequest 5 secrets map<string,string>
ValidateVolumeCapabilitiesRequest 6 mutable_parameters map<string,string>
ValidateVolumeCapabilitiesResponse 1 confirmed ValidateVolumeCapabilitiesResponse.Confirmed
ValidateVolumeCapabilitiesResponse 2 message string
ValidateVolumeCapabilitiesResponse.Confirmed 1 volume_context map<string,string>
ValidateVolumeCapabilitiesResponse.Confirmed 2 volume_capabilities repeated VolumeCapability
ValidateVolumeCapabilitiesResponse.Confirmed 3 parameters map<string,string>
ValidateVolumeCapabilitiesResponse.Confirmed 4 mutable_parameters map<string,string>
ListVolumesRequest 1 max_entries int32
ListVolumesRequest 2 starting_token string
ListVolumesResponse 1 entries repeated ListVolumesResponse.Entry
ListVolumesResponse 2 next_token string
ListVolumesResponse.VolumeStatus 1 published_node_ids repeated string
ListVolumesResponse.VolumeStatus 2 volume_condition VolumeCondition
ListVolumesResponse.Entry 1 volume Volume
ListVolumesResponse.Entry 2 status ListVolumesResponse.VolumeStatus
ControllerGetVolumeRequest 1 volume_id string
ControllerGetVolumeResponse 1 volume Volume
ControllerGetVolumeResponse 2 status ControllerGetVolumeResponse.VolumeStatus
ControllerGetVolumeResponse.VolumeStatus 1 published_node_ids repeated string
ControllerGetVolumeResponse.VolumeStatus 2 volume_condition VolumeCondition
ControllerModifyVolumeRequest 1 volume_id string
ControllerModifyVolumeRequest 2 secrets map<string,string>
ControllerModifyVolumeRequest 3 mutable_parameters map<string,string>
ControllerModifyVolumeResponse -
GetCapacityRequest 1 volume_capabilities repeated VolumeCapability
GetCapacityRequest 2 parameters map<string,string>
GetCapacityRequest 3 accessible_topology Topology
GetCapacityResponse 1 available_capacity int64
GetCapacityResponse 2 maximum_volume_size google.protobuf.Int64Value
GetCapacityResponse 3 minimum_volume_size google.protobuf.Int64Value
ControllerGetCapabilitiesRequest -
ControllerGetCapabilitiesResponse 1 capabilities repeated ControllerServiceCapability
ControllerServiceCapability 1 rpc ControllerServiceCapability.RPC oneof=type
ControllerServiceCapability.RPC 1 type ControllerServiceCapability.RPC.Type
ControllerServiceCapability.RPC.Type UNKNOWN=0
ControllerServiceCapability.RPC.Type CREATE_DELETE_VOLUME=1
ControllerServiceCapability.RPC.Type PUBLISH_UNPUBLISH_VOLUME=2
ControllerServiceCapability.RPC.Type LIST_VOLUMES=3
ControllerServiceCapability.RPC.Type GET_CAPACITY=4
ControllerServiceCapability.RPC.Type CREATE_DELETE_SNAPSHOT=5
ControllerServiceCapability.RPC.Type LIST_SNAPSHOTS=6
ControllerServiceCapability.RPC.Type CLONE_VOLUME=7
ControllerServiceCapability.RPC.Type PUBLISH_READONLY=8
ControllerServiceCapability.RPC.Type EXPAND_VOLUME=9
ControllerServiceCapability.RPC.Type LIST_VOLUMES_PUBLISHED_NODES=10
ControllerServiceCapability.RPC.Type VOLUME_CONDITION=11
ControllerServiceCapability.RPC.Type GET_VOLUME=12
ControllerServiceCapability.RPC.Type SINGLE_NODE_MULTI_WRITER=13
ControllerServiceCapability.RPC.Type MODIFY_VOLUME=14
ControllerServiceCapability.RPC.Type GET_SNAPSHOT=15
CreateSnapshotRequest 1 source_volume_id string
CreateSnapshotRequest 2 name string
CreateSnapshotRequest 3 secrets map<string,string>
CreateSnapshotRequest 4 parameters map<string,string>
CreateSnapshotResponse 1 snapshot Snapshot
Snapshot 1 size_bytes int64
Snapshot 2 snapshot_id string
Snapshot 3 source_volume_id string
Snapshot 4 creation_time google.protobuf.Timestamp
Snapshot 5 ready_to_use bool
Snapshot 6 group_snapshot_id string
DeleteSnapshotRequest 1 snapshot_id string
DeleteSnapshotRequest 2 secrets map<string,string>
DeleteSnapshotResponse -
ListSnapshotsRequest 1 max_entries int32
ListSnapshotsRequest 2 starting_token string
ListSnapshotsRequest 3 source_volume_id string
ListSnapshotsRequest 4 snapshot_id string
ListSnapshotsRequest 5 secrets map<string,string>
ListSnapshotsResponse 1 entries repeated ListSnapshotsResponse.Entry
ListSnapshotsResponse 2 next_token string
ListSnapshotsResponse.Entry 1 snapshot Snapshot
GetSnapshotRequest 1 snapshot_id string
GetSnapshotRequest 2 secrets map<string,string>
GetSnapshotResponse 1 snapshot Snapshot
ControllerExpandVolumeRequest 1 volume_id string
ControllerExpandVolumeRequest 2 capacity_range CapacityRange
ControllerExpandVolumeRequest 3 secrets map<string,string>
ControllerExpandVolumeRequest 4 volume_capability VolumeCapability
ControllerExpandVolumeResponse 1 capacity_bytes int64
ControllerExpandVolumeResponse 2 node_expansion_required bool
NodeStageVolumeRequest 1 volume_id string
NodeStageVolumeRequest 2 publish_context map<string,string>
NodeStageVolumeRequest 3 staging_target_path string
NodeStageVolumeRequest 4 volume_capability VolumeCapability
NodeStageVolumeRequest 5 secrets map<string,string>
NodeStageVolumeRequest 6 volume_context map<string,string>
NodeStageVolumeResponse -
NodeUnstageVolumeRequest 1 volume_id string
NodeUnstageVolumeRequest 2 staging_target_path string
NodeUnstageVolumeResponse -
NodePublishVolumeRequest 1 volume_id string
NodePublishVolumeRequest 2 publish_context map<string,string>
NodePublishVolumeRequest 3 staging_target_path string
NodePublishVolumeRequest 4 target_path string
NodePublishVolumeRequest 5 volume_capability VolumeCapability
NodePublishVolumeRequest 6 readonly bool
NodePublishVolumeRequest 7 secrets map<string,string>
NodePublishVolumeRequest 8 volume_context map<string,string>
NodePublishVolumeResponse -
NodeUnpublishVolumeRequest 1 volume_id string
NodeUnpublishVolumeRequest 2 target_path string
NodeUnpublishVolumeResponse -
NodeGetVolumeStatsRequest 1 volume_id string
NodeGetVolumeStatsRequest 2 volume_path string
NodeGetVolumeStatsRequest 3 staging_target_path string
NodeGetVolumeStatsResponse 1 usage repeated VolumeUsage
NodeGetVolumeStatsResponse 2 volume_condition VolumeCondition
VolumeUsage 1 available int64
VolumeUsage 2 total int64
VolumeUsage 3 used int64
VolumeUsage 4 unit VolumeUsage.Unit
VolumeUsage.Unit UNKNOWN=0
VolumeUsage.Unit BYTES=1
VolumeUsage.Unit INODES=2
VolumeCondition 1 abnormal bool
VolumeCondition 2 message string
NodeGetCapabilitiesRequest -
NodeGetCapabilitiesResponse 1 capabilities repeated NodeServiceCapability
NodeServiceCapability 1 rpc NodeServiceCapability.RPC oneof=type
NodeServiceCapability.RPC 1 type NodeServiceCapability.RPC.Type
NodeServiceCapability.RPC.Type UNKNOWN=0
NodeServiceCapability.RPC.Type STAGE_UNSTAGE_VOLUME=1
NodeServiceCapability.RPC.Type GET_VOLUME_STATS=2
NodeServiceCapability.RPC.Type EXPAND_VOLUME=3
NodeServiceCapability.RPC.Type VOLUME_CONDITION=4
NodeServiceCapability.RPC.Type SINGLE_NODE_MULTI_WRITER=5
NodeServiceCapability.RPC.Type VOLUME_MOUNT_GROUP=6
NodeGetInfoRequest -
NodeGetInfoResponse 1 node_id string
NodeGetInfoResponse 2 max_volumes_per_node int64
NodeGetInfoResponse 3 accessible_topology Topology
NodeExpandVolumeRequest 1 volume_id string
NodeExpandVolumeRequest 2 volume_path string
NodeExpandVolumeRequest 3 capacity_range CapacityRange
NodeExpandVolumeRequest 4 staging_target_path string
NodeExpandVolumeRequest 5 volume_capability VolumeCapability
NodeExpandVolumeRequest 6 secrets map<string,string>
NodeExpandVolumeResponse 1 capacity_bytes int64
GroupControllerGetCapabilitiesRequest -
GroupControllerGetCapabilitiesResponse 1 capabilities repeated GroupControllerServiceCapability
GroupControllerServiceCapability 1 rpc GroupControllerServiceCapability.RPC oneof=type
GroupControllerServiceCapability.RPC 1 type GroupControllerServiceCapability.RPC.Type
GroupControllerServiceCapability.RPC.Type UNKNOWN=0
GroupControllerServiceCapability.RPC.Type CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT=1
CreateVolumeGroupSnapshotRequest 1 name string
CreateVolumeGroupSnapshotRequest 2 source_volume_ids repeated string
CreateVolumeGroupSnapshotRequest 3 secrets map<string,string>
CreateVolumeGroupSnapshotRequest 4 parameters map<string,string>
CreateVolumeGroupSnapshotResponse 1 group_snapshot VolumeGroupSnapshot
VolumeGroupSnapshot 1 group_snapshot_id string
VolumeGroupSnapshot 2 snapshots repeated Snapshot
VolumeGroupSnapshot 3 creation_time google.protobuf.Timestamp
VolumeGroupSnapshot 4 ready_to_use bool
DeleteVolumeGroupSnapshotRequest 1 group_snapshot_id string
DeleteVolumeGroupSnapshotRequest 2 snapshot_ids repeated string
DeleteVolumeGroupSnapshotRequest 3 secrets map<string,string>
DeleteVolumeGroupSnapshotResponse -
GetVolumeGroupSnapshotRequest 1 group_snapshot_id string
GetVolumeGroupSnapshotRequest 2 snapshot_ids repeated string
GetVolumeGroupSnapshotRequest 3 secrets map<string,string>
GetVolumeGroupSnapshotResponse 1 group_snapshot VolumeGroupSnapshot
BlockMetadata 1 byte_offset int64
BlockMetadata 2 size_bytes int64
GetMetadataAllocatedRequest 1 snapshot_id string
GetMetadataAllocatedRequest 2 starting_offset int64
GetMetadataAllocatedRequest 3 max_results int32
GetMetadataAllocatedRequest 4 secrets map<string,string>
GetMetadataAllocatedResponse 1 block_metadata_type BlockMetadataType
GetMetadataAllocatedResponse 2 volume_capacity_bytes int64
GetMetadataAllocatedResponse 3 block_metadata repeated BlockMetadata
GetMetadataDeltaRequest 1 base_snapshot_id string
GetMetadataDeltaRequest 2 target_snapshot_id string
GetMetadataDeltaRequest 3 starting_offset int64
GetMetadataDeltaRequest 4 max_results int32
GetMetadataDeltaRequest 5 secrets map<string,string>
GetMetadataDeltaResponse 1 block_metadata_type BlockMetadataType
GetMetadataDeltaResponse 2 volume_capacity_bytes int64
GetMetadataDeltaResponse 3 block_metadata repeated BlockMetadata
BlockMetadataType UNKNOWN=0
BlockMetadataType FIXED_LENGTH=1
BlockMetadataType VARIABLE_LENGTH=2
"""


def _short(name: str) -> str:
    return name.removeprefix("csi.v1.")


def _field_type(field: FieldDescriptor) -> str:
    msg = field.message_type
    if msg is not None and msg.GetOptions().map_entry:
        key, value = msg.fields_by_name["key"], msg.fields_by_name["value"]
        return f"map<{_field_type(key)},{_field_type(value)}>"
    if msg is not None:
        name = _short(msg.full_name)
    elif field.enum_type is not None:
        name = _short(field.enum_type.full_name)
    else:
        name = _SCALARS[field.type]
    return ("repeated " if field.is_repeated else "") + name


def _enum_lines(enum: EnumDescriptor) -> list[str]:
    return [f"{_short(enum.full_name)} {v.name}={v.number}" for v in enum.values]


def _render_message(msg: Descriptor, out: list[str]) -> None:
    if msg.GetOptions().map_entry:
        return
    name = _short(msg.full_name)
    for field in msg.fields:
        oneof = f" oneof={field.containing_oneof.name}" if field.containing_oneof else ""
        out.append(f"{name} {field.number} {field.name} {_field_type(field)}{oneof}")
    if not msg.fields:
        out.append(f"{name} -")
    for enum in msg.enum_types:
        out.extend(_enum_lines(enum))
    for nested in msg.nested_types:
        _render_message(nested, out)


def _render() -> list[str]:
    out: list[str] = []
    for msg in csi_pb2.DESCRIPTOR.message_types_by_name.values():
        _render_message(msg, out)
    for enum in csi_pb2.DESCRIPTOR.enum_types_by_name.values():
        out.extend(_enum_lines(enum))
    return out


def test_every_csi_field_and_enum_value_matches_the_golden_table() -> None:
    golden = sorted(line for line in GOLDEN.strip().splitlines())
    actual = sorted(_render())
    missing = sorted(set(golden) - set(actual))
    unexpected = sorted(set(actual) - set(golden))
    assert not missing and not unexpected, f"missing={missing}\nunexpected={unexpected}"
    assert len(actual) == len(golden)


def test_golden_table_covers_all_messages() -> None:
    rendered_messages = {line.split()[0] for line in _render()}
    assert "VolumeCapability.MountVolume" in rendered_messages
    assert len(rendered_messages) >= 100
