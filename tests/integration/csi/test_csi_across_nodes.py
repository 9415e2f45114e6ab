"""A volume between two nodes (issue 18 item 5), through the calls the CSI sidecars and kubelet make.

Two driver processes against one LightningStor VolumeService (the fake, on its real gRPC wire):
node A serves the Controller and its Node service (`--mode all`, as the controller Deployment's
plugin plus node A's DaemonSet pod), node B only its Node service (`--mode node`), each with its own
node id, state and kubelet paths. The external-attacher's ControllerPublishVolume names the node;
each node stages and publishes what was attached to it. Both "nodes" are on this machine: the
attachment is a loop device here, as an NBD/iSCSI device would be on node B's kernel.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from nodeenv.lightningstor import FakeVolumeService, serve
from nodeenv.plasmacloud_auth import DevPki
from protos import csi_pb2
from tests.conftest import require_root
from tests.integration.csi.conftest import (
    MIB,
    Driver,
    Mode,
    create_req,
    loops_under,
    make_root,
    mount_cap,
    mounts_under,
    publish_all,
    teardown_root,
)

pytestmark = pytest.mark.root


@dataclass
class TwoNodes:
    a: Driver
    b: Driver
    service: FakeVolumeService
    root: Path

    def paths(self, node: Driver, name: str) -> tuple[Path, Path]:
        return node.root / "stage" / name, node.root / "pods" / name / "mount"

    def publish(self, node: Driver, volume_id: str, cap: csi_pb2.VolumeCapability) -> Path:
        staging, target = self.paths(node, volume_id)
        publish_all(node, volume_id, cap, staging, target, controller=self.a)
        return target

    def unpublish(self, node: Driver, volume_id: str) -> None:
        staging, target = self.paths(node, volume_id)
        node.node.NodeUnpublishVolume(
            csi_pb2.NodeUnpublishVolumeRequest(volume_id=volume_id, target_path=str(target))
        )
        node.node.NodeUnstageVolume(
            csi_pb2.NodeUnstageVolumeRequest(volume_id=volume_id, staging_target_path=str(staging))
        )
        self.a.controller.ControllerUnpublishVolume(
            csi_pb2.ControllerUnpublishVolumeRequest(volume_id=volume_id, node_id=node.node_id)
        )


@pytest.fixture
def nodes(plasmacloud_pki: DevPki) -> Iterator[TwoNodes]:
    require_root()
    root = make_root()
    server, service, endpoint = serve(root / "ls", ["node-a", "node-b"], plasmacloud_pki)
    backend = ["--backend", "lightningstor", "--lightningstor-endpoint", endpoint,
               *plasmacloud_pki.client_flags()]  # fmt: skip
    a = Driver(root / "a", backend, node_id="node-a")
    b = Driver(root / "b", ["--mode", "node", *backend], node_id="node-b")
    started: list[Driver] = []
    try:
        for d in (a, b):
            d.root.mkdir()
            d.start()
            started.append(d)
        yield TwoNodes(a, b, service, root)
    finally:
        for d in started:
            d.stop()
        server.stop(None)
        teardown_root(root)


def _write(target: Path, data: bytes) -> None:
    with open(target / "data.bin", "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def test_volume_moves_from_node_a_to_node_b_intact_and_is_never_on_both(nodes: TwoNodes) -> None:
    cap = mount_cap("ext4")
    vol = nodes.a.controller.CreateVolume(create_req("pvc-moves", 64 * MIB, cap)).volume
    data = os.urandom(3 * MIB)

    on_a = nodes.publish(nodes.a, vol.volume_id, cap)
    _write(on_a, data)
    with pytest.raises(grpc.RpcError) as refused:  # RWO: node B is refused while A has it
        nodes.a.controller.ControllerPublishVolume(
            csi_pb2.ControllerPublishVolumeRequest(
                volume_id=vol.volume_id, node_id="node-b", volume_capability=cap
            )
        )
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "node-a" in (refused.value.details() or "")  # the spec: name where it is published
    assert (vol.volume_id, "node-b") not in nodes.service.attachments
    assert (on_a / "data.bin").read_bytes() == data  # the refusal touched nothing on A

    nodes.unpublish(nodes.a, vol.volume_id)
    assert not mounts_under(nodes.a.root) and not loops_under(nodes.root)

    on_b = nodes.publish(nodes.b, vol.volume_id, cap)
    assert (on_b / "data.bin").read_bytes() == data
    with pytest.raises(grpc.RpcError) as back:  # and now A is refused while B has it
        nodes.a.controller.ControllerPublishVolume(
            csi_pb2.ControllerPublishVolumeRequest(
                volume_id=vol.volume_id, node_id="node-a", volume_capability=cap
            )
        )
    assert back.value.code() == grpc.StatusCode.FAILED_PRECONDITION and "node-b" in (
        back.value.details() or ""
    )
    nodes.unpublish(nodes.b, vol.volume_id)
    nodes.a.controller.DeleteVolume(csi_pb2.DeleteVolumeRequest(volume_id=vol.volume_id))
    assert not mounts_under(nodes.root) and not loops_under(nodes.root)
    assert vol.volume_id not in nodes.service.volumes


def test_read_only_many_is_published_to_both_nodes(nodes: TwoNodes) -> None:
    rw, rox = mount_cap("ext4"), mount_cap("ext4", Mode.MULTI_NODE_READER_ONLY)
    vol = nodes.a.controller.CreateVolume(create_req("pvc-rox", 64 * MIB, rw)).volume
    data = os.urandom(MIB)
    _write(nodes.publish(nodes.a, vol.volume_id, rw), data)
    nodes.unpublish(nodes.a, vol.volume_id)

    readers = [nodes.publish(n, vol.volume_id, rox) for n in (nodes.a, nodes.b)]
    assert [(t / "data.bin").read_bytes() == data for t in readers] == [True, True]
    with pytest.raises(OSError):
        (readers[1] / "other").write_bytes(b"x")  # read-only on the node too
    with pytest.raises(grpc.RpcError) as writer:  # no writer beside readers on other nodes
        nodes.a.controller.ControllerPublishVolume(
            csi_pb2.ControllerPublishVolumeRequest(
                volume_id=vol.volume_id, node_id="node-b", volume_capability=rw
            )
        )
    assert writer.value.code() in (grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.ALREADY_EXISTS)
    for n in (nodes.a, nodes.b):
        nodes.unpublish(n, vol.volume_id)
    nodes.a.controller.DeleteVolume(csi_pb2.DeleteVolumeRequest(volume_id=vol.volume_id))
    assert not mounts_under(nodes.root) and not loops_under(nodes.root)
