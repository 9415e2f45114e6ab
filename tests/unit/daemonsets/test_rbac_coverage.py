"""The RBAC coverage check (tests/rbac_coverage.py) on small, known inputs: it refuses a request no
rule allows (namespace-scoped Roles only in their namespace, resourceNames only for those names) and
reports grants nothing used; its ALLOWANCE names only grants the manifests really make."""

from __future__ import annotations

from typing import Any

from nodeenv.kubeapi.auth import RequestRecord
from tests import rbac_coverage as rc

USER = "system:serviceaccount:kube-system:demo"
RENDERED: list[dict[str, Any]] = [
    {"kind": "ServiceAccount", "metadata": {"name": "demo", "namespace": "kube-system"}},
    {"kind": "ClusterRole", "metadata": {"name": "demo"}, "rules": [
        {"apiGroups": [""], "resources": ["services"], "verbs": ["list", "watch", "patch"]},
        {"apiGroups": [""], "resources": ["services/status"], "verbs": ["patch"]}]},
    {"kind": "ClusterRoleBinding", "metadata": {"name": "demo"},
     "roleRef": {"kind": "ClusterRole", "name": "demo"},
     "subjects": [{"kind": "ServiceAccount", "name": "demo", "namespace": "kube-system"}]},
    {"kind": "Role", "metadata": {"name": "lease", "namespace": "kube-system"}, "rules": [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "update"],
         "resourceNames": ["demo"]}]},
    {"kind": "RoleBinding", "metadata": {"name": "lease", "namespace": "kube-system"},
     "roleRef": {"kind": "Role", "name": "lease"},
     "subjects": [{"kind": "ServiceAccount", "name": "demo", "namespace": "kube-system"}]},
]  # fmt: skip


def rec(
    verb: str, resource: str, *, group: str = "", sub: str = "", ns: str = "", name: str = ""
) -> RequestRecord:
    return RequestRecord(user=USER, verb=verb, group=group, version="v1", resource=resource, subresource=sub,
                         namespace=ns, name=name, status=200, path="/")  # fmt: skip


USED = [
    rec("list", "services"),
    rec("watch", "services"),
    rec("patch", "services", ns="default", name="web"),
    rec("patch", "services", sub="status", ns="default", name="web"),
    rec("get", "leases", group="coordination.k8s.io", ns="kube-system", name="demo"),
]


def test_requests_the_rules_allow_pass() -> None:
    assert rc.check_requests(USER, USED, RENDERED) == []


def test_requests_outside_the_rules_are_named() -> None:
    refused = [
        rec("delete", "services", ns="default", name="web"),
        rec("update", "services", sub="status", ns="default", name="web"),
        rec("get", "leases", group="coordination.k8s.io", ns="kube-system", name="other"),  # resourceNames
        rec("get", "leases", group="coordination.k8s.io", ns="default", name="demo"),  # Role elsewhere
    ]
    assert rc.check_requests(USER, refused, RENDERED) == sorted([
        "delete services default/web", "update services/status default/web",
        "get leases.coordination.k8s.io kube-system/other", "get leases.coordination.k8s.io default/demo",
    ])  # fmt: skip


def test_another_users_requests_are_not_charged_to_this_one() -> None:
    other = RequestRecord(user="admin", verb="delete", group="", version="v1", resource="nodes",
                          subresource="", namespace="", name="n", status=200, path="/")  # fmt: skip
    assert rc.check_requests(USER, [other], RENDERED) == []


def test_unused_grants_are_reported() -> None:
    assert rc.unused_grants(USER, USED, RENDERED) == ["update leases.coordination.k8s.io demo in kube-system"]
    assert len(rc.unused_grants(USER, [], RENDERED)) == 6


def test_allowance_names_only_grants_the_manifests_make() -> None:
    for user, allowed in rc.ALLOWANCE.items():
        assert user in rc.defined_accounts(), user
        assert set(allowed) <= rc.grants(user), f"{user}: stale ALLOWANCE entries"
        assert all(reason.strip() for reason in allowed.values())
