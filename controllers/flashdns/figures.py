"""Per-response figures of the embedded server, kept as plain ints on the hot path (a UDP answer
costs ~16 us; prometheus_client's locked observe would add a visible share) and turned into
Prometheus families at scrape time: responses by rcode, and query-to-response latency."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily

LATENCY_BUCKETS = (0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
RCODE_NAMES = {0: "NOERROR", 1: "FORMERR", 2: "SERVFAIL", 3: "NXDOMAIN", 4: "NOTIMP", 5: "REFUSED"}
"""The rcodes the server and its upstreams answer; the other ten values are counted as `other`."""


class Latency:
    __slots__ = ("counts", "sum")

    def __init__(self) -> None:
        self.counts = [0] * (len(LATENCY_BUCKETS) + 1)
        self.sum = 0.0

    def observe(self, seconds: float) -> None:
        self.counts[bisect_left(LATENCY_BUCKETS, seconds)] += 1
        self.sum += seconds

    def cumulative(self) -> list[tuple[str, float]]:
        out, seen = [], 0
        for bound, n in zip((*map(str, LATENCY_BUCKETS), "+Inf"), self.counts, strict=True):
            seen += n
            out.append((bound, float(seen)))
        return out


class ResponseFigures:
    """`rcodes[wire[3] & 15] += 1` and `udp.observe(...)` where a response leaves."""

    __slots__ = ("rcodes", "tcp", "udp")

    def __init__(self) -> None:
        self.rcodes = [0] * 16
        self.udp, self.tcp = Latency(), Latency()

    def sent(self, wire: bytes, latency: Latency, seconds: float) -> None:
        self.rcodes[wire[3] & 15] += 1
        latency.observe(seconds)

    def families(self) -> Iterator[CounterMetricFamily | HistogramMetricFamily]:
        by_rcode = CounterMetricFamily(
            "flashdns_dns_responses", "DNS responses sent, by rcode", labels=["rcode"]
        )
        for code, name in RCODE_NAMES.items():
            by_rcode.add_metric([name], self.rcodes[code])
        by_rcode.add_metric(["other"], sum(n for c, n in enumerate(self.rcodes) if c not in RCODE_NAMES))
        yield by_rcode
        latency = HistogramMetricFamily(
            "flashdns_dns_request_duration_seconds", "Query received to response sent", labels=["transport"]
        )
        for transport, lat in (("udp", self.udp), ("tcp", self.tcp)):
            latency.add_metric([transport], lat.cumulative(), lat.sum)
        yield latency
