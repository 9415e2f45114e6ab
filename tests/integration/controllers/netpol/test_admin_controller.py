"""netpol-controller enforcing AdminNetworkPolicies / the BaselineAdminNetworkPolicy as it runs: its
service account on the API double serving the daemonsets/policy/ CRDs, the real NB, real traffic; the
outcome written to each object's status subresource (a merge PATCH of status.conditions, as the API's
Ready condition), including a refusal (a priority above what the ACL bands hold)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from controllers.machinery import KubeClient
from controllers.netpol.adminpolicy import ADMIN_NETWORK_POLICIES, BASELINE_ADMIN_NETWORK_POLICIES
from nodeenv.kubeapi_component import install_policy_crds
from tests.integration.controllers.machinery_kit import eventually
from tests.integration.controllers.netpol.conftest import Cluster
from tests.integration.controllers.netpol.test_netpol_controller import SA, Running, allowed, wait_reach

pytestmark = [pytest.mark.root, pytest.mark.ovn]
API_VERSION = "policy.networking.k8s.io/v1alpha1"
BANPS = "baselineadminnetworkpolicies"
WEB = {"namespaceSelector": {"matchLabels": {"team": "a"}}, "podSelector": {"matchLabels": {"app": "web"}}}
FE = {"pods": {"namespaceSelector": {}, "podSelector": {"matchLabels": {"app": "fe"}}}}


def anp(name: str, priority: int, ingress: list[Any]) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": "AdminNetworkPolicy", "metadata": {"name": name},
            "spec": {"priority": priority, "subject": {"pods": WEB}, "ingress": ingress}}  # fmt: skip


def ready(kube_api: Any, resource: str, name: str) -> dict[str, Any] | None:
    obj = kube_api.get(resource, "", name) or {}
    conds = (obj.get("status") or {}).get("conditions") or []
    return next((c for c in conds if c.get("type") == "Ready"), None)


async def test_anp_and_banp_enforced_and_their_status_patched(
    kube_api: Any, cluster: Cluster, api: KubeClient
) -> None:
    await asyncio.to_thread(install_policy_crds, kube_api.kubeconfig)
    run = Running(kube_api, cluster)
    await run.start()
    try:
        deny = [{"name": "fe-8080", "action": "Deny", "from": [FE],
                 "ports": [{"portNumber": {"protocol": "TCP", "port": 8080}}]}]  # fmt: skip
        await api.create(ADMIN_NETWORK_POLICIES, anp("fe-to-web", 10, deny))
        await wait_reach(cluster, "np-b/fe", "tcp", 8080, False)
        assert allowed(cluster, "np-b/fe", "tcp", 9000) and allowed(cluster, "np-b/db", "tcp", 8080)
        await eventually(lambda: (ready(kube_api, "adminnetworkpolicies", "fe-to-web") or {}).get("status")
                         == "True", what="fe-to-web Ready=True")  # fmt: skip

        # a priority the ACL bands cannot hold: refused, said so in its status, nothing enforced
        await api.create(ADMIN_NETWORK_POLICIES, anp("too-high", 500, [{"action": "Deny", "from": [FE]}]))
        await eventually(lambda: ready(kube_api, "adminnetworkpolicies", "too-high") is not None,
                         what="too-high's Ready condition")  # fmt: skip
        cond = ready(kube_api, "adminnetworkpolicies", "too-high")
        assert cond is not None and (cond["status"], cond["reason"]) == ("False", "SetupFailed")
        assert "above 99" in cond["message"]
        assert allowed(cluster, "np-b/fe", "tcp", 9000)

        spec = {"subject": {"pods": WEB}, "ingress": [{"action": "Deny", "from": [FE]}]}
        banp = {"apiVersion": API_VERSION, "kind": "BaselineAdminNetworkPolicy",
                "metadata": {"name": "default"}, "spec": spec}  # fmt: skip
        await api.create(BASELINE_ADMIN_NETWORK_POLICIES, banp)
        await wait_reach(cluster, "np-b/fe", "tcp", 9000, False)
        assert allowed(cluster, "np-b/db", "tcp", 9000)
        await eventually(lambda: (ready(kube_api, BANPS, "default") or {}).get("status") == "True",
                         what="the BANP Ready=True")  # fmt: skip

        for kind, name in ((ADMIN_NETWORK_POLICIES, "fe-to-web"), (ADMIN_NETWORK_POLICIES, "too-high"),
                           (BASELINE_ADMIN_NETWORK_POLICIES, "default")):  # fmt: skip
            await api.delete(kind, None, name)
        await wait_reach(cluster, "np-b/fe", "tcp", 8080, True)
        await wait_reach(cluster, "np-b/fe", "tcp", 9000, True)
    finally:
        await run.halt()
    writes = {(r.resource, r.subresource, r.verb) for r in kube_api.requests_by(SA)
              if r.verb in ("create", "update", "patch", "delete") and r.resource != "events"}  # fmt: skip
    assert writes == {
        ("adminnetworkpolicies", "status", "patch"),
        ("baselineadminnetworkpolicies", "status", "patch"),
    }
