"""Reconciler decisions that the API double cannot produce (it refuses a LoadBalancer Service with no
ports, as kube-apiserver does): a fake backend implementing the Backend protocol, recording writers."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry

from controllers.fiberlb.annotations import LbOptions
from controllers.fiberlb.backend import Applied
from controllers.fiberlb.desired import DesiredLB
from controllers.fiberlb.ippool import IpPool
from controllers.fiberlb.metrics import FiberlbMetrics
from controllers.fiberlb.reconcile import SLICES_BY_SERVICE, Reconciler, slice_service_key
from controllers.fiberlb.settings import FiberlbSettings
from controllers.fiberlb.status import ServiceWriter
from controllers.machinery import Store
from controllers.resources import Service

CLASS = "fiberlb.plasmacloud.io/lb"


class FakeBackend:
    name = "fake"
    programs_cluster_ips = True
    shares_ips = True
    allocates_ips = False

    def __init__(self) -> None:
        self.applied: dict[str, DesiredLB] = {}

    def apply(self, desired: DesiredLB) -> Applied:
        self.applied[desired.service] = desired
        return Applied()

    def delete(self, service: str, uid: str) -> None:
        self.applied.pop(service, None)

    def services(self) -> set[str]:
        return set(self.applied)

    def allocations(self) -> dict[str, tuple[str, ...]]:
        return {k: d.external_ips for k, d in self.applied.items() if d.external_ips}

    def close(self) -> None:
        pass


class RecordingWriter(ServiceWriter):
    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    async def add_finalizer(self, svc: Service) -> None:
        self.calls.append(("finalizer", svc.key))

    async def set_status(self, svc: Service, ips: Any, ok: bool, reason: str, message: str) -> None:
        self.calls.append(("status", (tuple(ips), ok, reason)))


def make(objs: list[dict[str, Any]]) -> tuple[Reconciler, FakeBackend, RecordingWriter]:
    services, slices = Store(), Store()
    slices.add_index(SLICES_BY_SERVICE, slice_service_key)
    for o in objs:
        services.upsert(o)
    backend, writer = FakeBackend(), RecordingWriter()
    rec = Reconciler(settings=FiberlbSettings(external_ip_pool="192.168.1.0/30"), backend=backend,
                     services=services, slices=slices, writer=writer, events=None,
                     pool=IpPool.from_text("192.168.1.0/30"))  # fmt: skip
    return rec, backend, writer


def lb(name: str, ports: list[dict[str, Any]], **status: Any) -> dict[str, Any]:
    return {
        "metadata": {"namespace": "ns", "name": name, "uid": name, "resourceVersion": "1"},
        "spec": {
            "type": "LoadBalancer",
            "loadBalancerClass": CLASS,
            "clusterIP": "10.96.0.9",
            "ports": ports,
        },
        "status": status,
    }


async def test_a_service_with_no_ports_gets_a_condition_and_no_backend_object() -> None:
    rec, backend, writer = make([lb("empty", [])])
    assert await rec.reconcile("ns/empty") is None  # not raised: no retry loop
    assert backend.applied == {} and rec.pool.lookup("ns/empty") == ""
    assert writer.calls == [("status", ((), False, "NoPorts"))]


def held(key: str, ip: str) -> DesiredLB:
    ns, name = key.split("/")
    return DesiredLB(service=key, uid=name, namespace=ns, vips=(ip,), external_ips=(ip,), listeners=(),
                     options=LbOptions())  # fmt: skip


async def test_restore_from_the_backend_happens_before_the_first_allocation() -> None:
    port = [{"port": 80, "targetPort": 80}]
    rec, backend, _ = make([lb("new", port), lb("old", port)])
    backend.applied["ns/old"] = held("ns/old", "192.168.1.1")  # the platform's record, not status
    await rec.reconcile("ns/new")  # "new" is reconciled first and must not take old's IP
    assert rec.pool.lookup("ns/new") == "192.168.1.2" and rec.pool.lookup("ns/old") == "192.168.1.1"
    assert backend.applied["ns/new"].vips == ("192.168.1.2", "10.96.0.9")


async def test_a_forged_status_is_never_adopted_and_is_rewritten() -> None:
    port = [{"port": 80, "targetPort": 80}]
    victim = {"loadBalancer": {"ingress": [{"ip": "192.168.1.1"}]}}
    rec, backend, writer = make([lb("victim", port), lb("forger", port, **victim)])
    backend.applied["ns/victim"] = held("ns/victim", "192.168.1.1")
    await rec.reconcile("ns/forger")
    assert rec.pool.lookup("ns/forger") == "192.168.1.2" and rec.pool.holders("192.168.1.1") == ["ns/victim"]
    assert "192.168.1.1" not in backend.applied["ns/forger"].vips
    assert writer.calls[-1] == ("status", (("192.168.1.2",), True, "Ready"))
    outside = {"loadBalancer": {"ingress": [{"ip": "10.0.0.1"}]}}  # the platform's own address
    rec, backend, writer = make([lb("forger", port, **outside)])
    await rec.reconcile("ns/forger")
    assert backend.applied["ns/forger"].vips == ("192.168.1.1", "10.96.0.9")


async def test_sharing_keys_never_match_across_namespaces() -> None:
    share = {"fiberlb.plasmacloud.io/allow-shared-ip": "guessable"}
    a = lb("a", [{"port": 80, "targetPort": 80}])
    b = lb("b", [{"port": 443, "targetPort": 443}])
    c = lb("c", [{"port": 53, "targetPort": 53}])
    for o in (a, b, c):
        o["metadata"]["annotations"] = share
    b["metadata"]["namespace"] = "other"
    rec, _, _ = make([a, b, c])
    for key in ("ns/a", "other/b", "ns/c"):
        await rec.reconcile(key)
    assert rec.pool.lookup("ns/a") == rec.pool.lookup("ns/c") != rec.pool.lookup("other/b")


async def test_no_free_ip_keeps_what_the_platform_holds_not_what_status_says() -> None:
    port = [{"port": 80, "targetPort": 80}]
    forged = {"loadBalancer": {"ingress": [{"ip": "192.168.1.1"}]}}
    objs = [lb("a", port), lb("b", port), lb("c", port, **forged)]
    rec, backend, writer = make(objs)
    for key in ("ns/a", "ns/b", "ns/c"):
        await rec.reconcile(key)
    assert writer.calls[-1] == ("status", ((), False, "IPPoolExhausted"))
    assert rec.pool.lookup("ns/a") == "192.168.1.1" and rec.pool.lookup("ns/b") == "192.168.1.2"
    assert "ns/c" in rec.pending and "ns/c" not in backend.applied


async def test_orphaned_backend_objects_are_removed_at_start() -> None:
    rec, backend, _ = make([])
    backend.applied["gone/svc"] = DesiredLB(
        service="gone/svc", uid="", namespace="gone", vips=(), listeners=(), options=LbOptions()
    )
    await rec.reconcile("ns/missing")
    assert backend.applied == {}


async def test_a_protocol_the_backend_refuses_is_reported_not_retried() -> None:
    from controllers.fiberlb.grpc_backend import UnsupportedProtocol

    class SctpRefusing(FakeBackend):
        def apply(self, desired: DesiredLB) -> Applied:
            raise UnsupportedProtocol("FiberLB listeners speak TCP and UDP only, not SCTP")

    rec, _, writer = make([lb("sctp", [{"port": 9, "protocol": "SCTP"}])])
    rec.backend = SctpRefusing()
    assert await rec.reconcile("ns/sctp") is None  # returned, not raised: no retry loop
    assert writer.calls[-1] == ("status", ((), False, "UnsupportedProtocol"))


async def test_pool_failures_and_status_latency_are_counted() -> None:
    port = [{"port": 80, "targetPort": 80}]
    outside = lb("d", port)
    outside["spec"]["loadBalancerIP"] = "10.1.2.3"
    rec, _, _ = make([lb("a", port), lb("b", port), lb("c", port), outside])
    reg = CollectorRegistry()
    rec.metrics = FiberlbMetrics(reg, lambda: rec.pool, lambda: len(rec.pending))
    assert reg.get_sample_value("fiberlb_pool_addresses", {"state": "free"}) == 2
    for key in ("ns/a", "ns/b", "ns/c", "ns/d"):
        await rec.reconcile(key)
    assert reg.get_sample_value("fiberlb_pool_addresses", {"state": "used"}) == 2
    assert reg.get_sample_value("fiberlb_pool_addresses", {"state": "free"}) == 0
    assert reg.get_sample_value("fiberlb_allocation_failures_total", {"reason": "exhausted"}) == 1
    assert reg.get_sample_value("fiberlb_allocation_failures_total", {"reason": "unavailable"}) == 1
    assert reg.get_sample_value("fiberlb_services_waiting_for_ip") == 2
    assert reg.get_sample_value("fiberlb_service_status_seconds_count") == 2  # a and b got their address
    rec.services.remove("ns/a")
    await rec.reconcile("ns/a")  # a's IP freed: c gets it on its next reconcile
    await rec.reconcile("ns/c")
    assert reg.get_sample_value("fiberlb_service_status_seconds_count") == 3
    took = reg.get_sample_value("fiberlb_service_status_seconds_sum")
    assert took is not None and took > 0
