"""The VolumeSnapshot and VolumeSnapshotContent CRDs (snapshot.storage.k8s.io/v1) the snapshot-controller
and the csi-snapshotter sidecar work on, with the v1 API's fields as structural schemas written here
from the API reference (external-snapshotter v8.2's types): what a user writes (a snapshot of a claim
or of an existing content) and what the controller and the sidecar write (the content, both status
blocks). Namespaced VolumeSnapshot (`vs`), cluster-scoped VolumeSnapshotContent (`vsc`, `vscs`), each
with the status subresource."""

from __future__ import annotations

from typing import Any

Schema = dict[str, Any]
_STR: Schema = {"type": "string"}
_ERROR: Schema = {"type": "object", "properties": {"message": _STR, "time": _STR}}
_REF: Schema = {
    "type": "object",
    "properties": {
        k: _STR for k in ("apiVersion", "fieldPath", "kind", "name", "namespace", "resourceVersion", "uid")
    },
}
_OBJECT: Schema = {"apiVersion": _STR, "kind": _STR, "metadata": {"type": "object"}}

VOLUME_SNAPSHOT: Schema = {
    "type": "object",
    "required": ["spec"],
    "properties": {
        **_OBJECT,
        "spec": {
            "type": "object",
            "required": ["source"],
            "properties": {
                "source": {
                    "type": "object",
                    "properties": {"persistentVolumeClaimName": _STR, "volumeSnapshotContentName": _STR},
                },
                "volumeSnapshotClassName": _STR,
            },
        },
        "status": {
            "type": "object",
            "properties": {
                "boundVolumeSnapshotContentName": _STR,
                "creationTime": _STR,
                "error": _ERROR,
                "readyToUse": {"type": "boolean"},
                "restoreSize": {"x-kubernetes-int-or-string": True},
                "volumeGroupSnapshotName": _STR,
            },
        },
    },
}

VOLUME_SNAPSHOT_CONTENT: Schema = {
    "type": "object",
    "required": ["spec"],
    "properties": {
        **_OBJECT,
        "spec": {
            "type": "object",
            "required": ["deletionPolicy", "driver", "source", "volumeSnapshotRef"],
            "properties": {
                "deletionPolicy": {"type": "string", "enum": ["Delete", "Retain"]},
                "driver": _STR,
                "source": {"type": "object", "properties": {"snapshotHandle": _STR, "volumeHandle": _STR}},
                "sourceVolumeMode": _STR,
                "volumeSnapshotClassName": _STR,
                "volumeSnapshotRef": _REF,
            },
        },
        "status": {
            "type": "object",
            "properties": {
                "creationTime": {"type": "integer"},
                "error": _ERROR,
                "readyToUse": {"type": "boolean"},
                "restoreSize": {"type": "integer", "minimum": 0},
                "snapshotHandle": _STR,
                "volumeGroupSnapshotHandle": _STR,
            },
        },
    },
}

_VS_COLUMNS = [
    {"name": "ReadyToUse", "type": "boolean", "jsonPath": ".status.readyToUse"},
    {"name": "SourcePVC", "type": "string", "jsonPath": ".spec.source.persistentVolumeClaimName"},
    {"name": "RestoreSize", "type": "string", "jsonPath": ".status.restoreSize"},
    {"name": "SnapshotClass", "type": "string", "jsonPath": ".spec.volumeSnapshotClassName"},
    {"name": "SnapshotContent", "type": "string", "jsonPath": ".status.boundVolumeSnapshotContentName"},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]
_VSC_COLUMNS = [
    {"name": "ReadyToUse", "type": "boolean", "jsonPath": ".status.readyToUse"},
    {"name": "RestoreSize", "type": "integer", "jsonPath": ".status.restoreSize"},
    {"name": "DeletionPolicy", "type": "string", "jsonPath": ".spec.deletionPolicy"},
    {"name": "Driver", "type": "string", "jsonPath": ".spec.driver"},
    {"name": "VolumeSnapshot", "type": "string", "jsonPath": ".spec.volumeSnapshotRef.name"},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]


def _crd(
    kind: str, plural: str, short: list[str], scope: str, schema: Schema, columns: list[Schema]
) -> Schema:
    group = "snapshot.storage.k8s.io"
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": scope,
            "names": {
                "kind": kind,
                "listKind": f"{kind}List",
                "plural": plural,
                "shortNames": short,
                "singular": kind.lower(),
            },
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": columns,
                    "schema": {"openAPIV3Schema": schema},
                }
            ],
        },
    }


def snapshot_object_crds() -> list[Schema]:
    return [
        _crd("VolumeSnapshot", "volumesnapshots", ["vs"], "Namespaced", VOLUME_SNAPSHOT, _VS_COLUMNS),
        _crd(
            "VolumeSnapshotContent",
            "volumesnapshotcontents",
            ["vsc", "vscs"],
            "Cluster",
            VOLUME_SNAPSHOT_CONTENT,
            _VSC_COLUMNS,
        ),
    ]
