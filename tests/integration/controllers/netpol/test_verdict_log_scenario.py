"""The sandbox's verdict-log part on the test node: the API double, the CNI agent (following
ovn-controller's log) and netpol-controller as daemons, driven by kubectl."""

from __future__ import annotations

from typing import Any

import pytest

from nodeenv.netpol_component import NetpolComponent
from nodeenv.scenario import Scenario
from nodeenv.scenarios import verdict_log
from tests.integration.cni.conftest import Agent

pytestmark = [pytest.mark.root, pytest.mark.ovn]
NETPOL_SA = "system:serviceaccount:kube-system:netpol-controller"


def test_verdict_log_scenario(cni_agent: Agent, kube_api: Any) -> None:
    node = cni_agent.node
    added: dict[str, str] = {"KUBECONFIG": str(kube_api.kubeconfig_for(NETPOL_SA))}
    node.endpoints.update(added)
    scn = Scenario(node)
    try:
        added.update(env := NetpolComponent().start(node))
        node.endpoints.update(env)
        node.endpoints["KUBECONFIG"] = str(kube_api.kubeconfig)
        try:
            verdict_log.run(scn)
        finally:
            errors = scn.run_cleanups()
        print(scn.table())
        log = node.path("netpol-controller", "netpol-controller.log").read_text()[-3000:]
        assert all(r.ok for r in scn.results) and errors == [], (scn.table(), errors, log)
        assert "prismnet_policy_verdicts_total" not in scn.results[-1].detail  # the detail is the verdict
        assert " drop ingress tcp " in scn.results[-1].detail, scn.results[-1].detail
    finally:
        node.daemons.stop("netpol-controller")
        for key in added:
            node.endpoints.pop(key, None)
