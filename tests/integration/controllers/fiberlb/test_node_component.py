"""The node-up component as `make node-up` runs it (controller process against the API double, ovn
backend, node routes) and the sandbox scenario on it: every step passes and cleanup removes the
routes it added."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from nodeenv.daemons import is_alive
from nodeenv.fiberlb_component import FiberlbComponent
from nodeenv.node import Node
from nodeenv.scenario import Scenario
from nodeenv.scenarios import fiberlb as scenario
from tests.integration.cni.conftest import Agent

pytestmark = [pytest.mark.root, pytest.mark.ovn]
POOL = "198.51.100.0/28"


def routes() -> str:
    import subprocess

    return subprocess.run(["ip", "route"], capture_output=True, text=True, check=True).stdout


@pytest.fixture
def lb_node(lb_agent: Agent, kube_api: Any) -> Iterator[Node]:
    node = lb_agent.node
    node.endpoints["KUBECONFIG"] = str(kube_api.kubeconfig)
    component = FiberlbComponent(pool=POOL)
    try:
        node.endpoints.update(component.start(node))
        yield node
    finally:
        records = [r for r in node.daemons.load() if r.name == "fiberlb-controller"]
        node.daemons.stop("fiberlb-controller")
        assert records and not any(is_alive(r) for r in records)
        component.cleanup(node)
        for key in ("KUBECONFIG", "EXTERNAL_IP_POOL", "FIBERLB_METRICS"):
            node.endpoints.pop(key, None)
        assert POOL not in routes()


def test_node_up_component_and_sandbox_scenario(lb_node: Node) -> None:
    assert lb_node.endpoints["EXTERNAL_IP_POOL"] == POOL
    assert f"{POOL} via" in routes()
    scn = Scenario(lb_node)
    try:
        scenario.run(scn)
    finally:
        errors = scn.run_cleanups()
    failed = [(r.name, r.detail) for r in scn.results if not r.ok]
    assert failed == [] and errors == []
    assert len(scn.results) == 11
