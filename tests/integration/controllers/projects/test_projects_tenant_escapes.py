"""Issue 31 items 1 and 2, as an attacker tries them: IAM tokens minted for members of one
organization's projects, sent by kubectl and by the official `kubernetes` client through the API
double, which authenticates them through the IAM webhook and authorizes them by the RBAC
project-controller writes (its template, controllers/projects/template.py). Every escape is a 403.

Org `org-x` has projects `proj-a` and `proj-b` (namespaces tenant-a and tenant-b)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest

from controllers.projects.template import ORG_LABEL, PROJECT_LABEL, ProjectTemplate, desired_objects
from nodeenv.kubeapi.state import ApiConfig
from tests.iam_fixture import Iam
from tests.integration.kubeapi.test_kubeapi_kubectl import kubectl, kubectl_bin
from tests.kubeapi_fixture import KubeApiHandle

PROJECTS = {"tenant-a": "proj-a", "tenant-b": "proj-b"}
ORG = "org-x"


@pytest.fixture
def kube_api_config(iam: Iam) -> ApiConfig:
    return iam.api_config()


@pytest.fixture
def projects(kube_api: KubeApiHandle) -> KubeApiHandle:
    """Both namespaces with what project-controller writes in them, and a Service in each."""
    docs: list[dict[str, object]] = []
    for ns, project in PROJECTS.items():
        labels = {ORG_LABEL: ORG, PROJECT_LABEL: project}
        nsobj = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": labels}}
        kubectl(kube_api, "apply", "-f", "-", stdin=json.dumps(nsobj))
        created = json.loads(kubectl(kube_api, "get", "ns", ns, "-o", "json"))
        docs += [o.body for o in desired_objects(created, ProjectTemplate())]
        docs.append({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": ns},
                     "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]}})  # fmt: skip
    kubectl(
        kube_api, "apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": docs})
    )
    return kube_api


class Tenant:
    def __init__(self, api: KubeApiHandle, iam: Iam, name: str, **claims: Any) -> None:
        self.kubeconfig = iam.kubeconfig(api, iam.mint(sub=f"user-{name}", org=ORG, **claims), name)

    def kubectl(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([kubectl_bin(), "--kubeconfig", str(self.kubeconfig), *args], input=stdin,
                              capture_output=True, text=True, timeout=60)  # fmt: skip

    def can(self, *args: str, stdin: str | None = None) -> bool:
        out = self.kubectl(*args, stdin=stdin)
        assert out.returncode == 0 or "forbidden" in out.stderr, out.stderr  # refused by RBAC, not otherwise
        return out.returncode == 0


def tenant(api: KubeApiHandle, iam: Iam, name: str, **claims: Any) -> Tenant:
    return Tenant(api, iam, name, **claims)


CM = '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"probe"}}'


def test_a_project_viewer_reads_but_cannot_write(projects: KubeApiHandle, iam: Iam) -> None:
    viewer = tenant(projects, iam, "viewer", project="proj-a", roles=("project_viewer",))
    assert viewer.can("get", "pods,svc,cm", "-n", "tenant-a")
    assert not viewer.can("create", "-n", "tenant-a", "-f", "-", stdin=CM)
    assert not viewer.can("delete", "svc", "web", "-n", "tenant-a")
    assert not viewer.can("get", "secrets", "-n", "tenant-a")
    assert not viewer.can("get", "pods", "-n", "tenant-b")


ESCAPES = {
    "relabel its namespace into another project": (
        "label", "ns", "tenant-a", f"{PROJECT_LABEL}=proj-b", "--overwrite"),
    "delete its quota": ("delete", "resourcequota", "project-object-quota", "-n", "tenant-a"),
    "raise its quota": ("patch", "resourcequota", "project-object-quota", "-n", "tenant-a", "--type=merge",
                        "-p", '{"spec":{"hard":{"pods":"5000"}}}'),
    "delete its LimitRange": ("delete", "limitrange", "project-limits", "-n", "tenant-a"),
    "set its LoadBalancer IP": ("patch", "svc", "web", "-n", "tenant-a", "--subresource=status",
                                "--type=merge", "-p",
                                '{"status":{"loadBalancer":{"ingress":[{"ip":"203.0.113.9"}]}}}'),
    "list the other project's pods": ("get", "pods", "-n", "tenant-b"),
    "delete the other project's Service": ("delete", "svc", "web", "-n", "tenant-b"),
    "bind itself a role": ("create", "-n", "tenant-a", "-f", "-"),
    "write the platform's namespaces": ("create", "cm", "x", "-n", "kube-system"),
}  # fmt: skip


@pytest.fixture
def admin_a(projects: KubeApiHandle, iam: Iam) -> Iterator[Tenant]:
    yield tenant(projects, iam, "admin-a", project="proj-a", roles=("project_member",))


def test_a_project_admin_runs_its_project(admin_a: Tenant) -> None:
    assert admin_a.can("create", "-n", "tenant-a", "-f", "-", stdin=CM)
    deploy = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": "x"}]},
            },
        },
    }
    assert admin_a.can("create", "-n", "tenant-a", "-f", "-", stdin=json.dumps(deploy))
    assert admin_a.can("get", "resourcequota,limitrange", "-n", "tenant-a")


BINDING = json.dumps({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                      "metadata": {"name": "mine"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io",
                                                                "kind": "Role", "name": "project-admin"},
                      "subjects": [{"kind": "Group", "name": "project:proj-b"}]})  # fmt: skip


@pytest.mark.parametrize("escape", list(ESCAPES))
def test_a_project_admin_cannot_escape(admin_a: Tenant, projects: KubeApiHandle, escape: str) -> None:
    assert not admin_a.can(*ESCAPES[escape], stdin=BINDING if escape == "bind itself a role" else None)
    assert projects.get("namespaces", "", "tenant-a")["metadata"]["labels"][PROJECT_LABEL] == "proj-a"  # type: ignore[index]
    assert projects.get("resourcequotas", "tenant-a", "project-object-quota") is not None
    assert projects.get("limitranges", "tenant-a", "project-limits") is not None


def test_an_org_member_without_the_admin_role_cannot_administer_another_project(
    projects: KubeApiHandle, iam: Iam
) -> None:
    """Issue 31 item 1: `org:<org>` is every member's group; it binds nothing in a project namespace."""
    member = tenant(projects, iam, "member", project="proj-a")
    sa = tenant(projects, iam, "robot", project="proj-a", service_account="deployer")
    for who in (member, sa):
        assert not who.can("create", "-n", "tenant-b", "-f", "-", stdin=CM)
        assert not who.can("get", "secrets", "-n", "tenant-b")
    admin = tenant(projects, iam, "org-admin", project="proj-a", roles=("org_admin",), projects=("proj-b",))
    assert admin.can("create", "-n", "tenant-b", "-f", "-", stdin=CM)  # the org's admin does administer it
    assert not admin.can(*ESCAPES["relabel its namespace into another project"])
    assert not admin.can(*ESCAPES["delete its quota"])


def test_the_official_client_sees_the_same_403s(admin_a: Tenant) -> None:
    client = kubernetes.config.new_client_from_config(config_file=str(admin_a.kubeconfig))
    core = kubernetes.client.CoreV1Api(client)
    attempts: dict[str, Callable[[], object]] = {
        "relabel": lambda: core.patch_namespace("tenant-a",
                                                {"metadata": {"labels": {PROJECT_LABEL: "proj-b"}}}),
        "quota": lambda: core.delete_namespaced_resource_quota("project-compute-quota", "tenant-a"),
        "limits": lambda: core.replace_namespaced_limit_range(
            "project-limits", "tenant-a", core.read_namespaced_limit_range("project-limits", "tenant-a")),
        "lb ip": lambda: core.patch_namespaced_service_status(
            "web", "tenant-a", {"status": {"loadBalancer": {"ingress": [{"ip": "203.0.113.9"}]}}}),
        "other project": lambda: core.list_namespaced_secret("tenant-b"),
    }  # fmt: skip
    try:
        for what, attempt in attempts.items():
            with pytest.raises(kubernetes.client.ApiException) as e:
                attempt()
            assert e.value.status == 403, what
            assert json.loads(e.value.body)["reason"] == "Forbidden", what
        assert core.list_namespaced_pod("tenant-a").items == []
    finally:
        client.close()


def test_the_projects_page_prints_the_rbac_table() -> None:
    from controllers.projects.roles import markdown

    page = (Path(__file__).parents[4] / "docs" / "components" / "projects.md").read_text()
    assert markdown() in page, "the page's RBAC table differs: python -m controllers.projects.roles"


GUARDS = Path(__file__).parents[4] / "daemonsets" / "rbac" / "tenant-guards.yaml"
PROJECTS_MANIFEST = Path(__file__).parents[4] / "daemonsets" / "controllers" / "projects.yaml"
RBAC_HOLE = """\
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: too-much, namespace: tenant-a}
rules:
- {apiGroups: [""], resources: [namespaces, resourcequotas, limitranges], verbs: ["*"]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: too-much, namespace: tenant-a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: too-much}
subjects: [{kind: Group, name: "project:proj-a"}]
"""


@pytest.fixture
def guarded(projects: KubeApiHandle) -> KubeApiHandle:
    kubectl(projects, "apply", "-f", str(GUARDS))
    return projects


def test_the_admission_policies_hold_where_rbac_would_not(guarded: KubeApiHandle, iam: Iam) -> None:
    """Defence in depth: a project admin granted (by mistake) every verb on its Namespace, quotas and
    LimitRange is still refused the project label and the quotas by the ValidatingAdmissionPolicies."""
    kubectl(guarded, "apply", "-f", "-", stdin=RBAC_HOLE)
    admin = tenant(guarded, iam, "admin-a", project="proj-a")
    out = admin.kubectl(*ESCAPES["relabel its namespace into another project"])
    assert "ValidatingAdmissionPolicy 'plasmacloud-project-label'" in out.stderr, out.stderr
    assert admin.can("label", "ns", "tenant-a", "team=web")  # other labels are the tenant's
    out = admin.kubectl(*ESCAPES["delete its quota"])
    assert "ValidatingAdmissionPolicy 'plasmacloud-project-quota'" in out.stderr, out.stderr
    out = admin.kubectl(*ESCAPES["delete its LimitRange"])
    assert "ValidatingAdmissionPolicy 'plasmacloud-project-quota'" in out.stderr, out.stderr
    assert guarded.get("resourcequotas", "tenant-a", "project-object-quota") is not None
    kubectl(guarded, "label", "ns", "tenant-a", f"{PROJECT_LABEL}=proj-a", "--overwrite")  # the admin may


def test_project_controller_writes_rbac_only_in_project_namespaces(guarded: KubeApiHandle) -> None:
    """Issue 31 item 6: its ClusterRole lets it create Roles (with escalate/bind on org-admin) in any
    namespace; the scope policy confines it to namespaces labelled plasmacloud.io/project-id."""
    kubectl(guarded, "apply", "-f", str(PROJECTS_MANIFEST))
    sa = guarded.kubeconfig_for("system:serviceaccount:kube-system:project-controller")
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "org-admin"}, "rules": []}  # fmt: skip

    def create(ns: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([kubectl_bin(), "--kubeconfig", str(sa), "create", "-n", ns, "-f", "-"],
                              input=json.dumps(role), capture_output=True, text=True, timeout=60)  # fmt: skip

    for ns in ("kube-system", "default"):
        out = create(ns)
        assert "ValidatingAdmissionPolicy 'plasmacloud-project-controller-scope'" in out.stderr, out.stderr
    kubectl(guarded, "delete", "role", "org-admin", "-n", "tenant-a")
    assert create("tenant-a").returncode == 0
