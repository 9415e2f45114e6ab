"""The OVN node, the session's one PrismNET agent (shared with the CNI and kubelet tests), pods in netns,
and the node's routes to the VIPs; everything created here is removed here."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from controllers.fiberlb.ovn_backend import OvnBackend
from controllers.machinery import NAMESPACES
from nodeenv.fiberlb_routes import delete_host_routes, ensure_host_routes
from nodeenv.node import Node
from nodeenv.plasmacloud_auth import DevPki
from tests.integration.cni.conftest import Agent, Pods
from tests.integration.controllers.fiberlb.controller_harness import Admin
from tests.integration.controllers.fiberlb.fake_fiberlb import FakeServer
from tests.integration.controllers.fiberlb.netns_traffic import Servers

EXTERNAL_POOL = "192.168.240.0/28"
SERVICE_CIDR = "10.96.0.0/16"


@pytest.fixture(scope="session")
def lb_agent(agent: Agent, ovn_node: Node) -> Iterator[Agent]:
    """The session's one PrismNET agent (tests/cni_agent_fixture.py), and the node's routes to the
    external pool and the Service CIDR through its management interface."""
    management_if = agent.component.settings(ovn_node).management_if
    routes = ensure_host_routes([EXTERNAL_POOL, SERVICE_CIDR], management_if)
    try:
        yield agent
    finally:
        delete_host_routes(routes, management_if)


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


@pytest.fixture
def nb(ovn_node: Node) -> Iterator[OvnBackend]:
    """The OVN NB as the ovn backend sees it; load balancers a test leaves are removed."""
    backend = OvnBackend.connect(ovn_node.endpoints["OVN_NB_DB"])
    before = backend.services()
    yield backend
    for svc in backend.services() - before:
        backend.delete(svc, "")
    backend.close()
