"""metrics-server's part, as k3s runs it: every RESOLUTION seconds, each Node's kubelet
`/metrics/resource` scraped (its InternalIP, the read-only port: nodeenv/kubelet/readonlyport.py;
from the nodes' network namespace when the double serves one with --also-listen), and the usage
over the window between a sample and the one before: CPU as the rate of the cumulative core-seconds
(nanocores), memory as the last working set. A Node that does not answer keeps no metrics (kubectl
top then says so for it), as metrics-server drops it. Pure parsing and arithmetic here; the scrape
is one HTTP GET with http.client on a socket made in the right namespace."""

from __future__ import annotations

import asyncio
import http.client
import logging
import socket
from collections.abc import Iterable
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

from nodeenv import netns_socket

log = logging.getLogger(__name__)
RESOLUTION = 10.0
"""Seconds between scrapes (metrics-server's --metric-resolution; k3s's default is 15 s)."""
KUBELET_READ_ONLY_PORT = 10255
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


def fetch(host: str, port: int, netns: str, timeout: float = 3.0) -> str:
    """GET http://host:port/metrics/resource, connecting from `netns` (or this namespace)."""
    if netns:
        sock = netns_socket.connected_socket(netns, host, port, timeout)
    else:
        sock = socket.create_connection((host, port), timeout=timeout)
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    conn.sock = sock
    try:
        conn.request("GET", "/metrics/resource")
        resp = conn.getresponse()
        body = resp.read().decode()
        if resp.status != 200:
            raise OSError(f"HTTP {resp.status}")
        return body
    finally:
        conn.close()


@dataclass
class MetricsServer:
    netns: str = ""
    port: int = 0
    """The kubelets' port; 0: KUBELET_READ_ONLY_PORT."""
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

    async def scrape(self, nodes: Iterable[tuple[str, str]]) -> None:
        """One round over (node name, InternalIP)."""
        port = self.port or KUBELET_READ_ONLY_PORT
        for name, ip in nodes:
            try:
                text = await asyncio.to_thread(fetch, ip, port, self.netns)
            except OSError as e:
                log.info("metrics: node %s (%s:%d) not scraped: %s", name, ip, port, e)
                self.forget(name)
                continue
            self.record(name, text)
