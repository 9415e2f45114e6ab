"""The one RBAC table of a project namespace: which group gets which Role, the Role's rules, and
what each role may and may not do. project-controller writes exactly this (template.py) and
docs/components/projects.md prints it (`python -m controllers.projects.roles` renders the Markdown; a
test compares).

Where it departs from the spec's RBAC examples (spec "RBAC Templates"), following the spec's intent:
- org-admin is bound to `org:<org>:admin`, which only org admins get, not to `org:<org>`, which every
  member of the org has (that made every member admin of every project: issue 31 item 1);
- no role has `*` anywhere: every resource is named, so none covers the Namespace itself (a
  namespaced Role covering `namespaces` lets its holder update its own Namespace: relabelling
  `plasmacloud.io/project-id` joins another project's network isolation), ResourceQuotas and the
  LimitRange are read-only (the platform sets them), and status subresources (`services/status`: a
  LoadBalancer IP) are not granted;
- endpoints/endpointslices are read-only (kube's own `edit` role dropped writing them, CVE-2021-25740);
- the viewer does not read Secrets (kube's `view` role does not either: a Secret can hold a service
  account's token) and reads the workloads, their logs, events, quotas and policies;
- `storage.k8s.io` is left out: its kinds are cluster-scoped, a namespaced Role grants nothing there.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

from webhook.mapping import MappingSettings

READ = ("get", "list", "watch")
WRITE = (*READ, "create", "update", "patch", "delete", "deletecollection")


@dataclass(frozen=True, slots=True)
class Rule:
    group: str
    resources: tuple[str, ...]
    verbs: tuple[str, ...]

    def policy_rule(self) -> dict[str, Any]:
        return {"apiGroups": [self.group], "resources": list(self.resources), "verbs": list(self.verbs)}


@dataclass(frozen=True, slots=True)
class RoleSpec:
    name: str
    subject: str
    """The group bound, as the webhook names it (webhook/mapping.py, with its default prefixes)."""
    rules: tuple[Rule, ...]
    may: str
    may_not: str


_WORKLOADS = (
    Rule("", ("pods", "services", "configmaps", "secrets", "persistentvolumeclaims", "serviceaccounts",
              "replicationcontrollers", "podtemplates"), WRITE),
    Rule("", ("pods/log", "pods/exec", "pods/attach", "pods/portforward", "pods/eviction",
              "serviceaccounts/token", "replicationcontrollers/scale"), ("get", "create")),
    Rule("", ("endpoints", "events", "resourcequotas", "limitranges", "namespaces"), READ),
    Rule("apps", ("deployments", "replicasets", "statefulsets", "daemonsets", "controllerrevisions"), WRITE),
    Rule("apps", ("deployments/scale", "replicasets/scale", "statefulsets/scale"), ("get", "update",
                                                                                   "patch")),
    Rule("batch", ("jobs", "cronjobs"), WRITE),
    Rule("autoscaling", ("horizontalpodautoscalers",), WRITE),
    Rule("policy", ("poddisruptionbudgets",), WRITE),
    Rule("networking.k8s.io", ("ingresses", "networkpolicies"), WRITE),
    Rule("coordination.k8s.io", ("leases",), WRITE),
    Rule("snapshot.storage.k8s.io", ("volumesnapshots",), WRITE),
    Rule("discovery.k8s.io", ("endpointslices",), READ),
    Rule("events.k8s.io", ("events",), READ),
)  # fmt: skip
_VIEW = (
    Rule("", ("pods", "pods/log", "services", "endpoints", "configmaps", "persistentvolumeclaims", "events",
              "resourcequotas", "limitranges", "namespaces"), READ),
    Rule("apps", ("deployments", "replicasets", "statefulsets", "daemonsets"), READ),
    Rule("batch", ("jobs", "cronjobs"), READ),
    Rule("networking.k8s.io", ("ingresses", "networkpolicies"), READ),
)  # fmt: skip
_NOT_ADMIN = (
    "update its Namespace (labels: the project it belongs to), write ResourceQuotas, LimitRanges, "
    "endpoints or any status subresource (services/status: an LB IP), write Roles or RoleBindings, "
    "anything outside the project's namespaces"
)

TABLE: tuple[RoleSpec, ...] = (
    RoleSpec(
        "project-viewer",
        "project:<project>:viewer",
        _VIEW,
        "read the project's workloads, Services, ConfigMaps, PVCs, logs, events, quotas and policies",
        "write anything; read Secrets (or exec into pods)",
    ),
    RoleSpec(
        "project-admin",
        "project:<project>",
        _WORKLOADS,
        "run the project's workloads: Pods, Deployments, Jobs, Services, Secrets, PVCs, snapshots, "
        "NetworkPolicies, Leases; exec and port-forward",
        _NOT_ADMIN,
    ),
    RoleSpec(
        "org-admin",
        "org:<org>:admin",
        (*_WORKLOADS, Rule("rbac.authorization.k8s.io", ("roles", "rolebindings"), READ)),
        "what project-admin may, in every project of its org; read the project's RBAC",
        _NOT_ADMIN.replace(
            "anything outside the project's namespaces", "anything outside its org's projects"
        ),
    ),
)


def subject(role: RoleSpec, org: str, project: str, m: MappingSettings | None = None) -> str:
    """The group `role` is bound to in project `project` of org `org`, with the webhook's prefixes."""
    m = m or MappingSettings()
    groups = {
        "project:<project>:viewer": m.project_group_prefix + project + m.viewer_suffix,
        "project:<project>": m.project_group_prefix + project,
        "org:<org>:admin": m.org_group_prefix + org + m.org_admin_suffix,
    }
    return groups[role.subject]


def _verbs(verbs: tuple[str, ...]) -> str:
    return {WRITE: "all verbs", READ: "read"}.get(verbs, "/".join(verbs))


def markdown() -> str:
    """The table as docs/components/projects.md prints it (`all verbs`: get/list/watch/create/update/
    patch/delete/deletecollection, never `*`; `read`: get/list/watch)."""
    lines = ["| Role (group bound) | Rules (API group: resources: verbs) | May | May not |",
             "|---|---|---|---|"]  # fmt: skip
    shown: dict[tuple[Rule, ...], str] = {}
    for role in TABLE:
        rules, text = role.rules, []
        for prefix, name in shown.items():
            if rules[: len(prefix)] == prefix:
                rules, text = rules[len(prefix) :], [f"{name}'s rules"]
        text += [f"`{r.group or 'core'}` {', '.join(r.resources)}: {_verbs(r.verbs)}" for r in rules]
        shown[role.rules] = role.name
        lines.append(
            f"| {role.name} (`{role.subject}`) | {'<br>'.join(text)} | {role.may} | {role.may_not} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(markdown())
