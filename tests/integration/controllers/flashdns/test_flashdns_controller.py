"""flashdns-controller on the Kubernetes API double, answering over real UDP and TCP on loopback."""

from __future__ import annotations

import asyncio
import re
import threading
import urllib.request
from pathlib import Path
from typing import Any

from controllers.machinery import ENDPOINT_SLICES, SERVICES, KubeClient
from tests.integration.controllers.flashdns.flashdns_kit import (
    SA,
    Running,
    create_pod,
    endpoint_slice,
    flashdns_controller,
    service,
)
from tests.integration.controllers.machinery_kit import client_for, ensure_namespace
from tests.unit.controllers.flashdns.dns_kit import ask, values

WEB = "web.team-a.svc.cluster.local"


async def rcode_and_values(port: int, name: str, qtype: str = "A", tcp: bool = False) -> tuple[int, set[str]]:
    reply = await asyncio.to_thread(ask, port, name, qtype, tcp=tcp)
    return int(reply.header.rcode), values(reply)


async def until_answer(port: int, name: str, want: set[str], qtype: str = "A", timeout: float = 10.0) -> None:
    got: list[Any] = []

    async def check() -> bool:
        got[:] = [await rcode_and_values(port, name, qtype)]
        return got[0][1] == want

    deadline = asyncio.get_running_loop().time() + timeout
    while not await check():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"{name} {qtype}: wanted {want}, last answer {got}")
        await asyncio.sleep(0.05)


async def test_service_lifecycle_over_udp_and_tcp(kube_api: Any, tmp_path: Path) -> None:
    async with client_for(kube_api.kubeconfig) as c:
        await ensure_namespace(c, "team-a")
        created = await c.create(SERVICES, service("web", "team-a"))
        await c.create(SERVICES, service("keep", "team-a"))
        ip = created["spec"]["clusterIP"]
        async with flashdns_controller(kube_api.kubeconfig_for(SA), tmp_path) as run:
            for tcp in (False, True):
                assert await rcode_and_values(run.port, WEB, tcp=tcp) == (0, {ip})
            await until_answer(run.port, "_http._tcp." + WEB, {f"0 100 80 {WEB}."}, "SRV")
            rev = ".".join(reversed(ip.split("."))) + ".in-addr.arpa"
            assert (await rcode_and_values(run.port, rev, "PTR"))[1] == {WEB + "."}
            # a change: the named port is renamed
            current = await c.get(SERVICES, "team-a", "web")
            current["spec"]["ports"] = [{"name": "web", "port": 8080, "protocol": "TCP"}]
            await c.replace(SERVICES, current)
            await until_answer(run.port, "_web._tcp." + WEB, {f"0 100 8080 {WEB}."}, "SRV")
            assert (await rcode_and_values(run.port, "_http._tcp." + WEB, "SRV"))[0] == 3
            # deletion removes exactly that Service's records
            await c.delete(SERVICES, "team-a", "web")
            for _ in range(100):
                if (await rcode_and_values(run.port, WEB))[0] == 3:
                    break
                await asyncio.sleep(0.05)
            assert (await rcode_and_values(run.port, WEB))[0] == 3
            assert (await rcode_and_values(run.port, rev, "PTR"))[0] in (3, 5)  # no longer ours
            assert (await rcode_and_values(run.port, "keep.team-a.svc.cluster.local"))[0] == 0
            metrics = await asyncio.to_thread(_get, f"http://127.0.0.1:{run.app.metrics_port}/metrics")
            udp = re.search(r'flashdns_dns_queries_total\{transport="udp"\} (\d+)', metrics)
            assert udp and int(udp.group(1)) >= 5 and "flashdns_zone_names" in metrics


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as r:
        return str(r.read().decode())


async def test_headless_pods_and_restart(kube_api: Any, tmp_path: Path) -> None:
    async with client_for(kube_api.kubeconfig) as c:
        await ensure_namespace(c, "db")
        await c.create(SERVICES, service("pg", "db", clusterIP="None"))
        await c.create(ENDPOINT_SLICES, endpoint_slice("pg", ["10.244.3.10"], "db", hostname="pg-0"))
        await create_pod(c, "pg-0", "10.244.3.10", "db")
        for attempt in range(2):  # the second run is a restart: the same answers come back
            async with flashdns_controller(kube_api.kubeconfig_for(SA), tmp_path) as run:
                port = run.port
                assert await rcode_and_values(port, "pg.db.svc.cluster.local") == (0, {"10.244.3.10"})
                assert await rcode_and_values(port, "pg-0.pg.db.svc.cluster.local") == (0, {"10.244.3.10"})
                srv = await rcode_and_values(port, "_http._tcp.pg.db.svc.cluster.local", "SRV")
                assert srv == (0, {"0 100 8080 pg-0.pg.db.svc.cluster.local."})
                for name in ("10-244-3-10.db.pod.cluster.local", "10-244-3-10.pod.cluster.local"):
                    assert await rcode_and_values(port, name) == (0, {"10.244.3.10"}), attempt
                ptr = await rcode_and_values(port, "10.3.244.10.in-addr.arpa", "PTR")
                assert ptr == (0, {"pg-0.pg.db.svc.cluster.local.", "10-244-3-10.db.pod.cluster.local."})


async def test_endpoint_churn_is_debounced(kube_api: Any, tmp_path: Path) -> None:
    async with client_for(kube_api.kubeconfig) as c:
        await c.create(SERVICES, service("churn", clusterIP="None"))
        await c.create(ENDPOINT_SLICES, endpoint_slice("churn", ["10.244.9.1"]))
        async with flashdns_controller(kube_api.kubeconfig_for(SA), tmp_path, "--debounce", "1.0") as run:
            await until_answer(run.port, "churn.default.svc.cluster.local", {"10.244.9.1"})
            before = run.reconciles()
            for i in range(2, 22):  # 20 endpoint updates in well under a second
                await set_endpoint(c, "churn-a", f"10.244.9.{i}")
            await until_answer(run.port, "churn.default.svc.cluster.local", {"10.244.9.21"})
            await asyncio.sleep(1.2)
            assert run.reconciles() - before <= 5, "20 slice updates in a burst must be a few reconciles"


async def test_no_nxdomain_while_records_are_replaced(kube_api: Any, tmp_path: Path) -> None:
    """A resolver loop during 30 updates (every endpoint replaced each time) never sees NXDOMAIN."""
    async with client_for(kube_api.kubeconfig) as c:
        await c.create(SERVICES, service("flip", clusterIP="None"))
        await c.create(ENDPOINT_SLICES, endpoint_slice("flip", ["10.244.8.1"]))
        async with flashdns_controller(kube_api.kubeconfig_for(SA), tmp_path, "--debounce", "0") as run:
            await until_answer(run.port, "flip.default.svc.cluster.local", {"10.244.8.1"})
            stop = threading.Event()
            seen: list[tuple[int, int]] = []

            def resolver_loop() -> None:
                while not stop.is_set():
                    for tcp in (False, True):
                        r = ask(run.port, "flip.default.svc.cluster.local", tcp=tcp)
                        seen.append((int(r.header.rcode), len(r.rr)))

            loop_thread = threading.Thread(target=resolver_loop)
            loop_thread.start()
            try:
                await _flip_endpoints(c, run, 30)
            finally:
                stop.set()
                await asyncio.to_thread(loop_thread.join, 10)
            assert len(seen) > 50
            assert all(rcode == 0 and n >= 1 for rcode, n in seen), [s for s in seen if s != (0, 1)][:5]


async def _flip_endpoints(c: KubeClient, run: Running, n: int) -> None:
    for i in range(2, 2 + n):
        await set_endpoint(c, "flip-a", f"10.244.8.{i}")
        await until_answer(run.port, "flip.default.svc.cluster.local", {f"10.244.8.{i}"})


async def set_endpoint(c: KubeClient, slice_name: str, ip: str) -> None:
    """Replace every endpoint of the slice with one at `ip` (read-modify-write)."""
    sl = await c.get(ENDPOINT_SLICES, "default", slice_name)
    sl["endpoints"] = [{"addresses": [ip], "conditions": {"ready": True}}]
    await c.replace(ENDPOINT_SLICES, sl)


def test_a_taken_dns_address_is_a_clear_start_up_error(kube_api: Any) -> None:
    import socket
    import subprocess
    import sys

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as taken:
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]
        proc = subprocess.run(
            [sys.executable, "-m", "controllers.flashdns.main",
             "--kubeconfig", str(kube_api.kubeconfig_for(SA)), "--leader-elect=false",
             "--metrics-address", "off", "--dns-address", f"127.0.0.1:{port}"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    assert proc.returncode != 0
    assert f"cannot listen on 127.0.0.1:{port}" in proc.stderr and "Traceback" not in proc.stderr
