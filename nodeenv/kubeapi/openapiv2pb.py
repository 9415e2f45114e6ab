"""/openapi/v2 in the protobuf form kubectl asks for (`Accept: application/com.github.proto-openapi.
spec.v2@v1.0+protobuf`): gnostic's openapi_v2.Document (github.com/google/gnostic-models, OpenAPIv2.proto),
declared here with only the fields written.

kubectl reads it when a kind is missing from /openapi/v3: its field-validation check looks for the
kind's PATCH operation (vendor extension `x-kubernetes-group-version-kind`, query parameter
`fieldValidation`); a kind found nowhere that is not a CRD is then left to the REST mapping, which
reports `no matches for kind ... ensure CRDs are installed first`, as against kube-apiserver.
Simplified: the document carries the paths' PATCH operations and no definitions, so kubectl's
client-side schema validation finds no model and leaves validation to the server (which it asks for
with fieldValidation=Strict anyway).
"""

from __future__ import annotations

import json
from typing import Any

from google.protobuf import json_format

from nodeenv.kubeapi.kinds import Kind, Registry
from nodeenv.kubeapi.protobuf import _F, message_class, message_pool

CONTENT_TYPES = (
    "application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
    "application/com.github.proto-openapi.spec.v2.v1.0+protobuf",
)
RETURNED = CONTENT_TYPES[1]  # the "@" form does not parse as a media type in Go: servers answer this one
_STR, _MSG = _F.TYPE_STRING, _F.TYPE_MESSAGE
_PKG = "k8shost.kubeapi.openapiv2"
_MESSAGES = {  # message -> [(field, number, type, message type, repeated)], numbers from OpenAPIv2.proto
    "Document": [("swagger", 1, _STR, "", False), ("info", 2, _MSG, "Info", False),
                 ("paths", 8, _MSG, "Paths", False)],
    "Info": [("title", 1, _STR, "", False), ("version", 2, _STR, "", False)],
    "Paths": [("path", 2, _MSG, "NamedPathItem", True)],
    "NamedPathItem": [("name", 1, _STR, "", False), ("value", 2, _MSG, "PathItem", False)],
    "PathItem": [("patch", 8, _MSG, "Operation", False)],
    "Operation": [("operation_id", 5, _STR, "", False), ("parameters", 8, _MSG, "ParametersItem", True),
                  ("vendor_extension", 13, _MSG, "NamedAny", True)],
    "ParametersItem": [("parameter", 1, _MSG, "Parameter", False)],
    "Parameter": [("non_body_parameter", 2, _MSG, "NonBodyParameter", False)],
    "NonBodyParameter": [("query_parameter_sub_schema", 3, _MSG, "QueryParameterSubSchema", False)],
    "QueryParameterSubSchema": [("in", 2, _STR, "", False), ("name", 4, _STR, "", False),
                                ("type", 6, _STR, "", False)],
    "NamedAny": [("name", 1, _STR, "", False), ("value", 2, _MSG, "Any", False)],
    "Any": [("yaml", 2, _STR, "", False)],
}  # fmt: skip
_POOL = message_pool("k8shost_kubeapi_openapiv2.proto", _PKG, _MESSAGES)
_QUERY = ("dryRun", "fieldManager", "fieldValidation", "force")


def wants_protobuf(accept: str) -> bool:
    return any(t in accept for t in CONTENT_TYPES)


def _patch_path(kind: Kind) -> str:
    gv = f"/apis/{kind.group}/{kind.version}" if kind.group else f"/api/{kind.version}"
    ns = "/namespaces/{namespace}" if kind.namespaced else ""
    return f"{gv}{ns}/{kind.plural}/{{name}}"


def _path_item(kind: Kind) -> dict[str, Any]:
    gvk = f"group: {json.dumps(kind.group)}\nkind: {kind.kind}\nversion: {kind.version}\n"
    params = [{"parameter": {"non_body_parameter": {"query_parameter_sub_schema":
               {"in": "query", "name": q, "type": "string"}}}} for q in _QUERY]  # fmt: skip
    patch = {
        "operation_id": f"patch{kind.kind}",
        "parameters": params,
        "vendor_extension": [{"name": "x-kubernetes-group-version-kind", "value": {"yaml": gvk}}],
    }
    return {"name": _patch_path(kind), "value": {"patch": patch}}


def document(registry: Registry) -> bytes:
    doc = {
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": "v1.32.0"},
        "paths": {"path": [_path_item(k) for k in registry.kinds if "patch" in k.verbs]},
    }
    message = json_format.ParseDict(doc, message_class(_POOL, _PKG, "Document")())
    return bytes(message.SerializeToString())
