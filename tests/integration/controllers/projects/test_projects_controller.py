"""project-controller against the Kubernetes API double, as its service account reaches the API."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import jwt
import pytest

from controllers.machinery import (
    CONFIG_MAPS,
    LIMIT_RANGES,
    NAMESPACES,
    NETWORK_POLICIES,
    RESOURCE_QUOTAS,
    ROLE_BINDINGS,
    ROLES,
    ApiException,
    Kind,
    KubeClient,
    Store,
)
from controllers.machinery.settings import parse
from controllers.projects.main import PREFIX, add_arguments, make_app
from controllers.projects.reconcile import ProjectReconciler
from controllers.projects.template import KINDS, MANAGED_BY, MANAGER, ProjectTemplate
from tests.integration.controllers.machinery_kit import client_for, eventually
from webhook.devcerts import mint
from webhook.mapping import ClaimMapper
from webhook.settings import MintSettings

SA = "system:serviceaccount:kube-system:project-controller"
NS = "project-550e8400"
LABELS = {"plasmacloud.io/org-id": "org-123", "plasmacloud.io/project-id": "proj-456",
          "plasmacloud.io/tenant-type": "project"}  # fmt: skip
OURS = {
    "roles": {"org-admin", "project-admin", "project-viewer"},
    "rolebindings": {"org-admin-binding", "project-admin-binding", "project-viewer-binding"},
    "resourcequotas": {"project-compute-quota", "project-storage-quota", "project-object-quota"},
    "limitranges": {"project-limits"},
    "networkpolicies": {"default-deny-all", "allow-same-project"},
}


def names(kube_api: Any, resource: str) -> set[str]:
    return {o["metadata"]["name"] for o in kube_api.objects(resource, NS)}


def ours(kube_api: Any) -> dict[str, set[str]]:
    return {
        r: {o["metadata"]["name"] for o in kube_api.objects(r, NS)
            if (o["metadata"].get("labels") or {}).get(MANAGED_BY) == MANAGER}
        for r in OURS
    }  # fmt: skip


@pytest.fixture
async def controller(kube_api: Any) -> AsyncIterator[None]:
    argv = ["--kubeconfig", str(kube_api.kubeconfig_for(SA)), "--leader-elect=false", "--metrics-address=off"]
    settings = parse("project-controller", "", argv, {}, prefix=PREFIX, add_arguments=add_arguments)
    stop = asyncio.Event()
    task = asyncio.create_task(make_app().run(settings, stop))
    yield
    stop.set()
    assert await asyncio.wait_for(task, 30) == 0


@pytest.fixture
async def admin(kube_api: Any) -> AsyncIterator[KubeClient]:
    async with client_for(kube_api.kubeconfig) as c:
        yield c


def role(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": name, "namespace": NS, "labels": labels or {}},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]}  # fmt: skip


async def test_project_namespace_lifecycle(kube_api: Any, admin: KubeClient, controller: None) -> None:
    await admin.create(NAMESPACES, {"metadata": {"name": NS}})
    await admin.create(ROLES, role("project-viewer"))  # someone else's, same name as ours
    await admin.create(NETWORK_POLICIES, {"metadata": {"name": "user-policy", "namespace": NS},
                                          "spec": {"podSelector": {}}})  # fmt: skip
    await asyncio.sleep(0.3)
    assert ours(kube_api) == {r: set() for r in OURS}  # no project label: nothing
    ns = await admin.get(NAMESPACES, None, NS)
    await admin.replace(NAMESPACES, {**ns, "metadata": {**ns["metadata"], "labels": LABELS}})
    want = {**OURS, "roles": OURS["roles"] - {"project-viewer"}}
    await eventually(lambda: ours(kube_api) == want, what="the template's objects")
    assert kube_api.get("roles", NS, "project-viewer")["rules"][0]["verbs"] == ["get"]  # untouched

    def not_owned() -> list[str]:  # an Event about the Namespace (cluster-scoped: in "default")
        return [
            e.get("note") or e.get("message", "")
            for e in kube_api.objects("events.events.k8s.io")
            if e.get("reason") == "NotOwned"
        ]

    await eventually(not_owned, what="a NotOwned Event")
    assert "project-viewer" in not_owned()[0]
    quota = kube_api.get("resourcequotas", NS, "project-object-quota")
    assert quota["spec"]["hard"]["services.loadbalancers"] == "5"

    # drift: a rule widened, a quota deleted, a binding's subject changed -> repaired
    admin_role = await admin.get(ROLES, NS, "project-admin")
    await admin.replace(
        ROLES, {**admin_role, "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]}
    )
    await admin.delete(RESOURCE_QUOTAS, NS, "project-compute-quota")
    rb = await admin.get(ROLE_BINDINGS, NS, "org-admin-binding")
    evil = [{"kind": "Group", "name": "org:evil", "apiGroup": "rbac.authorization.k8s.io"}]
    await admin.replace(ROLE_BINDINGS, {**rb, "subjects": evil})
    await eventually(
        lambda: (
            kube_api.get("roles", NS, "project-admin")["rules"][0]["apiGroups"][0] == ""
            and kube_api.get("resourcequotas", NS, "project-compute-quota") is not None
            and kube_api.get("rolebindings", NS, "org-admin-binding")["subjects"][0]["name"]
            == "org:org-123:admin"
        ),
        what="drift repaired",
    )

    # the label goes: what we created goes, the rest stays
    ns = await admin.get(NAMESPACES, None, NS)
    labels = {k: v for k, v in LABELS.items() if k != "plasmacloud.io/project-id"}
    await admin.replace(NAMESPACES, {**ns, "metadata": {**ns["metadata"], "labels": labels}})
    await eventually(lambda: ours(kube_api) == {r: set() for r in OURS}, what="cleanup")
    assert names(kube_api, "roles") == {"project-viewer"} and names(kube_api, "networkpolicies") == {
        "user-policy"
    }
    ours_names = set().union(*OURS.values())
    writes = {r.user for r in kube_api.requests
              if r.verb in ("create", "update", "delete") and r.namespace == NS
              and r.name in ours_names}  # fmt: skip
    assert SA in writes


async def test_bindings_name_the_groups_the_webhook_maps_a_member_to(
    kube_api: Any, admin: KubeClient, controller: None, tmp_path: Path
) -> None:
    await admin.create(NAMESPACES, {"metadata": {"name": NS, "labels": LABELS}})
    await eventually(lambda: names(kube_api, "rolebindings") == OURS["rolebindings"], what="bindings")
    key = tmp_path / "hmac"
    key.write_text("dev-secret-for-the-test-only-0123456789")
    token = mint(MintSettings(key=key, alg="HS256", issuer="iam", audiences=("k8s",), sub="user-1",
                              email="dev@example.com", org="org-123", project="proj-456"))  # fmt: skip
    claims = jwt.decode(token, key.read_text(), algorithms=["HS256"], audience="k8s")
    groups = set(ClaimMapper().map(claims).groups)
    bound = {rb["metadata"]["name"]: rb["subjects"][0]["name"] for rb in kube_api.objects("rolebindings", NS)}
    assert bound["project-admin-binding"] in groups
    assert bound["org-admin-binding"] not in groups  # a member is not the org's admin (issue 31 item 1)
    assert bound["org-admin-binding"] in ClaimMapper().map({**claims, "roles": ["org_admin"]}).groups
    assert bound["project-viewer-binding"] == "project:proj-456:viewer"


async def test_drift_in_a_quota_limit_range_or_policy_spec_is_replaced(
    kube_api: Any, admin: KubeClient, controller: None
) -> None:
    await admin.create(NAMESPACES, {"metadata": {"name": NS, "labels": LABELS}})
    await eventually(lambda: ours(kube_api) == OURS, what="the template's objects")
    ingress_only = {"podSelector": {}, "policyTypes": ["Ingress"]}
    drift = [(LIMIT_RANGES, "project-limits", {"limits": [{"type": "Pod"}]}),
             (RESOURCE_QUOTAS, "project-compute-quota", {"hard": {"pods": "1000"}}),
             (NETWORK_POLICIES, "default-deny-all", ingress_only)]  # fmt: skip
    want = {name: kube_api.get(kind.plural, NS, name)["spec"] for kind, name, _ in drift}
    for kind, name, spec in drift:
        await admin.replace(kind, {**await admin.get(kind, NS, name), "spec": spec})
    await eventually(
        lambda: all(kube_api.get(k.plural, NS, n)["spec"] == want[n] for k, n, _ in drift),
        what="each spec repaired",
    )
    updated = {r.resource for r in kube_api.requests_by(SA) if r.verb == "update" and r.namespace == NS}
    assert {"limitranges", "resourcequotas", "networkpolicies"} <= updated


async def test_an_object_the_cache_has_not_seen_yet_is_read_back_and_left_alone(
    kube_api: Any, admin: KubeClient, controller: None
) -> None:
    """Create answers 409 for an object the informer has not delivered yet: the controller reads it
    (GET) and, as it is someone else's, leaves it alone. The informers' watches are held back (a
    delayed re-watch after the server closes them) while the objects and the project label arrive."""
    await admin.create(NAMESPACES, {"metadata": {"name": NS}})
    await eventually(lambda: bool(kube_api.requests_by(SA)), what="the controller's informers")
    await asyncio.sleep(0.3)
    RBAC = "rbac.authorization.k8s.io"
    foreign: list[tuple[Kind, dict[str, Any]]] = [
        (LIMIT_RANGES, {"metadata": {"name": "project-limits", "namespace": NS}, "spec": {"limits": []}}),
        (RESOURCE_QUOTAS, {"metadata": {"name": "project-compute-quota", "namespace": NS},
                           "spec": {"hard": {"pods": "1"}}}),
        (ROLE_BINDINGS, {"metadata": {"name": "org-admin-binding", "namespace": NS},
                         "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "view"},
                         "subjects": [{"kind": "Group", "name": "someone", "apiGroup": RBAC}]}),
    ]  # fmt: skip
    for kind, _ in foreign:
        kube_api.set_fault(verb="watch", resource=kind.plural, code=0, delay=4.0)
    kube_api.drop_watches()
    await asyncio.sleep(0.5)  # the informers are back, their watches waiting out the delay
    for kind, body in foreign:
        await admin.create(kind, body)
    ns = await admin.get(NAMESPACES, None, NS)
    await admin.replace(NAMESPACES, {**ns, "metadata": {**ns["metadata"], "labels": LABELS}})

    def read_back() -> set[str]:
        return {r.resource for r in kube_api.requests_by(SA) if r.verb == "get" and r.namespace == NS}

    await eventually(lambda: read_back() >= {k.plural for k, _ in foreign}, what="GETs after 409s")
    for kind, body in foreign:
        have = kube_api.get(kind.plural, NS, body["metadata"]["name"])
        assert (have["metadata"].get("labels") or {}).get(MANAGED_BY) != MANAGER, kind.plural
    await eventually(lambda: names(kube_api, "roles") == OURS["roles"], what="the rest of the template")


def stale_reconciler(admin: KubeClient, ns: dict[str, Any]) -> ProjectReconciler:
    """The reconciler with caches from just before `ns` went away (the watch event not in yet)."""
    cache = Store()
    cache.upsert(ns)
    return ProjectReconciler(admin, cache, {kind: Store() for kind in KINDS}, ProjectTemplate())


@pytest.mark.parametrize("terminating", [False, True], ids=["deleted", "terminating"])
async def test_a_namespace_deleted_mid_reconcile_is_done_not_an_error(
    kube_api: Any, admin: KubeClient, terminating: bool
) -> None:
    """Creates in a namespace that is gone (404 NotFound) or terminating (403 Forbidden) end the
    reconcile quietly: no exception, so the controller logs no traceback, records no Warning Event
    and does not retry."""
    name = f"gone-{'terminating' if terminating else 'deleted'}"
    ns = await admin.create(NAMESPACES, {"metadata": {"name": name, "labels": LABELS}})
    if terminating:  # an object with a finalizer keeps the namespace Terminating
        await admin.create(CONFIG_MAPS, {"metadata": {"name": "held", "namespace": name,
                                                      "finalizers": ["example.com/hold"]}})  # fmt: skip
    await admin.delete(NAMESPACES, None, name)
    assert (kube_api.get("namespaces", "", name) is not None) is terminating
    assert await stale_reconciler(admin, ns).reconcile(name) is None
    assert not kube_api.objects("roles", name)


async def test_a_refused_create_in_a_live_namespace_is_still_an_error(
    kube_api: Any, admin: KubeClient
) -> None:
    ns = await admin.create(NAMESPACES, {"metadata": {"name": "refused", "labels": LABELS}})
    kube_api.set_fault(verb="create", resource="roles", namespace="refused", code=403)
    with pytest.raises(ApiException) as e:
        await stale_reconciler(admin, ns).reconcile("refused")
    assert e.value.status == 403
