"""The external-snapshotter CRDs a cluster admin installs before `kubectl apply -k daemonsets/overlays/k3s`
(docs/install-k3s.md, step 4), built from the schemas vendored in tests/unit/daemonsets/crd_schemas/ with the
names, scope and printer columns of external-snapshotter v8.2's CRD manifests; and the VolumeSnapshot and
VolumeSnapshotContent CRDs (snapshot_objects.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from nodeenv.kubeapi.snapshot_objects import snapshot_object_crds

SCHEMAS = Path(__file__).parents[2] / "tests/unit/daemonsets/crd_schemas/snapshot.storage.k8s.io.json"
_NAMES = {  # "<group>/<version> <Kind>" -> plural, shortNames
    "snapshot.storage.k8s.io/v1 VolumeSnapshotClass": ("volumesnapshotclasses", ["vsclass", "vsclasses"]),
    "groupsnapshot.storage.k8s.io/v1beta1 VolumeGroupSnapshotClass": (
        "volumegroupsnapshotclasses",
        ["vgsclass", "vgsclasses"],
    ),
}
_COLUMNS = [
    {"name": "Driver", "type": "string", "jsonPath": ".driver"},
    {"name": "DeletionPolicy", "type": "string", "jsonPath": ".deletionPolicy"},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]


def snapshot_crds() -> list[dict[str, Any]]:
    schemas = json.loads(SCHEMAS.read_text())
    out = []
    for key, (plural, short) in _NAMES.items():
        group_version, kind = key.split(" ")
        group, version = group_version.split("/")
        out.append({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.{group}"},
            "spec": {
                "group": group,
                "names": {"kind": kind, "listKind": f"{kind}List", "plural": plural, "shortNames": short,
                          "singular": kind.lower()},
                "scope": "Cluster",
                "versions": [{"name": version, "served": True, "storage": True, "subresources": {},
                              "additionalPrinterColumns": _COLUMNS,
                              "schema": {"openAPIV3Schema": schemas[key]}}],
            },
        })  # fmt: skip
    return out + snapshot_object_crds()
