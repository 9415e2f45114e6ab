"""`flashdns-controller`: Services, EndpointSlices and Pods → DNS records (spec section 4).

Backends (`--backend`):
- `embedded` (default): every replica keeps the whole zone and answers DNS itself, so every
  replica reconciles into its own zone (nothing is written to the API, there is nothing to elect);
  the server starts listening once the caches are synced and the first reconcile pass is done.
- `flashdns`: records are written to the FlashDNS DNSService; only the elected leader writes, and
  a periodic full resync from ListRecords repairs drift.
EndpointSlice churn is debounced per Service (`--debounce`); Service changes apply at once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from controllers.flashdns.backend import RecordBackend
from controllers.flashdns.embedded_backend import EmbeddedBackend
from controllers.flashdns.reconcile import SLICES_BY_SERVICE, DnsReconciler, slice_service_key
from controllers.flashdns.settings import FlashDnsSettings, add_arguments
from controllers.machinery import (
    ENDPOINT_SLICES,
    PODS,
    SERVICES,
    AppContext,
    Controller,
    ControllerApp,
    Informer,
    KubeObject,
)

log = logging.getLogger(__name__)
RESYNC_KEY = "flashdns/resync"


def make_backend(s: FlashDnsSettings) -> RecordBackend:
    if s.backend == "flashdns":
        from controllers.flashdns.grpc_backend import GrpcBackend  # needs the generated stubs

        return GrpcBackend(s)
    return EmbeddedBackend(s)


async def setup(ctx: AppContext) -> None:
    try:
        s = FlashDnsSettings.from_args(ctx.args)
    except ValueError as e:
        raise SystemExit(f"flashdns-controller: {e}") from e
    services, slices, pods = ctx.informer(SERVICES), ctx.informer(ENDPOINT_SLICES), ctx.informer(PODS)
    slices.add_index(SLICES_BY_SERVICE, slice_service_key)
    backend = make_backend(s)
    rec = DnsReconciler(services.store, slices.store, pods.store, backend, s.cluster_domain)
    if isinstance(backend, EmbeddedBackend):
        try:
            backend.bind()
        except OSError as e:
            raise SystemExit(f"flashdns-controller: cannot listen on {s.dns_address}: {e}") from e
        svc_ctrl = Controller(
            "flashdns-services", rec.service, workers=ctx.settings.workers, metrics=ctx.metrics
        )
        pod_ctrl = Controller("flashdns-pods", rec.pod, workers=ctx.settings.workers, metrics=ctx.metrics)
        ctx.run_in_background(lambda: serve_everywhere(ctx, backend, (svc_ctrl, pod_ctrl)))
        ctx.metrics.registry.register(DnsCollector(backend))
    else:
        svc_ctrl = ctx.controller("flashdns-services", rec.service, lookup=services.store.get_by_key)
        pod_ctrl = ctx.controller("flashdns-pods", rec.pod, lookup=pods.store.get_by_key)
        resync = ctx.controller(
            "flashdns-resync", periodic_resync(backend, rec, s.resync_interval), workers=1
        )
        resync.enqueue(RESYNC_KEY)
        await backend.start()
        ctx.on_cleanup(backend.stop)
    wire((services, slices, pods), svc_ctrl, pod_ctrl, s.debounce)


def wire(informers: tuple[Informer, Informer, Informer], svc_ctrl: Controller, pod_ctrl: Controller,
         debounce: float) -> None:  # fmt: skip
    """Service events reconcile at once; EndpointSlice events after `debounce` (a burst is one)."""
    services, slices, pods = informers

    def slice_changed(*objs: KubeObject) -> None:
        for key in {k for o in objs for k in slice_service_key(o)}:
            svc_ctrl.queue.add_after(key, debounce)

    services.add_handler(svc_ctrl.enqueue_object, _new(svc_ctrl.enqueue_object), svc_ctrl.enqueue_object)
    slices.add_handler(slice_changed, slice_changed, slice_changed)
    pods.add_handler(pod_ctrl.enqueue_object, _new(pod_ctrl.enqueue_object), pod_ctrl.enqueue_object)


def _new(fn: Callable[[KubeObject], None]) -> Callable[[KubeObject, KubeObject], None]:
    return lambda old, new: fn(new)


async def serve_everywhere(ctx: AppContext, backend: EmbeddedBackend, ctrls: Iterable[Controller]) -> None:
    """Embedded backend, on every replica: sync, reconcile everything once, then answer DNS."""
    ctrls = tuple(ctrls)
    try:
        await ctx.wait_synced()
        for ctrl in ctrls:
            ctrl.start()
        await asyncio.gather(*(c.queue.wait_idle() for c in ctrls))
        await backend.start()
        log.info("zone %s ready: %d names", backend.zone.origin, len(backend.zone))
        await asyncio.Event().wait()
    finally:
        await asyncio.gather(*(c.stop(graceful=False) for c in ctrls))
        await backend.stop()


def periodic_resync(
    backend: RecordBackend, rec: DnsReconciler, interval: float
) -> Callable[[str], Awaitable[float | None]]:
    async def resync(_key: str) -> float | None:
        changed = await backend.resync(rec.desired())
        if changed:
            log.warning("resync repaired %d records that had drifted", changed)
        return interval

    return resync


class DnsCollector(Collector):
    """The embedded server's counters (plain ints on the hot path, read at scrape time)."""

    def __init__(self, backend: EmbeddedBackend) -> None:
        self.backend = backend

    def collect(self) -> Iterable[Metric]:
        st = self.backend.server.stats
        q = CounterMetricFamily("flashdns_dns_queries", "DNS queries received", labels=["transport"])
        q.add_metric(["udp"], st.udp_queries)
        q.add_metric(["tcp"], st.tcp_queries)
        yield q
        yield CounterMetricFamily("flashdns_dns_cache_hits", "UDP answers replayed from cache", st.cache_hits)
        yield CounterMetricFamily("flashdns_dns_forwarded", "Queries forwarded upstream", st.forwarded)
        yield CounterMetricFamily(
            "flashdns_dns_forward_failures", "Forwards that failed", st.forward_failures
        )
        rrl = self.backend.server.rrl
        limited = CounterMetricFamily("flashdns_dns_rate_limited", "UDP responses held back by the "
                                      "response rate limit", labels=["action"])  # fmt: skip
        limited.add_metric(["slip"], rrl.slipped)
        limited.add_metric(["drop"], rrl.limited - rrl.slipped)
        yield limited
        yield GaugeMetricFamily("flashdns_zone_names", "Names in the zone", len(self.backend.zone))
        yield GaugeMetricFamily(
            "flashdns_zone_records", "Records in the zone", self.backend.zone.record_count()
        )
        yield from self.backend.server.responses.families()


app = ControllerApp(
    "flashdns-controller",
    setup,
    description="FlashDNS service discovery: Services, EndpointSlices and Pods to DNS records, served by "
    "the embedded authoritative server or written to the FlashDNS gRPC API. Every flag falls back to "
    "the environment variable shown.",
    env_prefix="FLASHDNS_",
    add_arguments=add_arguments,
)


def main(argv: list[str] | None = None) -> int:
    return app.main(argv)


if __name__ == "__main__":
    raise SystemExit(main())
