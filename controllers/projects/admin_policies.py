"""The platform's own isolation of projects, as cluster-scoped AdminNetworkPolicies and the
BaselineAdminNetworkPolicy, which tenants cannot edit (their Roles are namespaced; no ClusterRole
grants policy.networking.k8s.io to them):

- `project-<id>` (one per project, priority `isolation_priority`): its namespaces pass their own
  project's traffic on (to NetworkPolicy, then the BANP) and refuse ingress from, and egress to, every
  other project's namespaces;
- `plasmacloud-platform-dns` (priority `isolation_priority - 1`, so before): project namespaces may
  always send DNS to the DNS namespace's pods and `dns_ip_blocks`, and to `api_ip_blocks` on 6443;
- the BaselineAdminNetworkPolicy `default`: what applies to project namespaces when no NetworkPolicy
  selects a pod — ingress from any namespace refused, egress anywhere refused (what the DNS ANP and
  the tenant's own NetworkPolicies do not allow).

The project ANPs carry the verdict-log annotation `plasmacloud.io/acl-logging` (controllers/netpol/
acl_logging.py) the operator chose (`--isolation-acl-logging`, default: Deny at `warning`), so a
refused cross-project packet shows in the node agents' verdict log, counter and the tenant's
PolicyDenied Event; "" or "off" writes none.

The NetworkPolicies project-controller writes into each project namespace (default-deny-all,
allow-same-project) stay as the tenant's editable default inside the project: a tenant who deletes
them falls back to the BANP (closed), never to another project. Pure builders + one sync.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Iterable, Mapping
from typing import Any

from controllers.machinery import ApiException, Kind, KubeClient, Store
from controllers.netpol.acl_logging import ANNOTATION as ACL_LOGGING
from controllers.netpol.adminpolicy import ADMIN_NETWORK_POLICIES, BASELINE_ADMIN_NETWORK_POLICIES
from controllers.projects.template import MANAGED_BY, MANAGER, PROJECT_LABEL, ProjectTemplate

log = logging.getLogger(__name__)
API_VERSION = "policy.networking.k8s.io/v1alpha1"
DNS_POLICY = "plasmacloud-platform-dns"
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,52}[a-z0-9])?$")


def project_policy_name(project: str) -> str:
    if _DNS_LABEL.match(project):
        return f"project-{project}"
    return f"project-{hashlib.sha1(project.encode()).hexdigest()[:16]}"


ISOLATION_LOGGING = '{"deny": "warning"}'
"""The default verdict-log setting of the project ANPs (their Deny rules logged at `warning`)."""


def _meta(name: str, **labels: str) -> dict[str, Any]:
    return {"name": name, "labels": {MANAGED_BY: MANAGER, **labels}}


def _logging(annotations: dict[str, str] | None) -> str | None:
    return (annotations or {}).get(ACL_LOGGING)


def _projects() -> dict[str, Any]:
    return {"matchExpressions": [{"key": PROJECT_LABEL, "operator": "Exists"}]}


def project_policy(project: str, t: ProjectTemplate, acl_logging: str = "") -> dict[str, Any]:
    """Its own project's traffic passed on (to the tenant's NetworkPolicies, then the BANP), every other
    project's denied: the "every project" peer is the same in each project's ANP, so OVN holds one
    address set of all project pods, not one per project. `acl_logging`: the acl-logging annotation's
    value ("" none)."""
    own = {"namespaces": {"matchLabels": {PROJECT_LABEL: project}}}
    every = {"namespaces": _projects()}
    ingress = [
        {"name": "own-project", "action": "Pass", "from": [own]},
        {"name": "other-projects", "action": "Deny", "from": [every]},
    ]
    egress = [
        {"name": "own-project", "action": "Pass", "to": [own]},
        {"name": "other-projects", "action": "Deny", "to": [every]},
    ]
    spec = {
        "priority": t.isolation_priority,
        "subject": {"namespaces": {"matchLabels": {PROJECT_LABEL: project}}},
        "ingress": ingress,
        "egress": egress,
    }
    meta = _meta(project_policy_name(project), **{PROJECT_LABEL: project})
    if acl_logging:
        meta["annotations"] = {ACL_LOGGING: acl_logging}
    return {"apiVersion": API_VERSION, "kind": "AdminNetworkPolicy", "metadata": meta, "spec": spec}


def dns_policy(t: ProjectTemplate) -> dict[str, Any]:
    dns_ports = [{"portNumber": {"protocol": p, "port": t.dns_port}} for p in ("UDP", "TCP")]
    to: list[dict[str, Any]] = [
        {"namespaces": {"matchLabels": {"kubernetes.io/metadata.name": t.dns_namespace}}}
    ]
    if t.dns_ip_blocks:
        to.append({"networks": list(t.dns_ip_blocks)})
    egress = [{"name": "dns", "action": "Allow", "to": to, "ports": dns_ports}]
    if t.api_ip_blocks:
        egress.append(
            {
                "name": "kube-apiserver",
                "action": "Allow",
                "to": [{"networks": list(t.api_ip_blocks)}],
                "ports": [{"portNumber": {"protocol": "TCP", "port": t.api_port}}],
            }
        )
    spec = {"priority": t.isolation_priority - 1, "subject": {"namespaces": _projects()}, "egress": egress}
    return {
        "apiVersion": API_VERSION,
        "kind": "AdminNetworkPolicy",
        "metadata": _meta(DNS_POLICY),
        "spec": spec,
    }


def baseline_policy() -> dict[str, Any]:
    spec = {
        "subject": {"namespaces": _projects()},
        "ingress": [{"name": "closed", "action": "Deny", "from": [{"namespaces": {}}]}],
        "egress": [{"name": "closed", "action": "Deny", "to": [{"networks": ["0.0.0.0/0", "::/0"]}]}],
    }
    return {
        "apiVersion": API_VERSION,
        "kind": "BaselineAdminNetworkPolicy",
        "metadata": _meta("default"),
        "spec": spec,
    }


def desired(
    projects: Iterable[str], t: ProjectTemplate, acl_logging: str = ""
) -> list[tuple[Kind, dict[str, Any]]]:
    """Every admin policy the platform wants for these projects (none without a project)."""
    projects = sorted(set(projects))
    if not projects:
        return []
    out = [(ADMIN_NETWORK_POLICIES, project_policy(p, t, acl_logging)) for p in projects]
    return [
        *out,
        (ADMIN_NETWORK_POLICIES, dns_policy(t)),
        (BASELINE_ADMIN_NETWORK_POLICIES, baseline_policy()),
    ]


def _ours(obj: Mapping[str, Any]) -> bool:
    return (obj.get("metadata", {}).get("labels") or {}).get(MANAGED_BY) == MANAGER


class AdminPolicySync:
    """Makes the cluster's project admin policies equal `desired` (reconcile key: any)."""

    def __init__(
        self,
        client: KubeClient,
        namespaces: Store,
        anps: Store,
        banps: Store,
        t: ProjectTemplate,
        acl_logging: str = ISOLATION_LOGGING,
    ) -> None:
        self.client, self.namespaces, self.t, self.acl_logging = client, namespaces, t, acl_logging
        self.stores = {ADMIN_NETWORK_POLICIES: anps, BASELINE_ADMIN_NETWORK_POLICIES: banps}

    async def reconcile(self, _key: str) -> None:
        projects = [
            str(lab[PROJECT_LABEL])
            for o in self.namespaces.list()
            if not o["metadata"].get("deletionTimestamp")
            and PROJECT_LABEL in (lab := o["metadata"].get("labels") or {})
        ]
        want = desired(projects, self.t, self.acl_logging)
        names = {(k.plural, b["metadata"]["name"]) for k, b in want}
        for kind, body in want:
            await self._ensure(kind, body)
        for kind, store in self.stores.items():
            for obj in store.list():
                if (kind.plural, obj["metadata"]["name"]) not in names and _ours(obj):
                    await self._delete(kind, obj)

    async def _ensure(self, kind: Kind, body: dict[str, Any]) -> None:
        name = body["metadata"]["name"]
        have = self.stores[kind].get(None, name)
        if have is None:
            try:
                await self.client.create(kind, body)
                log.info("created %s %s", kind.kind, name)
                return
            except ApiException as e:
                if e.status != 409:
                    raise
            have = await self.client.get(kind, None, name)
        if not _ours(have):
            log.warning("%s %s exists and is not managed by %s: left alone", kind.kind, name, MANAGER)
            return
        want_log = _logging(body["metadata"].get("annotations"))
        if (
            have.get("spec") != body["spec"]
            or (have["metadata"].get("labels") or {}) != body["metadata"]["labels"]
            or _logging(have["metadata"].get("annotations")) != want_log
        ):
            annotations = {k: v for k, v in (have["metadata"].get("annotations") or {}).items()
                           if k != ACL_LOGGING}  # fmt: skip
            if want_log is not None:
                annotations[ACL_LOGGING] = want_log
            meta = {**have["metadata"], "labels": body["metadata"]["labels"], "annotations": annotations}
            await self.client.replace(kind, {**have, "metadata": meta, "spec": body["spec"]})
            log.info("repaired drift of %s %s", kind.kind, name)

    async def _delete(self, kind: Kind, obj: Mapping[str, Any]) -> None:
        meta = obj["metadata"]
        try:
            await self.client.delete(kind, None, meta["name"], preconditions={"uid": meta["uid"]})
            log.info("deleted %s %s (no namespace of its project left)", kind.kind, meta["name"])
        except ApiException as e:
            if e.status not in (404, 409):
                raise
