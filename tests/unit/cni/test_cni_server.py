"""The agent's HTTP edge: error conversion, per-container serialization, metrics."""

from __future__ import annotations

import asyncio
import ipaddress
import json
import threading
import time

import pytest
from aiohttp.test_utils import TestClient

from cni.attachment import Attachment
from cni.daemon.metrics import READ_BUDGET, AgentSources, Metrics
from cni.daemon.server import CniServer, KeyedLocks
from cni.errors import InvalidNetworkConfig
from cni.ipam_usage import SubnetUsage
from cni.wire import CniRequest, CniResult, IpConfig
from ovnaccess.retry import NotCommitted

CONF = json.dumps({"cniVersion": "1.0.0", "name": "prismnet", "type": "prismnet"}).encode()


def frame(env: dict[str, str], stdin: bytes = CONF) -> bytes:
    return b"\0".join([*(f"{k}={v}".encode() for k, v in env.items()), b"", stdin])


def env(command: str, cid: str = "c1") -> dict[str, str]:
    return {"CNI_COMMAND": command, "CNI_CONTAINERID": cid, "CNI_NETNS": "/run/netns/x", "CNI_IFNAME": "eth0"}


class FakeService:
    def __init__(self) -> None:
        self.active: dict[str, int] = {}
        self.max_same = 0
        self.overlap_other = False
        self.lock = threading.Lock()
        self.removed_during_add: bool | None = None

    def add(self, req: CniRequest) -> CniResult:
        with self.lock:
            self.active[req.container_id] = self.active.get(req.container_id, 0) + 1
            self.max_same = max(self.max_same, self.active[req.container_id])
            self.overlap_other |= len([k for k, v in self.active.items() if v]) > 1
        time.sleep(0.05)
        with self.lock:
            self.active[req.container_id] -= 1
        return CniResult(ips=(IpConfig(address="10.0.0.5/24"),))

    def delete(self, req: CniRequest) -> None:
        raise InvalidNetworkConfig("nope", "because")

    def check(self, req: CniRequest) -> None:
        raise RuntimeError("secret internal detail")

    def stale_attachments(self, req: CniRequest) -> list[Attachment]:
        return [
            Attachment(
                container_id="a",
                ifname="eth0",
                network="prismnet",
                namespace="x",
                pod="p",
                netns="",
                node="n",
            )
        ]

    def remove_stale(self, req: CniRequest, att: Attachment) -> None:
        with self.lock:
            self.removed_during_add = self.active.get(att.container_id, 0) > 0

    def resync_egress(self) -> None:
        return None

    def status(self, req: CniRequest) -> None:
        return None


@pytest.fixture
async def client(aiohttp_client) -> tuple[TestClient, FakeService, Metrics]:
    svc, metrics = FakeService(), Metrics()
    return await aiohttp_client(CniServer(svc, metrics).app()), svc, metrics  # type: ignore[arg-type]


async def test_add_returns_the_result_in_the_requested_version(client) -> None:
    cl, _, metrics = client
    resp = await cl.post("/cni", data=frame(env("ADD")))
    assert resp.status == 200
    assert (await resp.json())["ips"] == [{"address": "10.0.0.5/24"}]
    reg = metrics.registry
    assert reg.get_sample_value("prismnet_cni_requests_total", {"command": "ADD", "code": "0"}) == 1
    count = reg.get_sample_value("prismnet_cni_request_duration_seconds_count", {"command": "ADD"})
    took = reg.get_sample_value("prismnet_cni_request_duration_seconds_sum", {"command": "ADD"})
    assert count == 1 and took is not None and took >= 0.05  # the fake ADD sleeps 50 ms


async def test_cni_errors_keep_code_and_details(client) -> None:
    cl, _, metrics = client
    resp = await cl.post("/cni", data=frame(env("DEL")))
    assert resp.status == 400
    assert await resp.json() == {"cniVersion": "1.0.0", "code": 7, "msg": "nope", "details": "because"}
    assert (
        metrics.registry.get_sample_value("prismnet_cni_requests_total", {"command": "DEL", "code": "7"}) == 1
    )
    assert (
        metrics.registry.get_sample_value("prismnet_cni_requests_total", {"command": "DEL", "code": "0"})
        is None
    )


async def test_crash_counts_as_code_999(client) -> None:
    cl, _, metrics = client
    await cl.post("/cni", data=frame(env("CHECK")))
    assert (
        metrics.registry.get_sample_value("prismnet_cni_requests_total", {"command": "CHECK", "code": "999"})
        == 1
    )


async def test_crash_is_999_without_details(client) -> None:
    cl, *_ = client
    resp = await cl.post("/cni", data=frame(env("CHECK")))
    body = await resp.json()
    assert resp.status == 500 and body["code"] == 999 and "secret" not in json.dumps(body)


async def test_an_nb_write_not_committed_is_11_try_again_later(client) -> None:
    """The OVN database took no write (no leader; a full disk: docs/database-bounds.md): kubelet is
    told to try again, with what the transaction said, and the request counts as code 11."""
    cl, svc, metrics = client

    def add(req: CniRequest) -> CniResult:
        raise NotCommitted("OVSDB transaction _Apply not committed")

    svc.add = add
    resp = await cl.post("/cni", data=frame(env("ADD")))
    body = await resp.json()
    assert resp.status == 400 and body["code"] == 11, body
    assert "took no write" in body["msg"] and "_Apply not committed" in body["details"]
    assert (
        metrics.registry.get_sample_value("prismnet_cni_requests_total", {"command": "ADD", "code": "11"})
        == 1
    )


async def test_bad_env_is_4(client) -> None:
    cl, *_ = client
    resp = await cl.post("/cni", data=frame({"CNI_COMMAND": "ADD"}))
    assert (await resp.json())["code"] == 4


async def test_same_container_is_serialized_others_run_in_parallel(client) -> None:
    cl, svc, _ = client
    await asyncio.gather(*(cl.post("/cni", data=frame(env("ADD", c))) for c in ("a", "a", "a", "b")))
    assert svc.max_same == 1 and svc.overlap_other


async def test_keyed_locks_are_dropped_when_unused() -> None:
    locks = KeyedLocks()
    await asyncio.gather(*(locks.run("k", lambda: None) for _ in range(5)))
    assert locks._locks == {}


class FakeFigures:
    def __init__(self) -> None:
        self.fail = False

    def address_usage(self) -> list[SubnetUsage]:
        if self.fail:
            raise RuntimeError("NB away")
        return [SubnetUsage("10.244.0.0/24", 3, 251), SubnetUsage("10.244.1.0/24", 254, 0)]

    def tunnels(self) -> dict[str, int]:
        return {"up": 0, "down": 1, "off": 2}


async def test_metrics_app_serves_health_and_metrics(aiohttp_client) -> None:
    figures = FakeFigures()
    metrics = Metrics(AgentSources(lambda: figures, ipaddress.IPv4Network("10.244.0.0/22"), 24))
    cl = await aiohttp_client(metrics.app(lambda: False))
    assert (await cl.get("/healthz")).status == 200
    assert (await cl.get("/readyz")).status == 503
    text = await (await cl.get("/metrics")).text()
    assert 'prismnet_ipam_subnet_addresses{state="used",subnet="10.244.0.0/24"} 3.0' in text
    assert 'prismnet_ipam_subnet_addresses{state="free",subnet="10.244.1.0/24"} 0.0' in text
    # 4 subnets of 254 in the /22: 257 used, the rest (2 uncarved subnets too) free
    assert 'prismnet_ipam_addresses{state="used"} 257.0' in text
    assert 'prismnet_ipam_addresses{state="free"} 759.0' in text
    assert (
        'prismnet_geneve_tunnels{bfd="down"} 1.0' in text and 'prismnet_geneve_tunnels{bfd="off"} 2.0' in text
    )
    figures.fail = True  # the NB away: the scrape still answers, without these figures
    resp = await cl.get("/metrics")
    assert resp.status == 200 and "prismnet_ipam_addresses{" not in await resp.text()


class StuckFigures(FakeFigures):
    """A replica read queued behind a write that retries against an NB taking none."""

    def __init__(self) -> None:
        super().__init__()
        self.release, self.reads = threading.Event(), 0

    def address_usage(self) -> list[SubnetUsage]:
        self.reads += 1
        self.release.wait(30)
        return super().address_usage()


async def test_metrics_and_health_answer_while_the_nb_read_is_stuck(aiohttp_client) -> None:
    figures = StuckFigures()
    metrics = Metrics(AgentSources(lambda: figures, ipaddress.IPv4Network("10.244.0.0/22"), 24))
    cl = await aiohttp_client(metrics.app(lambda: True))
    try:
        for _ in range(3):  # each scrape within the read budget; one read under way, not one per scrape
            t0 = time.monotonic()
            resp, health = await asyncio.gather(cl.get("/metrics"), cl.get("/healthz"))
            assert time.monotonic() - t0 < READ_BUDGET + 0.5
            text = await resp.text()
            assert resp.status == 200 and health.status == 200
            assert "prismnet_ipam_addresses{" not in text and 'prismnet_geneve_tunnels{bfd="off"} 2.0' in text
        assert figures.reads == 1
        figures.release.set()
        deadline = time.monotonic() + 5
        while 'prismnet_ipam_addresses{state="used"} 257.0' not in await (await cl.get("/metrics")).text():
            assert time.monotonic() < deadline, "the read that came back is never shown"
    finally:
        figures.release.set()
        metrics.close()


async def test_gc_never_removes_an_attachment_while_its_add_runs(client) -> None:
    cl, svc, _ = client
    gc_env = {"CNI_COMMAND": "GC"}
    gc_conf = json.dumps({"cniVersion": "1.1.0", "name": "prismnet", "type": "prismnet"}).encode()
    add = asyncio.create_task(cl.post("/cni", data=frame(env("ADD", "a"))))
    await asyncio.sleep(0.01)
    resp = await cl.post("/cni", data=frame(gc_env, gc_conf))
    await add
    assert resp.status == 200 and svc.removed_during_add is False
