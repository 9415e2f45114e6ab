"""Tenant escapes refused (issue 31): members of org `org-esc`'s project A, each with an IAM token
minted with the dev key (`iam-webhook mint`), try kubectl `--token` against the API double, which
authenticates them through the IAM webhook and authorizes them by the RBAC project-controller wrote:
each escape must be refused (403 Forbidden; a forged token 401), and nothing may have changed. Then
the admission policies of daemonsets/rbac/tenant-guards.yaml, as a cluster admin applies them, refuse
the relabel and the quota deletion even to a member RBAC was (by mistake) made to allow.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from nodeenv.scenario import Scenario
from nodeenv.scenarios.tenancy import _eventually

GUARDS = Path(__file__).resolve().parents[2] / "daemonsets" / "rbac" / "tenant-guards.yaml"
ORG, PROJECTS = "org-esc", {"escape-a": "proj-ea", "escape-b": "proj-eb"}
LABEL = "plasmacloud.io/project-id"
ESCAPES = {
    "relabels its namespace into project B": ["label", "ns", "escape-a", f"{LABEL}=proj-eb", "--overwrite"],
    "deletes its ResourceQuota": ["delete", "resourcequota", "project-object-quota", "-n", "escape-a"],
    "raises its ResourceQuota": ["patch", "resourcequota", "project-object-quota", "-n", "escape-a",
                                 "--type=merge", "-p", '{"spec":{"hard":{"pods":"5000"}}}'],
    "deletes its LimitRange": ["delete", "limitrange", "project-limits", "-n", "escape-a"],
    "sets its LoadBalancer IP (services/status)": [
        "patch", "svc", "web", "-n", "escape-a", "--subresource=status", "--type=merge",
        "-p", '{"status":{"loadBalancer":{"ingress":[{"ip":"203.0.113.9"}]}}}'],
    "reads project B's Secrets": ["get", "secrets", "-n", "escape-b"],
    "writes in kube-system": ["create", "configmap", "x", "-n", "kube-system"],
}  # fmt: skip


def run(scn: Scenario) -> None:
    admin = ["kubectl", f"--kubeconfig={scn.env['KUBECONFIG']}", "--request-timeout=10s"]
    with scn.step("escapes: two projects of one org, their RBAC from project-controller"):
        for ns, project in PROJECTS.items():
            labels = {"plasmacloud.io/org-id": ORG, LABEL: project}
            nsobj = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": labels}}
            _kubectl(admin, "apply", "-f", "-", stdin=json.dumps(nsobj))
            scn.defer(_deleter(admin, ns))
            _kubectl(admin, "apply", "-f", "-", stdin=json.dumps(
                {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": ns},
                 "spec": {"ports": [{"port": 80}]}}))  # fmt: skip
        _eventually(
            lambda: all(len(_names(admin, "rolebindings", ns)) == 3 for ns in PROJECTS), "bindings", 20
        )
    member = _as(admin, _mint(scn, "user-esc-admin", project="proj-ea"))
    viewer = _as(admin, _mint(scn, "user-esc-viewer", project="proj-ea", roles="project_viewer"))
    with scn.step("escapes: a project viewer reads, and is refused every write (403)"):
        _allowed(viewer, "get", "svc", "-n", "escape-a")
        _refused(viewer, "create", "configmap", "x", "-n", "escape-a")
        _refused(viewer, "get", "secrets", "-n", "escape-a")
    for what, argv in ESCAPES.items():
        with scn.step(f"escapes: a project admin {what}: 403"):
            _refused(member, *argv)
    with scn.step("escapes: the namespace, quota and LimitRange are unchanged"):
        labels = json.loads(_kubectl(admin, "get", "ns", "escape-a", "-o", "json"))["metadata"]["labels"]
        if labels[LABEL] != "proj-ea":
            raise RuntimeError(f"escape-a relabelled: {labels}")
        _kubectl(
            admin, "get", "resourcequota/project-object-quota", "limitrange/project-limits", "-n", "escape-a"
        )
    with scn.step("escapes: an org member without org_admin cannot administer project B (403)"):
        _refused(member, "create", "configmap", "x", "-n", "escape-b")
        org_admin = _as(
            admin, _mint(scn, "user-esc-org", project="proj-ea", roles="org_admin", projects="proj-eb")
        )
        _allowed(org_admin, "create", "configmap", "by-org-admin", "-n", "escape-b")
    with scn.step("escapes: admission policies refuse a member RBAC wrongly allows (relabel, quota delete)"):
        _guarded(scn, admin, member)
    with scn.step("escapes: a token signed with another key is 401"):
        out = subprocess.run([*admin, "--token", _forged(scn), "get", "pods", "-n", "escape-a"],
                             capture_output=True, text=True, timeout=60)  # fmt: skip
        if out.returncode == 0 or "must be logged in" not in out.stderr:
            raise RuntimeError(f"a forged token was not refused 401: {out.stderr.strip()}")


def _guarded(scn: Scenario, admin: list[str], member: list[str]) -> None:
    _kubectl(admin, "apply", "-f", str(GUARDS))
    scn.defer(lambda: _kubectl(admin, "delete", "-f", str(GUARDS), "--ignore-not-found", check=False))
    rbac = "rbac.authorization.k8s.io"
    role = {
        "apiVersion": f"{rbac}/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "admin-of-all"},
        "rules": [{"apiGroups": [""], "resources": ["namespaces", "resourcequotas"], "verbs": ["*"]}],
    }
    hole = {"apiVersion": f"{rbac}/v1", "kind": "RoleBinding",
            "metadata": {"name": "mistake", "namespace": "escape-a"},
            "roleRef": {"apiGroup": rbac, "kind": "ClusterRole", "name": "admin-of-all"},
            "subjects": [{"kind": "Group", "name": "project:proj-ea"}]}  # fmt: skip
    both = {"apiVersion": "v1", "kind": "List", "items": [role, hole]}
    _kubectl(admin, "apply", "-f", "-", stdin=json.dumps(both))
    scn.defer(lambda: _kubectl(admin, "delete", "clusterrole", "admin-of-all", check=False))
    for what in ("relabels its namespace into project B", "deletes its ResourceQuota"):
        out = subprocess.run([*member, *ESCAPES[what]], capture_output=True, text=True, timeout=60)
        if out.returncode == 0 or "ValidatingAdmissionPolicy" not in out.stderr:
            raise RuntimeError(f"{what}: not refused by the admission policies: {out.stderr.strip()}")


def _deleter(admin: list[str], ns: str) -> Callable[[], object]:
    return lambda: _kubectl(admin, "delete", "namespace", ns, "--wait=false", check=False)


def _as(admin: list[str], token: str) -> list[str]:
    """The admin kubeconfig's server and CA, the tenant's token (kubectl's --token replaces the admin's)."""
    return [*admin, "--token", token]


def _kubectl(kubectl: list[str], *args: str, stdin: str | None = None, check: bool = True) -> str:
    out = subprocess.run([*kubectl, *args], input=stdin, capture_output=True, text=True, timeout=60)
    if check and out.returncode:
        raise RuntimeError(f"kubectl {' '.join(args)}: {out.stderr.strip()}")
    return out.stdout


def _allowed(kubectl: list[str], *args: str) -> None:
    _kubectl(kubectl, *args)


def _refused(kubectl: list[str], *args: str) -> None:
    out = subprocess.run([*kubectl, *args], capture_output=True, text=True, timeout=60)
    if out.returncode == 0:
        raise RuntimeError(f"kubectl {' '.join(args)} was allowed")
    if "forbidden" not in out.stderr:
        raise RuntimeError(f"kubectl {' '.join(args)} failed, but not 403: {out.stderr.strip()}")


def _names(kubectl: list[str], resource: str, ns: str) -> list[str]:
    return _kubectl(kubectl, "get", resource, "-n", ns, "-o", "name").split()


def _mint(scn: Scenario, sub: str, **claims: str) -> str:
    argv = [sys.executable, "-m", "webhook.main", "mint", "--sub", sub, "--org", ORG]
    for name, value in claims.items():
        argv += [f"--{name}", value]
    proc = subprocess.run(argv, capture_output=True, text=True, env=scn.node.process_env(), timeout=30)
    if proc.returncode:
        raise RuntimeError(f"iam-webhook mint: {proc.stderr.strip()}")
    return proc.stdout.strip()


def _forged(scn: Scenario) -> str:
    """A token of the same claims signed with a fresh key the webhook never saw."""
    key = scn.node.path("escapes", "forger.pem")
    if not key.exists():
        from webhook.devcerts import new_key, private_pem

        key.parent.mkdir(parents=True, exist_ok=True)
        key.write_bytes(private_pem(new_key("ES256")))
        key.chmod(0o600)
    env = {**scn.node.process_env(), "IAM_DEV_SIGNING_KEY": str(key)}
    argv = [sys.executable, "-m", "webhook.main", "mint", "--sub", "user-esc-admin", "--org", ORG,
            "--project", "proj-ea"]  # fmt: skip
    return subprocess.run(
        argv, capture_output=True, text=True, env=env, timeout=30, check=True
    ).stdout.strip()
