"""csi-sanity v5 mirror, part 3: Node Service (node.go). Names are the Go spec descriptions.

The driver claims STAGE_UNSTAGE_VOLUME, GET_VOLUME_STATS, EXPAND_VOLUME and
SINGLE_NODE_MULTI_WRITER, and PUBLISH_UNPUBLISH_VOLUME on the controller, so every branch
below runs the way csi-sanity runs it for this driver. Not mirrored: the NodeGetVolumeHealth
and NodeGetStorageHealth specs of the newest csi-test node.go read (RPCs and capabilities that
CSI 1.12 does not have; csi-sanity skips them for any driver not claiming them).
"""

from __future__ import annotations

import os
import uuid

import grpc
import pytest

from protos import csi_pb2
from tests.integration.csi.conftest import status_of
from tests.integration.csi.sanity_resources import (
    EXPAND_SIZE,
    IDEMPOTENT_COUNT,
    TEST_VOLUME_SIZE,
    Resources,
    SanityContext,
    sanity_capability,
    unique_string,
)

pytestmark = pytest.mark.root
NRpc = csi_pb2.NodeServiceCapability.RPC
Mode = csi_pb2.VolumeCapability.AccessMode
IA = grpc.StatusCode.INVALID_ARGUMENT


def _fake_volume_id() -> str:
    return f"fake-vol-{uuid.uuid4()}"


Cap = csi_pb2.VolumeCapability


def _create_volume(r: Resources, name: str, cap: Cap | None = None) -> csi_pb2.CreateVolumeResponse:
    return r.must_create_volume(
        csi_pb2.CreateVolumeRequest(
            name=name,
            volume_capabilities=[cap or sanity_capability()],
            capacity_range=csi_pb2.CapacityRange(required_bytes=TEST_VOLUME_SIZE),
        )
    )


def _controller_publish(
    r: Resources, vol: csi_pb2.CreateVolumeResponse, node_id: str, cap: Cap | None = None
) -> dict[str, str]:
    req = csi_pb2.ControllerPublishVolumeRequest(
        volume_id=vol.volume.volume_id, node_id=node_id, volume_capability=cap or sanity_capability()
    )
    req.volume_context.update(vol.volume.volume_context)
    return dict(r.must_controller_publish_volume(req).publish_context)


def _node_stage(
    r: Resources, vol: csi_pb2.CreateVolumeResponse, ctx: dict[str, str], cap: Cap | None = None
) -> None:
    req = csi_pb2.NodeStageVolumeRequest(
        volume_id=vol.volume.volume_id,
        volume_capability=cap or sanity_capability(),
        staging_target_path=r.sc.staging_path,
        publish_context=ctx,
    )
    req.volume_context.update(vol.volume.volume_context)
    r.node_stage_volume(req)


def _node_publish(
    r: Resources, vol: csi_pb2.CreateVolumeResponse, ctx: dict[str, str], cap: Cap | None = None
) -> None:
    req = csi_pb2.NodePublishVolumeRequest(
        volume_id=vol.volume.volume_id,
        target_path=r.sc.target_path + "/target",
        staging_target_path=r.sc.staging_path,
        volume_capability=cap or sanity_capability(),
        publish_context=ctx,
    )
    req.volume_context.update(vol.volume.volume_context)
    r.node_publish_volume(req)


def test_nodegetcapabilities_should_return_appropriate_capabilities(sc: SanityContext) -> None:
    caps = sc.node.NodeGetCapabilities(csi_pb2.NodeGetCapabilitiesRequest()).capabilities
    known = {
        NRpc.UNKNOWN, NRpc.STAGE_UNSTAGE_VOLUME, NRpc.GET_VOLUME_STATS, NRpc.EXPAND_VOLUME,
        NRpc.VOLUME_CONDITION, NRpc.SINGLE_NODE_MULTI_WRITER, NRpc.VOLUME_MOUNT_GROUP,
    }  # fmt: skip
    assert caps and {c.rpc.type for c in caps} <= known


def test_nodegetinfo_should_return_appropriate_values(sc: SanityContext) -> None:
    info = sc.node.NodeGetInfo(csi_pb2.NodeGetInfoRequest())
    assert info.node_id and info.max_volumes_per_node >= 0
    assert info.HasField("accessible_topology")  # we claim VOLUME_ACCESSIBILITY_CONSTRAINTS


def test_nodepublishvolume_should_fail_when_no_volume_id_is_provided(sc: SanityContext) -> None:
    assert status_of(lambda: sc.node.NodePublishVolume(csi_pb2.NodePublishVolumeRequest())) == IA


def test_nodepublishvolume_should_fail_when_no_target_path_is_provided(sc: SanityContext) -> None:
    req = csi_pb2.NodePublishVolumeRequest(volume_id=_fake_volume_id())
    assert status_of(lambda: sc.node.NodePublishVolume(req)) == IA


def test_nodepublishvolume_should_fail_when_no_volume_capability_is_provided(sc: SanityContext) -> None:
    req = csi_pb2.NodePublishVolumeRequest(
        volume_id=_fake_volume_id(), target_path=sc.target_path + "/target"
    )
    assert status_of(lambda: sc.node.NodePublishVolume(req)) == IA


def test_nodepublishvolume_with_single_node_multi_writer_capability_should_fail_when_volume_with_single_node_single_writer_access_mode_is_already_mounted_at_a_different_target_path(  # noqa: E501
    sc: SanityContext, r: Resources
) -> None:
    assert NRpc.SINGLE_NODE_MULTI_WRITER in {
        c.rpc.type for c in sc.node.NodeGetCapabilities(csi_pb2.NodeGetCapabilitiesRequest()).capabilities
    }
    cap = sanity_capability(Mode.SINGLE_NODE_SINGLE_WRITER)
    vol = _create_volume(r, unique_string("sanity-node-publish-single-node-single-writer"), cap)
    nid = r.node_get_info().node_id
    ctx = _controller_publish(r, vol, nid, cap)
    _node_stage(r, vol, ctx, cap)
    _node_publish(r, vol, ctx, cap)
    req = csi_pb2.NodePublishVolumeRequest(
        volume_id=vol.volume.volume_id,
        target_path=sc.target_path + "/other_target",
        volume_capability=cap,
        publish_context=ctx,
        staging_target_path=sc.staging_path,
    )
    req.volume_context.update(vol.volume.volume_context)
    assert status_of(lambda: sc.node.NodePublishVolume(req)) == grpc.StatusCode.FAILED_PRECONDITION
    assert not os.path.ismount(sc.target_path + "/other_target")


def test_nodeunpublishvolume_should_fail_when_no_volume_id_is_provided(sc: SanityContext) -> None:
    assert status_of(lambda: sc.node.NodeUnpublishVolume(csi_pb2.NodeUnpublishVolumeRequest())) == IA


def test_nodeunpublishvolume_should_fail_when_no_target_path_is_provided(sc: SanityContext) -> None:
    req = csi_pb2.NodeUnpublishVolumeRequest(volume_id=_fake_volume_id())
    assert status_of(lambda: sc.node.NodeUnpublishVolume(req)) == IA


def test_nodeunpublishvolume_should_remove_target_path(sc: SanityContext, r: Resources) -> None:
    name = unique_string("sanity-node-unpublish-volume")
    vol = _create_volume(r, name)
    volpath = sc.target_path + "/target"
    nid = r.node_get_info().node_id
    ctx = _controller_publish(r, vol, nid)
    _node_stage(r, vol, ctx)
    _node_publish(r, vol, ctx)
    assert os.path.exists(volpath)
    sc.node.NodeUnpublishVolume(
        csi_pb2.NodeUnpublishVolumeRequest(volume_id=vol.volume.volume_id, target_path=volpath)
    )
    assert not os.path.exists(volpath)


def test_nodestagevolume_should_fail_when_no_volume_id_is_provided(sc: SanityContext) -> None:
    req = csi_pb2.NodeStageVolumeRequest(
        staging_target_path=sc.staging_path,
        volume_capability=sanity_capability(),
        publish_context={"device": "/dev/mock"},
    )
    assert status_of(lambda: sc.node.NodeStageVolume(req)) == IA


def test_nodestagevolume_should_fail_when_no_staging_target_path_is_provided(sc: SanityContext) -> None:
    req = csi_pb2.NodeStageVolumeRequest(
        volume_id=_fake_volume_id(),
        volume_capability=sanity_capability(),
        publish_context={"device": "/dev/mock"},
    )
    assert status_of(lambda: sc.node.NodeStageVolume(req)) == IA


def test_nodestagevolume_should_fail_when_no_volume_capability_is_provided(
    sc: SanityContext, r: Resources
) -> None:
    vol = r.must_create_volume(
        csi_pb2.CreateVolumeRequest(
            name=unique_string("sanity-node-stage-nocaps"), volume_capabilities=[sanity_capability()]
        )
    )
    req = csi_pb2.NodeStageVolumeRequest(
        volume_id=vol.volume.volume_id,
        staging_target_path=sc.staging_path,
        publish_context={"device": "/dev/mock"},
    )
    assert status_of(lambda: sc.node.NodeStageVolume(req)) == IA


def test_nodeunstagevolume_should_fail_when_no_volume_id_is_provided(sc: SanityContext) -> None:
    req = csi_pb2.NodeUnstageVolumeRequest(staging_target_path=sc.staging_path)
    assert status_of(lambda: sc.node.NodeUnstageVolume(req)) == IA


def test_nodeunstagevolume_should_fail_when_no_staging_target_path_is_provided(sc: SanityContext) -> None:
    req = csi_pb2.NodeUnstageVolumeRequest(volume_id=_fake_volume_id())
    assert status_of(lambda: sc.node.NodeUnstageVolume(req)) == IA


def test_nodegetvolumestats_should_fail_when_no_volume_id_is_provided(sc: SanityContext) -> None:
    req = csi_pb2.NodeGetVolumeStatsRequest(volume_path="some/path")
    assert status_of(lambda: sc.node.NodeGetVolumeStats(req)) == IA


def test_nodegetvolumestats_should_fail_when_no_volume_path_is_provided(sc: SanityContext) -> None:
    req = csi_pb2.NodeGetVolumeStatsRequest(volume_id=_fake_volume_id())
    assert status_of(lambda: sc.node.NodeGetVolumeStats(req)) == IA


def test_nodegetvolumestats_should_fail_when_volume_is_not_found(sc: SanityContext) -> None:
    req = csi_pb2.NodeGetVolumeStatsRequest(volume_id=_fake_volume_id(), volume_path="some/path")
    assert status_of(lambda: sc.node.NodeGetVolumeStats(req)) == grpc.StatusCode.NOT_FOUND


def test_nodegetvolumestats_should_fail_when_volume_does_not_exist_on_the_specified_path(
    sc: SanityContext, r: Resources
) -> None:
    vol = _create_volume(r, unique_string("sanity-node-get-volume-stats"))
    ctx = _controller_publish(r, vol, r.node_get_info().node_id)
    _node_stage(r, vol, ctx)
    _node_publish(r, vol, ctx)
    req = csi_pb2.NodeGetVolumeStatsRequest(volume_id=vol.volume.volume_id, volume_path="some/path")
    assert status_of(lambda: sc.node.NodeGetVolumeStats(req)) == grpc.StatusCode.NOT_FOUND


def test_nodeexpandvolume_should_fail_when_no_volume_id_is_provided(sc: SanityContext) -> None:
    req = csi_pb2.NodeExpandVolumeRequest(volume_path=sc.target_path, volume_capability=sanity_capability())
    assert status_of(lambda: sc.node.NodeExpandVolume(req)) == IA


def test_nodeexpandvolume_should_fail_when_no_volume_path_is_provided(
    sc: SanityContext, r: Resources
) -> None:
    vol = _create_volume(r, unique_string("sanity-node-expand-volume-valid-id"))
    req = csi_pb2.NodeExpandVolumeRequest(
        volume_id=vol.volume.volume_id, volume_capability=sanity_capability()
    )
    assert status_of(lambda: sc.node.NodeExpandVolume(req)) == IA


def test_nodeexpandvolume_should_fail_when_volume_is_not_found(sc: SanityContext) -> None:
    req = csi_pb2.NodeExpandVolumeRequest(volume_id=_fake_volume_id(), volume_path="some/path")
    assert status_of(lambda: sc.node.NodeExpandVolume(req)) == grpc.StatusCode.NOT_FOUND


def test_nodeexpandvolume_should_work_if_node_expand_is_called_after_node_publish(
    sc: SanityContext, r: Resources
) -> None:
    vol = _create_volume(r, unique_string("sanity-node-expand-volume"))
    rsp = sc.controller.ControllerExpandVolume(
        csi_pb2.ControllerExpandVolumeRequest(
            volume_id=vol.volume.volume_id, capacity_range=csi_pb2.CapacityRange(required_bytes=EXPAND_SIZE)
        )
    )
    assert rsp.capacity_bytes == EXPAND_SIZE
    ctx = _controller_publish(r, vol, r.node_get_info().node_id)
    _node_stage(r, vol, ctx)
    _node_publish(r, vol, ctx)
    sc.node.NodeExpandVolume(
        csi_pb2.NodeExpandVolumeRequest(
            volume_id=vol.volume.volume_id,
            volume_path=sc.target_path + "/target",
            capacity_range=csi_pb2.CapacityRange(required_bytes=EXPAND_SIZE),
        )
    )


def _run_controller_test(sc: SanityContext, r: Resources, count: int) -> None:
    """node.go runControllerTest: create, controller publish, stage xN, publish xN, stats."""
    ni = r.node_get_info()
    assert ni.node_id
    acc = csi_pb2.TopologyRequirement(requisite=[ni.accessible_topology])
    vol = r.must_create_volume(
        csi_pb2.CreateVolumeRequest(
            name=unique_string(f"sanity-node-full-{count}"),
            volume_capabilities=[sanity_capability()],
            capacity_range=csi_pb2.CapacityRange(required_bytes=TEST_VOLUME_SIZE),
            accessibility_requirements=acc,
        )
    )
    ctx = _controller_publish(r, vol, ni.node_id)
    for _ in range(count):
        _node_stage(r, vol, ctx)
    for _ in range(count):
        _node_publish(r, vol, ctx)
    stats = sc.node.NodeGetVolumeStats(
        csi_pb2.NodeGetVolumeStatsRequest(
            volume_id=vol.volume.volume_id, volume_path=sc.target_path + "/target"
        )
    )
    assert stats.usage


def test_node_service_should_work(sc: SanityContext, r: Resources) -> None:
    _run_controller_test(sc, r, 1)


def test_node_service_should_be_idempotent(sc: SanityContext, r: Resources) -> None:
    _run_controller_test(sc, r, IDEMPOTENT_COUNT)
