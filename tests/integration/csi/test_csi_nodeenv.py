"""The CSI component of the node environment and its sandbox scenario (no OVN needed)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from nodeenv.csi_component import CsiComponent
from nodeenv.csi_registrar import kubelet_endpoint
from nodeenv.node import Node, NodeSettings, read_env_file
from nodeenv.scenario import Scenario
from nodeenv.scenarios import csi as csi_scenario
from protos import csi_pb2, csi_pb2_grpc
from tests.conftest import require_root
from tests.integration.csi.conftest import loops_under, make_root, mounts_under, teardown_root

pytestmark = pytest.mark.root


@pytest.fixture
def csi_node() -> Iterator[Node]:
    require_root()
    root = make_root()
    settings = NodeSettings(run_dir=root / "run", system_id="csi-env-node", install_root=root / "host")
    node = Node(settings, [CsiComponent()])
    try:
        node.up()
        yield node
    finally:
        node.down()
        left = list((root / "host").rglob("*")) if (root / "host").exists() else []
        teardown_root(root)
    assert left == [], f"node-down left behind under the install root: {left}"


def test_node_up_names_the_endpoints_and_the_scenario_passes(csi_node: Node) -> None:
    env = read_env_file(csi_node.env_file)
    assert env["CSI_CONTROLLER_ENDPOINT"].startswith("unix://") and env["CSI_NODE_ENDPOINT"].startswith(
        "unix://"
    )
    # kubelet's view: only the plugin registration directory
    endpoint = kubelet_endpoint(Path(env["CSI_PLUGINS_REGISTRY"]), "stor.plasmacloud.io")
    with grpc.insecure_channel(endpoint) as ch:
        info = csi_pb2_grpc.NodeStub(ch).NodeGetInfo(csi_pb2.NodeGetInfoRequest())
    assert info.node_id == "csi-env-node" and endpoint == env["CSI_NODE_ENDPOINT"]
    with pytest.raises(LookupError):
        kubelet_endpoint(Path(env["CSI_PLUGINS_REGISTRY"]), "other.driver.io")
    scn = Scenario(csi_node)
    try:
        csi_scenario.run(scn)
    finally:
        assert scn.run_cleanups() == []
    assert [r.ok for r in scn.results] == [True] * 7, scn.table()
    registry = Path(env["CSI_PLUGINS_REGISTRY"])
    assert registry == csi_node.settings.install_root / "var/lib/kubelet/plugins_registry"
    assert [p.name for p in registry.iterdir()] == ["stor.plasmacloud.io-reg.sock"]
    assert (
        csi_scenario.POD_NS
        not in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    )


def test_node_down_leaves_no_mount_loop_device_or_file_even_with_volumes_in_use() -> None:
    require_root()
    root = make_root()
    settings = NodeSettings(run_dir=root / "run", system_id="csi-env-node", install_root=root / "host")
    node = Node(settings, [CsiComponent()])
    try:
        node.up()
        csi = csi_scenario.Csi(read_env_file(node.env_file))
        vol = csi.controller.CreateVolume(
            csi_pb2.CreateVolumeRequest(
                name="abandoned", volume_capabilities=[csi_scenario.CAP],
                capacity_range=csi_pb2.CapacityRange(required_bytes=64 << 20),
            )
        ).volume  # fmt: skip
        target = csi.attach_and_mount(vol.volume_id)
        assert Path(target).is_dir() and loops_under(root) and mounts_under(root)
        node.down()  # no teardown by the "kubelet": down must release it all
        assert loops_under(root) == [] and mounts_under(root) == []
        assert not (root / "run").exists()
    finally:
        node.down()
        teardown_root(root)
