"""kubelet's plugin registration API as kubelet speaks it: the service's full name and the field
numbers of protos/pluginregistration.proto (k8s.io/kubelet/pkg/apis/pluginregistration/v1)."""

from __future__ import annotations

from protos import pluginregistration_pb2 as pr


def _fields(message: type) -> dict[str, int]:
    return {f.name: f.number for f in message.DESCRIPTOR.fields}  # type: ignore[attr-defined]


def test_service_path_is_the_one_kubelet_calls() -> None:
    service = pr.DESCRIPTOR.services_by_name["Registration"]
    assert service.full_name == "pluginregistration.Registration"
    assert [m.name for m in service.methods] == ["GetInfo", "NotifyRegistrationStatus"]


def test_field_numbers() -> None:
    assert _fields(pr.PluginInfo) == {"type": 1, "name": 2, "endpoint": 3, "supported_versions": 4}
    assert _fields(pr.RegistrationStatus) == {"plugin_registered": 1, "error": 2}
    assert _fields(pr.InfoRequest) == {} and _fields(pr.RegistrationStatusResponse) == {}


def test_plugin_info_bytes() -> None:
    info = pr.PluginInfo(type="CSIPlugin", name="x", endpoint="/e", supported_versions=["1.0.0"])
    assert info.SerializeToString() == b'\n\tCSIPlugin\x12\x01x\x1a\x02/e"\x051.0.0'
