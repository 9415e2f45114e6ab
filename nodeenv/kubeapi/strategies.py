"""Per-kind write strategies, one dispatch for every kind (the registry's `RESTCreateStrategy` /
`RESTUpdateStrategy` in kube-apiserver): defaults on every write body, create-time preparation
(status reset, generated fields) and the kind's validation causes. The rules live in
workloads.py (apps, batch), storagekinds.py (storage.k8s.io), volumekinds.py (PVCs, PVs),
crds.py (apiextensions) and crschema.py (custom resources); Services and the core kinds' create
defaults in services.py and defaults.py; EndpointSlice and metadata validation in validation.py.
"""

from __future__ import annotations

from typing import Any

from nodeenv.kubeapi import crcel, crds, crschema, storagekinds, volumekinds, workloads
from nodeenv.kubeapi.kinds import Kind
from nodeenv.kubeapi.validation import endpoint_slice_causes, metadata_causes

Obj = dict[str, Any]
Cause = tuple[str, str, str]
_WORKLOADS = frozenset({("apps", "DaemonSet"), ("apps", "Deployment"), ("apps", "StatefulSet"),
                        ("apps", "ReplicaSet"), ("batch", "Job"), ("batch", "CronJob")})  # fmt: skip
_STORAGE = frozenset({"StorageClass", "CSIDriver", "CSINode", "VolumeAttachment", "VolumeAttributesClass"})
CRD = ("apiextensions.k8s.io", "CustomResourceDefinition")


def _storage(kind: Kind) -> bool:
    return kind.group == "storage.k8s.io" and kind.kind in _STORAGE


def _volumes(kind: Kind) -> bool:
    return kind.group == "" and kind.kind in volumekinds.KINDS


def normalize(kind: Kind, obj: Obj) -> Obj:
    """The body as the decoder hands it on: defaulted, and for custom resources pruned. Returns the
    object to go on with (custom resources get a new one)."""
    if kind.schema is not None:
        pruned, _ = crschema.prune(kind.schema, crschema.apply_defaults(kind.schema, obj))
        assert isinstance(pruned, dict)
        return pruned
    if (kind.group, kind.kind) in _WORKLOADS:
        workloads.apply_defaults(kind.kind, obj)
    elif _storage(kind):
        storagekinds.apply_defaults(kind.kind, obj)
    elif _volumes(kind):
        volumekinds.apply_defaults(kind.kind, obj)
    elif (kind.group, kind.kind) == CRD:
        crds.apply_defaults(obj)
    return obj


def prepare_create(kind: Kind, obj: Obj) -> None:
    """After uid and creationTimestamp are set, before validation."""
    if (kind.group, kind.kind) in _WORKLOADS:
        workloads.prepare_create(kind.kind, obj)
    elif _storage(kind):
        storagekinds.prepare_create(kind.kind, obj)
    elif _volumes(kind):
        volumekinds.prepare_create(kind.kind, obj)


def causes(kind: Kind, obj: Obj, old: Obj | None) -> list[Cause]:
    out = metadata_causes(obj["metadata"])
    if kind.schema is not None:
        return out + (crschema.causes(kind.schema, obj) or crcel.cel_causes(kind.schema, obj))
    if kind.kind == "EndpointSlice":
        out += endpoint_slice_causes(obj, old)
    elif (kind.group, kind.kind) in _WORKLOADS:
        out += workloads.causes(kind.kind, obj, old)
    elif _storage(kind):
        out += storagekinds.causes(kind.kind, obj, old)
    elif _volumes(kind):
        out += volumekinds.causes(kind.kind, obj, old)
    elif (kind.group, kind.kind) == CRD:
        out += crds.causes(obj, old)
    return out


def unknown_fields(kind: Kind, obj: Obj) -> list[str] | None:
    """A custom resource's fields its schema does not declare; None for built-in kinds (strict.py)."""
    if kind.schema is None:
        return None
    return crschema.prune(kind.schema, obj)[1]
