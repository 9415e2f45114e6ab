"""Opt-in RBAC enforcement: a service-account user gets exactly what its Roles/ClusterRoles grant, seen
through kubectl (403 messages, `auth can-i`, `auth whoami`) and in the request record."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from nodeenv.kubeapi.state import ApiConfig
from tests.integration.kubeapi.test_kubeapi_kubectl import kubectl, kubectl_bin
from tests.kubeapi_fixture import KubeApiHandle

USER = "system:serviceaccount:kube-system:bot"
RBAC = """\
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: svc-reader, namespace: default}
rules:
- {apiGroups: [""], resources: [services], verbs: [get, list, watch]}
- {apiGroups: [""], resources: [services/status], verbs: [get, patch]}
- {apiGroups: [""], resources: [configmaps], verbs: [get], resourceNames: [allowed]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: bot-svc-reader, namespace: default}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: svc-reader}
subjects: [{kind: ServiceAccount, name: bot, namespace: kube-system}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: lease-holder}
rules: [{apiGroups: [coordination.k8s.io], resources: [leases], verbs: ["*"]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: sa-leases}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: lease-holder}
subjects: [{kind: Group, name: "system:serviceaccounts:kube-system", apiGroup: rbac.authorization.k8s.io}]
"""


@pytest.fixture
def kube_api_config() -> ApiConfig:
    return ApiConfig(bookmark_interval=1.0, enforce_rbac=True)


def as_user(api: KubeApiHandle, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [kubectl_bin(), "--kubeconfig", str(api.kubeconfig_for(USER)), *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60)


@pytest.fixture
def granted(kube_api: KubeApiHandle, tmp_path: Path) -> KubeApiHandle:
    (tmp_path / "rbac.yaml").write_text(RBAC)
    kubectl(kube_api, "apply", "-f", str(tmp_path / "rbac.yaml"))
    for name in ("allowed", "denied"):
        kubectl(kube_api, "create", "configmap", name)
    return kube_api


def test_roles_and_cluster_roles_grant_exactly_their_rules(granted: KubeApiHandle) -> None:
    assert as_user(granted, "get", "svc", "-n", "default").returncode == 0
    denied = as_user(granted, "get", "svc", "-n", "kube-system")
    assert denied.returncode != 0
    assert (f'services is forbidden: User "{USER}" cannot list resource "services" in API group "" '
            'in the namespace "kube-system"') in denied.stderr  # fmt: skip
    assert as_user(granted, "get", "cm", "allowed", "-n", "default").returncode == 0
    assert 'configmaps "denied" is forbidden' in as_user(granted, "get", "cm", "denied").stderr
    assert as_user(granted, "get", "leases", "-A").returncode == 0  # ClusterRoleBinding to the SA group
    nodes = as_user(granted, "get", "nodes")
    assert "at the cluster scope" in nodes.stderr
    status = ["patch", "svc", "kubernetes", "--subresource=status", "--type=merge", "-p", '{"status":{}}']
    assert as_user(granted, *status).returncode == 0
    assert "forbidden" in as_user(granted, "patch", "svc", "kubernetes", "--type=merge", "-p", "{}").stderr
    mine = [(r.verb, r.resource, r.subresource, r.namespace, r.status) for r in granted.requests_by(USER)]
    assert ("list", "services", "", "kube-system", 403) in mine
    assert ("patch", "services", "status", "default", 200) in mine


def test_auth_can_i_and_whoami(granted: KubeApiHandle) -> None:
    assert as_user(granted, "auth", "can-i", "list", "services", "-n", "default").stdout.strip() == "yes"
    assert as_user(granted, "auth", "can-i", "delete", "services", "-n", "default").stdout.strip() == "no"
    assert kubectl(granted, "auth", "can-i", "delete", "nodes").strip() == "yes"  # system:masters
    who = as_user(granted, "auth", "whoami")
    assert USER in who.stdout and "system:serviceaccounts:kube-system" in who.stdout


def test_recorded_requests_checked_against_manifest_rules(granted: KubeApiHandle) -> None:
    as_user(granted, "get", "svc", "-n", "default")
    as_user(granted, "get", "leases", "-A")
    rules = [{"apiGroups": [""], "resources": ["services"], "verbs": ["list"]}]
    refused = granted.not_allowed_by(USER, rules)
    assert [(r.verb, r.group, r.resource) for r in refused] == [("list", "coordination.k8s.io", "leases")]


def test_a_namespaced_role_covering_namespaces_matches_the_namespace_itself(
    kube_api: KubeApiHandle, tmp_path: Path
) -> None:
    """As kube-apiserver's RequestInfoFactory: `/api/v1/namespaces/<n>` is authorized in namespace n,
    so a Role in `default` granting `namespaces` lets its holder relabel `default`, and only it."""
    role = """\
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: ns-editor, namespace: default}
rules: [{apiGroups: [""], resources: [namespaces], verbs: [get, patch]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: bot-ns-editor, namespace: default}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: ns-editor}
subjects: [{kind: ServiceAccount, name: bot, namespace: kube-system}]
"""
    (tmp_path / "role.yaml").write_text(role)
    kubectl(kube_api, "apply", "-f", str(tmp_path / "role.yaml"))
    assert as_user(kube_api, "label", "ns", "default", "x=y").returncode == 0
    denied = as_user(kube_api, "label", "ns", "kube-public", "x=y")
    assert (f'namespaces "kube-public" is forbidden: User "{USER}" cannot get resource "namespaces" in API '
            'group "" in the namespace "kube-public"') in denied.stderr  # fmt: skip
    assert "forbidden" in as_user(kube_api, "get", "ns").stderr  # a list is cluster-scoped
