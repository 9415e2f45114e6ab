"""What a fresh kube-apiserver with kube-controller-manager holds besides the caller's objects, on
the double's Resources directly: default ServiceAccounts (made again when deleted, not while the
namespace terminates), the APIServices of the served groups, and Events expiring after --event-ttl."""

from __future__ import annotations

from nodeenv.kubeapi.crud import DeleteOptions
from nodeenv.kubeapi.eventttl import EventLeases
from nodeenv.kubeapi.kinds import Kind
from nodeenv.kubeapi.selectors import Selector
from nodeenv.kubeapi.state import ApiConfig, ApiState


def _kind(st: ApiState, group: str, plural: str) -> Kind:
    kind = st.registry.lookup(group, "v1", plural)
    assert kind is not None
    return kind


def test_default_service_accounts() -> None:
    st = ApiState(ApiConfig())
    sa, r = _kind(st, "", "serviceaccounts"), st.resources
    assert {o["metadata"]["namespace"] for o in st.store.list(sa, None, Selector())} == {
        "default", "kube-system", "kube-public", "kube-node-lease"}  # fmt: skip
    r.create(r.namespaces, "", {"metadata": {"name": "team"}})
    first = r.get(sa, "team", "default")
    r.delete(sa, "team", "default", DeleteOptions())
    again = r.get(sa, "team", "default")
    assert again["metadata"]["uid"] != first["metadata"]["uid"]
    r.delete(r.namespaces, "", "team", DeleteOptions())
    assert st.store.get(r.namespaces, "", "team") is None and st.store.count(sa, "team") == 0


def test_apiservices_of_the_served_groups() -> None:
    st = ApiState(ApiConfig())
    names = {o["metadata"]["name"] for o in st.store.list(_kind(st, "apiregistration.k8s.io", "apiservices"),
                                                          None, Selector())}  # fmt: skip
    assert {"v1.", "v1.apps", "v1.batch", "v1.events.k8s.io", "v1beta1.storage.k8s.io"} <= names


def test_events_expire_after_the_ttl() -> None:
    st = ApiState(ApiConfig())
    now = [0.0]
    st.resources.event_leases = EventLeases(3600.0, clock=lambda: now[0])
    ev, r = _kind(st, "", "events"), st.resources
    event = {"metadata": {"name": "e"}, "involvedObject": {"kind": "Pod", "name": "p"}, "reason": "Started"}
    r.create(ev, "default", event)
    now[0] = 3599.0
    r.create(r.namespaces, "", {"metadata": {"name": "a-write"}})
    assert st.store.get(ev, "default", "e") is not None
    now[0] = 3610.0  # swept at most every 10 s
    r.create(r.namespaces, "", {"metadata": {"name": "another-write"}})
    assert st.store.get(ev, "default", "e") is None
