"""CSI messages serialize to the bytes their field numbers imply, and hand-built bytes decode.

Every expected byte string below is computed by hand from the protobuf wire format:
tag = (field_number << 3) | wire_type, wire type 0 = varint, 2 = length-delimited.
"""

import pytest
from google.protobuf import timestamp_pb2, wrappers_pb2

from protos import csi_pb2

VC = csi_pb2.VolumeCapability
MODE = VC.AccessMode.Mode


def test_create_volume_request_name_and_capacity() -> None:
    msg = csi_pb2.CreateVolumeRequest(name="a", capacity_range=csi_pb2.CapacityRange(required_bytes=1))
    # 1:"a" -> 0a 01 61 ; 2:{1:1} -> 12 02 08 01
    assert msg.SerializeToString() == bytes.fromhex("0a0161 12020801")


def test_create_volume_request_mutable_parameters_is_field_8() -> None:
    msg = csi_pb2.CreateVolumeRequest(mutable_parameters={"k": "v"})
    # map entry {1:"k", 2:"v"} = 0a 01 6b 12 01 76 (6 bytes) under tag (8<<3)|2 = 0x42
    assert msg.SerializeToString() == bytes.fromhex("4206 0a016b 120176")


def test_volume_capability_mount_with_fs_type() -> None:
    cap = VC(mount=VC.MountVolume(fs_type="ext4"), access_mode=VC.AccessMode(mode=MODE.SINGLE_NODE_WRITER))
    # 2:{1:"ext4"} -> 12 06 0a 04 65 78 74 34 ; 3:{1:1} -> 1a 02 08 01
    assert cap.SerializeToString() == bytes.fromhex("1206 0a04 65787434 1a020801")


def test_volume_capability_block_and_mount_group() -> None:
    block = VC(block=VC.BlockVolume(), access_mode=VC.AccessMode(mode=MODE.SINGLE_NODE_MULTI_WRITER))
    assert block.SerializeToString() == bytes.fromhex("0a00 1a020807")
    mount = VC(mount=VC.MountVolume(mount_flags=["ro"], volume_mount_group="5"))
    # MountVolume 2:"ro" -> 12 02 72 6f ; 3:"5" -> 1a 01 35  (7 bytes) under tag 0x12
    assert mount.SerializeToString() == bytes.fromhex("1207 1202726f 1a0135")


def test_node_stage_volume_request_secrets_is_field_5_map_entry() -> None:
    msg = csi_pb2.NodeStageVolumeRequest(volume_id="v", secrets={"k": "s"})
    # 1:"v" -> 0a 01 76 ; 5: entry {1:"k",2:"s"} -> 2a 06 0a 01 6b 12 01 73
    assert msg.SerializeToString() == bytes.fromhex("0a0176 2a06 0a016b 120173")


def test_node_stage_volume_request_paths_and_capability() -> None:
    cap = VC(block=VC.BlockVolume())
    msg = csi_pb2.NodeStageVolumeRequest(staging_target_path="/s", volume_capability=cap)
    assert msg.SerializeToString() == bytes.fromhex("1a022f73 2202 0a00")


def test_node_publish_volume_request_target_path_and_readonly() -> None:
    msg = csi_pb2.NodePublishVolumeRequest(volume_id="v", target_path="/t", readonly=True)
    # 1:"v" ; 4:"/t" -> 22 02 2f 74 ; 6:true -> 30 01
    assert msg.SerializeToString() == bytes.fromhex("0a0176 22022f74 3001")


def test_snapshot_fields() -> None:
    snap = csi_pb2.Snapshot(
        size_bytes=300,
        snapshot_id="s",
        source_volume_id="v",
        creation_time=timestamp_pb2.Timestamp(seconds=1),
        ready_to_use=True,
        group_snapshot_id="g",
    )
    # 1:300 -> 08 ac 02 ; 2:"s" ; 3:"v" ; 4:{1:1} -> 22 02 08 01 ; 5:true -> 28 01 ; 6:"g" -> 32 01 67
    expected = "08ac02 120173 1a0176 22020801 2801 320167"
    assert snap.SerializeToString() == bytes.fromhex(expected)


def test_get_capacity_response_wrapped_sizes() -> None:
    msg = csi_pb2.GetCapacityResponse(
        available_capacity=5,
        maximum_volume_size=wrappers_pb2.Int64Value(value=10),
        minimum_volume_size=wrappers_pb2.Int64Value(value=0),
    )
    # an Int64Value holding 0 is still present: 1a 00
    assert msg.SerializeToString() == bytes.fromhex("0805 1202080a 1a00")


def test_controller_modify_volume_request() -> None:
    msg = csi_pb2.ControllerModifyVolumeRequest(volume_id="v", mutable_parameters={"a": "b"})
    assert msg.SerializeToString() == bytes.fromhex("0a0176 1a06 0a0161 120162")


def test_volume_usage_with_unit() -> None:
    usage = csi_pb2.VolumeUsage(available=1, total=2, used=3, unit=csi_pb2.VolumeUsage.INODES)
    assert usage.SerializeToString() == bytes.fromhex("0801 1002 1803 2002")


@pytest.mark.parametrize(
    ("enum", "expected"),
    [
        (
            csi_pb2.VolumeCapability.AccessMode.Mode,
            {
                "UNKNOWN": 0,
                "SINGLE_NODE_WRITER": 1,
                "SINGLE_NODE_READER_ONLY": 2,
                "MULTI_NODE_READER_ONLY": 3,
                "MULTI_NODE_SINGLE_WRITER": 4,
                "MULTI_NODE_MULTI_WRITER": 5,
                "SINGLE_NODE_SINGLE_WRITER": 6,
                "SINGLE_NODE_MULTI_WRITER": 7,
            },
        ),
        (
            csi_pb2.ControllerServiceCapability.RPC.Type,
            {
                "UNKNOWN": 0,
                "CREATE_DELETE_VOLUME": 1,
                "PUBLISH_UNPUBLISH_VOLUME": 2,
                "LIST_VOLUMES": 3,
                "GET_CAPACITY": 4,
                "CREATE_DELETE_SNAPSHOT": 5,
                "LIST_SNAPSHOTS": 6,
                "CLONE_VOLUME": 7,
                "PUBLISH_READONLY": 8,
                "EXPAND_VOLUME": 9,
                "LIST_VOLUMES_PUBLISHED_NODES": 10,
                "VOLUME_CONDITION": 11,
                "GET_VOLUME": 12,
                "SINGLE_NODE_MULTI_WRITER": 13,
                "MODIFY_VOLUME": 14,
                "GET_SNAPSHOT": 15,
            },
        ),
        (
            csi_pb2.NodeServiceCapability.RPC.Type,
            {
                "UNKNOWN": 0,
                "STAGE_UNSTAGE_VOLUME": 1,
                "GET_VOLUME_STATS": 2,
                "EXPAND_VOLUME": 3,
                "VOLUME_CONDITION": 4,
                "SINGLE_NODE_MULTI_WRITER": 5,
                "VOLUME_MOUNT_GROUP": 6,
            },
        ),
        (
            csi_pb2.PluginCapability.Service.Type,
            {
                "UNKNOWN": 0,
                "CONTROLLER_SERVICE": 1,
                "VOLUME_ACCESSIBILITY_CONSTRAINTS": 2,
                "GROUP_CONTROLLER_SERVICE": 3,
                "SNAPSHOT_METADATA_SERVICE": 4,
            },
        ),
        (csi_pb2.PluginCapability.VolumeExpansion.Type, {"UNKNOWN": 0, "ONLINE": 1, "OFFLINE": 2}),
        (csi_pb2.VolumeUsage.Unit, {"UNKNOWN": 0, "BYTES": 1, "INODES": 2}),
    ],
)
def test_enum_values(enum, expected: dict[str, int]) -> None:
    assert dict(enum.items()) == expected


def test_decode_hand_built_controller_publish_request() -> None:
    raw = bytes.fromhex(
        "0a05"
        + b"vol-1".hex()  # 1: volume_id
        + "1202"
        + b"n1".hex()  # 2: node_id
        + "1a06 0a00 1a020803"  # 3: capability {block, access_mode MULTI_NODE_READER_ONLY}
        + "2001"  # 4: readonly
        + "3206 0a0161 120162"  # 6: volume_context {"a": "b"}
    )
    msg = csi_pb2.ControllerPublishVolumeRequest.FromString(raw)
    assert msg.volume_id == "vol-1"
    assert msg.node_id == "n1"
    assert msg.volume_capability.WhichOneof("access_type") == "block"
    assert msg.volume_capability.access_mode.mode == MODE.MULTI_NODE_READER_ONLY
    assert msg.readonly is True
    assert dict(msg.volume_context) == {"a": "b"}
    assert not msg.secrets
    assert msg.SerializeToString() == raw


def test_decode_hand_built_stats_and_capabilities() -> None:
    stats = csi_pb2.NodeGetVolumeStatsResponse.FromString(bytes.fromhex("0a08 0801 1002 1803 2001"))
    assert [(u.available, u.total, u.used, u.unit) for u in stats.usage] == [
        (1, 2, 3, csi_pb2.VolumeUsage.BYTES)
    ]
    # two capabilities: rpc{type=STAGE_UNSTAGE_VOLUME}, rpc{type=GET_VOLUME_STATS}
    caps = csi_pb2.NodeGetCapabilitiesResponse.FromString(bytes.fromhex("0a04 0a020801 0a04 0a020802"))
    assert [c.rpc.type for c in caps.capabilities] == [1, 2]


def test_unknown_fields_from_newer_peers_survive_a_round_trip() -> None:
    # field 99 (varint 7) is unknown to us; a newer CO may send fields we do not know
    raw = bytes.fromhex("0a0176") + bytes([0x98, 0x06, 0x07])
    msg = csi_pb2.NodeUnstageVolumeRequest.FromString(raw)
    assert msg.volume_id == "v"
    assert msg.SerializeToString() == raw


def test_custom_option_extensions_have_official_numbers() -> None:
    assert csi_pb2.csi_secret.number == 1059
    for ext in (
        "alpha_field",
        "alpha_message",
        "alpha_method",
        "alpha_service",
        "alpha_enum",
        "alpha_enum_value",
    ):
        assert getattr(csi_pb2, ext).number == 1060, ext


def test_every_secrets_field_is_marked_csi_secret() -> None:
    marked = []
    pending = list(csi_pb2.DESCRIPTOR.message_types_by_name.values())
    while pending:
        msg = pending.pop()
        pending.extend(msg.nested_types)
        for field in msg.fields:
            is_secret = field.GetOptions().Extensions[csi_pb2.csi_secret]
            assert is_secret == (field.name == "secrets"), f"{msg.full_name}.{field.name}"
            if is_secret:
                marked.append(msg.name)
    assert "NodeStageVolumeRequest" in marked
    assert len(marked) == 19
