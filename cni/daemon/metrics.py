"""Prometheus metrics of prismnet-agent, on their own registry, served with health endpoints."""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from cni.ipam_usage import SubnetUsage, cluster_usage
from ovnaccess.metrics import OvsdbClientMetrics

log = logging.getLogger(__name__)

BUCKETS = (0.005, 0.01, 0.015, 0.02, 0.03, 0.05, 0.075, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


class _NodeCollector(Collector):
    """Read at scrape time from the replicas: IPAM use per subnet and over the cluster CIDR
    (the NB's, the same on every node), and this node's Geneve tunnels (its OVS)."""

    def __init__(self, sources: AgentSources) -> None:
        self._s = sources

    def collect(self) -> Iterator[GaugeMetricFamily]:
        per_subnet = GaugeMetricFamily("prismnet_ipam_subnet_addresses", "Pod addresses of one namespace "
                                       "subnet (used|free)", labels=["subnet", "state"])  # fmt: skip
        total = GaugeMetricFamily(
            "prismnet_ipam_addresses", "Pod addresses over the cluster CIDR (used|free)", labels=["state"]
        )
        tunnels = GaugeMetricFamily(
            "prismnet_geneve_tunnels", "Geneve tunnels of this node by BFD state", labels=["bfd"]
        )
        started = self._s.started()
        if started is not None:
            try:  # a scrape must not fail because OVSDB is away
                subnets = started.address_usage()
                used, free = cluster_usage(subnets, self._s.cluster, self._s.prefix)
                for u in subnets:
                    per_subnet.add_metric([u.subnet, "used"], u.used)
                    per_subnet.add_metric([u.subnet, "free"], u.free)
                total.add_metric(["used"], used)
                total.add_metric(["free"], free)
                for state, n in started.tunnels().items():
                    tunnels.add_metric([state], n)
            except Exception as e:
                log.debug("node figures unavailable: %s", e)
        yield from (per_subnet, total, tunnels)


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
        self.ovsdb = OvsdbClientMetrics(self.registry)
        if sources is not None:
            self.registry.register(_NodeCollector(sources))

    def observe(self, command: str, code: int, seconds: float) -> None:
        command = command if command in ("ADD", "DEL", "CHECK", "GC", "STATUS") else "other"
        self.requests.labels(command, str(code)).inc()
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
