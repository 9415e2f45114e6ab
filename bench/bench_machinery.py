"""Controller machinery figures: the floors under every controller's latency.

Against the API double (in-process, HTTPS on loopback, its own thread), through kubernetes_asyncio:
1. API write -> informer handler: ConfigMap created (POST sent) -> the watch delivered it to the
   handler, 500 times; beside it the floor, the POST round trip alone.
2. Initial sync of an informer over 5,000 objects (paged, 500 per page).
3. WorkQueue add/get/done cycles per second (one process, no I/O).
4. Leader hand-over: two ControllerApps with the default Lease timing (15 s duration, 10 s renew
   deadline, 2 s retry); the leader is stopped as on SIGTERM (releases the Lease) -> the follower
   leads. Bound: the lease duration (a leader that dies without releasing); expected: about one
   retry period.
No target is named for the machinery itself: the LB bench's "IP in status p99 < 100 ms" is built on
(1), so (1) must stay a small part of it.

    make bench BENCH=machinery
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from controllers.machinery import (
    CONFIG_MAPS,
    NAMESPACES,
    AppContext,
    ControllerApp,
    Informer,
    KubeClient,
    WorkQueue,
)
from controllers.machinery.kubeconfig import load_api_client
from controllers.machinery.settings import parse
from nodeenv.kubeapi.server import ThreadedKubeApi
from nodeenv.kubeapi.state import ApiConfig

NS, EVENTS, SYNC_OBJECTS, QUEUE_CYCLES, HANDOVERS = "bench", 500, 5000, 100_000, 5


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, round(p / 100 * (len(s) - 1)))]


def line(label: str, ms: list[float], note: str = "") -> str:
    return (f"{label:<40} median {statistics.median(ms):6.2f} ms  p95 {pct(ms, 95):6.2f} ms  "
            f"p99 {pct(ms, 99):6.2f} ms  (n={len(ms)}) {note}")  # fmt: skip


def cm(name: str) -> dict[str, object]:
    return {"metadata": {"name": name, "namespace": NS}, "data": {"k": "v"}}


async def write_to_handler(client: KubeClient) -> None:
    informer = Informer(client, CONFIG_MAPS, namespace=NS)
    arrived: dict[str, float] = {}
    informer.add_handler(lambda o: arrived.setdefault(o["metadata"]["name"], time.perf_counter()))
    informer.start()
    await informer.wait_synced()
    latency, floor = [], []
    for i in range(EVENTS):
        name = f"e-{i}"
        sent = time.perf_counter()
        await client.create(CONFIG_MAPS, cm(name))
        floor.append((time.perf_counter() - sent) * 1000)
        while name not in arrived:
            await asyncio.sleep(0)
        latency.append((arrived[name] - sent) * 1000)
    await informer.stop()
    print(line("POST sent -> informer handler", latency))
    print(line("floor: POST round trip alone", floor))


async def initial_sync(client: KubeClient) -> None:
    for i in range(SYNC_OBJECTS):
        await client.create(CONFIG_MAPS, cm(f"s-{i}"))
    times = []
    for _ in range(3):
        informer = Informer(client, CONFIG_MAPS, namespace=NS)
        started = time.perf_counter()
        informer.start()
        await informer.wait_synced()
        times.append((time.perf_counter() - started) * 1000)
        await informer.stop()
    label = f"informer sync, {len(informer.store)} objects"
    print(f"{label:<40} median {statistics.median(times):6.0f} ms")


async def queue_cycles() -> None:
    q = WorkQueue("bench")
    started = time.perf_counter()
    for i in range(QUEUE_CYCLES):
        q.add(f"ns/{i % 1000}")
        key = await q.get()
        assert key is not None
        q.done(key)
    rate = QUEUE_CYCLES / (time.perf_counter() - started)
    print(f"{'work queue add+get+done':<40} {rate:,.0f} cycles/s")


async def noop_setup(ctx: AppContext) -> None:
    async def reconcile(key: str) -> None:
        return None

    informer = ctx.informer(CONFIG_MAPS, namespace=NS)
    ctrl = ctx.controller("noop", reconcile)
    informer.add_handler(ctrl.enqueue_object)


class Replica:
    def __init__(self, kubeconfig: Path, who: str) -> None:
        argv = ["--kubeconfig", str(kubeconfig), "--leader-elect-identity", who, "--metrics-address", "off"]
        self.app = ControllerApp("bench-handover", noop_setup)
        self.stop = asyncio.Event()
        self.task = asyncio.create_task(self.app.run(parse("bench", "", argv, {}), self.stop))

    @property
    def leading(self) -> bool:
        return self.app.elector is not None and self.app.elector.is_leader


async def handover(kubeconfig: Path) -> None:
    leader = Replica(kubeconfig, "r0")
    while not leader.leading:
        await asyncio.sleep(0.01)
    times = []
    for i in range(1, HANDOVERS + 1):
        follower = Replica(kubeconfig, f"r{i}")
        await asyncio.sleep(1.0)  # the follower has seen the held Lease
        started = time.perf_counter()
        leader.stop.set()
        while not follower.leading:
            await asyncio.sleep(0.005)
        times.append((time.perf_counter() - started) * 1000)
        await leader.task
        leader = follower
    leader.stop.set()
    await leader.task
    print(line("SIGTERM -> follower leads", times, "(bound: lease 15 s; retry period 2 s)"))


async def run(kubeconfig: Path) -> None:
    api = await load_api_client(kubeconfig, in_cluster=False)
    async with api:
        client = KubeClient(api)
        await client.create(NAMESPACES, {"metadata": {"name": NS}})
        await write_to_handler(client)
        await initial_sync(client)
    await queue_cycles()
    await handover(kubeconfig)


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="k8sh-bench-") as tmp:
        double = ThreadedKubeApi(Path(tmp), ApiConfig())
        double.start()
        try:
            asyncio.run(run(double.server.kubeconfig))
        finally:
            double.stop()


if __name__ == "__main__":
    main()
