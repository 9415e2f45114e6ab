"""The cluster's control plane besides OVN central, and what each node runs against it.

- The API double runs in this namespace on loopback, as before, and serves the same API inside the
  underlay namespace on the central address (`API_PORT`), where the nodes reach it over their
  br-phy; it writes an admin kubeconfig naming that URL (NODES_KUBECONFIG). Nothing in this
  namespace sends to the underlay: the listening socket lives in the underlay namespace
  (nodeenv/netns_socket.py), this namespace only serves it.
- The cluster-wide controllers as their Deployments run them (replicas: 2, one per node by
  anti-affinity, host network): one replica of each on each of the first `controller_replicas`
  nodes, started in that node's namespace into its daemon table (a node killed takes its replicas
  with it), against the API through the underlay listener (the node's KUBECONFIG) and the central
  NB (and SB) over the underlay (the whole remote list of a RAFT central), each with its own
  identity in the Lease (`<program>-<node>_<uuid>`): fiberlb-controller (`ovn` backend,
  LoadBalancer and ClusterIP Services), netpol-controller and node-controller. One leader each;
  the other replica keeps its caches warm and takes over when the leader's Lease expires.
- On every node, after its chassis and CNI: IPv4 forwarding (pod egress is forwarded and
  masqueraded by its node), the routes from the node to the Service CIDR and the external IP pool
  through its management port (a node reaches a VIP as a pod does), and the
  node-local FlashDNS listener on the cluster DNS address in the node's namespace, watching the API
  through the underlay listener, and the node's LightningStor CSI plugin (node id = node name,
  registered through `plugins_registry` under the node's install root; local backend).
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from nodeenv.cni_component import CniComponent
from nodeenv.csi_component import CsiComponent
from nodeenv.daemons import run_checked
from nodeenv.fiberlb_component import DEFAULT_POOL, DEFAULT_SERVICE_CIDR
from nodeenv.fiberlb_routes import pool_prefixes
from nodeenv.flashdns_component import FlashDnsComponent
from nodeenv.kubeapi_component import KubeApiComponent
from nodeenv.netpol_component import launch_controller
from nodeenv.node import Component, Node
from nodeenv.webhook_component import WebhookComponent

API_PORT = 6443
LEASE_NAMESPACE = "kube-system"
CONTROLLERS = ("fiberlb-controller", "netpol-controller", "node-controller")
"""Each one's Lease is kube-system/<its name>; its replica on node N is the pod `<name>-<N>`."""


class Given:
    """Component: endpoints known before the part starts (from the parts started before it)."""

    name = "given"

    def __init__(self, endpoints: Mapping[str, str]) -> None:
        self.endpoints = dict(endpoints)

    def start(self, node: Node) -> dict[str, str]:
        return dict(self.endpoints)

    def cleanup(self, node: Node) -> None:
        """Nothing was created."""


class ControllerReplicas:
    """Component: one replica of each cluster-wide controller on this node, all started before any
    is waited for (each then answers /readyz once its caches synced, leader or not):
    - fiberlb-controller: `ovn` backend on the central NB, the external IP pool, `--default-class`
      as on k3s;
    - netpol-controller: policies as port groups and ACLs in the central NB;
    - node-controller: a deleted Node's OVN state (NB and SB) released."""

    name = "controller-replicas"

    def __init__(self, pool: str = DEFAULT_POOL) -> None:
        self.pool = pool

    def start(self, node: Node) -> dict[str, str]:
        nb, sb = node.endpoints["OVN_NB_DB"], node.endpoints["OVN_SB_DB"]
        launched = {
            "FIBERLB_METRICS": launch_controller(node, "fiberlb-controller", "controllers.fiberlb.main",
                                                 ["--backend", "ovn", "--ovn-nb-db", nb, "--external-ip-pool",
                                                  self.pool, "--default-class"]),
            "NETPOL_METRICS": launch_controller(node, "netpol-controller", "controllers.netpol.main",
                                                ["--ovn-nb-db", nb]),
            "NODE_CONTROLLER_METRICS": launch_controller(node, "node-controller", "controllers.nodes.main",
                                                         ["--ovn-nb-db", nb, "--ovn-sb-db", sb]),
        }  # fmt: skip
        return {"EXTERNAL_IP_POOL": self.pool, **{k: f"{c.ready()}/metrics" for k, c in launched.items()}}

    def cleanup(self, node: Node) -> None:
        """The daemons are stopped by PID; their rows are cluster-wide and stay with OVN central."""


class NodeRouting:
    """Component on a node: what a Kubernetes node's host network has besides the CNI.

    - IPv4 forwarding on (`net.ipv4.ip_forward`, as kubelet requires of a node; a new namespace
      starts with it off): the CNI turns it on for the management port only, which forwards a pod's
      egress out of the node, but the replies come back in on br-phy and are forwarded from there.
    - The Service CIDR and the external IP pool routed through the node's management port (via the
      cluster router), so the node reaches ClusterIPs and LoadBalancer IPs through OVN's load
      balancers on its management switch.
    Both go with the node's namespace."""

    name = "node-routing"

    def __init__(self, pool: str = DEFAULT_POOL, service_cidr: str = DEFAULT_SERVICE_CIDR) -> None:
        self.prefixes = vip_prefixes(pool, service_cidr)

    def start(self, node: Node) -> dict[str, str]:
        run_checked(["ip", "netns", "exec", node.settings.netns, "sysctl", "-qw", "net.ipv4.ip_forward=1"])
        mgmt = CniComponent().settings(node).management_if
        if not route_vips(node.settings.netns, mgmt, self.prefixes):
            raise RuntimeError(f"{mgmt} on {node.settings.system_id} has no route through the cluster router")
        return {"VIP_ROUTES": ",".join(self.prefixes)}

    def cleanup(self, node: Node) -> None:
        """Nothing: the routes go with the node's network namespace."""


def vip_prefixes(pool: str = DEFAULT_POOL, service_cidr: str = DEFAULT_SERVICE_CIDR) -> list[str]:
    return [*pool_prefixes(pool), service_cidr]


def route_vips(netns: str, mgmt: str, prefixes: list[str]) -> bool:
    """The prefixes routed through the management port `mgmt` of the node `netns`, via the gateway
    of its route to the cluster router; False (nothing done) while it has no such route yet."""
    ip = ["ip", "-n", netns]
    routes = json.loads(run_checked([*ip, "-4", "-j", "route", "show", "dev", mgmt]) or "[]")
    gateway = next((r["gateway"] for r in routes if "gateway" in r), None)
    if gateway is None:
        return False
    for prefix in prefixes:
        run_checked([*ip, "route", "replace", prefix, "via", gateway, "dev", mgmt])
    return True


def control_components(underlay_netns: str, address: str, api_data: bool = False) -> list[Component]:
    """The control part: the IAM webhook, then the API double authenticating tokens through it (RBAC
    enforced), also listening on the underlay for the nodes, with its audit log (which client wrote
    what: a replica's source IP is its node's address); `api_data`: its objects kept on disk."""
    also = f"{underlay_netns}={address}:{API_PORT}"
    api = KubeApiComponent(also_listen=also, audit_log=True, token_webhook=True, durable=api_data)
    return [WebhookComponent(), api]


def controller_replicas() -> list[Component]:
    """One replica of each cluster-wide controller, run on a node after its own services (its
    KUBECONFIG is the underlay listener's, its OVN_NB_DB/OVN_SB_DB the underlay remote lists)."""
    return [ControllerReplicas()]


def node_services(control: Mapping[str, str]) -> list[Component]:
    """What a node runs after its chassis and CNI, given the control part's endpoints (empty when a
    node is only being cleaned up: nothing of these needs them then)."""
    given = {"KUBECONFIG": control["NODES_KUBECONFIG"], "KUBE_API_URL": control["NODES_KUBE_API_URL"]} \
        if "NODES_KUBECONFIG" in control else {}  # fmt: skip
    return [Given(given), NodeRouting(), FlashDnsComponent(upstreams="none"), CsiComponent()]
