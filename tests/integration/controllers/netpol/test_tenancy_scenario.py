"""The sandbox's tenancy scenario on the test node: the API double, the CNI agent, the IAM webhook
and both controllers as daemons (started by their node-up components), driven by kubectl."""

from __future__ import annotations

import shutil
from typing import Any

import pytest

from nodeenv.netpol_component import NetpolComponent
from nodeenv.projects_component import ProjectsComponent
from nodeenv.scenario import Scenario
from nodeenv.scenarios import tenancy
from nodeenv.webhook_component import WebhookComponent
from tests.integration.cni.conftest import Agent

pytestmark = [pytest.mark.root, pytest.mark.ovn]
DAEMONS = ("iam-webhook", "netpol-controller", "project-controller")
PROJECTS_SA = "system:serviceaccount:kube-system:project-controller"
NETPOL_SA = "system:serviceaccount:kube-system:netpol-controller"


def test_tenancy_scenario(cni_agent: Agent, kube_api: Any) -> None:
    if shutil.which("kubectl") is None:
        pytest.fail("kubectl (v1.32) is needed: it is preinstalled on these machines at /usr/bin/kubectl")
    node = cni_agent.node
    added: dict[str, str] = {"KUBECONFIG": str(kube_api.kubeconfig)}
    node.endpoints.update(added)
    scn = Scenario(node)
    try:
        for component, user in ((WebhookComponent(), ""), (ProjectsComponent(), PROJECTS_SA),
                                (NetpolComponent(), NETPOL_SA)):  # fmt: skip
            # each controller under its own service account (kubectl and the webhook as admin)
            node.endpoints["KUBECONFIG"] = str(kube_api.kubeconfig_for(user) if user else kube_api.kubeconfig)
            env = component.start(node)
            added.update(env)
            node.endpoints.update(env)
        node.endpoints["KUBECONFIG"] = str(kube_api.kubeconfig)
        try:
            tenancy.run(scn)
        finally:
            errors = scn.run_cleanups()
        print(scn.table())
        logs = {d: node.path(d, f"{d}.log").read_text()[-3000:] for d in DAEMONS[1:]}
        assert all(r.ok for r in scn.results) and errors == [], (scn.table(), errors, logs)
    finally:
        for name in DAEMONS:
            node.daemons.stop(name)
        for key in added:
            node.endpoints.pop(key, None)
