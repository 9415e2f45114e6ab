"""Generated stubs import, expose every service, and serve the spec's method paths over real gRPC."""

import importlib
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path

import grpc
import pytest

from protos import csi_pb2, csi_pb2_grpc, lightningstor_pb2, lightningstor_pb2_grpc

PROTOS_DIR = Path(__file__).resolve().parents[3] / "protos"

CSI_SERVICES = {
    "Identity": ["GetPluginInfo", "GetPluginCapabilities", "Probe"],
    "Controller": [
        "CreateVolume",
        "DeleteVolume",
        "ControllerPublishVolume",
        "ControllerUnpublishVolume",
        "ValidateVolumeCapabilities",
        "ListVolumes",
        "GetCapacity",
        "ControllerGetCapabilities",
        "CreateSnapshot",
        "DeleteSnapshot",
        "ListSnapshots",
        "GetSnapshot",
        "ControllerExpandVolume",
        "ControllerGetVolume",
        "ControllerModifyVolume",
    ],
    "GroupController": [
        "GroupControllerGetCapabilities",
        "CreateVolumeGroupSnapshot",
        "DeleteVolumeGroupSnapshot",
        "GetVolumeGroupSnapshot",
    ],
    "SnapshotMetadata": ["GetMetadataAllocated", "GetMetadataDelta"],
    "Node": [
        "NodeStageVolume",
        "NodeUnstageVolume",
        "NodePublishVolume",
        "NodeUnpublishVolume",
        "NodeGetVolumeStats",
        "NodeExpandVolume",
        "NodeGetCapabilities",
        "NodeGetInfo",
    ],
}

# module name -> (proto package, {service: methods})
MODULES = {
    "csi": ("csi.v1", CSI_SERVICES),
    "lightningstor": (
        "plasmacloud.lightningstor.v1",
        {
            "VolumeService": [
                "CreateVolume",
                "DeleteVolume",
                "AttachVolume",
                "DetachVolume",
                "GetVolume",
                "ListVolumes",
                "ExpandVolume",
                "CreateSnapshot",
                "DeleteSnapshot",
                "GetSnapshot",
                "ListSnapshots",
                "ModifyVolume",
            ]
        },
    ),
    "pluginregistration": (
        "pluginregistration",
        {"Registration": ["GetInfo", "NotifyRegistrationStatus"]},
    ),
    "prismnet": (
        "plasmacloud.prismnet.v1",
        {"NetworkService": ["AllocateIP", "ReleaseIP", "CreateLogicalSwitch", "ListAllocations"]},
    ),
    "fiberlb": (
        "plasmacloud.fiberlb.v1",
        {
            "LoadBalancerService": [
                "CreateLoadBalancer",
                "UpdateLoadBalancer",
                "DeleteLoadBalancer",
                "GetLoadBalancer",
                "ListLoadBalancers",
                "CreateListener",
                "DeleteListener",
                "CreatePool",
                "UpdatePool",
                "GetPool",
                "DeletePool",
            ]
        },
    ),
    "flashdns": (
        "plasmacloud.flashdns.v1",
        {"DNSService": ["CreateRecord", "UpdateRecord", "DeleteRecord", "ListRecords"]},
    ),
}


def test_every_proto_file_is_covered_here() -> None:
    assert sorted(p.stem for p in PROTOS_DIR.glob("*.proto")) == sorted(MODULES)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_stubs_import_and_expose_services(name: str) -> None:
    package, services = MODULES[name]
    pb2 = importlib.import_module(f"protos.{name}_pb2")
    pb2_grpc = importlib.import_module(f"protos.{name}_pb2_grpc")
    assert pb2.DESCRIPTOR.package == package
    assert pb2.DESCRIPTOR.name == f"protos/{name}.proto"
    assert sorted(pb2.DESCRIPTOR.services_by_name) == sorted(services)
    for service, methods in services.items():
        desc = pb2.DESCRIPTOR.services_by_name[service]
        assert desc.full_name == f"{package}.{service}"
        assert [m.name for m in desc.methods] == methods
        for attr in (f"{service}Stub", f"{service}Servicer", f"add_{service}Servicer_to_server"):
            assert callable(getattr(pb2_grpc, attr)), attr
        servicer = getattr(pb2_grpc, f"{service}Servicer")
        assert all(callable(getattr(servicer, m)) for m in methods)


def test_csi_methods_take_request_and_return_response_of_their_name() -> None:
    for service in CSI_SERVICES:
        for method in csi_pb2.DESCRIPTOR.services_by_name[service].methods:
            assert method.input_type.full_name == f"csi.v1.{method.name}Request"
            assert method.output_type.full_name == f"csi.v1.{method.name}Response"
            assert not method.client_streaming
            assert method.server_streaming == (service == "SnapshotMetadata"), method.full_name


class _Identity(csi_pb2_grpc.IdentityServicer):
    def Probe(self, request, context):
        return csi_pb2.ProbeResponse(ready={"value": True})


class _Volumes(lightningstor_pb2_grpc.VolumeServiceServicer):
    def GetVolume(self, request, context):
        return lightningstor_pb2.Volume(id=request.volume_id, size_bytes=1 << 20)


@pytest.fixture
def channel(short_tmp: Path) -> Iterator[grpc.Channel]:
    sock = short_tmp / "protos-stubs.sock"
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    csi_pb2_grpc.add_IdentityServicer_to_server(_Identity(), server)
    csi_pb2_grpc.add_ControllerServicer_to_server(csi_pb2_grpc.ControllerServicer(), server)
    lightningstor_pb2_grpc.add_VolumeServiceServicer_to_server(_Volumes(), server)
    server.add_insecure_port(f"unix://{sock}")
    server.start()
    chan = grpc.insecure_channel(f"unix://{sock}")
    try:
        yield chan
    finally:
        chan.close()
        server.stop(None)
        sock.unlink(missing_ok=True)


def test_raw_call_on_csi_method_path_gets_hand_computed_bytes(channel: grpc.Channel) -> None:
    probe = channel.unary_unary("/csi.v1.Identity/Probe")
    # ProbeResponse{ready: BoolValue{value: true}} = 0a 02 08 01
    assert probe(b"", timeout=10) == bytes.fromhex("0a020801")


def test_stub_call_and_default_servicer_is_unimplemented(channel: grpc.Channel) -> None:
    assert csi_pb2_grpc.IdentityStub(channel).Probe(csi_pb2.ProbeRequest(), timeout=10).ready.value is True
    with pytest.raises(grpc.RpcError) as err:
        csi_pb2_grpc.ControllerStub(channel).CreateVolume(csi_pb2.CreateVolumeRequest(name="a"), timeout=10)
    assert err.value.code() == grpc.StatusCode.UNIMPLEMENTED


def test_plasmacloud_method_path(channel: grpc.Channel) -> None:
    get = channel.unary_unary("/plasmacloud.lightningstor.v1.VolumeService/GetVolume")
    # request {1: "v"}; reply Volume{1: "v", 3: 1048576} = 0a 01 76 18 80 80 40
    assert get(bytes.fromhex("0a0176"), timeout=10) == bytes.fromhex("0a0176 18808040")
