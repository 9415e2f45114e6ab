"""What the cluster's control part and each node are made of, and which API endpoints each is given:
the nodes (and the controllers' replicas on them) the underlay listener."""

from __future__ import annotations

from pathlib import Path

from nodeenv.cluster.cluster import Cluster
from nodeenv.cluster.control import Given, control_components, node_services
from nodeenv.cluster.settings import ClusterSettings
from nodeenv.kubeapi_component import KubeApiComponent
from nodeenv.node import Node, NodeSettings
from nodeenv.webhook_component import WebhookComponent

CONTROL = {
    "KUBECONFIG": "/run/control/kubeapi/admin.kubeconfig",
    "NODES_KUBECONFIG": "/run/control/kubeapi/k8shc-underlay.kubeconfig",
    "NODES_KUBE_API_URL": "https://10.250.0.1:6443",
}
CENTRAL = {"OVN_NB_DB": "unix:/run/central/ovs/nb.sock", "OVN_NB_DB_SSL": "ssl:10.250.0.1:6641",
           "OVN_SB_DB_SSL": "ssl:10.250.0.1:6642"}  # fmt: skip


def test_the_api_double_also_listens_on_the_central_address_in_the_underlay_and_keeps_an_audit_log() -> None:
    webhook, api = control_components("k8shc-underlay", "10.250.0.1")
    assert isinstance(api, KubeApiComponent) and api.also_listen == "k8shc-underlay=10.250.0.1:6443"
    assert api.audit_log
    assert isinstance(webhook, WebhookComponent) and api.token_webhook  # tokens through the IAM webhook


def test_the_first_two_nodes_run_a_replica_of_each_controller_after_their_services(tmp_path: Path) -> None:
    c = Cluster(ClusterSettings(run_dir=tmp_path, nodes=3))
    every = ["ovn-chassis", "prismnet-cni", "given", "node-routing", "flashdns-controller", "csi"]
    names = {n.name: [comp.name for comp in c.components_of(n, CENTRAL)] for n in c.nodes}
    assert names == {"node1": [*every, "controller-replicas"], "node2": [*every, "controller-replicas"],
                     "node3": every}  # fmt: skip
    assert [comp.name for comp in c.node_components(CENTRAL)] == every, "what every node runs"
    assert [n.name for n in c.controller_nodes()] == ["node1", "node2"]
    one = Cluster(ClusterSettings(run_dir=tmp_path, nodes=1))
    assert [n.name for n in one.controller_nodes()] == ["node1"]  # the second replica would stay Pending


def test_a_node_gets_the_underlay_kubeconfig_then_routing_dns_and_csi(tmp_path: Path) -> None:
    given, *rest = node_services(CONTROL)
    assert isinstance(given, Given)
    node = Node(NodeSettings(run_dir=tmp_path), [])
    assert given.start(node) == {"KUBECONFIG": CONTROL["NODES_KUBECONFIG"],
                                 "KUBE_API_URL": CONTROL["NODES_KUBE_API_URL"]}  # fmt: skip
    assert [c.name for c in rest] == ["node-routing", "flashdns-controller", "csi"]
    only_cleanup = node_services({})[0]  # a node cleaned up after a crash: nothing needs the API
    assert isinstance(only_cleanup, Given) and only_cleanup.endpoints == {}
