"""Prometheus metrics of one double (own registry, so tests can run several): requests by verb,
resource and code (as apiserver_request_total), and at scrape time the resourceVersion, stored
objects and open watches."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from nodeenv.kubeapi.store import Store


class _StoreCollector(Collector):
    def __init__(self, store: Store) -> None:
        self._store = store

    def collect(self) -> Iterator[Metric]:
        yield GaugeMetricFamily("kubeapi_resource_version", "Current resourceVersion", value=self._store.rv)
        yield GaugeMetricFamily("kubeapi_objects", "Stored objects", value=self._store.size())
        yield GaugeMetricFamily("kubeapi_watches", "Open watches", value=self._store.watch_count())


class Metrics:
    def __init__(self, store: Store) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "kubeapi_requests", "Requests by verb, resource and HTTP code",
            ["verb", "resource", "code"], registry=self.registry,
        )  # fmt: skip
        self.registry.register(_StoreCollector(store))

    def render(self) -> bytes:
        return bytes(generate_latest(self.registry))
