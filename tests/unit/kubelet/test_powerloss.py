"""What `resume` does to the API's pods after a power loss, before any runner runs (nodeenv/kubelet/
powerloss.py): the node lifecycle controller's NodeNotReady, so nothing waiting for Ready counts a
pod its node has not started again; and refusals of what is not a kept multi-node boot."""

from __future__ import annotations

from pathlib import Path

import pytest

from nodeenv.kubelet.apiclient import KubeClient
from nodeenv.kubelet.boot import BootSettings, waiting_for
from nodeenv.kubelet.powerloss import PowerLossError, booted_nodes, mark_pods_not_ready
from tests.kubeapi_fixture import KubeApiHandle
from tests.unit.kubelet.test_endpoints import _pod_in_api

CORE = "/api/v1"


def test_every_ready_pod_turns_not_ready_with_nodenotready(kube_api: KubeApiHandle) -> None:
    c = KubeClient.from_kubeconfig(kube_api.kubeconfig)
    _pod_in_api(c, "a", "10.0.0.2", True)
    _pod_in_api(c, "b", "10.0.0.3", False)
    assert waiting_for(c.list(CORE, "pods")) == ["default/b"]
    assert mark_pods_not_ready(c) == 1  # b was not Ready: left as it is
    pods = {p["metadata"]["name"]: p for p in c.list(CORE, "pods")}
    (ready,) = [x for x in pods["a"]["status"]["conditions"] if x["type"] == "Ready"]
    assert (ready["status"], ready["reason"]) == ("False", "NodeNotReady")
    assert pods["a"]["status"]["podIP"] == "10.0.0.2"  # the rest of the status is kept
    assert sorted(waiting_for(list(pods.values()))) == ["default/a", "default/b"]
    assert mark_pods_not_ready(c) == 0


def _settings(run_dir: Path) -> BootSettings:
    return BootSettings(run_dir=run_dir, node_name="node-1", api_address="198.18.0.1", api_port=0,
                        overlay=run_dir, datapath="netdev", timeout=1,
                        runtime_dir=run_dir / "rt")  # fmt: skip


def test_a_run_dir_without_a_multi_node_boot_is_refused(tmp_path: Path) -> None:
    with pytest.raises(PowerLossError, match="no multi-node boot"):
        booted_nodes(_settings(tmp_path))
    (tmp_path / "boot.json").write_text('{"link": "k8sh-api0", "address": "198.18.0.1"}')  # one node's
    with pytest.raises(PowerLossError, match="no multi-node boot"):
        booted_nodes(_settings(tmp_path))
    (tmp_path / "boot.json").write_text('{"nodes": 2, "prefix": "k8shz"}')
    assert [n.netns for n in booted_nodes(_settings(tmp_path)).nodes] == ["k8shz-node1", "k8shz-node2"]
