"""metrics-server's part, as k3s runs it: every RESOLUTION seconds, each Node's kubelet
`/metrics/resource` scraped over the kubelet API (HTTPS with the API server's kubelet client
certificate, through kubeletclient.py: its endpoint from the Node's address and the port in its
status, as k3s's metrics-server runs with --kubelet-use-node-status-port, so a Node without a
kubelet endpoint is not scraped; from --kubelet-netns when the nodes are reached from there), all
Nodes at once, and the usage over the window between a sample and the one before: CPU as the rate
of the cumulative core-seconds (nanocores), memory as the last working set. A Node that does not
answer keeps no metrics (kubectl top then says so for it), as metrics-server drops it. Pure parsing
and arithmetic here, but for the scrape (`fetch`)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from nodeenv.kubeapi.errors import BadRequest
from nodeenv.kubeapi.kubeletclient import KubeletClient, node_endpoint

log = logging.getLogger(__name__)
RESOLUTION = 10.0
"""Seconds between scrapes (metrics-server's --metric-resolution; k3s's default is 15 s)."""
TIMEOUT = 5.0
"""Seconds a scrape of one kubelet may take."""
ContainerKey = tuple[str, str, str]
"""(namespace, pod, container)."""


@dataclass(frozen=True, slots=True)
class Point:
    cpu_seconds: float
    memory_bytes: float
    at: float
    """The sample's timestamp, seconds since the epoch."""


@dataclass(frozen=True, slots=True)
class Usage:
    nanocores: int
    memory_bytes: int
    at: float
    window: float


def rate(before: Point | None, after: Point) -> Usage | None:
    """The usage between two cumulative samples; None without an earlier one (or a reset)."""
    if before is None or after.at <= before.at or after.cpu_seconds < before.cpu_seconds:
        return None
    window = after.at - before.at
    cores = (after.cpu_seconds - before.cpu_seconds) / window
    return Usage(int(cores * 1e9), int(after.memory_bytes), after.at, window)


def parse(text: str) -> tuple[Point | None, dict[ContainerKey, Point]]:
    """The node's sample and each container's, from kubelet's resource metrics text."""
    values: dict[tuple[str, ContainerKey | None], tuple[float, float]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name in ("node_cpu_usage_seconds_total", "node_memory_working_set_bytes"):
                key: ContainerKey | None = None
            elif s.name in ("container_cpu_usage_seconds_total", "container_memory_working_set_bytes"):
                key = (s.labels.get("namespace", ""), s.labels.get("pod", ""), s.labels.get("container", ""))
            else:
                continue
            at = float(s.timestamp) if s.timestamp is not None else 0.0
            values[("cpu" if "cpu" in s.name else "mem", key)] = (s.value, at)
    keys = {k for _, k in values}
    points = {k: Point(values[("cpu", k)][0], values[("mem", k)][0], values[("cpu", k)][1])
              for k in keys if ("cpu", k) in values and ("mem", k) in values}  # fmt: skip
    node = points.pop(None, None)
    return node, {k: v for k, v in points.items() if k is not None}


def scraped(nodes: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(name, kubelet API base URL) of the Nodes that report a kubelet endpoint (and an address)."""
    out = []
    for n in nodes:
        status = n.get("status") or {}
        if ((status.get("daemonEndpoints") or {}).get("kubeletEndpoint") or {}).get("Port"):
            with contextlib.suppress(BadRequest):  # no address: nowhere to scrape
                out.append((n["metadata"]["name"], node_endpoint(n)))
    return out


async def fetch(client: KubeletClient, endpoint: str, timeout: float = TIMEOUT) -> str:
    """GET {endpoint}/metrics/resource, as the API server's kubelet client."""
    async with client.session.get(
        endpoint + "/metrics/resource", timeout=aiohttp.ClientTimeout(total=timeout)
    ) as resp:
        body = await resp.text()
        if resp.status != 200:
            raise aiohttp.ClientResponseError(
                resp.request_info, (), status=resp.status, message=body.strip()[:200]
            )
        return body


@dataclass
class MetricsServer:
    client: KubeletClient
    nodes: dict[str, Usage] = field(default_factory=dict)
    containers: dict[ContainerKey, Usage] = field(default_factory=dict)
    _last: dict[str, tuple[Point | None, dict[ContainerKey, Point]]] = field(default_factory=dict)
    _owner: dict[ContainerKey, str] = field(default_factory=dict)
    """Container -> the node it was scraped from."""

    def record(self, node: str, text: str) -> None:
        """One scrape of `node`: its usage and its containers' since the scrape before."""
        point, containers = parse(text)
        before_node, before = self._last.get(node, (None, {}))
        self._last[node] = (point, containers)
        usage = rate(before_node, point) if point is not None else None
        if usage is not None:
            self.nodes[node] = usage
        for key in [
            k for k, u in self.containers.items() if self._owner.get(k) == node and k not in containers
        ]:
            del self.containers[key]
        for key, p in containers.items():
            u = rate(before.get(key), p)
            if u is not None:
                self.containers[key] = u
                self._owner[key] = node

    def forget(self, node: str) -> None:
        self.nodes.pop(node, None)
        self._last.pop(node, None)
        for key in [k for k, n in self._owner.items() if n == node]:
            self.containers.pop(key, None)
            del self._owner[key]

    async def scrape(self, nodes: list[tuple[str, str]]) -> None:
        """One round over (node name, kubelet API base URL), every node at once."""
        results = await asyncio.gather(*(fetch(self.client, url) for _, url in nodes), return_exceptions=True)
        for (name, url), result in zip(nodes, results, strict=True):
            if isinstance(result, str):
                self.record(name, result)
            elif isinstance(result, aiohttp.ClientError | OSError):  # TimeoutError is an OSError
                log.info("metrics: node %s (%s) not scraped: %s", name, url, result)
                self.forget(name)
            else:
                raise result
