"""Opt-in RBAC authorization from the Roles, ClusterRoles and bindings in the store.

Follows k8s.io/kubernetes/plugin/pkg/auth/authorizer/rbac: members of `system:masters` may do
anything; otherwise a request is allowed when a ClusterRoleBinding, or a RoleBinding in the request's
namespace, binds the user (User name, Group, or ServiceAccount) to a role with a rule matching
verb, apiGroup, resource (`<plural>/<sub>` for subresources) and, when the rule names them,
resourceNames. `*` matches everything in each list. Denials are 403 Forbidden with the apiserver's
message. Simplified: aggregated ClusterRoles (aggregationRule) are not expanded; non-resource URLs
(discovery, /version, /openapi) are open to every authenticated user, as the default
`system:discovery` and `system:public-info-viewer` bindings make them; every authenticated user may
create SelfSubjectReviews and SelfSubjectAccessReviews (the default `system:basic-user` binding).
A request for a Namespace object itself (`/api/v1/namespaces/<name>[/status]`) is authorized in
that namespace, as kube-apiserver's RequestInfoFactory sets its namespace to the name: a RoleBinding
in namespace N to a Role covering `namespaces` lets its holder get, update or delete N itself.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from nodeenv.kubeapi.auth import RequestRecord, User
from nodeenv.kubeapi.errors import Forbidden
from nodeenv.kubeapi.kinds import Kind, Registry
from nodeenv.kubeapi.routing import RequestInfo
from nodeenv.kubeapi.store import Store

Obj = dict[str, Any]
_RBAC = "rbac.authorization.k8s.io"
_BASIC_USER = {
    ("authentication.k8s.io", "selfsubjectreviews"),
    ("authorization.k8s.io", "selfsubjectaccessreviews"),
}


def _binds(binding: Obj, user: User) -> bool:
    for s in binding.get("subjects") or []:
        kind, name = s.get("kind"), s.get("name")
        if kind == "User" and name == user.name:
            return True
        if kind == "Group" and name in user.groups:
            return True
        if kind == "ServiceAccount" and user.name == f"system:serviceaccount:{s.get('namespace')}:{name}":
            return True
    return False


def rule_allows(rule: Obj, info: RequestInfo) -> bool:
    def has(key: str, value: str) -> bool:
        values = rule.get(key) or []
        return "*" in values or value in values

    resource = f"{info.resource}/{info.subresource}" if info.subresource else info.resource
    if not (has("verbs", info.verb) and has("apiGroups", info.group) and has("resources", resource)):
        return False
    names = rule.get("resourceNames") or []
    return not names or (bool(info.name) and info.name in names)


def authz_namespace(info: RequestInfo) -> str:
    """The namespace a request is authorized in: a Namespace object's own name for requests on it."""
    if not info.namespace and info.group == "" and info.resource == "namespaces":
        return info.name
    return info.namespace


class Authorizer:
    def __init__(self, store: Store, registry: Registry) -> None:
        self.store = store
        self._kinds: dict[str, Kind] = {}
        for plural in ("roles", "rolebindings", "clusterroles", "clusterrolebindings"):
            kind = registry.lookup(_RBAC, "v1", plural)
            assert kind is not None
            self._kinds[plural] = kind

    def _rules(self, user: User, namespace: str) -> Iterator[Obj]:
        for b in self.store.items(self._kinds["clusterrolebindings"]):
            if _binds(b, user):
                yield from self._role_rules(b.get("roleRef") or {}, "")
        if namespace:
            for b in self.store.items(self._kinds["rolebindings"], namespace):
                if _binds(b, user):
                    yield from self._role_rules(b.get("roleRef") or {}, namespace)

    def _role_rules(self, ref: Obj, namespace: str) -> list[Obj]:
        if ref.get("kind") == "ClusterRole":
            role = self.store.get(self._kinds["clusterroles"], "", ref.get("name", ""))
        elif ref.get("kind") == "Role" and namespace:
            role = self.store.get(self._kinds["roles"], namespace, ref.get("name", ""))
        else:
            role = None
        return list((role or {}).get("rules") or [])

    def allowed(self, user: User, info: RequestInfo) -> bool:
        if "system:masters" in user.groups:
            return True
        if (info.group, info.resource) in _BASIC_USER and info.verb == "create":
            return True  # the default system:basic-user ClusterRole
        return any(rule_allows(r, info) for r in self._rules(user, authz_namespace(info)))

    def check(self, user: User, info: RequestInfo) -> None:
        if self.allowed(user, info):
            return
        resource = f"{info.resource}/{info.subresource}" if info.subresource else info.resource
        what = f"{info.resource}.{info.group}" if info.group else info.resource
        subject = f'{what} "{info.name}"' if info.name else what
        ns = authz_namespace(info)
        where = f'in the namespace "{ns}"' if ns else "at the cluster scope"
        details: dict[str, Any] = {"name": info.name} if info.name else {}
        if info.group:
            details["group"] = info.group
        details["kind"] = info.resource
        raise Forbidden(
            f'{subject} is forbidden: User "{user.name}" cannot {info.verb} resource "{resource}" '
            f'in API group "{info.group}" {where}',
            details,
        )


def not_covered(rules: Iterable[Obj], records: Iterable[RequestRecord]) -> list[RequestRecord]:
    """The recorded resource requests that none of `rules` (RBAC PolicyRules) allows: a manifest's
    Role/ClusterRole rules checked against what a controller actually did."""
    rules = list(rules)
    out = []
    for r in records:
        info = RequestInfo(verb=r.verb, group=r.group, version=r.version, resource=r.resource,
                           subresource=r.subresource, namespace=r.namespace, name=r.name)  # fmt: skip
        if not any(rule_allows(rule, info) for rule in rules):
            out.append(r)
    return out
