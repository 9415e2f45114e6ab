"""What `make node-up` starts, in order. Each component adds its endpoints to node.env."""

from __future__ import annotations

from nodeenv.cni_component import CniComponent
from nodeenv.csi_component import CsiComponent
from nodeenv.fiberlb_component import FiberlbComponent
from nodeenv.flashdns_component import FlashDnsComponent
from nodeenv.kubeapi_component import KubeApiComponent
from nodeenv.netpol_component import NetpolComponent
from nodeenv.node import Component, NodeSettings
from nodeenv.ovn_stack import OvnStack
from nodeenv.projects_component import ProjectsComponent
from nodeenv.webhook_component import WebhookComponent


def default_components(settings: NodeSettings) -> list[Component]:
    components: list[Component] = [OvnStack()]
    components.append(WebhookComponent())  # before the API double, which sends it TokenReviews
    components.append(KubeApiComponent(token_webhook=True))  # writes KUBECONFIG for the controllers after it
    components.append(CniComponent())
    components.append(CsiComponent())
    components.append(FlashDnsComponent())  # the cluster DNS the CNI names (10.96.0.10)
    components.append(FiberlbComponent())  # after the CNI: routes to the VIPs via its management port
    components.append(ProjectsComponent())
    components.append(NetpolComponent())  # writes ACLs into the NB the CNI's ports live in
    return components
