"""Prometheus metrics of one webhook instance (own registry, so tests can run several)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from webhook.cache import ReviewCache

LATENCY_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0)


class _LiveCollector(Collector):
    """Figures read at scrape time: cache lookups and hit ratio, key-set size and age."""

    def __init__(self, cache: ReviewCache | None, keys: Callable[[], int], age: Callable[[], float],
                 jwks_failures: Callable[[], int]) -> None:  # fmt: skip
        self._cache, self._keys, self._age, self._jwks_failures = cache, keys, age, jwks_failures

    def collect(self) -> Iterator[Metric]:
        hits, misses = (self._cache.hits, self._cache.misses) if self._cache else (0, 0)
        lookups = CounterMetricFamily(
            "iam_webhook_cache_lookups", "Review cache lookups by result", labels=["result"]
        )
        lookups.add_metric(["hit"], hits)
        lookups.add_metric(["miss"], misses)
        yield lookups
        ratio = hits / (hits + misses) if hits + misses else 0.0
        yield GaugeMetricFamily("iam_webhook_cache_hit_ratio", "Review cache hits / lookups", value=ratio)
        yield GaugeMetricFamily("iam_webhook_keys", "Verification keys loaded", value=self._keys())
        yield GaugeMetricFamily(
            "iam_webhook_keyset_age_seconds",
            "Seconds since the key sources last loaded successfully (+Inf: never)",
            value=self._age(),
        )
        yield CounterMetricFamily(
            "iam_webhook_jwks_refresh_failures", "JWKS fetches that failed (last good keys kept)",
            value=self._jwks_failures(),
        )  # fmt: skip


class Metrics:
    def __init__(
        self,
        cache: ReviewCache | None,
        keys: Callable[[], int],
        age: Callable[[], float],
        jwks_failures: Callable[[], int] = lambda: 0,
    ) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.reviews = Counter(
            "iam_webhook_reviews",
            "TokenReviews answered, by result",
            ["result"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "iam_webhook_review_duration_seconds",
            "Time to answer a TokenReview",
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self._by_result = {
            r: self.reviews.labels(r)
            for r in ("authenticated", "rejected", "bad_request", "forbidden", "unavailable", "error")
        }
        self.registry.register(_LiveCollector(cache, keys, age, jwks_failures))

    def observe(self, result: str, seconds: float) -> None:
        self._by_result[result].inc()
        self.latency.observe(seconds)
