"""The PlasmaCloud protos keep the spec's messages exactly and put completions after them.

SPEC lists, per message, the fields the k8s hosting spec defines (name, number, type);
COMPLETED lists the fields this project adds. Together they must be the whole message.
"""

import importlib
import re

import pytest
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from protos import prismnet_pb2

_SCALARS = {v: k[5:].lower() for k, v in vars(FieldDescriptor).items() if k.startswith("TYPE_")}

SPEC = {
    "prismnet.AllocateIPRequest": "1 namespace string, 2 pod_name string, 3 container_id string",
    "prismnet.AllocateIPResponse": "1 ip_address string, 2 gateway string, 3 dns_servers repeated string",
    "fiberlb.CreateLoadBalancerRequest": (
        "1 name string, 2 description string, 3 external_ip string, 4 org_id string, 5 project_id string"
    ),
    "fiberlb.CreateListenerRequest": (
        "1 load_balancer_id string, 2 protocol string, 3 port int32, 4 default_pool_id string,"
        " 5 health_check HealthCheck"
    ),
    "fiberlb.UpdatePoolRequest": "1 pool_id string, 2 members repeated PoolMember, 3 algorithm string",
    "fiberlb.PoolMember": "1 address string, 2 port int32, 3 weight int32",
    "flashdns.CreateRecordRequest": (
        "1 zone string, 2 name string, 3 type string, 4 value string, 5 ttl int32,"
        " 6 labels map<string,string>"
    ),
    "flashdns.DNSRecord": (
        "1 id string, 2 zone string, 3 name string, 4 type string, 5 value string, 6 ttl int32"
    ),
    "lightningstor.CreateVolumeRequest": (
        "1 name string, 2 size_bytes int64, 3 volume_type string, 4 replication_factor int32,"
        " 5 org_id string, 6 project_id string"
    ),
    "lightningstor.Volume": (
        "1 id string, 2 name string, 3 size_bytes int64, 4 status string, 5 volume_type string"
    ),
    "lightningstor.AttachVolumeRequest": "1 volume_id string, 2 node_id string, 3 attach_mode string",
    "lightningstor.VolumeAttachment": (
        "1 id string, 2 volume_id string, 3 node_id string, 4 device_path string, 5 connection_info string"
    ),
}

PAGED_BY_OWNER = "1 page_size int32, 2 page_token string, 3 org_id string, 4 project_id string"

COMPLETED = {
    "prismnet.AllocateIPResponse": "4 mac_address string, 5 prefix_length int32",
    "prismnet.ReleaseIPRequest": (
        "1 namespace string, 2 pod_name string, 3 container_id string, 4 ip_address string"
    ),
    "prismnet.ReleaseIPResponse": "1 released bool",
    "prismnet.CreateLogicalSwitchRequest": "1 namespace string, 2 subnet string, 3 gateway string",
    "prismnet.CreateLogicalSwitchResponse": "1 name string, 2 subnet string, 3 gateway string",
    "prismnet.ListAllocationsRequest": "1 namespace string",
    "prismnet.ListAllocationsResponse": "1 allocations repeated Allocation",
    "prismnet.Allocation": (
        "1 namespace string, 2 pod_name string, 3 container_id string, 4 ip_address string,"
        " 5 mac_address string"
    ),
    "fiberlb.LoadBalancer": (
        "1 id string, 2 name string, 3 description string, 4 external_ip string, 5 org_id string,"
        " 6 project_id string, 7 status string, 8 listeners repeated Listener"
    ),
    "fiberlb.Listener": (
        "1 id string, 2 load_balancer_id string, 3 protocol string, 4 port int32, 5 default_pool_id string,"
        " 6 health_check HealthCheck"
    ),
    "fiberlb.HealthCheck": (
        "1 type string, 2 path string, 3 interval_seconds int32, 4 timeout_seconds int32,"
        " 5 healthy_threshold int32, 6 unhealthy_threshold int32"
    ),
    "fiberlb.Pool": (
        "1 id string, 2 load_balancer_id string, 3 members repeated PoolMember, 4 algorithm string,"
        " 5 session_affinity string"
    ),
    "fiberlb.UpdatePoolRequest": "4 session_affinity string",
    "fiberlb.ListLoadBalancersRequest": PAGED_BY_OWNER,
    "fiberlb.ListLoadBalancersResponse": "1 load_balancers repeated LoadBalancer, 2 next_page_token string",
    "fiberlb.Empty": "",
    "flashdns.DNSRecord": "7 labels map<string,string>",
    "flashdns.UpdateRecordRequest": "1 id string, 2 value string, 3 ttl int32, 4 labels map<string,string>",
    "flashdns.DeleteRecordRequest": "1 id string",
    "flashdns.ListRecordsRequest": (
        "1 zone string, 2 name string, 3 type string, 4 label_selector map<string,string>,"
        " 5 page_size int32, 6 page_token string"
    ),
    "flashdns.ListRecordsResponse": "1 records repeated DNSRecord, 2 next_page_token string",
    "flashdns.Empty": "",
    "lightningstor.CreateVolumeRequest": (
        "7 source_snapshot_id string, 8 source_volume_id string, 9 qos QosPolicy"
    ),
    "lightningstor.Volume": (
        "6 created_at Timestamp, 7 org_id string, 8 project_id string, 9 replication_factor int32,"
        " 10 source_snapshot_id string, 11 source_volume_id string, 12 qos QosPolicy"
    ),
    "lightningstor.QosPolicy": (
        "1 qos_class string, 2 read_bytes_per_second int64, 3 write_bytes_per_second int64,"
        " 4 read_iops int64, 5 write_iops int64"
    ),
    "lightningstor.ModifyVolumeRequest": "1 volume_id string, 2 qos QosPolicy",
    "lightningstor.DetachVolumeRequest": "1 volume_id string, 2 node_id string",
    "lightningstor.DeleteVolumeRequest": "1 volume_id string",
    "lightningstor.GetVolumeRequest": "1 volume_id string",
    "lightningstor.ListVolumesRequest": PAGED_BY_OWNER,
    "lightningstor.ListVolumesResponse": "1 volumes repeated Volume, 2 next_page_token string",
    "lightningstor.ExpandVolumeRequest": "1 volume_id string, 2 new_size_bytes int64",
    "lightningstor.CreateSnapshotRequest": "1 name string, 2 source_volume_id string",
    "lightningstor.Snapshot": (
        "1 id string, 2 name string, 3 source_volume_id string, 4 size_bytes int64, 5 created_at Timestamp,"
        " 6 ready bool"
    ),
    "lightningstor.Empty": "",
}


def _field_type(field: FieldDescriptor) -> str:
    msg = field.message_type
    if msg is not None and msg.GetOptions().map_entry:
        key, value = msg.fields_by_name["key"], msg.fields_by_name["value"]
        return f"map<{_field_type(key)},{_field_type(value)}>"
    name = msg.name if msg is not None else _SCALARS[field.type]
    return ("repeated " if field.is_repeated else "") + name


def _descriptor(key: str) -> Descriptor:
    module, message = key.split(".")
    return importlib.import_module(f"protos.{module}_pb2").DESCRIPTOR.message_types_by_name[message]


def _fields(spec: str) -> list[str]:
    return [f.strip() for f in re.split(r",\s*(?=\d)", spec) if f.strip()]


@pytest.mark.parametrize("key", sorted(set(SPEC) | set(COMPLETED)))
def test_message_is_spec_fields_then_completions(key: str) -> None:
    spec, extra = _fields(SPEC.get(key, "")), _fields(COMPLETED.get(key, ""))
    actual = [f"{f.number} {f.name} {_field_type(f)}" for f in _descriptor(key).fields]
    assert actual == spec + extra
    if spec and extra:
        assert min(int(e.split()[0]) for e in extra) > max(int(s.split()[0]) for s in spec)


def test_bytes_of_a_spec_message() -> None:
    req = prismnet_pb2.AllocateIPRequest(namespace="d", pod_name="p", container_id="c")
    assert req.SerializeToString() == bytes.fromhex("0a0164 120170 1a0163")
    # 1:"a1" ; 2:"g" ; 3:["s"] ; 5:24
    resp = prismnet_pb2.AllocateIPResponse.FromString(bytes.fromhex("0a026131 120167 1a0173 2818"))
    got = (resp.ip_address, resp.gateway, list(resp.dns_servers), resp.mac_address, resp.prefix_length)
    assert got == ("a1", "g", ["s"], "", 24)
