"""Prometheus metrics of prismnet-agent, on their own registry, served with health endpoints."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

BUCKETS = (0.005, 0.01, 0.015, 0.02, 0.03, 0.05, 0.075, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


class _IpsInUse(Collector):
    def __init__(self, source: Callable[[], dict[str, int]]) -> None:
        self._source = source

    def collect(self) -> Iterator[GaugeMetricFamily]:
        g = GaugeMetricFamily(
            "prismnet_ips_in_use", "Pod addresses held in OVN, per namespace", labels=["namespace"]
        )
        try:
            counts = self._source()
        except Exception:  # a scrape must not fail because OVSDB is away
            counts = {}
        for ns, n in sorted(counts.items()):
            g.add_metric([ns], n)
        yield g


class Metrics:
    def __init__(self, ips_in_use: Callable[[], dict[str, int]] | None = None) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "prismnet_cni_requests",
            "CNI requests by command and outcome",
            ["command", "result"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "prismnet_cni_request_seconds",
            "CNI request latency by command",
            ["command"],
            buckets=BUCKETS,
            registry=self.registry,
        )
        if ips_in_use is not None:
            self.registry.register(_IpsInUse(ips_in_use))

    def observe(self, command: str, ok: bool, seconds: float) -> None:
        command = command if command in ("ADD", "DEL", "CHECK", "GC", "STATUS") else "other"
        self.requests.labels(command, "ok" if ok else "error").inc()
        self.latency.labels(command).observe(seconds)

    def app(self, ready: Callable[[], bool], why: Callable[[], str] = str) -> web.Application:
        """/metrics, /healthz (the process answers) and /readyz (503 with `why()` when not ready)."""

        async def metrics(_: web.Request) -> web.Response:
            return web.Response(body=generate_latest(self.registry), content_type="text/plain")

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
