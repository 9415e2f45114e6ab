"""project-controller with only the RBAC its manifest grants (the API double enforcing RBAC)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import yaml

from controllers.machinery import CLUSTER_ROLE_BINDINGS, CLUSTER_ROLES, NAMESPACES, ROLE_BINDINGS, ROLES, Kind
from controllers.machinery.settings import parse
from controllers.projects.main import PREFIX, add_arguments, make_app
from nodeenv.kubeapi.state import ApiConfig
from tests.integration.controllers.machinery_kit import client_for, eventually

MANIFEST = Path(__file__).parents[4] / "daemonsets" / "controllers" / "projects.yaml"
GUARDS = Path(__file__).parents[4] / "daemonsets" / "rbac" / "tenant-guards.yaml"
"""Its admission policies: the controller works within the scope policy too."""
SA = "system:serviceaccount:kube-system:project-controller"
POLICY_KINDS: dict[str, Kind] = {
    k: Kind(group="admissionregistration.k8s.io", version="v1", kind=k, plural=p, namespaced=False)
    for k, p in (("ValidatingAdmissionPolicy", "validatingadmissionpolicies"),
                 ("ValidatingAdmissionPolicyBinding", "validatingadmissionpolicybindings"))
}  # fmt: skip
RBAC_KINDS: dict[str, Kind] = {"ClusterRole": CLUSTER_ROLES, "ClusterRoleBinding": CLUSTER_ROLE_BINDINGS,
                               "Role": ROLES, "RoleBinding": ROLE_BINDINGS}  # fmt: skip


@pytest.fixture
def kube_api_config() -> ApiConfig:
    return ApiConfig(bookmark_interval=1.0, enforce_rbac=True)


async def test_the_manifests_rbac_is_enough_with_leader_election(kube_api: Any) -> None:
    async with client_for(kube_api.kubeconfig) as admin:
        if kube_api.get("namespaces", "", "kube-system") is None:
            await admin.create(NAMESPACES, {"metadata": {"name": "kube-system"}})
        for doc in yaml.safe_load_all(MANIFEST.read_text()):
            if doc["kind"] in RBAC_KINDS:
                await admin.create(RBAC_KINDS[doc["kind"]], doc)
        for doc in yaml.safe_load_all(GUARDS.read_text()):
            await admin.create(POLICY_KINDS[doc["kind"]], doc)
        argv = ["--kubeconfig", str(kube_api.kubeconfig_for(SA)), "--metrics-address=off",
                "--leader-elect-lease-namespace=kube-system"]  # fmt: skip
        settings = parse("project-controller", "", argv, {}, prefix=PREFIX, add_arguments=add_arguments)
        stop = asyncio.Event()
        task = asyncio.create_task(make_app().run(settings, stop))
        try:
            labels = {"plasmacloud.io/org-id": "o", "plasmacloud.io/project-id": "p"}
            await admin.create(NAMESPACES, {"metadata": {"name": "project-p", "labels": labels}})
            await eventually(lambda: len(kube_api.objects("rolebindings", "project-p")) == 3, timeout=20,
                             what="bindings created by the service account")  # fmt: skip
            await eventually(
                lambda: len(kube_api.objects("networkpolicies", "project-p")) == 2, what="policies"
            )
        finally:
            stop.set()
            assert await asyncio.wait_for(task, 30) == 0
    denied = [r for r in kube_api.requests_by(SA) if r.status == 403]
    assert denied == [], [(r.verb, r.resource, r.namespace) for r in denied]
    assert kube_api.get("leases", "kube-system", "project-controller") is not None
