"""Every node runs its own LightningStor CSI node plugin, found as kubelet finds it: through that
node's plugin registration directory (under its install root), answering NodeGetInfo with the
node's name as its node id."""

from __future__ import annotations

from pathlib import Path

import grpc

from csi.settings import DRIVER_NAME
from nodeenv.cluster.cluster import Cluster
from nodeenv.csi_registrar import kubelet_endpoint
from nodeenv.node import read_env_file
from protos import csi_pb2, csi_pb2_grpc


def test_every_node_registers_its_own_csi_plugin_with_its_name_as_node_id(cluster: Cluster) -> None:
    endpoints = {}
    for n in cluster.nodes:
        env = read_env_file(n.env_file)
        registry = Path(env["CSI_PLUGINS_REGISTRY"])
        assert registry == n.node.settings.install_root / "var/lib/kubelet/plugins_registry", n.name
        endpoint = kubelet_endpoint(registry, DRIVER_NAME)  # kubelet's view: only that directory
        with grpc.insecure_channel(endpoint) as ch:
            info = csi_pb2_grpc.NodeStub(ch).NodeGetInfo(csi_pb2.NodeGetInfoRequest(), timeout=10)
        assert info.node_id == n.name and endpoint == env["CSI_NODE_ENDPOINT"], (n.name, info, endpoint)
        endpoints[n.name] = endpoint
    assert len(set(endpoints.values())) == len(cluster.nodes), endpoints
