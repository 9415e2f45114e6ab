"""FiberLB controller figures: Service -> external IP in status, endpoint change -> OVN row, restart.

Parts, all real except the Kubernetes API (the in-process API double, HTTPS on loopback): an OVN
node environment (its NB database), `fiberlb-controller` as its own process (ovn backend, JSON logs
to a file), this process as the user creating Services and EndpointSlices through
kubernetes_asyncio, and `ovsdb-client monitor` as an independent observer of Load_Balancer rows.

1. 1,000 Services created and served; then 200 more, one at a time: create sent -> the watch
   shows status.loadBalancer.ingress. Target p99 < 100 ms (the spec asks 5 s).
2. 20 Services with EndpointSlices; slices changed at 100 changes/s for 10 s: PATCH sent -> the
   NB row's vips hold the new backend (ovsdb-client monitor). Target p99 < 1 s; NB writes/s
   beside changes/s (debounce effect).
3. Controller stopped (SIGTERM) and started again with 1,220 Services: time until every Service
   was reconciled (reconcile count from /metrics, queue empty), and IPs changed. Target < 10 s, 0.
Floors: one status PATCH round trip to the double; one NB transaction (the backend alone).

    flock /tmp/k8shost-ovn.lock make bench BENCH=lb
"""

from __future__ import annotations

import asyncio
import re
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from bench.private_node import private_node
from bench.stats import pct
from controllers.fiberlb.annotations import LbOptions
from controllers.fiberlb.desired import Backend, DesiredLB, Listener
from controllers.fiberlb.ovn_backend import OvnBackend
from controllers.machinery import ENDPOINT_SLICES, NAMESPACES, SERVICES, KubeClient
from controllers.machinery.kubeconfig import load_api_client
from nodeenv.kubeapi.server import ThreadedKubeApi
from nodeenv.node import Node
from nodeenv.ovn_stack import OvnStack

NS = "bench"
BASE, TIMED, CHURN_SERVICES, CHURN_RATE, CHURN_SECONDS = 1000, 200, 20, 100, 10
POOL = "10.200.0.0/20"


def line(label: str, values: list[float], target: str) -> str:
    if not values:
        return f"{label:<34} n/a   target {target}"
    return (
        f"{label:<34} median {statistics.median(values):7.1f} ms  p95 {pct(values, 95):7.1f} ms  "
        f"p99 {pct(values, 99):7.1f} ms  (n={len(values)})   target {target}"
    )


def service(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "type": "LoadBalancer",
            "loadBalancerClass": "fiberlb.plasmacloud.io/lb",
            "ports": [{"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"}],
        },
    }


def endpoint_slice(name: str, ip: str) -> dict[str, Any]:
    return {
        "metadata": {"name": f"{name}-x", "namespace": NS, "labels": {"kubernetes.io/service-name": name}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": [ip], "conditions": {"ready": True}}],
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
    }


class Controller:
    """fiberlb-controller as a separate process, as node-up runs it."""

    def __init__(self, kubeconfig: Path, nb: str, log: Path) -> None:
        self.argv = [
            sys.executable,
            "-m",
            "controllers.fiberlb.main",
            "--kubeconfig",
            str(kubeconfig),
            "--ovn-nb-db",
            nb,
            "--external-ip-pool",
            POOL,
            "--leader-elect=false",
            "--metrics-address",
            "127.0.0.1:0",
            "--log-level",
            "warning",
            "--workers",
            "4",
        ]
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0

    def start(self) -> float:
        self.port = _free_port()
        self.argv[self.argv.index("--metrics-address") + 1] = f"127.0.0.1:{self.port}"
        t0 = time.perf_counter()
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.DEVNULL, stderr=self.log.open("ab"))
        return t0

    def metrics(self) -> dict[str, float]:
        try:
            text = urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=2).read().decode()
        except OSError:
            return {}
        out = {}
        for m in re.finditer(
            r"^(controller_reconcile_duration_seconds_count|workqueue_depth)\{[^}]*\} (\S+)$", text, re.M
        ):
            out[m.group(1)] = float(m.group(2))
        return out

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(30)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class NbMonitor:
    """`ovsdb-client monitor` of Load_Balancer vips: when each (row, backend) first appeared."""

    def __init__(self, remote: str) -> None:
        argv = [
            "ovsdb-client",
            "monitor",
            remote,
            "OVN_Northbound",
            "Load_Balancer",
            "name,vips",
            "--format=json",
        ]
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
        self.seen: dict[tuple[str, str], float] = {}
        self.updates: list[float] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            now = time.perf_counter()
            self.updates.append(now)
            for name, backend in re.findall(r'"fiberlb:([^"]+):tcp".*?"[\d.]+:80","([\d.]+):8080"', raw):
                self.seen.setdefault((name, backend), now)

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait()


async def wait_ips(client: KubeClient, names: set[str], timeout: float = 120) -> dict[str, str]:
    deadline = time.monotonic() + timeout
    while True:
        items = (await client.list(SERVICES, NS))["items"]
        ips = {
            s["metadata"]["name"]: (s.get("status", {}).get("loadBalancer", {}).get("ingress") or [{}])[
                0
            ].get("ip", "")
            for s in items
        }
        if all(ips.get(n) for n in names) or time.monotonic() > deadline:
            return {n: ips.get(n, "") for n in names}
        await asyncio.sleep(0.2)


async def ip_latencies(client: KubeClient) -> list[float]:
    rv = (await client.list(SERVICES, NS, limit=1))["metadata"]["resourceVersion"]
    sent: dict[str, float] = {}
    got: dict[str, float] = {}
    done = asyncio.Event()

    async def watch() -> None:
        async for ev in client.watch(SERVICES, NS, resource_version=rv, timeout_seconds=300):
            obj = ev.get("object", {})
            name = obj.get("metadata", {}).get("name", "")
            if (
                name in sent
                and name not in got
                and obj.get("status", {}).get("loadBalancer", {}).get("ingress")
            ):
                got[name] = time.perf_counter()
                done.set()

    task = asyncio.create_task(watch())
    for i in range(TIMED):
        name = f"timed-{i}"
        done.clear()
        sent[name] = time.perf_counter()
        await client.create(SERVICES, service(name), NS)
        await asyncio.wait_for(done.wait(), 10)
    task.cancel()
    return [(got[n] - sent[n]) * 1000 for n in sent if n in got]


async def churn(client: KubeClient, monitor: NbMonitor, services: int) -> tuple[list[float], float, float]:
    """CHURN_RATE slice changes/s spread over `services` Services for CHURN_SECONDS."""
    names = [f"churn{services}-{i}" for i in range(services)]
    for n in names:
        await client.create(ENDPOINT_SLICES, endpoint_slice(n, "10.250.0.1"), NS)
        await client.create(SERVICES, service(n), NS)
    await wait_ips(client, set(names))
    await asyncio.sleep(1)
    sent: dict[tuple[str, str], float] = {}
    writes_before, t0 = len(monitor.updates), time.perf_counter()
    for k in range(CHURN_RATE * CHURN_SECONDS):
        due = t0 + k / CHURN_RATE
        await asyncio.sleep(max(0.0, due - time.perf_counter()))
        name = names[k % len(names)]
        ip = f"10.251.{k // 250}.{k % 250 + 1}"
        sent[(f"{NS}/{name}", ip)] = time.perf_counter()
        body = {"endpoints": [{"addresses": [ip], "conditions": {"ready": True}}]}
        await client.patch(ENDPOINT_SLICES, NS, f"{name}-x", body)
    elapsed = time.perf_counter() - t0
    await asyncio.sleep(2)
    writes = len(monitor.updates) - writes_before
    lat = [(monitor.seen[k] - t) * 1000 for k, t in sent.items() if k in monitor.seen]
    missed = len(sent) - len(lat)
    if missed:
        print(f"  ({missed} endpoint changes never reached OVN: superseded within the debounce window)")
    return lat, len(sent) / elapsed, writes / elapsed


async def restart(ctrl: Controller, client: KubeClient) -> tuple[float, int, int]:
    items = (await client.list(SERVICES, NS))["items"]
    before = {s["metadata"]["name"]: s["status"]["loadBalancer"]["ingress"][0]["ip"] for s in items}
    ctrl.stop()
    t0 = ctrl.start()
    while True:
        m = ctrl.metrics()
        if (
            m.get("controller_reconcile_duration_seconds_count", 0) >= len(items)
            and m.get("workqueue_depth") == 0
        ):
            break
        await asyncio.sleep(0.05)
    took = time.perf_counter() - t0
    after = await wait_ips(client, set(before))
    return took, sum(1 for n, ip in before.items() if after.get(n) != ip), len(before)


def nb_floor(nb: str) -> None:
    backend = OvnBackend.connect(nb)
    times = []
    for i in range(200):
        d = DesiredLB(
            service="floor/svc",
            uid="",
            namespace="floor",
            vips=("10.199.0.1",),
            options=LbOptions(),
            listeners=(
                Listener(name="", protocol="TCP", port=80, backends=(Backend(f"10.9.0.{i % 250 + 1}", 80),)),
            ),
        )
        t = time.perf_counter()
        backend.apply(d)
        times.append((time.perf_counter() - t) * 1000)
    backend.delete("floor/svc", "")
    backend.close()
    print(line("floor: one NB transaction (backend)", times, "-"))


async def status_floor(client: KubeClient) -> None:
    await client.create(SERVICES, {"metadata": {"name": "floor"}, "spec": {"ports": [{"port": 1}]}}, NS)
    times = []
    for i in range(100):
        t = time.perf_counter()
        await client.patch(
            SERVICES,
            NS,
            "floor",
            {
                "status": {
                    "conditions": [
                        {
                            "type": "X",
                            "status": "True",
                            "reason": "R",
                            "message": str(i),
                            "lastTransitionTime": "2026-01-01T00:00:00Z",
                        }
                    ]
                }
            },
            subresource="status",
        )
        times.append((time.perf_counter() - t) * 1000)
    await client.delete(SERVICES, NS, "floor")
    print(line("floor: one status PATCH (API double)", times, "-"))


async def run(api: ThreadedKubeApi, node: Node, tmp: Path) -> None:
    client = KubeClient(await load_api_client(api.server.kubeconfig, in_cluster=False))
    nb = node.endpoints["OVN_NB_DB"]
    await client.create(NAMESPACES, {"metadata": {"name": NS}})
    ctrl = Controller(api.server.kubeconfig, nb, tmp / "controller.log")
    monitor = NbMonitor(nb)
    try:
        ctrl.start()
        t0 = time.perf_counter()
        names = {f"base-{i}" for i in range(BASE)}
        for n in sorted(names):
            await client.create(SERVICES, service(n), NS)
        ips = await wait_ips(client, names)
        print(
            f"{BASE} Services created and served in {time.perf_counter() - t0:.1f} s "
            f"({sum(1 for v in ips.values() if v)} with an IP)"
        )
        print(
            line(f"Service -> IP in status (@{BASE})", await ip_latencies(client), "p99 < 100 ms (spec 5 s)")
        )
        for services in (CHURN_SERVICES, 4):  # 4: each Service changes every 40 ms, inside the debounce
            lat, rate, writes = await churn(client, monitor, services)
            print(line(f"endpoint change -> OVN row ({services} Svc)", lat, "p99 < 1000 ms"))
            print(f"{'  NB Load_Balancer writes':<34} {writes:.0f}/s for {rate:.0f} endpoint changes/s")
        took, changed, total = await restart(ctrl, client)
        print(
            f"restart with {total} Services: converged in {took:.2f} s, {changed} IPs changed   "
            f"target < 10 s, 0 changed"
        )
        await status_floor(client)
        await asyncio.to_thread(nb_floor, nb)
    finally:
        ctrl.stop()
        monitor.close()
        await client.api.close()


def main() -> None:
    with private_node("k8sh-blb-", "br-k8sbench", "k8shost-bench", lambda _: [OvnStack()]) as (node, tmp):
        api = ThreadedKubeApi(tmp / "api")
        api.start()
        try:
            asyncio.run(run(api, node, tmp))
        finally:
            api.stop()


if __name__ == "__main__":
    main()
