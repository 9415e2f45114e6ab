"""fiberlb-controller's own figures: the external IP pool (used/free), refused allocations by
reason, and the time from a LoadBalancer Service first seen without its address to its
status.loadBalancer written. Label values are fixed words; Service names never become labels."""

from __future__ import annotations

import time
from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from controllers.fiberlb.ippool import IpPool, PoolExhausted

STATUS_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)


class FiberlbMetrics:
    def __init__(
        self, registry: CollectorRegistry, pool: Callable[[], IpPool], waiting: Callable[[], int]
    ) -> None:
        addresses = Gauge("fiberlb_pool_addresses", "External IP pool addresses (used|free)", ["state"],
                          registry=registry)  # fmt: skip
        addresses.labels("used").set_function(lambda: pool().in_use())
        addresses.labels("free").set_function(lambda: pool().size - pool().in_use())
        Gauge("fiberlb_services_waiting_for_ip", "Services of our class waiting for an external IP",
              registry=registry).set_function(waiting)  # fmt: skip
        self.failures = Counter("fiberlb_allocation_failures", "External IP allocations refused, by reason "
                                "(exhausted|unavailable)", ["reason"], registry=registry)  # fmt: skip
        self.to_status = Histogram("fiberlb_service_status_seconds", "LoadBalancer Service seen without its "
                                   "address to status.loadBalancer written", buckets=STATUS_BUCKETS,
                                   registry=registry)  # fmt: skip
        self._seen: dict[str, float] = {}

    def allocation_failed(self, e: Exception) -> None:
        self.failures.labels("exhausted" if isinstance(e, PoolExhausted) else "unavailable").inc()

    def waiting_for_address(self, key: str) -> None:
        """The Service has no address in its status yet: timed from its first such reconcile."""
        self._seen.setdefault(key, time.monotonic())

    def status_written(self, key: str) -> None:
        seen = self._seen.pop(key, None)
        if seen is not None:
            self.to_status.observe(time.monotonic() - seen)

    def forget(self, key: str) -> None:
        self._seen.pop(key, None)
