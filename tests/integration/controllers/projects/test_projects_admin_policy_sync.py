"""project-controller's AdminNetworkPolicies and BaselineAdminNetworkPolicy (admin_policies.py) against the
API double serving the daemonsets/policy/ CRDs, as its service account reaches the API: created per
project, an unowned ANP or BANP of the same name read back and left alone, an owned one changed by hand (spec,
the verdict-log annotation) put back, and each deleted once no namespace of its project is left."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from controllers.machinery import NAMESPACES, KubeClient
from controllers.netpol.acl_logging import ANNOTATION
from controllers.netpol.adminpolicy import ADMIN_NETWORK_POLICIES, BASELINE_ADMIN_NETWORK_POLICIES
from controllers.projects.admin_policies import DNS_POLICY, ISOLATION_LOGGING
from controllers.projects.template import MANAGED_BY, MANAGER, PROJECT_LABEL
from nodeenv.kubeapi_component import install_policy_crds
from tests.integration.controllers.machinery_kit import client_for, eventually
from tests.integration.controllers.projects.test_projects_controller import controller  # noqa: F401 (fixture)

SA = "system:serviceaccount:kube-system:project-controller"
ANPS, BANPS = "adminnetworkpolicies", "baselineadminnetworkpolicies"
FOREIGN = "project-proj-789"  # someone's ANP with the name project-controller wants for proj-789


@pytest.fixture(autouse=True)
async def crds(kube_api: Any) -> None:
    """Served before project-controller starts (it looks for the API group once, at start)."""
    await asyncio.to_thread(install_policy_crds, kube_api.kubeconfig)


@pytest.fixture
async def api(kube_api: Any) -> AsyncIterator[KubeClient]:
    async with client_for(kube_api.kubeconfig) as c:
        yield c


def ours(kube_api: Any, resource: str) -> set[str]:
    return {o["metadata"]["name"] for o in kube_api.objects(resource)
            if (o["metadata"].get("labels") or {}).get(MANAGED_BY) == MANAGER}  # fmt: skip


def annotations_of(kube_api: Any, name: str) -> dict[str, str]:
    return dict(kube_api.get(ANPS, "", name)["metadata"].get("annotations") or {})


def sa_verbs(kube_api: Any, resource: str) -> set[str]:
    return {r.verb for r in kube_api.requests if r.user == SA and r.resource == resource and r.status < 400}


async def label(api: KubeClient, name: str, project: str | None) -> None:
    ns = await api.get(NAMESPACES, None, name)
    labels = {k: v for k, v in (ns["metadata"].get("labels") or {}).items() if k != PROJECT_LABEL}
    if project:
        labels[PROJECT_LABEL] = project
    await api.replace(NAMESPACES, {**ns, "metadata": {**ns["metadata"], "labels": labels}})


@pytest.mark.usefixtures("controller")
async def test_admin_policies_created_kept_repaired_and_removed(kube_api: Any, api: KubeClient) -> None:
    foreign = {"apiVersion": "policy.networking.k8s.io/v1alpha1", "kind": "AdminNetworkPolicy",
               "metadata": {"name": FOREIGN},
               "spec": {"priority": 7, "subject": {"namespaces": {}},
                        "ingress": [{"action": "Allow", "from": [{"namespaces": {}}]}]}}  # fmt: skip
    await api.create(ADMIN_NETWORK_POLICIES, foreign)
    their_banp = {"apiVersion": "policy.networking.k8s.io/v1alpha1", "kind": "BaselineAdminNetworkPolicy",
                  "metadata": {"name": "default"}, "spec": {"subject": {"namespaces": {}}}}  # fmt: skip
    await api.create(BASELINE_ADMIN_NETWORK_POLICIES, their_banp)
    await api.create(NAMESPACES, {"metadata": {"name": "ns-789", "labels": {PROJECT_LABEL: "proj-789"}}})
    await eventually(lambda: ours(kube_api, ANPS) == {DNS_POLICY}, what="the DNS ANP")
    await eventually(lambda: "get" in sa_verbs(kube_api, ANPS) and "get" in sa_verbs(kube_api, BANPS),
                     what="both 409s read back")  # fmt: skip
    assert kube_api.get(ANPS, "", FOREIGN)["spec"] == foreign["spec"]  # not ours: left as they were
    assert not ours(kube_api, BANPS) and kube_api.get(BANPS, "", "default")["spec"] == their_banp["spec"]

    # theirs gone, a project more: ours written (the project ANP with its Deny logged)
    await api.delete(BASELINE_ADMIN_NETWORK_POLICIES, None, "default")
    await api.create(NAMESPACES, {"metadata": {"name": "ns-456", "labels": {PROJECT_LABEL: "proj-456"}}})
    await eventually(
        lambda: (
            ours(kube_api, ANPS) == {"project-proj-456", DNS_POLICY} and ours(kube_api, BANPS) == {"default"}
        ),
        what="the project ANP, the DNS ANP and the BANP",
    )
    isolation = kube_api.get(ANPS, "", "project-proj-456")
    assert isolation["metadata"]["annotations"] == {ANNOTATION: ISOLATION_LOGGING}
    assert json.loads(ISOLATION_LOGGING) == {"deny": "warning"}
    assert kube_api.get(ANPS, "", FOREIGN)["spec"] == foreign["spec"]

    # changed by hand: the verdict-log annotation alone; then the spec and the BANP's rule -> put back (PUT)
    have = await api.get(ADMIN_NETWORK_POLICIES, None, "project-proj-456")
    await api.replace(
        ADMIN_NETWORK_POLICIES, {**have, "metadata": {**have["metadata"], "annotations": {"note": "kept"}}}
    )
    kept = {"note": "kept", ANNOTATION: ISOLATION_LOGGING}
    await eventually(lambda: annotations_of(kube_api, "project-proj-456") == kept,
                     what="the verdict-log annotation put back, the other kept")  # fmt: skip
    have = await api.get(ADMIN_NETWORK_POLICIES, None, "project-proj-456")
    await api.replace(ADMIN_NETWORK_POLICIES, {**have, "spec": {**have["spec"], "priority": 99}})
    base = await api.get(BASELINE_ADMIN_NETWORK_POLICIES, None, "default")
    opened = {
        **base["spec"],
        "ingress": [{"name": "closed", "action": "Allow", "from": [{"namespaces": {}}]}],
    }
    await api.replace(BASELINE_ADMIN_NETWORK_POLICIES, {**base, "spec": opened})

    def repaired() -> bool:
        anp, banp = kube_api.get(ANPS, "", "project-proj-456"), kube_api.get(BANPS, "", "default")
        return bool(
            anp["spec"]["priority"] == isolation["spec"]["priority"]
            and anp["metadata"].get("annotations") == kept
            and banp["spec"]["ingress"][0]["action"] == "Deny"
        )

    await eventually(repaired, what="the ANP's spec and the BANP's rule put back")
    assert "update" in sa_verbs(kube_api, ANPS) and "update" in sa_verbs(kube_api, BANPS)

    # the project's last namespace leaves it: its ANP goes; the last project goes: the DNS ANP and BANP go
    await label(api, "ns-456", None)
    await eventually(lambda: ours(kube_api, ANPS) == {DNS_POLICY}, what="project-proj-456 deleted")
    await label(api, "ns-789", None)
    await eventually(lambda: not ours(kube_api, ANPS) and not ours(kube_api, BANPS), what="all deleted")
    assert kube_api.get(ANPS, "", FOREIGN) is not None  # never ours, never deleted
    assert "delete" in sa_verbs(kube_api, ANPS) and "delete" in sa_verbs(kube_api, BANPS)
