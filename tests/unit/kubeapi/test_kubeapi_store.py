"""Store, watch history and the verbs' semantics without HTTP."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from nodeenv.kubeapi.auth import Recorder, RequestRecord
from nodeenv.kubeapi.crud import DeleteOptions, Resources
from nodeenv.kubeapi.errors import (
    AlreadyExists,
    BadRequest,
    Conflict,
    Expired,
    Forbidden,
    Invalid,
    NotFound,
    Timeout,
)
from nodeenv.kubeapi.kinds import Kind, Registry
from nodeenv.kubeapi.paging import decode_token, exact_rv
from nodeenv.kubeapi.selectors import Selector, parse_labels
from nodeenv.kubeapi.store import Store, Watch

REG = Registry()


def kind(plural: str, group: str = "") -> Kind:
    k = REG.lookup(group, "v1", plural)
    assert k is not None
    return k


CM, SVC, NS = kind("configmaps"), kind("services"), kind("namespaces")


@pytest.fixture
def res() -> Resources:
    r = Resources(Store(), REG)
    r.bootstrap()
    return r


def drain(w: Watch) -> list[tuple[str, str]]:
    out = []
    while True:
        try:
            item = w.queue.get_nowait()
        except asyncio.QueueEmpty:
            return out
        if item is not None:
            out.append((item[0], item[1]["metadata"]["name"]))


def cm(name: str, **meta: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, **meta}}


def test_one_resource_version_across_kinds(res: Resources) -> None:
    a = res.create(CM, "default", cm("a"))
    s = res.create(SVC, "default", {"metadata": {"name": "s"}, "spec": {"ports": [{"port": 80}]}})
    assert int(s["metadata"]["resourceVersion"]) == int(a["metadata"]["resourceVersion"]) + 1


def test_watch_replays_history_of_its_kind_and_410_after_compact(res: Resources) -> None:
    store = res.store
    rv = store.rv
    res.create(CM, "default", cm("a"))
    res.create(SVC, "default", {"metadata": {"name": "s"}, "spec": {"ports": [{"port": 80}]}})
    res.update(CM, "default", "a", {"metadata": {"name": "a"}, "data": {"k": "v"}})
    w = store.watch(CM, None, Selector(), rv)
    assert drain(w) == [("ADDED", "a"), ("MODIFIED", "a")]
    store.compact()
    with pytest.raises(Expired, match=f"too old resource version: {rv}"):
        store.watch(CM, None, Selector(), rv)
    store.watch(CM, None, Selector(), store.rv)  # from now is fine


def test_selector_transitions_are_added_and_deleted(res: Resources) -> None:
    res.create(CM, "default", cm("a", labels={"t": "x"}))
    w = res.store.watch(CM, "default", Selector(parse_labels("t=x")), res.store.rv)
    res.update(CM, "default", "a", cm("a", labels={"t": "y"}))
    res.update(CM, "default", "a", cm("a", labels={"t": "x"}))
    assert drain(w) == [("DELETED", "a"), ("ADDED", "a")]


def test_history_limit_moves_the_floor() -> None:
    store = Store(history_limit=2)
    r = Resources(store, REG)
    r.bootstrap()
    with pytest.raises(Expired):
        store.watch(CM, None, Selector(), 0)


def test_history_is_compacted_by_time_as_etcd_behind_kube_apiserver() -> None:
    """Every interval the history is cut at the version seen at the previous compaction: a watch
    may start from anything written within the last interval, never from more than two back."""
    now = [0.0]
    store = Store(compaction_interval=300, clock=lambda: now[0])
    r = Resources(store, REG)
    r.bootstrap()
    first = int(r.create(CM, "default", cm("a"))["metadata"]["resourceVersion"])
    now[0] = 301
    second = int(r.create(CM, "default", cm("b"))["metadata"]["resourceVersion"])  # compacts up to rv 0
    store.watch(CM, None, Selector(), first - 1)  # still there: one interval back
    now[0] = 602
    r.create(CM, "default", cm("c"))  # compacts up to `second`
    with pytest.raises(Expired):
        store.watch(CM, None, Selector(), first)
    store.watch(CM, None, Selector(), second)
    assert len(store._history) == 1, "events older than two intervals are gone"


def test_conflict_notfound_alreadyexists(res: Resources) -> None:
    a = res.create(CM, "default", cm("a"))
    with pytest.raises(AlreadyExists):
        res.create(CM, "default", cm("a"))
    with pytest.raises(NotFound, match='namespaces "nope" not found'):
        res.create(CM, "nope", cm("a"))
    res.update(CM, "default", "a", {"metadata": {"name": "a"}, "data": {"x": "1"}})
    with pytest.raises(Conflict):
        res.update(
            CM,
            "default",
            "a",
            {"metadata": {"name": "a", "resourceVersion": a["metadata"]["resourceVersion"]}},
        )


def test_generate_name_and_invalid_name(res: Resources) -> None:
    made = res.create(CM, "default", {"metadata": {"generateName": "job-"}})
    assert made["metadata"]["name"].startswith("job-") and len(made["metadata"]["name"]) == 9
    with pytest.raises(Invalid):
        res.create(CM, "default", cm("Bad_Name"))


def test_finalizers_hold_deletion_until_emptied(res: Resources) -> None:
    res.create(CM, "default", cm("f", finalizers=["example.com/x"]))
    w = res.store.watch(CM, None, Selector(), res.store.rv)
    obj, removed = res.delete(CM, "default", "f", DeleteOptions())
    assert not removed and obj["metadata"]["deletionTimestamp"]
    with pytest.raises(Invalid, match="no new finalizers"):
        res.update(CM, "default", "f", cm("f", finalizers=["example.com/x", "other"]))
    res.update(CM, "default", "f", cm("f", finalizers=[]))
    assert res.store.get(CM, "default", "f") is None
    assert drain(w) == [("MODIFIED", "f"), ("DELETED", "f")]


def test_namespace_deletion_and_immortal_namespaces(res: Resources) -> None:
    res.create(NS, "", cm("team"))
    res.create(CM, "team", cm("plain"))
    res.create(CM, "team", cm("held", finalizers=["x/y"]))
    ns, removed = res.delete(NS, "", "team", DeleteOptions())
    assert not removed and ns["status"]["phase"] == "Terminating"
    assert res.store.get(CM, "team", "plain") is None
    with pytest.raises(Forbidden, match="being terminated"):
        res.create(CM, "team", cm("late"))
    res.update(CM, "team", "held", cm("held", finalizers=[]))
    assert res.store.get(NS, "", "team") is None
    with pytest.raises(Forbidden):
        res.delete(NS, "", "kube-system", DeleteOptions())


def test_service_cluster_ip_and_node_port_allocation(res: Resources) -> None:
    def svc(name: str, **spec: Any) -> dict[str, Any]:
        return {"metadata": {"name": name}, "spec": {"ports": [{"port": 80}], **spec}}

    a = res.create(SVC, "default", svc("a", clusterIP="10.96.0.10"))
    assert a["spec"]["clusterIPs"] == ["10.96.0.10"]
    with pytest.raises(Invalid, match="provided IP is already allocated"):
        res.create(SVC, "default", svc("b", clusterIP="10.96.0.10"))
    with pytest.raises(Invalid, match="not in the valid range"):
        res.create(SVC, "default", svc("b", clusterIP="10.0.0.1"))
    headless = res.create(SVC, "default", svc("h", clusterIP="None"))
    assert headless["spec"]["clusterIP"] == "None"
    lb = res.create(SVC, "default", svc("lb", type="LoadBalancer"))
    assert 30000 <= lb["spec"]["ports"][0]["nodePort"] <= 32767
    nolb = res.create(SVC, "default", svc("n", type="LoadBalancer", allocateLoadBalancerNodePorts=False))
    assert "nodePort" not in nolb["spec"]["ports"][0]
    dynamic = res.create(SVC, "default", svc("d"))
    assert int(dynamic["spec"]["clusterIP"].split(".")[2]) >= 1  # dynamic band above the static one
    res.delete(SVC, "default", "a", DeleteOptions())
    assert res.create(SVC, "default", svc("b", clusterIP="10.96.0.10"))  # freed on delete
    with pytest.raises(Invalid, match=r"spec.ports: Required value"):
        res.create(SVC, "default", {"metadata": {"name": "z"}, "spec": {}})


def test_pagination_tokens_and_expiry(res: Resources) -> None:
    for i in range(5):
        res.create(CM, "default", cm(f"c{i}"))
    page = res.list_page(CM, "default", Selector(), limit=2)
    assert [o["metadata"]["name"] for o in page.items] == ["c0", "c1"] and page.remaining == 3
    assert page.continue_token is not None
    assert decode_token(page.continue_token)[1] == "default/c1\x00"
    nxt = res.list_page(CM, "default", Selector(), limit=10, token=page.continue_token)
    assert [o["metadata"]["name"] for o in nxt.items] == ["c2", "c3", "c4"] and nxt.continue_token is None
    res.create(CM, "default", cm("late"))
    res.store.compact()
    with pytest.raises(Expired):
        res.list_page(CM, "default", Selector(), limit=2, token=page.continue_token)


def test_create_drops_status_of_pods_and_services_and_defaults_them(res: Resources) -> None:
    pod = res.create(kind("pods"), "default", {
        "metadata": {"name": "p"}, "status": {"phase": "Running", "podIP": "10.0.0.9"},
        "spec": {"containers": [{"name": "c", "image": "busybox", "ports": [{"containerPort": 80}]}]},
    })  # fmt: skip
    assert pod["status"] == {"phase": "Pending"}
    c = pod["spec"]["containers"][0]
    assert c["imagePullPolicy"] == "Always" and c["ports"][0]["protocol"] == "TCP"
    assert pod["spec"]["restartPolicy"] == "Always"
    sent = {"loadBalancer": {"ingress": [{"ip": "192.0.2.1"}]}}
    body = {"metadata": {"name": "s"}, "spec": {"ports": [{"port": 80}]}, "status": sent}
    svc = res.create(SVC, "default", body)
    assert svc["status"] == {"loadBalancer": {}}
    secret = res.create(kind("secrets"), "default", {"metadata": {"name": "x"}})
    assert secret["type"] == "Opaque"


def test_later_pages_come_from_the_first_pages_state(res: Resources) -> None:
    for i in range(4):
        res.create(CM, "default", cm(f"c{i}"))
    first = res.list_page(CM, "default", Selector(), limit=2)
    res.delete(CM, "default", "c3", DeleteOptions())
    res.create(CM, "default", cm("c2a"))
    rest = res.list_page(CM, "default", Selector(), limit=10, token=first.continue_token)
    assert [o["metadata"]["name"] for o in rest.items] == ["c2", "c3"]  # as of the first page
    assert rest.resource_version == first.resource_version


def test_type_change_back_to_cluster_ip_releases_node_ports(res: Resources) -> None:
    body = {
        "metadata": {"name": "np"},
        "spec": {"type": "NodePort", "ports": [{"port": 80, "nodePort": 30080}]},
    }
    svc = res.create(SVC, "default", body)
    res.update(SVC, "default", "np", {**svc, "spec": {**svc["spec"], "type": "ClusterIP"}})
    assert "nodePort" not in res.get(SVC, "default", "np")["spec"]["ports"][0]
    again = {
        "metadata": {"name": "np2"},
        "spec": {"type": "NodePort", "ports": [{"port": 80, "nodePort": 30080}]},
    }
    assert res.create(SVC, "default", again)["spec"]["ports"][0]["nodePort"] == 30080  # released
    with pytest.raises(Invalid, match="may not be used when `type` is 'ClusterIP'"):
        res.create(
            SVC, "default", {"metadata": {"name": "x"}, "spec": {"ports": [{"port": 80, "nodePort": 30081}]}}
        )


def test_list_at_an_exact_resource_version(res: Resources) -> None:
    res.create(CM, "default", cm("a", labels={"v": "1"}))
    rv = res.store.rv
    res.update(CM, "default", "a", cm("a", labels={"v": "2"}))
    res.create(CM, "default", cm("b"))
    res.delete(CM, "default", "a", DeleteOptions())
    then = res.list_page(CM, "default", Selector(), at=rv)
    assert [(o["metadata"]["name"], o["metadata"]["labels"]) for o in then.items] == [("a", {"v": "1"})]
    assert then.resource_version == str(rv)
    assert exact_rv(res.store, str(rv), "Exact") == rv
    assert exact_rv(res.store, str(rv), "NotOlderThan") is None
    with pytest.raises(Timeout, match="Too large resource version"):
        exact_rv(res.store, str(res.store.rv + 5), None)
    with pytest.raises(BadRequest):
        exact_rv(res.store, "0", "Exact")
    res.store.compact()
    with pytest.raises(Expired):
        res.list_page(CM, "default", Selector(), at=rv)


def test_metadata_and_endpoint_slice_validation(res: Resources) -> None:
    with pytest.raises(Invalid, match=r'metadata.labels: Invalid value: "bad value!"'):
        res.create(CM, "default", cm("a", labels={"ok": "bad value!"}))
    with pytest.raises(Invalid, match=r"metadata\.annotations"):
        res.create(CM, "default", cm("a", annotations={"-bad": "x"}))
    res.create(CM, "default", cm("a", labels={"example.com/tier": "web"}, annotations={"a.b/c": "any thing"}))
    with pytest.raises(Invalid, match=r"metadata\.labels"):
        res.update(CM, "default", "a", cm("a", labels={"x/y/z": "1"}))
    eps = kind("endpointslices", "discovery.k8s.io")
    with pytest.raises(Invalid, match="addressType: Required value"):
        res.create(eps, "default", {"metadata": {"name": "s"}, "endpoints": []})
    ok = {"metadata": {"name": "s"}, "addressType": "IPv4", "endpoints": [{"addresses": ["10.0.0.1"]}]}
    res.create(eps, "default", ok)
    with pytest.raises(Invalid, match="field is immutable"):
        res.update(eps, "default", "s", {**ok, "addressType": "IPv6"})
    with pytest.raises(Invalid, match=r"endpoints\[0\].addresses"):
        res.update(eps, "default", "s", {**ok, "endpoints": [{"addresses": []}]})


def test_the_request_record_keeps_only_the_newest() -> None:
    """The daemon records every request too and nothing reads it there: bounded, it cannot grow."""
    rec = Recorder(limit=3)
    for i in range(5):
        rec.add(RequestRecord(user="u", verb="get", group="", version="v1", resource="pods", subresource="",
                              namespace="ns", name=f"p{i}", status=200, path="/"))  # fmt: skip
    assert [r.name for r in rec.requests] == ["p2", "p3", "p4"]
