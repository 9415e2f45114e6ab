"""csi-sanity v5 mirror, part 4: the VolumeAttributesClass specs of CreateVolume, ModifyVolume
[Controller Server] (controller.go) and GroupController (groupcontroller.go).

See test_sanity.py for what this mirror is; names are the Go spec descriptions. The
driver claims MODIFY_VOLUME, GROUP_CONTROLLER_SERVICE and CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT,
so csi-sanity runs every one of these.
"""

from __future__ import annotations

import uuid

import grpc
import pytest

from protos import csi_pb2, csi_pb2_grpc
from tests.integration.csi.conftest import status_of
from tests.integration.csi.sanity_resources import (
    TEST_VOLUME_MUTABLE_PARAMETERS,
    Resources,
    SanityContext,
    make_create_volume_req,
    make_modify_volume_req,
    unique_string,
)

pytestmark = pytest.mark.root
IA = grpc.StatusCode.INVALID_ARGUMENT
GRpc = csi_pb2.GroupControllerServiceCapability.RPC


def _fake_key_req(volume_id: str) -> csi_pb2.ControllerModifyVolumeRequest:
    return csi_pb2.ControllerModifyVolumeRequest(
        volume_id=volume_id, mutable_parameters={"XXX_FakeKey": "XXX_FakeValue"}
    )


# ---------------------------------------------------------------- CreateVolume (VolumeAttributesClass)


def test_createvolume_should_create_volume_with_a_volume_attribute_class(r: Resources) -> None:
    req = make_create_volume_req(unique_string("sanity-controller-vol-with-mutable-parameters"))
    req.mutable_parameters.update(TEST_VOLUME_MUTABLE_PARAMETERS)
    r.create_volume(req)


def test_createvolume_should_not_create_volume_with_an_invalid_volume_attribute_class(
    sc: SanityContext,
) -> None:
    req = make_create_volume_req(unique_string("sanity-controller-vol-with-mutable-parameters"))
    req.mutable_parameters["XXX_FakeKey"] = "XXX_FakeValue"
    assert status_of(lambda: sc.controller.CreateVolume(req)) == IA


# ---------------------------------------------------------------- ModifyVolume


def test_modifyvolume_should_fail_if_no_volume_id_is_given(sc: SanityContext) -> None:
    assert status_of(lambda: sc.controller.ControllerModifyVolume(make_modify_volume_req(""))) == IA


def test_modifyvolume_should_fail_if_volume_does_not_exist(sc: SanityContext) -> None:
    req = make_modify_volume_req("non-existing-volume-id")
    assert status_of(lambda: sc.controller.ControllerModifyVolume(req)) == grpc.StatusCode.NOT_FOUND


def test_modifyvolume_should_fail_if_specified_mutable_parameters_are_not_supported_by_the_volume(
    sc: SanityContext, r: Resources
) -> None:
    vol = r.must_create_volume(make_create_volume_req(unique_string("sanity-modify-volume")))
    assert status_of(lambda: sc.controller.ControllerModifyVolume(_fake_key_req(vol.volume.volume_id))) == IA


def test_modifyvolume_should_modify_a_volume_created_without_a_volume_attribute_class(
    sc: SanityContext, r: Resources
) -> None:
    vol = r.must_create_volume(make_create_volume_req(unique_string("sanity-modify-volume")))
    assert sc.controller.ControllerModifyVolume(make_modify_volume_req(vol.volume.volume_id)) is not None


def test_modifyvolume_should_modify_a_volume_created_with_a_volume_attribute_class(
    sc: SanityContext, r: Resources
) -> None:
    req = make_create_volume_req(unique_string("sanity-modify-volume"))
    req.mutable_parameters.update(TEST_VOLUME_MUTABLE_PARAMETERS)
    vol = r.must_create_volume(req)
    assert sc.controller.ControllerModifyVolume(make_modify_volume_req(vol.volume.volume_id)) is not None


def test_modifyvolume_should_fail_to_modify_a_volume_created_with_a_volume_attribute_class_if_new_mutable_parameters_are_not_supported_by_volume(  # noqa: E501
    sc: SanityContext, r: Resources
) -> None:
    req = make_create_volume_req(unique_string("sanity-modify-volume"))
    req.mutable_parameters.update(TEST_VOLUME_MUTABLE_PARAMETERS)
    vol = r.must_create_volume(req)
    assert status_of(lambda: sc.controller.ControllerModifyVolume(_fake_key_req(vol.volume.volume_id))) == IA


# ---------------------------------------------------------------- GroupController


def _group(sc: SanityContext) -> csi_pb2_grpc.GroupControllerStub:
    assert sc.group is not None
    return sc.group


def test_groupcontrollergetcapabilities_should_return_appropriate_capabilities(sc: SanityContext) -> None:
    caps = _group(sc).GroupControllerGetCapabilities(csi_pb2.GroupControllerGetCapabilitiesRequest())
    assert caps.capabilities
    for cap in caps.capabilities:
        assert cap.rpc.type == GRpc.CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT, f"Unknown capability: {cap}"


def test_createvolumegroupsnapshot_should_fail_when_no_name_is_provided(sc: SanityContext) -> None:
    req = csi_pb2.CreateVolumeGroupSnapshotRequest()
    assert status_of(lambda: _group(sc).CreateVolumeGroupSnapshot(req)) == IA


def test_getvolumegroupsnapshot_should_fail_when_no_volume_id_is_provided(sc: SanityContext) -> None:
    req = csi_pb2.GetVolumeGroupSnapshotRequest()
    assert status_of(lambda: _group(sc).GetVolumeGroupSnapshot(req)) == IA


def test_getvolumegroupsnapshot_should_fail_when_an_invalid_volume_id_is_used(sc: SanityContext) -> None:
    req = csi_pb2.GetVolumeGroupSnapshotRequest(group_snapshot_id=f"fake-vol-{uuid.uuid4()}")
    assert status_of(lambda: _group(sc).GetVolumeGroupSnapshot(req)) == grpc.StatusCode.NOT_FOUND


def test_deletevolumegroupsnapshot_should_fail_when_no_volume_id_is_provided(sc: SanityContext) -> None:
    req = csi_pb2.DeleteVolumeGroupSnapshotRequest()
    assert status_of(lambda: _group(sc).DeleteVolumeGroupSnapshot(req)) == IA


def test_deletevolumegroupsnapshot_should_succeed_when_an_invalid_volume_id_is_used(
    sc: SanityContext,
) -> None:
    req = csi_pb2.DeleteVolumeGroupSnapshotRequest(group_snapshot_id=f"fake-vol-{uuid.uuid4()}")
    _group(sc).DeleteVolumeGroupSnapshot(req)
