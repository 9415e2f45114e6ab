"""`fieldValidation=Strict` (what kubectl sends by default) for the top level and metadata of every
kind: an unknown field is 400 `<Kind> in version "<v>" cannot be handled as a <Kind>: strict decoding
error: unknown field "<path>"`, as the apiserver's strict decoder answers; `Warn` (the default when a
client sends none) accepts the object and answers `Warning: 299 - "unknown field \\"<path>\\""` headers;
`Ignore` accepts it silently.
Custom resources are checked at every depth against their CRD's schema (crschema.py).
Simplified: built-in kinds' fields below spec/status/data are not checked (no schemas, see openapi.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nodeenv.kubeapi import strategies
from nodeenv.kubeapi.errors import BadRequest
from nodeenv.kubeapi.kinds import Kind

META = frozenset({
    "name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "generation",
    "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "labels", "annotations",
    "ownerReferences", "finalizers", "managedFields",
})  # fmt: skip
_SPEC_STATUS = ("spec", "status")
_CORE_EVENT = (
    "involvedObject",
    "reason",
    "message",
    "source",
    "firstTimestamp",
    "lastTimestamp",
    "count",
    "type",
    "eventTime",
    "series",
    "action",
    "related",
    "reportingComponent",
    "reportingInstance",
)
_EVENT_V1 = ("eventTime", "series", "reportingController", "reportingInstance", "action", "reason",
             "regarding", "related", "note", "type", "deprecatedSource", "deprecatedFirstTimestamp",
             "deprecatedLastTimestamp", "deprecatedCount")  # fmt: skip
TOP: dict[tuple[str, str], tuple[str, ...]] = {
    ("", "Namespace"): _SPEC_STATUS, ("", "Pod"): _SPEC_STATUS, ("", "Service"): _SPEC_STATUS,
    ("", "Node"): _SPEC_STATUS, ("", "ResourceQuota"): _SPEC_STATUS, ("", "LimitRange"): ("spec",),
    ("", "Endpoints"): ("subsets",), ("", "Event"): _CORE_EVENT,
    ("", "PersistentVolumeClaim"): _SPEC_STATUS, ("", "PersistentVolume"): _SPEC_STATUS,
    ("", "ConfigMap"): ("data", "binaryData", "immutable"),
    ("", "Secret"): ("data", "stringData", "type", "immutable"),
    ("", "ServiceAccount"): ("secrets", "imagePullSecrets", "automountServiceAccountToken"),
    ("discovery.k8s.io", "EndpointSlice"): ("addressType", "endpoints", "ports"),
    ("networking.k8s.io", "NetworkPolicy"): ("spec",),
    ("events.k8s.io", "Event"): _EVENT_V1,
    ("coordination.k8s.io", "Lease"): ("spec",),
    ("rbac.authorization.k8s.io", "Role"): ("rules",),
    ("rbac.authorization.k8s.io", "ClusterRole"): ("rules", "aggregationRule"),
    ("rbac.authorization.k8s.io", "RoleBinding"): ("subjects", "roleRef"),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"): ("subjects", "roleRef"),
    **{("apps", k): _SPEC_STATUS for k in ("DaemonSet", "Deployment", "StatefulSet", "ReplicaSet")},
    ("apps", "ControllerRevision"): ("data", "revision"),
    ("", "ReplicationController"): _SPEC_STATUS, ("apiregistration.k8s.io", "APIService"): _SPEC_STATUS,
    ("batch", "Job"): _SPEC_STATUS, ("batch", "CronJob"): _SPEC_STATUS,
    ("storage.k8s.io", "StorageClass"): ("provisioner", "parameters", "reclaimPolicy", "mountOptions",
                                         "allowVolumeExpansion", "volumeBindingMode", "allowedTopologies"),
    ("storage.k8s.io", "CSIDriver"): ("spec",), ("storage.k8s.io", "CSINode"): ("spec",),
    ("storage.k8s.io", "VolumeAttachment"): _SPEC_STATUS,
    ("storage.k8s.io", "VolumeAttributesClass"): ("driverName", "parameters"),
    ("apiextensions.k8s.io", "CustomResourceDefinition"): _SPEC_STATUS,
}  # fmt: skip


def unknown_fields(kind: Kind, obj: Mapping[str, Any]) -> list[str]:
    known = TOP.get((kind.group, kind.kind))
    custom = strategies.unknown_fields(kind, dict(obj))
    if known is None and custom is None:
        return []
    out = (
        custom
        if custom is not None
        else [k for k in obj if k not in ("apiVersion", "kind", "metadata", *(known or ()))]
    )
    meta = obj.get("metadata")
    if isinstance(meta, Mapping):
        out += [f"metadata.{k}" for k in meta if k not in META]
    return out


def check(kind: Kind, obj: Any, query: Mapping[str, str]) -> list[str]:
    """400 for unknown fields under Strict; their warnings under Warn (the default); nothing under Ignore."""
    mode = query.get("fieldValidation") or "Warn"
    if mode == "Ignore" or not isinstance(obj, Mapping):
        return []
    unknown = unknown_fields(kind, obj)
    if unknown and mode == "Strict":
        fields = ", ".join(f'unknown field "{f}"' for f in unknown)
        raise BadRequest(
            f'{kind.kind} in version "{kind.version}" cannot be handled as a {kind.kind}: '
            f"strict decoding error: {fields}"
        )
    return [f'unknown field "{f}"' for f in unknown]


def warning_header(text: str) -> str:
    """RFC 7234 form the apiserver uses: code 299, agent "-", the text quoted."""
    return "299 - " + '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
