"""Store: keys, namespaces, secondary indexes kept right through updates and removals."""

from __future__ import annotations

import pytest

from controllers.machinery import Store, by_label, by_namespace, object_key, split_key
from controllers.machinery.kinds import ENDPOINT_SLICES, NAMESPACES, SERVICES


def obj(name: str, namespace: str | None = "default", **labels: str) -> dict[str, object]:
    meta: dict[str, object] = {"name": name, "labels": labels}
    if namespace:
        meta["namespace"] = namespace
    return {"metadata": meta}


def test_keys_are_namespace_slash_name() -> None:
    assert object_key(obj("a", "ns1")) == "ns1/a"
    assert object_key(obj("node1", None)) == "node1"
    assert split_key("ns1/a") == ("ns1", "a")
    assert split_key("node1") == (None, "node1")
    with pytest.raises(ValueError):
        object_key({"metadata": {}})


def test_get_list_and_namespace_filter() -> None:
    s = Store()
    s.upsert(obj("a", "ns1"))
    s.upsert(obj("b", "ns2"))
    s.upsert(obj("n", None))
    assert s.get("ns1", "a") == obj("a", "ns1")
    assert s.get(None, "n") == obj("n", None)
    assert s.get("ns2", "a") is None
    assert [o["metadata"]["name"] for o in s.list("ns2")] == ["b"]
    assert len(s) == 3


def test_index_follows_label_changes_and_removal() -> None:
    s = Store()
    s.add_index("service", by_label("kubernetes.io/service-name"))
    s.upsert(obj("web-abc", **{"kubernetes.io/service-name": "web"}))
    s.upsert(obj("web-def", **{"kubernetes.io/service-name": "web"}))
    s.upsert(obj("db-x", **{"kubernetes.io/service-name": "db"}))
    assert s.index_keys("service", "web") == ["default/web-abc", "default/web-def"]
    old = s.upsert(obj("web-def", **{"kubernetes.io/service-name": "db"}))  # relabelled
    assert old is not None
    assert s.index_keys("service", "web") == ["default/web-abc"]
    assert s.index_keys("service", "db") == ["default/db-x", "default/web-def"]
    assert s.remove("default/db-x") is not None
    assert s.remove("default/db-x") is None
    assert [o["metadata"]["name"] for o in s.by_index("service", "db")] == ["web-def"]
    assert s.by_index("service", "nothing") == []


def test_index_added_late_covers_existing_objects_and_namespace_listing_uses_it() -> None:
    s = Store()
    s.upsert(obj("a", "ns1"))
    s.upsert(obj("b", "ns1"))
    s.add_index("namespace", by_namespace)
    assert s.index_keys("namespace", "ns1") == ["ns1/a", "ns1/b"]
    s.remove("ns1/a")
    assert [o["metadata"]["name"] for o in s.list("ns1")] == ["b"]
    with pytest.raises(ValueError):
        s.add_index("namespace", by_namespace)


def test_kind_paths() -> None:
    assert SERVICES.collection_path() == "/api/v1/services"
    assert SERVICES.collection_path("ns1") == "/api/v1/namespaces/ns1/services"
    assert SERVICES.object_path("ns1", "web", "status") == "/api/v1/namespaces/ns1/services/web/status"
    assert (
        ENDPOINT_SLICES.object_path("ns1", "s") == "/apis/discovery.k8s.io/v1/namespaces/ns1/endpointslices/s"
    )
    assert NAMESPACES.object_path(None, "ns1") == "/api/v1/namespaces/ns1"
    assert ENDPOINT_SLICES.api_version == "discovery.k8s.io/v1"
    with pytest.raises(ValueError):
        SERVICES.object_path(None, "web")
