"""apiregistration.k8s.io/v1 APIServices as kube-apiserver's aggregator keeps them: one per group
version the server serves itself (`v1.` for the core group, `v1.apps`, ...), service null (kubectl's
SERVICE column: Local), condition Available=True "Local APIServices are always available". Built-in
ones are made at start (label kube-aggregator.kubernetes.io/automanaged=onstart), a CRD's group
versions when the CRD is stored (automanaged=true), and those go when no kind of theirs is left.
Priorities: kube-apiserver's table for the built-in groups, 1000/100 for CRD groups.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nodeenv.kubeapi.errors import ApiError
from nodeenv.kubeapi.kinds import Kind
from nodeenv.kubeapi.objects import Obj, now_rfc3339

if TYPE_CHECKING:
    from nodeenv.kubeapi.crud import Resources

AUTOMANAGED = "kube-aggregator.kubernetes.io/automanaged"
_PRIORITIES: dict[str, int] = {
    "": 18000, "apiregistration.k8s.io": 18000, "apps": 17800, "events.k8s.io": 17750,
    "authentication.k8s.io": 17700, "authorization.k8s.io": 17600, "autoscaling": 17500, "batch": 17400,
    "certificates.k8s.io": 17300, "networking.k8s.io": 17200, "policy": 17100,
    "rbac.authorization.k8s.io": 17000, "storage.k8s.io": 16800, "apiextensions.k8s.io": 16700,
    "admissionregistration.k8s.io": 16700, "scheduling.k8s.io": 16600, "coordination.k8s.io": 16500,
    "node.k8s.io": 16300, "discovery.k8s.io": 16200, "flowcontrol.apiserver.k8s.io": 16100,
}  # fmt: skip
_VERSION_PRIORITY = {"v1": 15, "v2": 30, "v1beta1": 9}


def name_of(group: str, version: str) -> str:
    return f"{version}.{group}"


def apiservice(group: str, version: str, automanaged: str) -> dict[str, Any]:
    builtin = group in _PRIORITIES
    spec: dict[str, Any] = {"group": group, "version": version} if group else {"version": version}
    spec["groupPriorityMinimum"] = _PRIORITIES.get(group, 1000)
    spec["versionPriority"] = (1 if not group else _VERSION_PRIORITY.get(version, 15)) if builtin else 100
    return {
        "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
        "metadata": {"name": name_of(group, version), "labels": {AUTOMANAGED: automanaged}},
        "spec": spec,
        "status": {"conditions": [{"type": "Available", "status": "True", "lastTransitionTime": now_rfc3339(),
                                   "reason": "Local", "message": "Local APIServices are always available"}]},
    }  # fmt: skip


def _kind(resources: Resources) -> Kind:
    kind = resources.registry.lookup("apiregistration.k8s.io", "v1", "apiservices")
    assert kind is not None
    return kind


def _ensure(resources: Resources, group: str, version: str, automanaged: str) -> None:
    kind = _kind(resources)
    if resources.store.get(kind, "", name_of(group, version)) is None:
        try:
            resources.create(kind, "", apiservice(group, version, automanaged))
        except ApiError:  # an admission policy refusing it: the aggregator retries, we give up
            return


def register_builtin(resources: Resources) -> None:
    """At start: the core group and every built-in group version."""
    served = [("", "v1"), *((g, v) for g, versions in resources.registry.groups().items() for v in versions)]
    for group, version in served:
        _ensure(resources, group, version, "onstart")


def on_stored(resources: Resources, kind: Kind, obj: Obj) -> None:
    if (kind.group, kind.kind) == ("apiextensions.k8s.io", "CustomResourceDefinition"):
        spec = obj.get("spec") or {}
        for v in spec.get("versions") or []:
            if v.get("served"):
                _ensure(resources, spec.get("group", ""), v.get("name", ""), "true")


def on_removed(resources: Resources, kind: Kind, obj: Obj) -> None:
    """A CRD gone: the APIServices of its group versions no kind is served in any more."""
    if (kind.group, kind.kind) != ("apiextensions.k8s.io", "CustomResourceDefinition"):
        return
    group, ak = (obj.get("spec") or {}).get("group", ""), _kind(resources)
    for v in (obj.get("spec") or {}).get("versions") or []:
        version = v.get("name", "")
        svc = resources.store.get(ak, "", name_of(group, version))
        if svc is None or svc["metadata"].get("labels", {}).get(AUTOMANAGED) != "true":
            continue
        if not resources.registry.in_group_version(group, version):
            resources.store.remove(ak, svc)
