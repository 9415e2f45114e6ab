"""The `flashdns` backend against the in-process FlashDNS DNSService fake (real gRPC on loopback)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import grpc
import pytest

from controllers.flashdns.grpc_backend import GrpcBackend
from controllers.flashdns.records import Record
from controllers.flashdns.settings import FlashDnsSettings
from controllers.machinery import EVENTS, SERVICES
from nodeenv.plasmacloud_auth import DevPki
from tests.integration.controllers.flashdns.fake_flashdns import FakeServer
from tests.integration.controllers.flashdns.flashdns_kit import SA, flashdns_controller, service
from tests.integration.controllers.machinery_kit import client_for, eventually

WEB = "web.default.svc.cluster.local."
OWNER = "service/default/web"
WEB_RECORDS = frozenset(
    {
        Record(WEB, "A", "10.96.0.100"),
        Record("100.0.96.10.in-addr.arpa.", "PTR", WEB),
        Record("_http._tcp." + WEB, "SRV", f"0 100 80 {WEB}"),
    }
)


@pytest.fixture
def fake(plasmacloud_pki: DevPki) -> Iterator[FakeServer]:
    server = FakeServer(plasmacloud_pki)
    yield server
    server.stop()


@pytest.fixture
async def backend(fake: FakeServer) -> AsyncIterator[GrpcBackend]:
    b = GrpcBackend(
        FlashDnsSettings(
            backend="flashdns", flashdns_endpoint=fake.endpoint, plasmacloud=fake.pki.client_auth()
        )
    )
    await b.start()
    yield b
    await b.stop()


async def test_records_land_in_their_zones_with_owner_labels(backend: GrpcBackend, fake: FakeServer) -> None:
    await backend.replace(OWNER, WEB_RECORDS)
    assert fake.service.presentation() == {
        ("cluster.local", "web.default.svc", "A", "10.96.0.100"),
        ("in-addr.arpa", "100.0.96.10", "PTR", WEB),
        ("cluster.local", "_http._tcp.web.default.svc", "SRV", f"0 100 80 {WEB}"),
    }
    (a,) = fake.service.find(type="A")
    labels = {"managed-by": "flashdns-controller", "k8s.owner": OWNER, "k8s.namespace": "default"}
    assert dict(a.labels) == {**labels, "k8s.service": "web"}
    assert a.ttl == 30


async def test_changes_update_in_place_create_before_delete_and_removal_is_exact(
    backend: GrpcBackend, fake: FakeServer
) -> None:
    await backend.replace(OWNER, WEB_RECORDS)
    await backend.replace(
        "pod/default/p", frozenset({Record("10-244-0-5.pod.cluster.local.", "A", "10.244.0.5")})
    )
    fake.service.calls.clear()
    changed = (WEB_RECORDS - {Record(WEB, "A", "10.96.0.100")}) | {Record(WEB, "A", "10.96.0.101")}
    await backend.replace(OWNER, changed)
    assert fake.service.calls == ["UpdateRecord"], "one value changed: one atomic update"
    assert {r.value for r in fake.service.find(type="A", name="web.default.svc")} == {"10.96.0.101"}
    srv = f"_http._tcp.{WEB}"
    two = (changed - {Record(srv, "SRV", f"0 100 80 {WEB}")}) | {
        Record(srv, "SRV", f"0 50 80 a.{WEB}"),
        Record(srv, "SRV", f"0 50 80 b.{WEB}"),
        Record(f"_dns._udp.{WEB}", "SRV", f"0 100 53 {WEB}"),
    }
    await backend.replace(OWNER, two)
    assert fake.service.calls[1:] == ["UpdateRecord", "CreateRecord", "CreateRecord"]
    await backend.replace(OWNER, changed)
    assert fake.service.calls[4:] == ["UpdateRecord", "DeleteRecord", "DeleteRecord"]
    await backend.replace(OWNER, frozenset())
    assert not [r for r in fake.service.records.values() if r.labels.get("k8s.owner") == OWNER]
    assert fake.service.find(name="10-244-0-5.pod")


async def test_resync_repairs_drift(backend: GrpcBackend, fake: FakeServer) -> None:
    await backend.replace(OWNER, WEB_RECORDS)
    svc = fake.service
    svc.records.pop(svc.find(type="PTR")[0].id)  # deleted behind our back
    svc.find(type="A")[0].value = "10.96.0.66"  # changed behind our back
    stray = {"managed-by": "flashdns-controller", "k8s.owner": "service/default/gone"}
    svc.add_direct(
        zone="cluster.local", name="gone.default.svc", type="A", value="10.96.0.9", ttl=30, labels=stray
    )
    foreign = svc.add_direct(zone="cluster.local", name="mine", type="A", value="192.0.2.1", ttl=60)
    changed = await backend.resync({OWNER: WEB_RECORDS})
    assert changed == 4  # PTR created, the changed A updated back, orphan deleted; the zone's TXT written
    assert "UpdateRecord" in svc.calls
    assert svc.presentation() == {
        ("cluster.local", "dns-version", "TXT", '"1.1.0"'),
        ("cluster.local", "web.default.svc", "A", "10.96.0.100"),
        ("in-addr.arpa", "100.0.96.10", "PTR", WEB),
        ("cluster.local", "_http._tcp.web.default.svc", "SRV", f"0 100 80 {WEB}"),
        ("cluster.local", "mine", "A", "192.0.2.1"),
    }
    assert foreign in svc.records, "records we do not manage are never touched"
    assert await backend.resync({OWNER: WEB_RECORDS}) == 0


async def test_restart_adopts_and_deletes_nothing_that_stays(backend: GrpcBackend, fake: FakeServer) -> None:
    await backend.replace(OWNER, WEB_RECORDS)
    before = dict(fake.service.records)
    fake.service.calls.clear()
    again = GrpcBackend(
        FlashDnsSettings(
            backend="flashdns", flashdns_endpoint=fake.endpoint, plasmacloud=fake.pki.client_auth()
        )
    )
    await again.start()
    await again.replace(OWNER, WEB_RECORDS)
    await again.stop()
    assert [c for c in fake.service.calls if c != "ListRecords"] == []
    assert fake.service.records.keys() == before.keys()


async def test_listing_pages_through_many_records(backend: GrpcBackend, fake: FakeServer) -> None:
    many = frozenset(
        Record(f"s{i}.default.svc.cluster.local.", "A", f"10.96.{i // 250}.{i % 250 + 1}")
        for i in range(1200)
    )
    await backend.replace("service/default/many", many)
    await backend.resync({"service/default/many": many})  # writes the zone's own TXT
    fake.service.calls.clear()
    assert await backend.resync({"service/default/many": many}) == 0
    assert fake.service.calls.count("ListRecords") == 3  # 500 a page


async def test_errors_propagate_and_a_retry_converges(backend: GrpcBackend, fake: FakeServer) -> None:
    fake.service.fail_next = grpc.StatusCode.UNAVAILABLE
    with pytest.raises(grpc.aio.AioRpcError) as e:
        await backend.replace(OWNER, WEB_RECORDS)
    assert e.value.code() == grpc.StatusCode.UNAVAILABLE
    await backend.replace(OWNER, WEB_RECORDS)
    assert len(fake.service.find(name="web.default.svc")) == 1


async def test_controller_with_the_flashdns_backend_writes_and_resyncs(
    kube_api: Any, tmp_path: Path, fake: FakeServer
) -> None:
    async with client_for(kube_api.kubeconfig) as c:
        created = await c.create(SERVICES, service("api"))
        ip = created["spec"]["clusterIP"]
        args = ("--backend", "flashdns", *fake.flags, "--resync-interval", "0.5")
        async with flashdns_controller(kube_api.kubeconfig_for(SA), tmp_path, *args):
            svc = fake.service
            await eventually(lambda: bool(svc.find(name="api.default.svc", value=ip)), what="the A record")
            svc.records.pop(svc.find(name="api.default.svc")[0].id)
            await eventually(
                lambda: bool(svc.find(name="api.default.svc", value=ip)), what="resync repairing it"
            )
            await c.delete(SERVICES, "default", "api")
            await eventually(lambda: not svc.find(name="api.default.svc"), what="deletion")
            await asyncio.sleep(0)


async def test_two_replicas_only_the_leader_writes_and_the_follower_takes_over(
    kube_api: Any, tmp_path: Path, fake: FakeServer
) -> None:
    lease = ("--leader-elect=true", "--leader-elect-lease-duration", "2", "--leader-elect-renew-deadline",
             "1.5", "--leader-elect-retry-period", "0.2", "--backend", "flashdns",
             *fake.flags, "--resync-interval", "0.5")  # fmt: skip
    svc = fake.service
    async with client_for(kube_api.kubeconfig) as c, AsyncExitStack() as second_stack:
        created = await c.create(SERVICES, service("ha"))
        ip = created["spec"]["clusterIP"]
        async with flashdns_controller(kube_api.kubeconfig_for(SA), tmp_path, *lease) as first:
            await eventually(
                lambda: bool(svc.find(name="ha.default.svc", value=ip)), what="the leader's write"
            )
            second = await second_stack.enter_async_context(
                flashdns_controller(kube_api.kubeconfig_for(SA), tmp_path, *lease)
            )
            await asyncio.sleep(1.0)
            assert first.app.is_leader and not second.app.is_leader
            assert second.reconciles() == 0, "a follower never writes"
        # the first replica stopped and released the Lease: the second takes over and repairs drift
        svc.records.pop(svc.find(name="ha.default.svc")[0].id)
        await eventually(lambda: second.app.is_leader, what="the follower to take over")
        await eventually(lambda: bool(svc.find(name="ha.default.svc", value=ip)), what="its resync repair")
        assert len(svc.find(name="ha.default.svc")) == 1


async def test_a_failed_write_is_a_warning_event_on_the_service_and_the_retry_lands(
    kube_api: Any, tmp_path: Path, fake: FakeServer
) -> None:
    async with client_for(kube_api.kubeconfig) as c:
        await c.create(SERVICES, service("first"))
        args = ("--backend", "flashdns", *fake.flags)
        async with flashdns_controller(kube_api.kubeconfig_for(SA), tmp_path, *args):
            svc = fake.service
            await eventually(lambda: bool(svc.find(name="first.default.svc")), what="the first records")
            await asyncio.sleep(0.3)  # idle: the next RPC is the new Service's write
            svc.fail_next = grpc.StatusCode.UNAVAILABLE
            await c.create(SERVICES, service("second"))
            await eventually(lambda: bool(svc.find(name="second.default.svc")), what="the retried write")

            for _ in range(100):
                events = (await c.list(EVENTS, "default"))["items"]
                mine = [e for e in events if e["regarding"].get("name") == "second"]
                if mine:
                    break
                await asyncio.sleep(0.1)
            assert mine and mine[0]["type"] == "Warning" and "UNAVAILABLE" in mine[0]["note"], events
    assert any(r.verb == "create" and r.resource == "events" for r in kube_api.requests_by(SA))
