"""Every rendered object validates against the Kubernetes 1.32 schemas (kubernetes-validate ships them,
offline, strict: unknown fields are errors, as `kubectl apply`'s strict field validation makes them).
Kinds served by CRDs are checked against the CRD's openAPIV3Schema, vendored in crd_schemas/ with its
source named; a kind with neither schema fails."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest

from tests.unit.daemonsets.rendered import ident, objects

K8S_VERSION = "1.32"
CRD_SCHEMAS = Path(__file__).parent / "crd_schemas"


@functools.cache
def crd_schemas() -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for path in sorted(CRD_SCHEMAS.glob("*.json")):
        doc = json.loads(path.read_text())
        assert doc.pop("_source"), f"{path.name} must name where its schemas come from"
        out |= doc
    return out


def _crd_errors(obj: dict[str, Any]) -> list[str]:
    schema = crd_schemas().get(f"{obj['apiVersion']} {obj['kind']}")
    if schema is None:
        return [f"no Kubernetes {K8S_VERSION} or vendored CRD schema for {obj['apiVersion']} {obj['kind']}"]
    strict = {**schema, "additionalProperties": False}
    return [e.message for e in jsonschema.Draft202012Validator(strict).iter_errors(obj)]


def schema_errors(obj: dict[str, Any]) -> list[str]:
    try:
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
    except kubernetes_validate.SchemaNotFoundError:
        return _crd_errors(obj)
    except kubernetes_validate.ValidationError as e:
        return [f"{'.'.join(map(str, e.path))}: {e.message}"]
    return []


def test_kubernetes_validate_knows_the_target_version() -> None:
    assert (
        kubernetes_validate.validate(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}, K8S_VERSION, strict=True
        )
        == K8S_VERSION
    )


@pytest.mark.parametrize("obj", objects(), ids=ident)
def test_rendered_object_matches_its_schema(obj: dict[str, Any]) -> None:
    assert schema_errors(obj) == []


@pytest.mark.parametrize(
    "bad",
    [
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x"}, "spec": {"replicas": "2"}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "x"}, "spec": {"clusterIp": "None"}},
        {"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshotClass", "metadata": {"name": "x"},
         "driver": "stor.plasmacloud.io", "deletionPolicy": "Keep"},
        {"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshotClass", "metadata": {"name": "x"},
         "driver": "stor.plasmacloud.io", "deletionPolicy": "Delete", "parameter": {}},
        {"apiVersion": "example.io/v1", "kind": "Widget", "metadata": {"name": "x"}},
    ],
    ids=["wrong-type", "unknown-field", "crd-enum", "crd-unknown-field", "unknown-kind"],
)  # fmt: skip
def test_the_check_refuses_invalid_objects(bad: dict[str, Any]) -> None:
    assert schema_errors(bad) != []
