"""Prometheus figures of a component's OVSDB connections: connected (to the leader, for a RAFT
cluster), the server it is on, reconnections, and transaction latency and errors per database.

`OvsdbClientMetrics(registry).watch(db, "OVN_Northbound")` after each `connect`: the connection
state is read at scrape time; every transaction of the connection's API reports its duration
(commit to answer, retries included) through `api.txn_observer` (ovnaccess/retry.py).
The `database` label is the schema name (three values); `server` is one of the configured remotes.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from ovnaccess.connection import Ovsdb

TXN_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class _ConnectionCollector(Collector):
    def __init__(self, dbs: list[tuple[str, Ovsdb]]) -> None:
        self._dbs = dbs

    def collect(self) -> Iterator[Metric]:
        connected = GaugeMetricFamily(
            "ovsdb_client_connected", "1 while connected (a cluster: to its leader)", labels=["database"]
        )
        server = GaugeMetricFamily(
            "ovsdb_client_server_info", "1 for the server the connection is on", labels=["database", "server"]
        )
        reconnects = CounterMetricFamily(
            "ovsdb_client_reconnects", "Times the connection was made again (a new leader, a server back)",
            labels=["database"],
        )  # fmt: skip
        for database, db in list(self._dbs):
            up = db.connected()
            connected.add_metric([database], 1.0 if up else 0.0)
            if up:
                server.add_metric([database, db.remote()], 1.0)
            reconnects.add_metric([database], float(getattr(db.idl, "reconnects", 0)))
        yield from (connected, server, reconnects)


class OvsdbClientMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self._dbs: list[tuple[str, Ovsdb]] = []
        self.duration = Histogram(
            "ovsdb_client_transaction_duration_seconds",
            "OVSDB transaction commit to answer, retries included",
            ["database"],
            buckets=TXN_BUCKETS,
            registry=registry,
        )
        self.errors = Counter(
            "ovsdb_client_transaction_errors",
            "OVSDB transactions that ended in an error",
            ["database"],
            registry=registry,
        )
        registry.register(_ConnectionCollector(self._dbs))

    def watch(self, db: Ovsdb, database: str) -> None:
        """Export `db`'s state and time its transactions under `database` (its schema's name)."""
        duration, errors = self.duration.labels(database), self.errors.labels(database)

        def observe(seconds: float, ok: bool) -> None:
            duration.observe(seconds)
            if not ok:
                errors.inc()

        db.api.txn_observer = observe
        self._dbs.append((database, db))
