"""The Kubernetes API double's own costs, the floor under every controller benchmark.

The double runs as node-up runs it (`python -m nodeenv.kubeapi`, its own process, HTTPS on
loopback); the client is raw aiohttp with one keep-alive connection per role, so the figures are the
double's plus one TLS round trip:
1. Service create (POST, ClusterIP + NodePort allocation) while 0 -> 1,000 Services exist.
2. Create -> the ADDED event arrives on a watch of all Services.
3. Status write (merge patch of /status with a load-balancer ingress).
4. List of 1,000 Services (JSON), and the same as a kubectl Table.
The LB bench's target is "Service created -> IP in status p99 < 100 ms at 1,000 Services"; a
controller's path through the double is (2) + (3), printed beside it.

    make bench BENCH=kubeapi
"""

from __future__ import annotations

import asyncio
import json
import signal
import ssl
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from bench.bench_machinery import line  # the same median/p95/p99 line

SERVICES, LISTS = 1000, 20
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"


def start_daemon(workdir: Path) -> tuple[subprocess.Popen[bytes], dict[str, Any]]:
    port_file = workdir / "ports.json"
    argv = [sys.executable, "-m", "nodeenv.kubeapi", "--dir", str(workdir / "api"), "--port", "0",
            "--port-file", str(port_file), "--log-level", "warning"]  # fmt: skip
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while not port_file.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("the API double did not start")
        time.sleep(0.05)
    return proc, json.loads(port_file.read_text())


class Client:
    def __init__(self, info: dict[str, Any]) -> None:
        cfg = yaml.safe_load(Path(info["kubeconfig"]).read_text())
        self.url = info["url"]
        self.ssl = ssl.create_default_context(cafile=cfg["clusters"][0]["cluster"]["certificate-authority"])
        self.headers = {"Authorization": f"Bearer {cfg['users'][0]['user']['token']}"}

    def session(self) -> aiohttp.ClientSession:
        return aiohttp.ClientSession(
            headers=self.headers, connector=aiohttp.TCPConnector(ssl=self.ssl, limit=1)
        )


async def watch_services(c: Client, arrived: dict[str, float], ready: asyncio.Event) -> None:
    async with c.session() as s, s.get(f"{c.url}/api/v1/services?watch=1&resourceVersion=1") as r:
        ready.set()
        async for raw in r.content:
            ev = json.loads(raw)
            if ev["type"] == "ADDED":
                arrived.setdefault(ev["object"]["metadata"]["name"], time.perf_counter())


async def writes(c: Client) -> tuple[list[float], list[float], list[float]]:
    arrived: dict[str, float] = {}
    ready = asyncio.Event()
    watcher = asyncio.create_task(watch_services(c, arrived, ready))
    await ready.wait()
    creates, delivered, statuses = [], [], []
    base = f"{c.url}/api/v1/namespaces/default/services"
    patch_headers = {"Content-Type": "application/merge-patch+json"}
    async with c.session() as s:
        for i in range(SERVICES):
            name = f"svc-{i}"
            body = {"metadata": {"name": name}, "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]}}
            t0 = time.perf_counter()
            async with s.post(base, json=body) as r:
                await r.read()
            creates.append((time.perf_counter() - t0) * 1000)
            while name not in arrived:
                await asyncio.sleep(0)
            delivered.append((arrived[name] - t0) * 1000)
            status = {"status": {"loadBalancer": {"ingress": [{"ip": f"192.0.2.{i % 250 + 1}"}]}}}
            t0 = time.perf_counter()
            async with s.patch(f"{base}/{name}/status", data=json.dumps(status), headers=patch_headers) as r:
                await r.read()
            statuses.append((time.perf_counter() - t0) * 1000)
    watcher.cancel()
    return creates, delivered, statuses


async def lists(c: Client, accept: str) -> list[float]:
    out = []
    async with c.session() as s:
        for _ in range(LISTS):
            t0 = time.perf_counter()
            async with s.get(f"{c.url}/api/v1/services", headers={"Accept": accept}) as r:
                await r.read()
            out.append((time.perf_counter() - t0) * 1000)
    return out


async def run(info: dict[str, Any]) -> None:
    c = Client(info)
    creates, delivered, statuses = await writes(c)
    print(line(f"Service create (0 -> {SERVICES} Services)", creates))
    print(line("create -> ADDED on a Services watch", delivered))
    print(line("status write (merge patch /status)", statuses))
    path = [d + s for d, s in zip(delivered, statuses, strict=True)]
    print(line("controller path: watch + status", path, "(LB target: IP in status p99 < 100 ms)"))
    print(line(f"list {SERVICES + 1} Services (JSON)", await lists(c, "application/json")))
    print(line(f"list {SERVICES + 1} Services (Table)", await lists(c, TABLE)))


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="bench-kubeapi-") as tmp:
        proc, info = start_daemon(Path(tmp))
        try:
            asyncio.run(run(info))
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=20)


if __name__ == "__main__":
    main()
