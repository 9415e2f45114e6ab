"""project-controller's AdminNetworkPolicies and BaselineAdminNetworkPolicy (admin_policies.py) against the
API double serving the daemonsets/policy/ CRDs, as its service account reaches the API: created per
project, an unowned ANP of the same name read back and left alone, an owned one changed by hand (spec,
the verdict-log annotation) put back, and each deleted once no namespace of its project is left."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from controllers.machinery import NAMESPACES, KubeClient
from controllers.machinery.settings import parse
from controllers.netpol.acl_logging import ANNOTATION
from controllers.netpol.adminpolicy import ADMIN_NETWORK_POLICIES, BASELINE_ADMIN_NETWORK_POLICIES
from controllers.projects.admin_policies import DNS_POLICY, ISOLATION_LOGGING
from controllers.projects.main import PREFIX, add_arguments, make_app
from controllers.projects.template import MANAGED_BY, MANAGER, PROJECT_LABEL
from nodeenv.kubeapi_component import install_policy_crds
from tests.integration.controllers.machinery_kit import client_for, eventually

SA = "system:serviceaccount:kube-system:project-controller"
ANPS, BANPS = "adminnetworkpolicies", "baselineadminnetworkpolicies"
FOREIGN = "project-proj-789"  # someone's ANP with the name project-controller wants for proj-789


@pytest.fixture
async def admin(kube_api: Any) -> AsyncIterator[KubeClient]:
    await asyncio.to_thread(install_policy_crds, kube_api.kubeconfig)
    async with client_for(kube_api.kubeconfig) as c:
        yield c


@pytest.fixture
async def controller(kube_api: Any, admin: KubeClient) -> AsyncIterator[None]:
    argv = ["--kubeconfig", str(kube_api.kubeconfig_for(SA)), "--leader-elect=false", "--metrics-address=off"]
    settings = parse("project-controller", "", argv, {}, prefix=PREFIX, add_arguments=add_arguments)
    stop = asyncio.Event()
    task = asyncio.create_task(make_app().run(settings, stop))
    yield
    stop.set()
    assert await asyncio.wait_for(task, 30) == 0


def ours(kube_api: Any, resource: str) -> set[str]:
    return {o["metadata"]["name"] for o in kube_api.objects(resource)
            if (o["metadata"].get("labels") or {}).get(MANAGED_BY) == MANAGER}  # fmt: skip


def sa_verbs(kube_api: Any, resource: str) -> set[str]:
    return {r.verb for r in kube_api.requests if r.user == SA and r.resource == resource and r.status < 400}


async def label(admin: KubeClient, name: str, project: str | None) -> None:
    ns = await admin.get(NAMESPACES, None, name)
    labels = {k: v for k, v in (ns["metadata"].get("labels") or {}).items() if k != PROJECT_LABEL}
    if project:
        labels[PROJECT_LABEL] = project
    await admin.replace(NAMESPACES, {**ns, "metadata": {**ns["metadata"], "labels": labels}})


async def test_admin_policies_created_kept_repaired_and_removed(
    kube_api: Any, admin: KubeClient, controller: None
) -> None:
    foreign = {"apiVersion": "policy.networking.k8s.io/v1alpha1", "kind": "AdminNetworkPolicy",
               "metadata": {"name": FOREIGN},
               "spec": {"priority": 7, "subject": {"namespaces": {}},
                        "ingress": [{"action": "Allow", "from": [{"namespaces": {}}]}]}}  # fmt: skip
    await admin.create(ADMIN_NETWORK_POLICIES, foreign)
    for name, project in (("ns-456", "proj-456"), ("ns-789", "proj-789")):
        await admin.create(NAMESPACES, {"metadata": {"name": name, "labels": {PROJECT_LABEL: project}}})
    await eventually(
        lambda: (
            ours(kube_api, ANPS) == {"project-proj-456", DNS_POLICY} and ours(kube_api, BANPS) == {"default"}
        ),
        what="the project ANP, the DNS ANP and the BANP",
    )
    isolation = kube_api.get(ANPS, "", "project-proj-456")
    assert isolation["metadata"]["annotations"] == {ANNOTATION: ISOLATION_LOGGING}  # its Deny logged
    assert json.loads(ISOLATION_LOGGING) == {"deny": "warning"}
    await eventually(lambda: "get" in sa_verbs(kube_api, ANPS), what="the 409 read back")
    assert kube_api.get(ANPS, "", FOREIGN)["spec"] == foreign["spec"]  # not ours: left as it was

    # changed by hand: the spec, the verdict-log annotation, the BANP's rule -> put back (PUT)
    have = await admin.get(ADMIN_NETWORK_POLICIES, None, "project-proj-456")
    spec, meta = {**have["spec"], "priority": 99}, {**have["metadata"], "annotations": {"note": "kept"}}
    await admin.replace(ADMIN_NETWORK_POLICIES, {**have, "metadata": meta, "spec": spec})
    base = await admin.get(BASELINE_ADMIN_NETWORK_POLICIES, None, "default")
    opened = {
        **base["spec"],
        "ingress": [{"name": "closed", "action": "Allow", "from": [{"namespaces": {}}]}],
    }
    await admin.replace(BASELINE_ADMIN_NETWORK_POLICIES, {**base, "spec": opened})

    def repaired() -> bool:
        anp, banp = kube_api.get(ANPS, "", "project-proj-456"), kube_api.get(BANPS, "", "default")
        return bool(
            anp["spec"]["priority"] == have["spec"]["priority"]
            and anp["metadata"].get("annotations") == {"note": "kept", ANNOTATION: ISOLATION_LOGGING}
            and banp["spec"]["ingress"][0]["action"] == "Deny"
        )

    await eventually(repaired, what="the ANP's spec and annotation and the BANP's rule put back")
    assert "update" in sa_verbs(kube_api, ANPS) and "update" in sa_verbs(kube_api, BANPS)

    # the project's last namespace leaves it: its ANP goes; the last project goes: the DNS ANP and BANP go
    await label(admin, "ns-456", None)
    await eventually(lambda: ours(kube_api, ANPS) == {DNS_POLICY}, what="project-proj-456 deleted")
    await label(admin, "ns-789", None)
    await eventually(lambda: not ours(kube_api, ANPS) and not ours(kube_api, BANPS), what="all deleted")
    assert kube_api.get(ANPS, "", FOREIGN) is not None  # never ours, never deleted
    assert "delete" in sa_verbs(kube_api, ANPS) and "delete" in sa_verbs(kube_api, BANPS)
