"""OpenAPI v2 (/openapi/v2) and v3 (/openapi/v3, /openapi/v3/<api|apis/g>/<v>) documents.

Enough for kubectl: every kind has a schema named as the real one (io.k8s.api.<pkg>.<v>.<Kind>)
with `x-kubernetes-group-version-kind`, the strategic-merge metadata of `patchmeta`
(`x-kubernetes-patch-merge-key`, `x-kubernetes-patch-strategy`) on the lists that have it, and
`x-kubernetes-preserve-unknown-fields` elsewhere; the v3 paths list each resource's operations with
the `fieldValidation` and `dryRun` query parameters, so `kubectl --validate=strict` asks the
server to validate. Custom resources are published under their CRD's schema (named as the real
server names them, e.g. io.k8s.storage.snapshot.v1.VolumeSnapshotClass) once the CRD is stored.
Simplified: built-in kinds' field schemas are open (no per-field types), so kubectl's client-side
validation and `kubectl explain` see little.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from nodeenv.kubeapi.kinds import Kind, Registry
from nodeenv.kubeapi.patchmeta import Field, Schema, schema_for

_PKG = {
    "": "core",
    "discovery.k8s.io": "discovery",
    "networking.k8s.io": "networking",
    "events.k8s.io": "events",
    "coordination.k8s.io": "coordination",
    "rbac.authorization.k8s.io": "rbac",
    "storage.k8s.io": "storage",
}
_CRD_SCHEMA = "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition"
INFO = {"title": "Kubernetes", "version": "v1.32.0"}


def schema_name(kind: Kind) -> str:
    if kind.schema is not None:  # a custom resource: the group's labels reversed, as for CRDs
        return ".".join([*reversed(kind.group.split(".")), kind.version, kind.kind])
    if kind.group == "apiextensions.k8s.io":
        return _CRD_SCHEMA
    return f"io.k8s.api.{_PKG.get(kind.group, kind.group.split('.')[0])}.{kind.version}.{kind.kind}"


def _field_schema(f: Field) -> dict[str, Any]:
    if f.key is not None:
        items: dict[str, Any] = {"type": "string"} if f.key == "" else _object(f.children)
        s: dict[str, Any] = {"type": "array", "items": items, "x-kubernetes-patch-strategy": "merge"}
        if f.key:
            s["x-kubernetes-patch-merge-key"] = f.key
            s["x-kubernetes-list-type"] = "map"
            s["x-kubernetes-list-map-keys"] = list(f.ssa_keys)
        else:
            s["x-kubernetes-list-type"] = "set"
        return s
    return _object(f.children)


def _object(children: Schema) -> dict[str, Any]:
    s: dict[str, Any] = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    if children:
        s["properties"] = {name: _field_schema(f) for name, f in children.items()}
    return s


def kind_schema(kind: Kind) -> dict[str, Any]:
    s = dict(kind.schema) if kind.schema is not None else _object(schema_for(kind.kind))
    s["properties"] = {
        "apiVersion": {"type": "string"},
        "kind": {"type": "string"},
        **s.get("properties", {}),
    }
    if kind.schema is not None:
        s["properties"]["metadata"] = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    s["x-kubernetes-group-version-kind"] = [{"group": kind.group, "kind": kind.kind, "version": kind.version}]
    return s


def v2(registry: Registry) -> dict[str, Any]:
    defs = {schema_name(k): kind_schema(k) for k in registry.kinds}
    return {"swagger": "2.0", "info": INFO, "paths": {}, "definitions": defs}


def _gv_path(kind: Kind) -> str:
    return f"apis/{kind.group}/{kind.version}" if kind.group else f"api/{kind.version}"


_PARAMS = [
    {"name": "dryRun", "in": "query", "schema": {"type": "string"}, "uniqueItems": True},
    {"name": "fieldManager", "in": "query", "schema": {"type": "string"}, "uniqueItems": True},
    {"name": "fieldValidation", "in": "query", "schema": {"type": "string"}, "uniqueItems": True},
]


def _paths(kind: Kind) -> dict[str, Any]:
    base = f"/{_gv_path(kind)}/" + ("namespaces/{namespace}/" if kind.namespaced else "")
    ref = {"$ref": f"#/components/schemas/{schema_name(kind)}"}
    ok = {"200": {"description": "OK", "content": {"application/json": {"schema": ref}}}}
    gvk = {"group": kind.group, "version": kind.version, "kind": kind.kind}
    op = {"responses": ok, "x-kubernetes-group-version-kind": gvk}
    return {
        base + kind.plural: {"get": op, "post": {**op, "parameters": _PARAMS}},
        base + kind.plural + "/{name}": {
            "get": op,
            "put": {**op, "parameters": _PARAMS},
            "patch": {
                **op,
                "parameters": [*_PARAMS, {"name": "force", "in": "query", "schema": {"type": "boolean"}}],
            },
            "delete": op,
        },
    }


def v3_group_version(registry: Registry, gv: str) -> dict[str, Any] | None:
    kinds = [k for k in registry.kinds if _gv_path(k) == gv.strip("/")]
    if not kinds:
        return None
    paths: dict[str, Any] = {}
    for k in kinds:
        paths.update(_paths(k))
    return {
        "openapi": "3.0.0",
        "info": INFO,
        "paths": paths,
        "components": {"schemas": {schema_name(k): kind_schema(k) for k in kinds}},
    }


def v3_index(registry: Registry) -> dict[str, Any]:
    out = {}
    for gv in dict.fromkeys(_gv_path(k) for k in registry.kinds):
        doc = v3_group_version(registry, gv)
        digest = hashlib.sha512(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:32].upper()
        out[gv] = {"serverRelativeURL": f"/openapi/v3/{gv}?hash={digest}"}
    return {"paths": out}
