"""The agent's HTTP edge: error conversion, per-container serialization, metrics."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import pytest
from aiohttp.test_utils import TestClient

from cni.attachment import Attachment
from cni.daemon.metrics import Metrics
from cni.daemon.server import CniServer, KeyedLocks
from cni.errors import InvalidNetworkConfig
from cni.wire import CniRequest, CniResult, IpConfig

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
    assert metrics.requests.labels("ADD", "ok")._value.get() == 1


async def test_cni_errors_keep_code_and_details(client) -> None:
    cl, _, metrics = client
    resp = await cl.post("/cni", data=frame(env("DEL")))
    assert resp.status == 400
    assert await resp.json() == {"cniVersion": "1.0.0", "code": 7, "msg": "nope", "details": "because"}
    assert metrics.requests.labels("DEL", "error")._value.get() == 1


async def test_crash_is_999_without_details(client) -> None:
    cl, *_ = client
    resp = await cl.post("/cni", data=frame(env("CHECK")))
    body = await resp.json()
    assert resp.status == 500 and body["code"] == 999 and "secret" not in json.dumps(body)


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


async def test_metrics_app_serves_health_and_metrics(aiohttp_client) -> None:
    metrics = Metrics(ips_in_use=lambda: {"team-a": 3})
    cl = await aiohttp_client(metrics.app(lambda: False))
    assert (await cl.get("/healthz")).status == 200
    assert (await cl.get("/readyz")).status == 503
    text = await (await cl.get("/metrics")).text()
    assert 'prismnet_ips_in_use{namespace="team-a"} 3.0' in text


async def test_gc_never_removes_an_attachment_while_its_add_runs(client) -> None:
    cl, svc, _ = client
    gc_env = {"CNI_COMMAND": "GC"}
    gc_conf = json.dumps({"cniVersion": "1.1.0", "name": "prismnet", "type": "prismnet"}).encode()
    add = asyncio.create_task(cl.post("/cni", data=frame(env("ADD", "a"))))
    await asyncio.sleep(0.01)
    resp = await cl.post("/cni", data=frame(gc_env, gc_conf))
    await add
    assert resp.status == 200 and svc.removed_during_add is False
