"""What the cluster's control part, controllers part and each node are made of, and which API and NB
endpoints each is given: the nodes the underlay listener, the controllers loopback and unix sockets."""

from __future__ import annotations

from pathlib import Path

from nodeenv.cluster.control import Given, control_components, controller_components, node_services
from nodeenv.kubeapi_component import KubeApiComponent
from nodeenv.node import Node, NodeSettings

CONTROL = {
    "KUBECONFIG": "/run/control/kubeapi/admin.kubeconfig",
    "NODES_KUBECONFIG": "/run/control/kubeapi/k8shc-underlay.kubeconfig",
    "NODES_KUBE_API_URL": "https://10.250.0.1:6443",
}
CENTRAL = {"OVN_NB_DB": "unix:/run/central/ovs/nb.sock", "OVN_NB_DB_TCP": "tcp:10.250.0.1:6641"}


def test_the_api_double_also_listens_on_the_central_address_in_the_underlay() -> None:
    (api,) = control_components("k8shc-underlay", "10.250.0.1")
    assert isinstance(api, KubeApiComponent) and api.also_listen == "k8shc-underlay=10.250.0.1:6443"


def test_controllers_use_loopback_and_unix_sockets() -> None:
    given, *rest = controller_components(CONTROL, CENTRAL)
    assert isinstance(given, Given)
    assert given.endpoints == {"KUBECONFIG": CONTROL["KUBECONFIG"], "OVN_NB_DB": CENTRAL["OVN_NB_DB"]}
    assert [c.name for c in rest] == ["fiberlb-controller", "netpol-controller"]


def test_a_node_gets_the_underlay_kubeconfig_then_routing_dns_and_csi(tmp_path: Path) -> None:
    given, *rest = node_services(CONTROL)
    assert isinstance(given, Given)
    node = Node(NodeSettings(run_dir=tmp_path), [])
    assert given.start(node) == {"KUBECONFIG": CONTROL["NODES_KUBECONFIG"],
                                 "KUBE_API_URL": CONTROL["NODES_KUBE_API_URL"]}  # fmt: skip
    assert [c.name for c in rest] == ["node-routing", "flashdns-controller", "csi"]
    only_cleanup = node_services({})[0]  # a node cleaned up after a crash: nothing needs the API
    assert isinstance(only_cleanup, Given) and only_cleanup.endpoints == {}
