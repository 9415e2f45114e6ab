"""What a project namespace gets (pure): the spec's Roles, RoleBindings, ResourceQuotas, a LimitRange
and the default NetworkPolicies, from a configurable template.

The Roles and their groups come from the one RBAC table (roles.py); group names are built with the
IAM webhook's own MappingSettings, so a RoleBinding names exactly the group the webhook puts in a
token review (`project:<project>`, `project:<project>:viewer`, `org:<org>:admin`).

The template (quotas, LimitRange, where DNS is) loads from a YAML/JSON file whose keys are the fields
below; anything absent keeps the spec's value.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Self

import yaml  # type: ignore[import-untyped]

from controllers.machinery import (
    LIMIT_RANGES,
    NETWORK_POLICIES,
    RESOURCE_QUOTAS,
    ROLE_BINDINGS,
    ROLES,
    Kind,
)
from controllers.projects.roles import TABLE, subject
from webhook.mapping import MappingSettings

PROJECT_LABEL, ORG_LABEL = "plasmacloud.io/project-id", "plasmacloud.io/org-id"
MANAGED_BY, MANAGER = "app.kubernetes.io/managed-by", "plasmacloud-project-controller"
RBAC = "rbac.authorization.k8s.io"
KINDS: tuple[Kind, ...] = (ROLES, ROLE_BINDINGS, RESOURCE_QUOTAS, LIMIT_RANGES, NETWORK_POLICIES)
_MAPPING = MappingSettings()


def project_group(project_id: str) -> str:
    return _MAPPING.project_group_prefix + project_id


def _compute() -> dict[str, str]:
    return {"requests.cpu": "10", "requests.memory": "20Gi", "limits.cpu": "20", "limits.memory": "40Gi"}


def _storage() -> dict[str, str]:
    return {"persistentvolumeclaims": "10", "requests.storage": "100Gi"}


def _objects() -> dict[str, str]:
    return {
        "pods": "50",
        "services": "20",
        "services.loadbalancers": "5",
        "configmaps": "50",
        "secrets": "50",
    }


def _limits() -> list[dict[str, Any]]:
    return [{"type": "Container", "default": {"cpu": "500m", "memory": "512Mi"},
             "defaultRequest": {"cpu": "100m", "memory": "128Mi"}}]  # fmt: skip


@dataclass(frozen=True, slots=True, kw_only=True)
class ProjectTemplate:
    compute_quota: dict[str, str] = field(default_factory=_compute)
    storage_quota: dict[str, str] = field(default_factory=_storage)
    object_quota: dict[str, str] = field(default_factory=_objects)
    limit_range: list[dict[str, Any]] = field(default_factory=_limits)
    """LimitRange spec.limits."""
    dns_namespace: str = "kube-system"
    dns_port: int = 53
    dns_ip_blocks: list[str] = field(default_factory=lambda: ["10.96.0.10/32"])
    """Where DNS is not a pod of dns_namespace (a host-network server, the node environment's
    10.96.0.10 on the node): these CIDRs are allowed on the DNS port too."""
    isolation_priority: int = 50
    """The AdminNetworkPolicy priority of each project's isolation (admin_policies.py); the DNS
    exception takes the one before it. Cluster admins' own ANPs above 49 come before both."""
    api_ip_blocks: list[str] = field(default_factory=list)
    """kube-apiserver's addresses (after the Service's load balancing): allowed on api_port to every
    project pod by the platform's DNS/API AdminNetworkPolicy; none by default."""
    api_port: int = 6443

    @classmethod
    def load(cls, path: Path | None) -> Self:
        if path is None:
            return cls()
        data = (
            yaml.safe_load(path.read_text())
            if path.suffix in (".yaml", ".yml")
            else json.loads(path.read_text())
        )
        if not isinstance(data, Mapping):
            raise ValueError(f"{path}: the template must be a mapping")
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"{path}: unknown template keys {sorted(unknown)} (known: {sorted(known)})")
        return cls(**{k: v for k, v in data.items()})


@dataclass(frozen=True, slots=True)
class Owned:
    kind: Kind
    body: dict[str, Any]

    @property
    def name(self) -> str:
        return str(self.body["metadata"]["name"])


def _meta(name: str, ns: str, owner: Mapping[str, Any]) -> dict[str, Any]:
    meta = owner["metadata"]
    ref = {"apiVersion": "v1", "kind": "Namespace", "name": meta["name"], "uid": meta.get("uid", ""),
           "controller": True, "blockOwnerDeletion": False}  # fmt: skip
    return {"name": name, "namespace": ns, "labels": {MANAGED_BY: MANAGER}, "ownerReferences": [ref]}


def _role(ns: Mapping[str, Any], name: str, rules: list[dict[str, Any]]) -> Owned:
    body = {
        "apiVersion": f"{RBAC}/v1",
        "kind": "Role",
        "metadata": _meta(name, _name(ns), ns),
        "rules": rules,
    }
    return Owned(ROLES, body)


def _binding(ns: Mapping[str, Any], role: str, group: str) -> Owned:
    meta = _meta(f"{role}-binding", _name(ns), ns)
    body = {"apiVersion": f"{RBAC}/v1", "kind": "RoleBinding", "metadata": meta,
            "subjects": [{"kind": "Group", "name": group, "apiGroup": RBAC}],
            "roleRef": {"kind": "Role", "name": role, "apiGroup": RBAC}}  # fmt: skip
    return Owned(ROLE_BINDINGS, body)


def _name(ns: Mapping[str, Any]) -> str:
    return str(ns["metadata"]["name"])


def desired_objects(ns: Mapping[str, Any], t: ProjectTemplate) -> list[Owned]:
    """Every object the project namespace `ns` should hold (none without the project label)."""
    labels = ns["metadata"].get("labels") or {}
    project, org = labels.get(PROJECT_LABEL), labels.get(ORG_LABEL)
    if not project:
        return []
    name = _name(ns)
    out: list[Owned] = []
    for role in TABLE:
        if "<org>" in role.subject and not org:
            continue
        out += [
            _role(ns, role.name, [r.policy_rule() for r in role.rules]),
            _binding(ns, role.name, subject(role, org or "", project, _MAPPING)),
        ]
    for quota, hard in (
        ("compute", t.compute_quota),
        ("storage", t.storage_quota),
        ("object", t.object_quota),
    ):
        out.append(Owned(RESOURCE_QUOTAS, {"apiVersion": "v1", "kind": "ResourceQuota",
                                           "metadata": _meta(f"project-{quota}-quota", name, ns),
                                           "spec": {"hard": dict(hard)}}))  # fmt: skip
    out.append(Owned(LIMIT_RANGES, {"apiVersion": "v1", "kind": "LimitRange",
                                    "metadata": _meta("project-limits", name, ns),
                                    "spec": {"limits": list(t.limit_range)}}))  # fmt: skip
    out += _policies(ns, project, t)
    return out


def _policies(ns: Mapping[str, Any], project: str, t: ProjectTemplate) -> list[Owned]:
    dns_ns = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": t.dns_namespace}}}
    dns_to = [dns_ns] + [{"ipBlock": {"cidr": cidr}} for cidr in t.dns_ip_blocks]
    same = [{"namespaceSelector": {"matchLabels": {PROJECT_LABEL: project}}}]
    deny = {"podSelector": {}, "policyTypes": ["Ingress", "Egress"],
            "egress": [{"to": dns_to, "ports": [{"protocol": "UDP", "port": t.dns_port},
                                                  {"protocol": "TCP", "port": t.dns_port}]}]}  # fmt: skip
    allow = {"podSelector": {}, "policyTypes": ["Ingress", "Egress"],
             "ingress": [{"from": same}], "egress": [{"to": same}]}  # fmt: skip
    return [
        Owned(NETWORK_POLICIES, {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
                                 "metadata": _meta(name, _name(ns), ns), "spec": spec})
        for name, spec in (("default-deny-all", deny), ("allow-same-project", allow))
    ]  # fmt: skip


DRIFT_FIELDS = {"Role": ("rules",), "RoleBinding": ("subjects", "roleRef"), "ResourceQuota": ("spec",),
                "LimitRange": ("spec",), "NetworkPolicy": ("spec",)}  # fmt: skip


def drifted(want: Mapping[str, Any], have: Mapping[str, Any]) -> bool:
    """True when `have` differs from `want` in what we set (ignoring server-filled fields)."""
    if (have.get("metadata", {}).get("labels") or {}).get(MANAGED_BY) != MANAGER:
        return True
    return any(_subset(want.get(f), have.get(f)) is False for f in DRIFT_FIELDS[str(want["kind"])])


def _subset(want: Any, have: Any) -> bool:
    """`want` is contained in `have` (the server may add defaults, e.g. policyTypes)."""
    if isinstance(want, Mapping):
        return isinstance(have, Mapping) and all(_subset(v, have.get(k)) for k, v in want.items())
    if isinstance(want, list):
        return isinstance(have, list) and len(want) == len(have) and all(map(_subset, want, have))
    return bool(want == have or (isinstance(want, int) and str(want) == str(have)))
