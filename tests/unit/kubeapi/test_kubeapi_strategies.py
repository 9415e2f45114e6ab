"""The per-kind write rules without HTTP: custom resources against a structural schema (defaults,
pruning, validation), workload selectors, CRD validation and the kinds a CRD serves, and the
registry following CRDs."""

from __future__ import annotations

import copy
from typing import Any

from nodeenv.kubeapi import crds, crschema, workloads
from nodeenv.kubeapi.crud import DeleteOptions, Resources
from nodeenv.kubeapi.kinds import Registry
from nodeenv.kubeapi.store import Store

SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["spec"],
    "properties": {
        "metadata": {"type": "object"},
        "spec": {
            "type": "object",
            "required": ["size"],
            "properties": {
                "size": {"type": "integer", "minimum": 1},
                "mode": {"type": "string", "enum": ["a", "b"], "default": "a"},
                "port": {"x-kubernetes-int-or-string": True},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "raw": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                "items": {
                    "type": "array",
                    "items": {"type": "object", "properties": {"n": {"type": "string"}}},
                },
            },
        },
    },
}


def crd(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "group": "example.com", "scope": "Namespaced",
        "names": {"plural": "widgets", "kind": "Widget", "shortNames": ["wd"]},
        "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": SCHEMA},
                      "subresources": {"status": {}}},
                     {"name": "v1alpha1", "served": False, "storage": False,
                      "schema": {"openAPIV3Schema": SCHEMA}}],
    }  # fmt: skip
    return {"metadata": {"name": "widgets.example.com"}, "spec": {**base, **spec}}


def test_defaults_then_prune_reports_unknown_fields_at_every_depth() -> None:
    obj = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w", "labels": {"a": "b"}},
           "spec": {"size": 2, "extra": 1, "labels": {"k": "v"}, "raw": {"anything": [1]},
                    "items": [{"n": "x", "bad": True}]}, "top": 1}  # fmt: skip
    pruned, unknown = crschema.prune(SCHEMA, crschema.apply_defaults(SCHEMA, obj))
    assert unknown == ["spec.extra", "spec.items[0].bad", "top"]
    assert pruned["spec"]["mode"] == "a" and pruned["spec"]["raw"] == {"anything": [1]}
    assert pruned["metadata"] == obj["metadata"]  # ObjectMeta is never pruned by the CRD's schema
    assert crschema.causes(SCHEMA, pruned) == []


def test_schema_causes_name_the_field_as_the_apiserver_does() -> None:
    bad = {"spec": {"size": "two", "mode": "c", "port": 1.5}}
    assert crschema.causes(SCHEMA, bad) == [
        ("FieldValueTypeInvalid", "spec.size",
         'Invalid value: "string": spec.size in body must be of type integer: "string"'),
        ("FieldValueNotSupported", "spec.mode", 'Unsupported value: "c": supported values: "a", "b"'),
        ("FieldValueTypeInvalid", "spec.port",
         'Invalid value: "number": spec.port in body must be of type integer,string: "number"'),
    ]  # fmt: skip
    assert crschema.causes(SCHEMA, {"spec": {"size": 0}})[0][2].endswith(
        "should be greater than or equal to 1"
    )
    assert crschema.causes(SCHEMA, {}) == [("FieldValueRequired", "spec", "Required value")]


def test_selector_matching_and_the_immutable_selector() -> None:
    sel = {
        "matchLabels": {"app": "x"},
        "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a"]}],
    }
    assert workloads.selector_matches(sel, {"app": "x", "tier": "a"})
    assert not workloads.selector_matches(sel, {"app": "x", "tier": "b"})
    ds: dict[str, Any] = {"metadata": {"name": "d"}, "spec": {
        "selector": {"matchLabels": {"app": "x"}},
        "template": {"metadata": {"labels": {"app": "x"}},
                     "spec": {"containers": [{"name": "c", "image": "i"}]}},
    }}  # fmt: skip
    workloads.apply_defaults("DaemonSet", ds)
    assert workloads.causes("DaemonSet", ds, None) == []
    moved = copy.deepcopy(ds)
    moved["spec"]["selector"]["matchLabels"]["tier"] = "a"
    moved["spec"]["template"]["metadata"]["labels"]["tier"] = "a"
    assert [c[1] for c in workloads.causes("DaemonSet", moved, ds)] == ["spec.selector"]


def test_crd_rules_and_the_kinds_it_serves() -> None:
    good = crd()
    crds.apply_defaults(good)
    assert good["spec"]["names"]["singular"] == "widget" and good["spec"]["names"]["listKind"] == "WidgetList"
    assert crds.causes(good, None) == []
    bad = crd(group="nodot", scope="Global")
    fields = [c[1] for c in crds.causes(bad, None)]
    assert fields == ["metadata.name", "spec.group", "spec.scope"]
    kinds = crds.kinds_of(good)
    assert [(k.group, k.version, k.plural, k.namespaced, k.status) for k in kinds] == [
        ("example.com", "v1", "widgets", True, True)
    ]
    assert kinds[0].short_names == ("wd",) and kinds[0].schema == SCHEMA


def test_registry_follows_crds_and_their_objects_go_with_them() -> None:
    registry = Registry()
    resources = Resources(Store(), registry)
    resources.bootstrap()
    crd_kind = registry.lookup("apiextensions.k8s.io", "v1", "customresourcedefinitions")
    assert crd_kind is not None
    stored = resources.create(crd_kind, "", crd())
    assert {c["type"] for c in stored["status"]["conditions"]} == {"NamesAccepted", "Established"}
    widget = registry.lookup("example.com", "v1", "widgets")
    assert widget is not None and registry.lookup("example.com", "v1alpha1", "widgets") is None
    made = resources.create(widget, "default", {"metadata": {"name": "w"}, "spec": {"size": 1}})
    assert made["spec"]["mode"] == "a" and made["metadata"]["generation"] == 1
    resources.delete(crd_kind, "", "widgets.example.com", DeleteOptions())
    assert registry.lookup("example.com", "v1", "widgets") is None
    assert resources.store.get(widget, "default", "w") is None
