"""The reconciler: joins pods to their ports, skips invalid policies with an Event."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from controllers.machinery import Store
from controllers.netpol.ovn_apply import ApplyStats, PortInfo
from controllers.netpol.reconcile import NetpolMetrics, NetpolReconciler, pod_changed
from controllers.netpol.translate import Desired, Frozen, deny_group, policy_group


class FakeNorthbound:
    def __init__(self) -> None:
        self.applied: list[tuple[Desired, set[str]]] = []
        self.prev: dict[str, Frozen] = {}

    def ports(self) -> list[PortInfo]:
        return [
            PortInfo("web-c1", "a", "web", ("10.0.0.5",), False),
            PortInfo("mgmt.n1", "", "", ("10.0.9.2",), True),
        ]

    def ports_version(self) -> int:
        return hash(tuple(self.ports()))

    def previous(self) -> dict[str, Frozen]:
        return self.prev

    def apply(self, desired: Desired, keep: Any = (), release: Any = ()) -> ApplyStats:
        self.applied.append((desired, set(keep)))
        return ApplyStats(1, 0, 0)


class FakeEvents:
    def __init__(self) -> None:
        self.recorded: list[tuple[str, str, str]] = []

    async def record(self, obj: Any, type_: str, reason: str, action: str, note: str) -> None:
        self.recorded.append((obj["metadata"]["name"], reason, note))


def pod(name: str, labels: dict[str, str], ip: str = "") -> dict[str, Any]:
    status = {"podIPs": [{"ip": ip}]} if ip else {}
    return {"metadata": {"namespace": "a", "name": name, "labels": labels}, "spec": {}, "status": status}


def policy(name: str, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"namespace": "a", "name": name, "uid": name}, "spec": {"podSelector": {}, **spec}}


def stores(*policies: dict[str, Any]) -> tuple[Store, Store, Store]:
    pols, pods, nss = Store(), Store(), Store()
    for p in policies:
        pols.upsert(p)
    pods.upsert(pod("web", {"app": "web"}))
    pods.upsert(pod("nolsp", {"app": "web"}, "10.0.0.6"))  # no logical port: not a member
    nss.upsert({"metadata": {"name": "a", "labels": {"team": "x"}}})
    return pols, pods, nss


async def test_members_come_from_ports_and_nodes_from_management_ports() -> None:
    nb = FakeNorthbound()
    await NetpolReconciler(nb, *stores(policy("p"))).reconcile("cluster")
    desired, keep = nb.applied[-1]
    assert desired.port_groups[policy_group("a/p")].ports == {"web-c1"}
    assert desired.address_sets["pn_np_nodes"].addresses == {"10.0.9.2"}
    assert keep == set()


async def test_invalid_policy_gets_one_event_and_keeps_its_ovn_state() -> None:
    nb, events = FakeNorthbound(), FakeEvents()
    nb.prev = {"a/bad": Frozen("a/bad", "a", frozenset({"Ingress"}), frozenset({"web-c1"}))}
    bad = policy("bad", ingress=[{"from": [{"ipBlock": {"cidr": "10.0.0.0/33"}}]}])
    r = NetpolReconciler(nb, *stores(bad, policy("ok", ingress=[{"ports": [{"port": "nope"}]}])),
                         events=events)  # type: ignore[arg-type]  # fmt: skip
    await r.reconcile("cluster")
    await r.reconcile("cluster")
    desired, keep = nb.applied[-1]
    assert keep == {"a/bad", "a/ok"}
    assert sorted(e[:2] for e in events.recorded) == [
        ("bad", "InvalidNetworkPolicy"),
        ("ok", "InvalidNetworkPolicy"),
    ]
    assert "not a CIDR" in next(n for name, _, n in events.recorded if name == "bad")
    assert policy_group("a/bad") not in desired.port_groups
    assert desired.port_groups[deny_group("a", "Ingress")].ports == {"web-c1"}  # still isolated


async def test_a_reconcile_woken_by_nb_rows_alone_applies_the_last_desired_state_again() -> None:
    """Nothing of Kubernetes or the logical ports changed (the echo of our own write, or someone
    else's write to our rows): no translation, the very desired state given to the apply again,
    which then compares the changed rows only. Any change of the inputs translates anew."""

    class Ports(FakeNorthbound):
        extra: list[PortInfo] = []

        def ports(self) -> list[PortInfo]:
            return super().ports() + self.extra

    nb = Ports()
    pols, pods, nss = stores(policy("p"))
    r = NetpolReconciler(nb, pols, pods, nss)
    await r.reconcile("cluster")
    await r.reconcile("cluster")
    first, again = nb.applied[0][0], nb.applied[1][0]
    assert again is first
    pols.upsert(policy("q"))
    await r.reconcile("cluster")
    assert nb.applied[-1][0] is not first and policy_group("a/q") in nb.applied[-1][0].port_groups
    nb.extra = [PortInfo("db-c1", "a", "nolsp", ("10.0.0.6",), False)]  # the pod's port appeared
    await r.reconcile("cluster")
    assert nb.applied[-1][0].port_groups[policy_group("a/q")].ports == {"web-c1", "db-c1"}
    pods.remove("a/web")
    await r.reconcile("cluster")
    assert nb.applied[-1][0].port_groups[policy_group("a/q")].ports == {"db-c1"}
    nss.upsert({"metadata": {"name": "a", "labels": {"team": "y"}}})
    await r.reconcile("cluster")
    assert nb.applied[-1][0] is not nb.applied[-2][0]
    await r.reconcile("cluster")
    assert nb.applied[-1][0] is nb.applied[-2][0]


def test_pod_updates_that_do_not_matter_are_ignored() -> None:
    a = pod("web", {"app": "web"}, "10.0.0.5")
    b = {**a, "status": {**a["status"], "phase": "Running"}}
    assert not pod_changed(a, b)
    assert pod_changed(a, pod("web", {"app": "db"}, "10.0.0.5"))
    assert pod_changed(a, pod("web", {"app": "web"}, "10.0.0.7"))


async def test_change_to_acl_latency_covers_the_wait_and_a_failed_attempt() -> None:
    class FlakyNorthbound(FakeNorthbound):
        fail = False

        def apply(self, desired: Desired, keep: Any = (), release: Any = ()) -> ApplyStats:
            if self.fail:
                self.fail = False
                raise RuntimeError("NB away")
            return super().apply(desired, keep)

    reg = CollectorRegistry()
    metrics, nb = NetpolMetrics(reg), FlakyNorthbound()
    r = NetpolReconciler(nb, *stores(policy("p")), metrics=metrics)
    await r.reconcile("cluster")  # nothing changed yet: nothing to time
    assert reg.get_sample_value("netpol_policy_to_acl_seconds_count") == 0
    metrics.changed()
    await asyncio.sleep(0.05)
    metrics.changed()  # a second change before the reconcile: timed from the first
    nb.fail = True
    with pytest.raises(RuntimeError):
        await r.reconcile("cluster")
    assert reg.get_sample_value("netpol_policy_to_acl_seconds_count") == 0  # not committed
    await r.reconcile("cluster")
    assert reg.get_sample_value("netpol_policy_to_acl_seconds_count") == 1
    took = reg.get_sample_value("netpol_policy_to_acl_seconds_sum")
    assert took is not None and took >= 0.05


async def test_namespace_annotation_logs_its_acls_and_its_change_reconciles() -> None:
    from controllers.netpol.acl_logging import ANNOTATION
    from controllers.netpol.reconcile import logging_changed

    nb = FakeNorthbound()
    pols, pods, nss = stores(policy("p", ingress=[{}]))
    plain = {"metadata": {"name": "a", "labels": {"team": "x"}}}
    annotated = {"metadata": {**plain["metadata"], "annotations": {ANNOTATION: '{"deny": "alert"}'}}}
    nss.upsert(annotated)
    await NetpolReconciler(nb, pols, pods, nss).reconcile("cluster")
    desired = nb.applied[-1][0]
    logged = [a.log for pg in desired.port_groups.values() for a in pg.acls if a.log is not None]
    assert [(x.name, x.severity) for x in logged] == [("np-deny/a/Ingress", "alert")]
    assert logging_changed(plain, annotated) and not logging_changed(annotated, annotated)


async def test_a_policy_is_parsed_again_only_at_a_new_resource_version() -> None:
    nb, events = FakeNorthbound(), FakeEvents()
    ok = {**policy("p"), "metadata": {**policy("p")["metadata"], "resourceVersion": "1"}}
    pols, pods, nss = stores(ok)
    r = NetpolReconciler(nb, pols, pods, nss, events=events)  # type: ignore[arg-type]
    await r.reconcile("cluster")
    assert policy_group("a/p") in nb.applied[-1][0].port_groups
    spec = {"podSelector": {}, "ingress": [{"from": [{"ipBlock": {"cidr": "10.0.0.0/33"}}]}]}
    bad = {**ok, "metadata": {**ok["metadata"], "resourceVersion": "2"}, "spec": spec}
    pols.upsert(bad)
    await r.reconcile("cluster")
    assert policy_group("a/p") not in nb.applied[-1][0].port_groups
    assert [e[:2] for e in events.recorded] == [("p", "InvalidNetworkPolicy")]
    pols.upsert(ok | {"metadata": {**ok["metadata"], "resourceVersion": "3"}})
    await r.reconcile("cluster")
    assert policy_group("a/p") in nb.applied[-1][0].port_groups
    assert set(r._parsed) == {"a/p"}
