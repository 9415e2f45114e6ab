"""The OVN node, the PrismNET agent (shared with the CNI tests when they ran first), pods in netns,
and the node's routes to the VIPs; everything created here is removed here."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from controllers.fiberlb.ovn_backend import OvnBackend
from controllers.machinery import NAMESPACES
from nodeenv.cni_component import CniComponent
from nodeenv.daemons import unix_listening
from nodeenv.fiberlb_routes import delete_host_routes, ensure_host_routes
from nodeenv.node import Node
from nodeenv.plasmacloud_auth import DevPki
from tests.integration.cni.conftest import CLUSTER_CIDR, Agent, Pods
from tests.integration.controllers.fiberlb.controller_harness import Admin
from tests.integration.controllers.fiberlb.fake_fiberlb import FakeServer
from tests.integration.controllers.fiberlb.netns_traffic import Servers

EXTERNAL_POOL = "192.168.240.0/28"
SERVICE_CIDR = "10.96.0.0/16"


@pytest.fixture(scope="session")
def lb_agent(ovn_node: Node) -> Iterator[Agent]:
    """The CNI test session's agent if it runs (one agent per node), else one of our own."""
    component = CniComponent(cluster_cidr=CLUSTER_CIDR)
    settings = component.settings(ovn_node)
    env = {k: v for k, v in ovn_node.endpoints.items() if k.startswith("PRISMNET_")}
    ours = not (env and unix_listening(Path(env["PRISMNET_AGENT_SOCKET"])))
    if ours:
        env = component.start(ovn_node)
        ovn_node.endpoints.update(env)
    conflist = json.loads(Path(env["PRISMNET_CNI_CONFLIST"]).read_text())
    conflist["plugins"] = conflist["plugins"][:1]
    agent = Agent(ovn_node, component, env, conflist)
    routes = ensure_host_routes([EXTERNAL_POOL, SERVICE_CIDR], settings.management_if)
    try:
        yield agent
    finally:
        delete_host_routes(routes, settings.management_if)
        if ours:
            ovn_node.daemons.stop("prismnet-agent")
            component.cleanup(ovn_node)
            for key in env:
                ovn_node.endpoints.pop(key, None)


@pytest.fixture
def lb_pods(lb_agent: Agent) -> Iterator[Pods]:
    p = Pods(lb_agent, [])
    yield p
    p.delete_all()


@pytest.fixture
def servers() -> Iterator[Servers]:
    s = Servers()
    yield s
    s.stop()


@pytest.fixture
def fiberlb(plasmacloud_pki: DevPki) -> Iterator[FakeServer]:
    s = FakeServer(plasmacloud_pki)
    yield s
    s.stop()


@pytest.fixture
async def admin(kube_api: Any) -> AsyncIterator[Admin]:
    a = await Admin.connect(kube_api)
    if kube_api.get("namespaces", "", "kube-system") is None:
        await a.client.create(NAMESPACES, {"metadata": {"name": "kube-system"}})
    yield a
    await a.close()


@pytest.fixture
def ovn_backend(lb_agent: Agent) -> Iterator[OvnBackend]:
    backend = OvnBackend.connect(lb_agent.node.endpoints["OVN_NB_DB"])
    before = backend.services()
    yield backend
    for service in backend.services() - before:
        backend.delete(service, "")
    backend.close()
