"""fiberlb-controller against the Kubernetes API double, with the `fiberlb` backend talking gRPC to the
in-process FiberLB server: IP allocation, reconcile on create/update/delete, endpoint churn,
restart, bad input."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import grpc

from controllers.machinery import SERVICES
from tests.integration.controllers.fiberlb.controller_harness import (
    SA_USER,
    Admin,
    RunningController,
    condition,
    endpoint_slice,
    ingress,
    service,
    until,
)
from tests.integration.controllers.fiberlb.fake_fiberlb import FakeServer

P = "fiberlb.plasmacloud.io/"
FINALIZER = "service.kubernetes.io/load-balancer-cleanup"


def flags(fiberlb: FakeServer, pool: str = "192.168.100.10-192.168.100.19", *extra: str) -> list[str]:
    return ["--leader-elect=false", "--backend", "fiberlb", *fiberlb.flags,
            "--external-ip-pool", pool, "--debounce", "0.05", *extra]  # fmt: skip


async def ip_of(admin: Admin, name: str, ns: str = "default") -> str:
    svc = await until(lambda: admin.get(name, ns), lambda s: bool(ingress(s)))
    assert ingress(svc), svc.get("status")
    return ingress(svc)[0]


def members(fiberlb: FakeServer, name: str) -> list[str]:
    lbs = [lb for lb in fiberlb.fake.lbs.values() if lb.name == name]
    if not lbs:
        return []
    pools = [fiberlb.fake.pools[x.default_pool_id] for x in fiberlb.fake.listeners.values()
             if x.load_balancer_id == lbs[0].id]  # fmt: skip
    return sorted(m.address for p in pools for m in p.members)


async def test_lifecycle_create_update_churn_delete(kube_api: Any, admin: Admin, fiberlb: FakeServer) -> None:
    ctrl = await RunningController(kube_api, flags(fiberlb)).start()
    try:
        await admin.create(endpoint_slice("web", ["10.244.1.2", "10.244.1.3"]))
        await admin.create(service("web"))
        assert await ip_of(admin, "web") == "192.168.100.10"
        svc = await admin.get("web")
        assert FINALIZER in svc["metadata"]["finalizers"]
        assert condition(svc)["status"] == "True"  # type: ignore[index]
        lb = next(iter(fiberlb.fake.lbs.values()))
        assert (lb.name, lb.external_ip) == ("default/web", "192.168.100.10")
        assert svc["metadata"]["annotations"][P + "load-balancer-id"] == lb.id  # the spec's step 2c
        assert await until(lambda: _async(members(fiberlb, "default/web")), lambda m: len(m) == 2)

        # endpoint churn: 20 changes in quick succession are coalesced, the last state wins
        updates_before = fiberlb.fake.calls.count("UpdatePool")
        for i in range(20):
            await admin.replace_slice(endpoint_slice("web", [f"10.244.1.{10 + i}"]))
        assert await until(lambda: _async(members(fiberlb, "default/web")), lambda m: m == ["10.244.1.29"])
        assert fiberlb.fake.calls.count("UpdatePool") - updates_before < 20

        # a spec change (a second port) reaches the backend
        await admin.client.patch(
            SERVICES, "default", "web",
            {"spec": {"ports": [{"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"},
                                {"name": "dns", "port": 53, "targetPort": 5353, "protocol": "UDP"}]}},
        )  # fmt: skip
        assert await until(lambda: _async(len(fiberlb.fake.listeners)), lambda n: n == 2) == 2

        await admin.delete("web")
        assert await until(lambda: admin.gone("web"), bool)
        assert fiberlb.fake.lbs == {} and fiberlb.fake.pools == {}
        await admin.create(service("next"))  # the freed IP is handed out again
        assert await ip_of(admin, "next") == "192.168.100.10"
    finally:
        assert await ctrl.stop() == 0
    used = {(r.verb, r.resource, r.subresource) for r in kube_api.requests_by(SA_USER)}
    assert ("patch", "services", "status") in used and ("update", "services", "") not in used


def _scrape(port: int | None) -> str:
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        return str(r.read().decode())


async def _async(value: Any) -> Any:
    return value


async def test_only_our_class(kube_api: Any, admin: Admin, fiberlb: FakeServer) -> None:
    ctrl = await RunningController(kube_api, flags(fiberlb)).start()
    try:
        await admin.create(service("other", lb_class="example.com/other"))
        await admin.create(service("noclass", lb_class=None))
        await admin.create(service("mine"))
        await ip_of(admin, "mine")
        for name in ("other", "noclass"):
            svc = await admin.get(name)
            assert not ingress(svc) and FINALIZER not in (svc["metadata"].get("finalizers") or [])
    finally:
        await ctrl.stop()
    ctrl = await RunningController(kube_api, [*flags(fiberlb), "--default-class"]).start()
    try:
        await ip_of(admin, "noclass")
        assert not ingress(await admin.get("other"))
    finally:
        await ctrl.stop()


async def test_exhaustion_event_condition_then_ip_when_one_frees(
    kube_api: Any, admin: Admin, fiberlb: FakeServer
) -> None:
    argv = [*flags(fiberlb, "192.168.100.10-192.168.100.11"), "--metrics-address", "127.0.0.1:0"]
    ctrl = await RunningController(kube_api, argv).start()
    try:
        for name in ("a", "b"):
            await admin.create(service(name))
            await ip_of(admin, name)
        await admin.create(service("c"))
        svc = await until(lambda: admin.get("c"), lambda s: condition(s) is not None)
        metrics = await asyncio.to_thread(_scrape, ctrl.app.metrics_port)
        assert 'fiberlb_pool_addresses{state="used"} 2.0' in metrics
        assert 'fiberlb_pool_addresses{state="free"} 0.0' in metrics
        assert 'fiberlb_allocation_failures_total{reason="exhausted"}' in metrics
        assert "fiberlb_service_status_seconds_count 2.0" in metrics
        assert "fiberlb_services_waiting_for_ip 1.0" in metrics
        assert condition(svc)["status"] == "False" and condition(svc)["reason"] == "IPPoolExhausted"  # type: ignore[index]
        assert "2 of 2 in use" in condition(svc)["message"]  # type: ignore[index]
        assert await until(lambda: admin.events("c", "IPPoolExhausted"), bool)
        await admin.delete("a")
        assert await ip_of(admin, "c") == "192.168.100.10"  # pending Service served as soon as it freed
        assert condition(await admin.get("c"))["status"] == "True"  # type: ignore[index]
    finally:
        await ctrl.stop()


async def test_restart_keeps_every_ip_even_with_an_edited_pool(
    kube_api: Any, admin: Admin, fiberlb: FakeServer
) -> None:
    ctrl = await RunningController(kube_api, flags(fiberlb, "192.168.100.10-192.168.100.19")).start()
    names = [f"s{i}" for i in range(6)]
    try:
        for name in names:
            await admin.create(service(name))
        before = {name: await ip_of(admin, name) for name in names}
    finally:
        await ctrl.stop()
    await admin.delete("s0")  # deleted while the controller is down: its finalizer holds it
    await admin.create(service("late"))  # created while down: must not take anyone's IP
    # the new pool drops the first addresses and lists a new range first
    pool = "192.168.200.1-192.168.200.2,192.168.100.13-192.168.100.19"
    ctrl = await RunningController(kube_api, flags(fiberlb, pool)).start()
    try:
        late = await ip_of(admin, "late")
        assert await until(lambda: admin.gone("s0"), bool)
        after = {name: ingress(await admin.get(name))[0] for name in names[1:]}
        assert after == {n: ip for n, ip in before.items() if n != "s0"}  # zero IPs changed
        assert late == "192.168.200.1" and late not in before.values()
        assert sorted(lb.external_ip for lb in fiberlb.fake.lbs.values()) == sorted([*after.values(), late])
    finally:
        await ctrl.stop()


async def test_requested_ips(kube_api: Any, admin: Admin, fiberlb: FakeServer) -> None:
    ctrl = await RunningController(kube_api, flags(fiberlb)).start()
    try:
        await admin.create(service("req", annotations={P + "load-balancer-ip": "192.168.100.15"}))
        await admin.create(service("legacy", loadBalancerIP="192.168.100.16"))
        assert await ip_of(admin, "req") == "192.168.100.15"
        assert await ip_of(admin, "legacy") == "192.168.100.16"

        await admin.create(service("outside", annotations={P + "load-balancer-ip": "10.1.1.1"}))
        svc = await until(lambda: admin.get("outside"), lambda s: condition(s) is not None)
        assert condition(svc)["reason"] == "RequestedIPUnavailable" and not ingress(svc)  # type: ignore[index]
        assert "not in any external IP pool" in condition(svc)["message"]  # type: ignore[index]
        assert await until(lambda: admin.events("outside", "RequestedIPUnavailable"), bool)

        # FiberLB has one load balancer per IP: asking to share is refused clearly (ovn shares)
        await admin.create(service("shy", annotations={P + "allow-shared-ip": "team-a"}))
        svc = await until(lambda: admin.get("shy"), lambda s: condition(s) is not None)
        assert "cannot share" in condition(svc)["message"] and not ingress(svc)  # type: ignore[index]
    finally:
        await ctrl.stop()


async def test_invalid_annotations_event_and_condition_never_a_crash_loop(
    kube_api: Any, admin: Admin, fiberlb: FakeServer
) -> None:
    ctrl = await RunningController(kube_api, flags(fiberlb)).start()
    try:
        await admin.create(
            service("bad", annotations={P + "algorithm": "random", P + "health-check-retries": "x"})
        )
        svc = await until(lambda: admin.get("bad"), lambda s: condition(s) is not None)
        cond = condition(svc)
        assert cond["status"] == "False" and cond["reason"] == "InvalidAnnotation"  # type: ignore[index]
        assert "fiberlb.plasmacloud.io/algorithm" in cond["message"]  # type: ignore[index]
        events = await until(lambda: admin.events("bad", "InvalidAnnotation"), bool)
        assert events[0]["type"] == "Warning"
        assert not ingress(svc) and fiberlb.fake.lbs == {}
        await admin.create(service("good"))  # the controller goes on
        await ip_of(admin, "good")
        writes = len(kube_api.requests_by(SA_USER))
        await asyncio.sleep(1.0)
        assert len(kube_api.requests_by(SA_USER)) - writes < 5  # no retry loop on bad input

        # fixing the annotation programs it
        await admin.client.patch(
            SERVICES, "default", "bad",
            {"metadata": {"annotations": {P + "algorithm": "ip-hash", P + "health-check-retries": "3"}}},
        )  # fmt: skip
        svc = await until(lambda: admin.get("bad"), lambda s: bool(ingress(s)))
        assert condition(svc)["status"] == "True"  # type: ignore[index]
    finally:
        await ctrl.stop()


async def test_backend_errors_are_retried_and_reported(
    kube_api: Any, admin: Admin, fiberlb: FakeServer
) -> None:
    ctrl = await RunningController(kube_api, flags(fiberlb)).start()
    try:
        await admin.create(service("first"))
        await ip_of(admin, "first")
        fiberlb.fake.fail_next = grpc.StatusCode.UNAVAILABLE
        await admin.create(service("web"))
        await ip_of(admin, "web")  # retried with backoff after the injected failure
        assert await until(lambda: admin.events("web", "BackendError"), bool)
    finally:
        await ctrl.stop()


async def test_a_refused_iam_token_is_an_event_and_a_renewed_one_is_retried(
    kube_api: Any, admin: Admin, fiberlb: FakeServer, tmp_path: Path
) -> None:
    """FiberLB answers UNAUTHENTICATED (the token is for another audience): a BackendError Event on
    the Service naming it, retried with backoff; the renewed token file is used, no restart."""
    token = tmp_path / "token"
    token.write_text(fiberlb.pki.mint(audience="somebody-else"))
    argv = [*flags(fiberlb), "--plasmacloud-token-file", str(token)]
    ctrl = await RunningController(kube_api, argv).start()
    try:
        await admin.create(service("web"))
        refused = await until(lambda: admin.events("web", "BackendError"), bool)
        assert "UNAUTHENTICATED" in refused[0]["note"] and "audience" in refused[0]["note"]
        assert not fiberlb.fake.lbs
        token.write_text(fiberlb.pki.mint())
        await ip_of(admin, "web")
    finally:
        await ctrl.stop()


async def test_without_a_pool_fiberlb_allocates_and_the_ip_stays(
    kube_api: Any, admin: Admin, fiberlb: FakeServer
) -> None:
    argv = ["--leader-elect=false", "--backend", "fiberlb", *fiberlb.flags]
    ctrl = await RunningController(kube_api, argv).start()
    try:
        await admin.create(service("web"))
        ip = await ip_of(admin, "web")
        assert ip.startswith("203.0.113.")  # FiberLB's own pool (CreateLoadBalancer without external_ip)
    finally:
        await ctrl.stop()
    forged = {"status": {"loadBalancer": {"ingress": [{"ip": "198.51.100.7"}]}}}
    await admin.client.patch(SERVICES, "default", "web", forged, subresource="status")
    ctrl = await RunningController(kube_api, argv).start()
    try:  # FiberLB's record is the truth: the same IP, the forged status rewritten, nothing recreated
        got = await until(lambda: admin.get("web"), lambda s: ingress(s) == [ip])
        assert ingress(got) == [ip] and [lb.external_ip for lb in await _lbs(fiberlb)] == [ip]
    finally:
        await ctrl.stop()
    fiberlb.fake.lbs.clear()  # FiberLB lost it: the status alone is no record, FiberLB allocates anew
    fiberlb.fake.listeners.clear()
    fiberlb.fake.pools.clear()
    await admin.client.patch(SERVICES, "default", "web", forged, subresource="status")
    ctrl = await RunningController(kube_api, argv).start()
    try:
        lbs = await until(lambda: _lbs(fiberlb), bool)
        new = lbs[0].external_ip
        assert len(lbs) == 1 and new.startswith("203.0.113.")
        assert ingress(await until(lambda: admin.get("web"), lambda s: ingress(s) == [new])) == [new]
    finally:
        await ctrl.stop()


async def _lbs(fiberlb: FakeServer) -> list[Any]:
    return list(fiberlb.fake.lbs.values())
