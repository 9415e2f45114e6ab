"""Server-side apply's simplified ownership: fields a manager stops applying go away unless another
manager owns them; a different value owned by another manager conflicts unless forced."""

from __future__ import annotations

from typing import Any

import pytest

from nodeenv.kubeapi.apply import field_paths, from_fields_v1, server_side_apply, to_fields_v1
from nodeenv.kubeapi.crud import Resources
from nodeenv.kubeapi.errors import BadRequest, Conflict
from nodeenv.kubeapi.kinds import Registry
from nodeenv.kubeapi.patchmeta import schema_for
from nodeenv.kubeapi.routing import RequestInfo
from nodeenv.kubeapi.store import Store

REG = Registry()
CM = REG.lookup("", "v1", "configmaps")
SVC = REG.lookup("", "v1", "services")
assert CM is not None and SVC is not None
INFO = RequestInfo(verb="patch", group="", version="v1", resource="configmaps", namespace="default", name="c")


@pytest.fixture
def res() -> Resources:
    r = Resources(Store(), REG)
    r.bootstrap()
    return r


def cm(labels: dict[str, str], data: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "c", "labels": labels},
        "data": data,
    }


def apply(res: Resources, body: dict[str, Any], manager: str, force: bool = False) -> dict[str, Any]:
    assert CM is not None
    query = {"fieldManager": manager, **({"force": "true"} if force else {})}
    return server_side_apply(res, CM, INFO, body, query)[0]


def test_fields_v1_round_trip_with_keyed_items() -> None:
    body = {"spec": {"ports": [{"port": 80, "name": "http"}], "selector": {"app": "x"}}}
    paths = set(field_paths(body, schema_for("Service")))
    assert ("f:spec", "f:ports", 'k:{"port":80,"protocol":"TCP"}', "f:name") in paths  # TCP by default
    tree = to_fields_v1(paths)
    assert "." in tree["f:spec"]["f:ports"]['k:{"port":80,"protocol":"TCP"}']
    assert set(from_fields_v1(tree)) - {()} >= paths


def test_dropped_fields_are_removed_unless_another_manager_owns_them(res: Resources) -> None:
    apply(res, cm({"a": "1", "b": "2"}, {"x": "1", "y": "2"}), "alice")
    apply(res, cm({"b": "2"}, {}), "bob")  # same value: shared ownership, no conflict
    out = apply(res, cm({"a": "1"}, {"x": "1"}), "alice")  # alice drops label b and data y
    assert out["metadata"]["labels"] == {"a": "1", "b": "2"}  # b is still bob's
    assert out["data"] == {"x": "1"}
    managers = {e["manager"] for e in out["metadata"]["managedFields"]}
    assert managers == {"alice", "bob"}


def test_conflict_then_force_takes_ownership(res: Resources) -> None:
    apply(res, cm({}, {"x": "1"}), "alice")
    with pytest.raises(Conflict, match='conflict with "alice"'):
        apply(res, cm({}, {"x": "2"}), "bob")
    out = apply(res, cm({}, {"x": "2"}), "bob", force=True)
    assert out["data"] == {"x": "2"}
    out = apply(res, cm({}, {}), "alice")  # alice no longer owns x: it stays
    assert out["data"] == {"x": "2"}


def test_field_manager_required_and_kind_checked(res: Resources) -> None:
    assert CM is not None
    with pytest.raises(BadRequest, match="fieldManager"):
        server_side_apply(res, CM, INFO, cm({}, {}), {})
    with pytest.raises(BadRequest, match="invalid object type"):
        server_side_apply(res, CM, INFO, {**cm({}, {}), "kind": "Secret"}, {"fieldManager": "m"})


def test_service_ports_are_keyed_by_port_and_protocol(res: Resources) -> None:
    assert SVC is not None
    info = RequestInfo(
        verb="patch", group="", version="v1", resource="services", namespace="default", name="dns"
    )
    ports = [{"name": "dns", "port": 53, "protocol": "UDP"}, {"name": "dns-tcp", "port": 53}]
    body = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "dns"}, "spec": {"ports": ports}}
    created = server_side_apply(res, SVC, info, body, {"fieldManager": "m"})[0]
    assert [(p["port"], p["protocol"]) for p in created["spec"]["ports"]] == [(53, "UDP"), (53, "TCP")]
    body["spec"]["ports"] = [{"name": "dns", "port": 53, "protocol": "UDP", "targetPort": 5353}]
    out = server_side_apply(res, SVC, info, body, {"fieldManager": "m"})[0]
    assert [(p["port"], p["protocol"], p["targetPort"]) for p in out["spec"]["ports"]] == [(53, "UDP", 5353)]
    fields = out["metadata"]["managedFields"][0]["fieldsV1"]["f:spec"]["f:ports"]
    assert list(fields) == ['k:{"port":53,"protocol":"UDP"}']
