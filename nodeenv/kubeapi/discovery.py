"""Legacy (unaggregated) discovery and /version, as kubectl and client-go read them.

/api -> APIVersions, /apis -> APIGroupList, /api/v1 and /apis/<g>/<v> -> APIResourceList with
each resource's verbs, shortNames, categories, singularName and its `<plural>/status` and
`<plural>/scale` (autoscaling/v1 Scale: Deployments, StatefulSets, ReplicaSets) subresources.
Custom resources appear with their CRD. Aggregated discovery (`as=APIGroupDiscoveryList`) is not
served: clients that ask for it accept the plain list that comes back with
`Content-Type: application/json` (kubectl falls back).
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any

from nodeenv.kubeapi.kinds import Kind, Registry

VERSION = {
    "major": "1",
    "minor": "32",
    "gitVersion": "v1.32.0-k8shost-kubeapi",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": "go1.23.0",
    "compiler": "gc",
    "platform": "linux/amd64",
}


def api_versions(server_address: str) -> dict[str, Any]:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    }


def group_list(registry: Registry) -> dict[str, Any]:
    groups = []
    for name, versions in registry.groups().items():
        gvs = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
        groups.append({"name": name, "versions": gvs, "preferredVersion": gvs[0]})
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def _hash(kind: Kind) -> str:
    digest = hashlib.sha256(f"{kind.api_version}/{kind.kind}".encode()).digest()[:8]
    return base64.b64encode(digest).decode()


def _resource(kind: Kind) -> dict[str, Any]:
    r: dict[str, Any] = {
        "name": kind.plural,
        "singularName": kind.singular,
        "namespaced": kind.namespaced,
        "kind": kind.kind,
        "verbs": list(kind.verbs),
    }
    if kind.short_names:
        r["shortNames"] = list(kind.short_names)
    if kind.categories:
        r["categories"] = list(kind.categories)
    r["storageVersionHash"] = _hash(kind)
    return r


def resource_list(registry: Registry, group: str, version: str) -> dict[str, Any] | None:
    kinds = registry.in_group_version(group, version)
    if not kinds:
        return None
    resources = []
    for k in kinds:
        resources.append(_resource(k))
        if k.status:
            resources.append({"name": f"{k.plural}/status", "singularName": "", "namespaced": k.namespaced,
                              "kind": k.kind, "verbs": ["get", "patch", "update"]})  # fmt: skip
        if k.scale:
            resources.append({"name": f"{k.plural}/scale", "singularName": "", "namespaced": k.namespaced,
                              "group": "autoscaling", "version": "v1", "kind": "Scale",
                              "verbs": ["get", "patch", "update"]})  # fmt: skip
    gv = f"{group}/{version}" if group else version
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}
