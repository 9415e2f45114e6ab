"""Prometheus metrics of prismnet-agent, on their own registry, served with health endpoints."""

from __future__ import annotations

import asyncio
import ipaddress
import logging
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from cni.ipam_usage import SubnetUsage, cluster_usage
from ovnaccess.metrics import OvsdbClientMetrics

log = logging.getLogger(__name__)

BUCKETS = (0.005, 0.01, 0.015, 0.02, 0.03, 0.05, 0.075, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
READ_BUDGET = 0.25
"""Seconds a scrape waits for the node figures' replica reads before it shows the last ones: a read
queues behind the connection's transaction in progress, which retries for as long as the NB takes
no write (ovnaccess/retry.py)."""
T = TypeVar("T")


class _Latest(Generic[T]):
    """The last value of one replica read, read again at each scrape: a read starts only when none
    is under way (a stuck NB holds one thread, not one per scrape), and a scrape waits for it at most
    READ_BUDGET s. A read that fails clears the value (the figures are then absent, not stale)."""

    def __init__(self, read: Callable[[], T | None], pool: ThreadPoolExecutor) -> None:
        self._read, self._pool = read, pool
        self._pending: Future[None] | None = None
        self.value: T | None = None

    def start(self) -> Future[None]:
        if self._pending is None or self._pending.done():
            self._pending = self._pool.submit(self._update)
        return self._pending

    def _update(self) -> None:
        try:
            self.value = self._read()
        except Exception as e:
            self.value = None
            log.debug("node figures unavailable: %s", e)


class _NodeCollector(Collector):
    """Read at scrape time from the replicas: IPAM use per subnet and over the cluster CIDR
    (the NB's, the same on every node), and this node's Geneve tunnels (its OVS)."""

    def __init__(self, sources: AgentSources, pool: ThreadPoolExecutor) -> None:
        self._s = sources
        self.usage = _Latest(lambda: _call(sources.started(), "address_usage"), pool)
        self.tunnels = _Latest(lambda: _call(sources.started(), "tunnels"), pool)

    async def refresh(self) -> None:
        """Both reads started, waited for within READ_BUDGET s together."""
        pending = [asyncio.wrap_future(r.start()) for r in (self.usage, self.tunnels)]
        await asyncio.wait(pending, timeout=READ_BUDGET)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        per_subnet = GaugeMetricFamily("prismnet_ipam_subnet_addresses", "Pod addresses of one namespace "
                                       "subnet (used|free)", labels=["subnet", "state"])  # fmt: skip
        total = GaugeMetricFamily(
            "prismnet_ipam_addresses", "Pod addresses over the cluster CIDR (used|free)", labels=["state"]
        )
        tunnels = GaugeMetricFamily(
            "prismnet_geneve_tunnels", "Geneve tunnels of this node by BFD state", labels=["bfd"]
        )
        subnets, states = self.usage.value, self.tunnels.value
        if subnets is not None:
            used, free = cluster_usage(subnets, self._s.cluster, self._s.prefix)
            for u in subnets:
                per_subnet.add_metric([u.subnet, "used"], u.used)
                per_subnet.add_metric([u.subnet, "free"], u.free)
            total.add_metric(["used"], used)
            total.add_metric(["free"], free)
        for state, n in (states or {}).items():
            tunnels.add_metric([state], n)
        yield from (per_subnet, total, tunnels)


def _call(figures: NodeFigures | None, name: str) -> Any:
    return None if figures is None else getattr(figures, name)()


class NodeFigures(Protocol):
    def address_usage(self) -> list[SubnetUsage]: ...
    def tunnels(self) -> dict[str, int]: ...


@dataclass(frozen=True, slots=True)
class AgentSources:
    started: Callable[[], NodeFigures | None]
    """The agent's figures once it is connected (None before)."""
    cluster: ipaddress.IPv4Network
    prefix: int


class Metrics:
    def __init__(self, sources: AgentSources | None = None) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "prismnet_cni_requests",
            "CNI requests by command and result code (0: success, else the CNI error code)",
            ["command", "code"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "prismnet_cni_request_duration_seconds",
            "CNI request latency by command",
            ["command"],
            buckets=BUCKETS,
            registry=self.registry,
        )
        self.overlaps = Counter(
            "prismnet_switch_subnet_overlaps_refused",
            "Logical switches not created: their subnet overlapped another switch's (the log names both)",
            registry=self.registry,
        )
        self.ovsdb = OvsdbClientMetrics(self.registry)
        # scrapes run here, never on the event loop (whose /healthz must answer whatever OVSDB does),
        # nor in the CNI requests' pool (which a stuck NB can fill): 2 threads for the two reads, at
        # most one each under way, 2 for rendering
        self._pool = ThreadPoolExecutor(4, thread_name_prefix="metrics")
        self._node: _NodeCollector | None = None
        if sources is not None:
            self._node = _NodeCollector(sources, self._pool)
            self.registry.register(self._node)

    def close(self) -> None:
        """A read still stuck on the NB is not waited for (it ends with its connection)."""
        self._pool.shutdown(wait=False, cancel_futures=True)

    def observe(self, command: str, code: int, seconds: float) -> None:
        command = command if command in ("ADD", "DEL", "CHECK", "GC", "STATUS") else "other"
        self.requests.labels(command, str(code)).inc()
        self.latency.labels(command).observe(seconds)

    def refused_overlap(self, _refused: object) -> None:
        """Northbound's on_overlap (any thread; the refusal itself is logged where it happens)."""
        self.overlaps.inc()

    def app(self, ready: Callable[[], bool], why: Callable[[], str] = str) -> web.Application:
        """/metrics, /healthz (the process answers) and /readyz (503 with `why()` when not ready)."""

        async def metrics(_: web.Request) -> web.Response:
            if self._node is not None:
                await self._node.refresh()
            body = await asyncio.wrap_future(self._pool.submit(generate_latest, self.registry))
            return web.Response(body=body, content_type="text/plain")

        async def healthz(_: web.Request) -> web.Response:
            return web.Response(text="ok\n")

        async def readyz(_: web.Request) -> web.Response:
            if ready():
                return web.Response(text="ready\n")
            reason = why()
            return web.Response(
                status=503, text=f"not ready: waiting for {reason}\n" if reason else "not ready\n"
            )

        app = web.Application()
        app.router.add_get("/metrics", metrics)
        app.router.add_get("/healthz", healthz)
        app.router.add_get("/readyz", readyz)
        return app
