"""A spec-by-spec mirror of kubernetes-csi/csi-test v5 `pkg/sanity` (identity.go, controller.go, node.go,
groupcontroller.go; files test_sanity*.py).

The Go csi-sanity binary cannot be built on these machines (no Go module proxy), so
each Ginkgo `It(...)` is reproduced here with the same requests and the same
expectations, against the real driver process on a real unix socket, with csi-sanity's
defaults (10 GiB volumes, idempotent count 10) and, for the VolumeAttributesClass specs,
TestVolumeMutableParameters = {"qosClass": "silver"}. Test names are the Go spec descriptions.
The driver claims every capability csi-sanity checks, so no spec is skipped. Deliberately
not mirrored, one by one:
- the snapshot-metadata specs: csi-test v5 has none (SnapshotMetadata is a separate
  service the driver does not offer, and no csi-sanity spec exercises it);
- NodeGetVolumeHealth / NodeGetStorageHealth (newest node.go read): not CSI 1.12 RPCs;
- none else. The XIt (disabled) ListVolumes pagination spec is mirrored anyway.
Divergence: csi-test's ControllerGetCapabilities spec (as read, with MODIFY_VOLUME) does
not list GET_SNAPSHOT (CSI 1.11's alpha capability) among the known ones; the task asks
the driver to claim it, so this mirror accepts it. A Go csi-sanity run older than a
release that knows GET_SNAPSHOT would fail that one spec with "Unknown capability".
"""

from __future__ import annotations

import re
import uuid

import grpc
import pytest

from csi import loopdev
from protos import csi_pb2
from tests.conftest import require_root
from tests.integration.csi.conftest import Driver, make_root, status_of, teardown_root
from tests.integration.csi.sanity_resources import (
    IDEMPOTENT_COUNT,
    MAX_NAME_LENGTH,
    TEST_VOLUME_SIZE,
    Resources,
    SanityContext,
    make_create_volume_req,
    sanity_capability,
    unique_string,
    unique_string_with_length,
)

pytestmark = pytest.mark.root
Mode = csi_pb2.VolumeCapability.AccessMode
CRpc = csi_pb2.ControllerServiceCapability.RPC
NRpc = csi_pb2.NodeServiceCapability.RPC
Service = csi_pb2.PluginCapability.Service


def ctrl_caps(sc: SanityContext) -> set[int]:
    caps = sc.controller.ControllerGetCapabilities(csi_pb2.ControllerGetCapabilitiesRequest()).capabilities
    return {c.rpc.type for c in caps}


def node_caps(sc: SanityContext) -> set[int]:
    caps = sc.node.NodeGetCapabilities(csi_pb2.NodeGetCapabilitiesRequest()).capabilities
    return {c.rpc.type for c in caps}


def test_driver_claims_what_the_mirrored_specs_need(sc: SanityContext) -> None:
    """csi-sanity skips specs whose capability is missing; this mirror runs them all, so claim them."""
    assert {
        CRpc.CREATE_DELETE_VOLUME,
        CRpc.PUBLISH_UNPUBLISH_VOLUME,
        CRpc.LIST_VOLUMES,
        CRpc.GET_CAPACITY,
        CRpc.CREATE_DELETE_SNAPSHOT,
        CRpc.LIST_SNAPSHOTS,
        CRpc.CLONE_VOLUME,
        CRpc.PUBLISH_READONLY,
        CRpc.EXPAND_VOLUME,
        CRpc.MODIFY_VOLUME,
        CRpc.GET_SNAPSHOT,
        CRpc.SINGLE_NODE_MULTI_WRITER,
        CRpc.LIST_VOLUMES_PUBLISHED_NODES,
        CRpc.GET_VOLUME,
        CRpc.VOLUME_CONDITION,
    } <= ctrl_caps(sc)
    assert {
        NRpc.STAGE_UNSTAGE_VOLUME,
        NRpc.GET_VOLUME_STATS,
        NRpc.EXPAND_VOLUME,
        NRpc.VOLUME_CONDITION,
        NRpc.SINGLE_NODE_MULTI_WRITER,
    } <= node_caps(sc)
    services = sc.identity.GetPluginCapabilities(csi_pb2.GetPluginCapabilitiesRequest()).capabilities
    assert Service.GROUP_CONTROLLER_SERVICE in {c.service.type for c in services}
    info = sc.node.NodeGetInfo(csi_pb2.NodeGetInfoRequest())
    assert info.max_volumes_per_node == loopdev.node_capacity()  # auto: the loop devices the node holds


# ---------------------------------------------------------------- Identity Service


def test_identity_getplugincapabilities_should_return_appropriate_capabilities(sc: SanityContext) -> None:
    res = sc.identity.GetPluginCapabilities(csi_pb2.GetPluginCapabilitiesRequest())
    for cap in res.capabilities:
        which = cap.WhichOneof("type")
        if which == "service":
            assert cap.service.type in (
                Service.CONTROLLER_SERVICE,
                Service.VOLUME_ACCESSIBILITY_CONSTRAINTS,
                Service.GROUP_CONTROLLER_SERVICE,
            )
        elif which == "volume_expansion":
            assert cap.volume_expansion.type in (
                csi_pb2.PluginCapability.VolumeExpansion.ONLINE,
                csi_pb2.PluginCapability.VolumeExpansion.OFFLINE,
            )
        else:
            pytest.fail(f"unknown capability {cap}")


def test_identity_probe_should_return_appropriate_information(sc: SanityContext) -> None:
    res = sc.identity.Probe(csi_pb2.ProbeRequest())
    assert res.HasField("ready") and res.ready.value is True


def test_identity_getplugininfo_should_return_appropriate_information(sc: SanityContext) -> None:
    res = sc.identity.GetPluginInfo(csi_pb2.GetPluginInfoRequest())
    assert res.name and len(res.name) <= 63
    assert re.fullmatch(r"[a-zA-Z][A-Za-z0-9\-\.\_]{0,61}[a-zA-Z]", res.name)
    assert res.vendor_version


# ---------------------------------------------------------------- Controller Service


def test_controllergetcapabilities_should_return_appropriate_capabilities(sc: SanityContext) -> None:
    known = {
        CRpc.CREATE_DELETE_VOLUME, CRpc.PUBLISH_UNPUBLISH_VOLUME, CRpc.LIST_VOLUMES, CRpc.GET_CAPACITY,
        CRpc.CREATE_DELETE_SNAPSHOT, CRpc.LIST_SNAPSHOTS, CRpc.PUBLISH_READONLY, CRpc.CLONE_VOLUME,
        CRpc.EXPAND_VOLUME, CRpc.MODIFY_VOLUME, CRpc.LIST_VOLUMES_PUBLISHED_NODES, CRpc.GET_VOLUME,
        CRpc.VOLUME_CONDITION, CRpc.SINGLE_NODE_MULTI_WRITER,
        CRpc.GET_SNAPSHOT,  # not in csi-test's list as read: see the module docstring
    }  # fmt: skip
    assert ctrl_caps(sc) <= known


def test_getcapacity_should_return_capacity_no_optional_values_added(sc: SanityContext) -> None:
    sc.controller.GetCapacity(csi_pb2.GetCapacityRequest())


def test_listvolumes_should_return_appropriate_values_no_optional_values_added(sc: SanityContext) -> None:
    for entry in sc.controller.ListVolumes(csi_pb2.ListVolumesRequest()).entries:
        assert entry.volume.volume_id


def test_listvolumes_should_fail_when_an_invalid_starting_token_is_passed(sc: SanityContext) -> None:
    code = status_of(
        lambda: sc.controller.ListVolumes(csi_pb2.ListVolumesRequest(starting_token="invalid-token"))
    )
    assert code == grpc.StatusCode.ABORTED


def test_listvolumes_check_the_presence_of_new_volumes_and_absence_of_deleted_ones(
    sc: SanityContext, r: Resources
) -> None:
    total = len(sc.controller.ListVolumes(csi_pb2.ListVolumesRequest()).entries)
    req = csi_pb2.CreateVolumeRequest(name="sanity", volume_capabilities=[sanity_capability()])
    vol = r.must_create_volume(req)
    assert len(sc.controller.ListVolumes(csi_pb2.ListVolumesRequest()).entries) == total + 1
    sc.controller.DeleteVolume(csi_pb2.DeleteVolumeRequest(volume_id=vol.volume.volume_id))
    assert len(sc.controller.ListVolumes(csi_pb2.ListVolumesRequest()).entries) == total


def test_listvolumes_pagination_should_detect_volumes_added_between_pages_and_accept_tokens_when_the_last_volume_from_a_page_is_deleted(  # noqa: E501
    sc: SanityContext, r: Resources
) -> None:
    """An XIt (disabled) in csi-sanity; mirrored anyway since our tokens survive deletions."""
    existing = {
        e.volume.volume_id: True for e in sc.controller.ListVolumes(csi_pb2.ListVolumesRequest()).entries
    }
    min_count, max_entries = max(3, len(existing)), 2
    for i in range(len(existing), min_count):
        vol = r.create_volume(
            csi_pb2.CreateVolumeRequest(name=f"sanity{i}", volume_capabilities=[sanity_capability()])
        )
        existing[vol.volume.volume_id] = True
    page = sc.controller.ListVolumes(csi_pb2.ListVolumesRequest(max_entries=max_entries))
    assert len(page.entries) == max_entries
    for entry in page.entries:
        assert existing[entry.volume.volume_id]
        sc.controller.DeleteVolume(csi_pb2.DeleteVolumeRequest(volume_id=entry.volume.volume_id))
        existing[entry.volume.volume_id] = False
    vol = r.must_create_volume(
        csi_pb2.CreateVolumeRequest(name="new-addition", volume_capabilities=[sanity_capability()])
    )
    existing[vol.volume.volume_id] = True
    rest = sc.controller.ListVolumes(csi_pb2.ListVolumesRequest(starting_token=page.next_token))
    assert len(rest.entries) <= min_count - max_entries + 1
    for entry in rest.entries:
        assert existing[entry.volume.volume_id]
        existing[entry.volume.volume_id] = False


def test_createvolume_should_fail_when_no_name_is_provided(sc: SanityContext) -> None:
    assert (
        status_of(lambda: sc.controller.CreateVolume(csi_pb2.CreateVolumeRequest()))
        == grpc.StatusCode.INVALID_ARGUMENT
    )


def test_createvolume_should_fail_when_no_volume_capabilities_are_provided(sc: SanityContext) -> None:
    req = csi_pb2.CreateVolumeRequest(name=unique_string("sanity-controller-create-no-volume-capabilities"))
    assert status_of(lambda: sc.controller.CreateVolume(req)) == grpc.StatusCode.INVALID_ARGUMENT


def test_createvolume_should_return_appropriate_values_singlenodewriter_nocapacity(r: Resources) -> None:
    r.must_create_volume(
        csi_pb2.CreateVolumeRequest(
            name=unique_string("sanity-controller-create-single-no-capacity"),
            volume_capabilities=[sanity_capability()],
            capacity_range=csi_pb2.CapacityRange(required_bytes=TEST_VOLUME_SIZE),
        )
    )


def test_createvolume_should_return_appropriate_values_singlenodewriter_withcapacity_1gi(
    r: Resources,
) -> None:
    vol = r.create_volume(
        csi_pb2.CreateVolumeRequest(
            name=unique_string("sanity-controller-create-single-with-capacity"),
            volume_capabilities=[sanity_capability()],
            capacity_range=csi_pb2.CapacityRange(required_bytes=TEST_VOLUME_SIZE),
        )
    )
    assert vol.volume.volume_id
    assert vol.volume.capacity_bytes >= TEST_VOLUME_SIZE


def test_createvolume_should_not_fail_when_requesting_to_create_a_volume_with_already_existing_name_and_same_capacity(  # noqa: E501
    r: Resources,
) -> None:
    req = csi_pb2.CreateVolumeRequest(
        name=unique_string("sanity-controller-create-twice"),
        volume_capabilities=[sanity_capability()],
        capacity_range=csi_pb2.CapacityRange(required_bytes=TEST_VOLUME_SIZE),
    )
    vol1, vol2 = r.must_create_volume(req), r.must_create_volume(req)
    assert vol1.volume.capacity_bytes >= TEST_VOLUME_SIZE and vol2.volume.capacity_bytes >= TEST_VOLUME_SIZE
    assert vol1.volume.volume_id == vol2.volume.volume_id


def test_createvolume_should_fail_when_requesting_to_create_a_volume_with_already_existing_name_and_different_capacity(  # noqa: E501
    sc: SanityContext, r: Resources
) -> None:
    name = unique_string("sanity-controller-create-twice-different")
    size1, size2 = TEST_VOLUME_SIZE, 2 * TEST_VOLUME_SIZE
    r.must_create_volume(
        csi_pb2.CreateVolumeRequest(
            name=name,
            volume_capabilities=[sanity_capability()],
            capacity_range=csi_pb2.CapacityRange(required_bytes=size1, limit_bytes=size1),
        )
    )
    req2 = csi_pb2.CreateVolumeRequest(
        name=name,
        volume_capabilities=[sanity_capability()],
        capacity_range=csi_pb2.CapacityRange(required_bytes=size2, limit_bytes=size2),
    )
    assert status_of(lambda: sc.controller.CreateVolume(req2)) == grpc.StatusCode.ALREADY_EXISTS


def test_createvolume_should_not_fail_when_creating_volume_with_maximum_length_name(r: Resources) -> None:
    name = unique_string_with_length("sanity-controller-create-maxlen", MAX_NAME_LENGTH)
    vol = r.must_create_volume(
        csi_pb2.CreateVolumeRequest(
            name=name,
            volume_capabilities=[sanity_capability()],
            capacity_range=csi_pb2.CapacityRange(required_bytes=TEST_VOLUME_SIZE),
        )
    )
    assert vol.volume.capacity_bytes >= TEST_VOLUME_SIZE


def test_createvolume_should_create_volume_from_an_existing_source_snapshot(r: Resources) -> None:
    vol1 = r.must_create_volume(make_create_volume_req(unique_string("sanity-controller-source-vol")))
    snap = r.must_create_snapshot(
        csi_pb2.CreateSnapshotRequest(
            name=unique_string("sanity-controller-snap-from-vol"), source_volume_id=vol1.volume.volume_id
        )
    )
    assert snap.snapshot.ready_to_use
    req = make_create_volume_req(unique_string("sanity-controller-vol-from-snap"))
    req.volume_content_source.snapshot.snapshot_id = snap.snapshot.snapshot_id
    assert r.create_volume(req).volume.HasField("content_source")


def test_createvolume_should_fail_when_the_volume_source_snapshot_is_not_found(sc: SanityContext) -> None:
    req = make_create_volume_req(unique_string("sanity-controller-vol-from-snap"))
    req.volume_content_source.snapshot.snapshot_id = "non-existing-snapshot-id"
    assert status_of(lambda: sc.controller.CreateVolume(req)) == grpc.StatusCode.NOT_FOUND


def test_createvolume_should_create_volume_from_an_existing_source_volume(r: Resources) -> None:
    vol1 = r.must_create_volume(make_create_volume_req(unique_string("sanity-controller-source-vol")))
    req = make_create_volume_req(unique_string("sanity-controller-vol-from-vol"))
    req.volume_content_source.volume.volume_id = vol1.volume.volume_id
    r.create_volume(req)


def test_createvolume_should_fail_when_the_volume_source_volume_is_not_found(sc: SanityContext) -> None:
    req = make_create_volume_req(unique_string("sanity-controller-vol-from-snap"))
    req.volume_content_source.volume.volume_id = f"fake-vol-{uuid.uuid4()}"
    assert status_of(lambda: sc.controller.CreateVolume(req)) == grpc.StatusCode.NOT_FOUND


def test_deletevolume_should_fail_when_no_volume_id_is_provided(sc: SanityContext) -> None:
    assert (
        status_of(lambda: sc.controller.DeleteVolume(csi_pb2.DeleteVolumeRequest()))
        == grpc.StatusCode.INVALID_ARGUMENT
    )


def test_deletevolume_should_succeed_when_an_invalid_volume_id_is_used(sc: SanityContext) -> None:
    sc.controller.DeleteVolume(csi_pb2.DeleteVolumeRequest(volume_id="fake-vol-id"))


def test_deletevolume_should_return_appropriate_values_no_optional_values_added(
    sc: SanityContext, r: Resources
) -> None:
    vol = r.must_create_volume(
        csi_pb2.CreateVolumeRequest(
            name=unique_string("sanity-controller-create-appropriate"),
            volume_capabilities=[sanity_capability()],
            capacity_range=csi_pb2.CapacityRange(required_bytes=TEST_VOLUME_SIZE),
        )
    )
    sc.controller.DeleteVolume(csi_pb2.DeleteVolumeRequest(volume_id=vol.volume.volume_id))


def test_validatevolumecapabilities_should_fail_when_no_volume_id_is_provided(sc: SanityContext) -> None:
    code = status_of(
        lambda: sc.controller.ValidateVolumeCapabilities(csi_pb2.ValidateVolumeCapabilitiesRequest())
    )
    assert code == grpc.StatusCode.INVALID_ARGUMENT


def _single_node_writer_volume(r: Resources, prefix: str, size: int = TEST_VOLUME_SIZE) -> csi_pb2.Volume:
    rng = csi_pb2.CapacityRange(required_bytes=size) if size else None
    return r.must_create_volume(
        csi_pb2.CreateVolumeRequest(
            name=unique_string(prefix), volume_capabilities=[sanity_capability()], capacity_range=rng
        )
    ).volume


def test_validatevolumecapabilities_should_fail_when_no_volume_capabilities_are_provided(
    sc: SanityContext, r: Resources
) -> None:
    vol = _single_node_writer_volume(r, "sanity-controller-validate-nocaps")
    req = csi_pb2.ValidateVolumeCapabilitiesRequest(volume_id=vol.volume_id)
    assert (
        status_of(lambda: sc.controller.ValidateVolumeCapabilities(req)) == grpc.StatusCode.INVALID_ARGUMENT
    )


def test_validatevolumecapabilities_should_return_appropriate_values_no_optional_values_added(
    sc: SanityContext, r: Resources
) -> None:
    vol = _single_node_writer_volume(r, "sanity-controller-validate")
    res = sc.controller.ValidateVolumeCapabilities(
        csi_pb2.ValidateVolumeCapabilitiesRequest(
            volume_id=vol.volume_id, volume_capabilities=[sanity_capability()]
        )
    )
    assert res.HasField("confirmed")  # stronger than csi-sanity: we do support this capability
    assert res.confirmed.volume_capabilities


def test_validatevolumecapabilities_should_fail_when_the_requested_volume_does_not_exist(
    sc: SanityContext,
) -> None:
    req = csi_pb2.ValidateVolumeCapabilitiesRequest(
        volume_id=f"fake-vol-{uuid.uuid4()}", volume_capabilities=[sanity_capability()]
    )
    assert status_of(lambda: sc.controller.ValidateVolumeCapabilities(req)) == grpc.StatusCode.NOT_FOUND


def test_controllerpublishvolume_should_fail_when_no_volume_id_is_provided(sc: SanityContext) -> None:
    code = status_of(lambda: sc.controller.ControllerPublishVolume(csi_pb2.ControllerPublishVolumeRequest()))
    assert code == grpc.StatusCode.INVALID_ARGUMENT


def test_controllerpublishvolume_should_fail_when_no_node_id_is_provided(sc: SanityContext) -> None:
    req = csi_pb2.ControllerPublishVolumeRequest(volume_id=f"fake-vol-{uuid.uuid4()}")
    assert status_of(lambda: sc.controller.ControllerPublishVolume(req)) == grpc.StatusCode.INVALID_ARGUMENT


def test_controllerpublishvolume_should_fail_when_no_volume_capability_is_provided(sc: SanityContext) -> None:
    req = csi_pb2.ControllerPublishVolumeRequest(volume_id=f"fake-vol-{uuid.uuid4()}", node_id="fake-node")
    assert status_of(lambda: sc.controller.ControllerPublishVolume(req)) == grpc.StatusCode.INVALID_ARGUMENT


def test_controllerpublishvolume_should_fail_when_publishing_more_volumes_than_the_node_max_attach_limit() -> (  # noqa: E501
    None
):
    """csi-sanity runs this only with TestNodeVolumeAttachLimit and MaxVolumesPerNode > 0: a driver with 2."""
    require_root()
    d = Driver(make_root(), ["--max-volumes-per-node", "2"])
    try:
        d.start()
        sc = SanityContext(d.controller, d.node, d.identity, "", "")
        r = Resources(sc)
        info = r.node_get_info()
        assert info.max_volumes_per_node == 2
        for i in range(info.max_volumes_per_node):
            vol = r.must_create_volume(
                make_create_volume_req(unique_string(f"sanity-max-attach-limit-vol-{i}"))
            )
            r.must_controller_publish_volume(_publish_req(vol.volume.volume_id, info.node_id))
        extra = r.must_create_volume(make_create_volume_req(unique_string("sanity-max-attach-limit-vol+1")))
        req = _publish_req(extra.volume.volume_id, info.node_id)
        assert (
            status_of(lambda: sc.controller.ControllerPublishVolume(req))
            == grpc.StatusCode.RESOURCE_EXHAUSTED
        )
        r.cleanup()
    finally:
        d.stop()
        teardown_root(d.root)


def _publish_req(
    volume_id: str, node_id: str, readonly: bool = False
) -> csi_pb2.ControllerPublishVolumeRequest:
    return csi_pb2.ControllerPublishVolumeRequest(
        volume_id=volume_id, node_id=node_id, volume_capability=sanity_capability(), readonly=readonly
    )


def test_controllerpublishvolume_should_fail_when_the_volume_does_not_exist(sc: SanityContext) -> None:
    req = _publish_req(f"fake-vol-{uuid.uuid4()}", f"fake-node-{uuid.uuid4()}")
    assert status_of(lambda: sc.controller.ControllerPublishVolume(req)) == grpc.StatusCode.NOT_FOUND


def test_controllerpublishvolume_should_fail_when_the_node_does_not_exist(
    sc: SanityContext, r: Resources
) -> None:
    vol = _single_node_writer_volume(r, "sanity-controller-wrong-node", size=0)
    req = _publish_req(vol.volume_id, f"fake-node-{uuid.uuid4()}")
    assert status_of(lambda: sc.controller.ControllerPublishVolume(req)) == grpc.StatusCode.NOT_FOUND


def test_controllerpublishvolume_should_fail_when_the_volume_is_already_published_but_is_incompatible(
    sc: SanityContext, r: Resources
) -> None:
    vol = _single_node_writer_volume(r, "sanity-controller-published-incompatible", size=0)
    nid = r.node_get_info().node_id
    r.must_controller_publish_volume(_publish_req(vol.volume_id, nid))
    req = _publish_req(vol.volume_id, nid, readonly=True)
    assert status_of(lambda: sc.controller.ControllerPublishVolume(req)) == grpc.StatusCode.ALREADY_EXISTS


def _volume_lifecycle(r: Resources, count: int) -> None:
    ni = r.node_get_info()
    assert ni.node_id
    acc = (
        csi_pb2.TopologyRequirement(requisite=[ni.accessible_topology])
        if ni.HasField("accessible_topology")
        else None
    )
    vol = r.must_create_volume(
        csi_pb2.CreateVolumeRequest(
            name=unique_string(f"sanity-controller-publish-{count}"),
            volume_capabilities=[sanity_capability()],
            accessibility_requirements=acc,
        )
    )
    for _ in range(count):
        req = _publish_req(vol.volume.volume_id, ni.node_id)
        req.volume_context.update(vol.volume.volume_context)
        r.must_controller_publish_volume(req)


def test_volume_lifecycle_should_work(r: Resources) -> None:
    _volume_lifecycle(r, 1)


def test_volume_lifecycle_should_be_idempotent(r: Resources) -> None:
    _volume_lifecycle(r, IDEMPOTENT_COUNT)


def test_controllerunpublishvolume_should_fail_when_no_volume_id_is_provided(sc: SanityContext) -> None:
    code = status_of(
        lambda: sc.controller.ControllerUnpublishVolume(csi_pb2.ControllerUnpublishVolumeRequest())
    )
    assert code == grpc.StatusCode.INVALID_ARGUMENT
