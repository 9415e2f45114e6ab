"""Merge patch (RFC 7386), JSON patch (RFC 6902) and the strategic merge patch as kubectl sends it."""

from __future__ import annotations

from typing import Any

import pytest

from nodeenv.kubeapi.errors import BadRequest, Invalid, UnsupportedMediaType
from nodeenv.kubeapi.patches import JSON, MERGE, STRATEGIC, apply_patch, merge_patch, strategic_merge_patch

SVC: dict[str, Any] = {
    "metadata": {"name": "s", "labels": {"a": "1", "b": "2"}, "finalizers": ["x"]},
    "spec": {
        "ports": [{"name": "http", "port": 80, "targetPort": 8080}, {"name": "m", "port": 9100}],
        "selector": {"app": "web"},
    },
}


def test_merge_patch_merges_maps_replaces_lists_and_null_deletes() -> None:
    out = merge_patch(SVC, {"metadata": {"labels": {"a": None, "c": "3"}}, "spec": {"ports": [{"port": 1}]}})
    assert out["metadata"]["labels"] == {"b": "2", "c": "3"}
    assert out["spec"]["ports"] == [{"port": 1}]
    assert SVC["metadata"]["labels"] == {"a": "1", "b": "2"}  # the input is not modified


def test_strategic_merges_ports_by_port_and_deletes_by_directive() -> None:
    patch = {"spec": {"ports": [{"port": 80, "targetPort": 9090}, {"port": 9100, "$patch": "delete"},
                                {"name": "new", "port": 443}]}}  # fmt: skip
    out = strategic_merge_patch(SVC, patch, "Service")
    assert out["spec"]["ports"] == [
        {"name": "http", "port": 80, "targetPort": 9090},
        {"name": "new", "port": 443},
    ]


def test_strategic_set_element_order_and_primitive_lists() -> None:
    patch = {
        "metadata": {"finalizers": ["y"], "$deleteFromPrimitiveList/finalizers": ["x"]},
        "spec": {
            "$setElementOrder/ports": [{"port": 9100}, {"port": 80}],
            "ports": [{"port": 80, "name": "h"}],
        },
    }
    out = strategic_merge_patch(SVC, patch, "Service")
    assert out["metadata"]["finalizers"] == ["y"]
    assert [p["port"] for p in out["spec"]["ports"]] == [9100, 80]
    assert out["spec"]["ports"][1]["name"] == "h"


def test_strategic_replace_and_retain_keys() -> None:
    out = strategic_merge_patch(SVC, {"spec": {"selector": {"$patch": "replace", "x": "y"}}}, "Service")
    assert out["spec"]["selector"] == {"x": "y"}
    out = strategic_merge_patch(SVC, {"spec": {"$retainKeys": ["ports"], "ports": []}}, "Service")
    assert set(out["spec"]) == {"ports"}
    replaced = strategic_merge_patch(
        SVC, {"spec": {"ports": [{"$patch": "replace"}, {"port": 1}]}}, "Service"
    )
    assert replaced["spec"]["ports"] == [{"port": 1}]


def test_strategic_lists_without_merge_key_are_atomic() -> None:
    cur = {"metadata": {"name": "e"}, "endpoints": [{"addresses": ["10.0.0.1"]}, {"addresses": ["10.0.0.2"]}]}
    out = strategic_merge_patch(cur, {"endpoints": [{"addresses": ["10.0.0.3"]}]}, "EndpointSlice")
    assert out["endpoints"] == [{"addresses": ["10.0.0.3"]}]


def test_pod_containers_merge_by_name_and_nested_env_by_name() -> None:
    pod = {"spec": {"containers": [{"name": "a", "image": "i1", "env": [{"name": "X", "value": "1"}]}]}}
    patch = {"spec": {"containers": [{"name": "a", "env": [{"name": "Y", "value": "2"}]}]}}
    out = strategic_merge_patch(pod, patch, "Pod")
    assert out["spec"]["containers"] == [
        {"name": "a", "image": "i1", "env": [{"name": "X", "value": "1"}, {"name": "Y", "value": "2"}]}
    ]


def test_conditions_merge_by_type() -> None:
    node = {
        "status": {
            "conditions": [{"type": "Ready", "status": "False"}, {"type": "DiskPressure", "status": "False"}]
        }
    }
    out = strategic_merge_patch(
        node, {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}, "Node"
    )
    assert out["status"]["conditions"] == [
        {"type": "Ready", "status": "True"},
        {"type": "DiskPressure", "status": "False"},
    ]


def test_json_patch_and_errors() -> None:
    out = apply_patch(JSON, SVC, [{"op": "replace", "path": "/spec/selector/app", "value": "db"}], "Service")
    assert out["spec"]["selector"] == {"app": "db"}
    with pytest.raises(Invalid):
        apply_patch(JSON, SVC, [{"op": "remove", "path": "/nope"}], "Service")
    with pytest.raises(BadRequest):
        apply_patch(JSON, SVC, {"op": "remove"}, "Service")
    with pytest.raises(UnsupportedMediaType):
        apply_patch("application/xml", SVC, {}, "Service")
    assert apply_patch(MERGE, SVC, {"spec": None}, "Service").get("spec") is None
    assert (
        apply_patch(STRATEGIC, SVC, {"spec": {"selector": None}}, "Service")["spec"].get("selector") is None
    )
