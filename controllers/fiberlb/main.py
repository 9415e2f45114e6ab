"""fiberlb-controller: the program. Flags: `fiberlb-controller --help`."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from controllers.fiberlb.backend import Backend
from controllers.fiberlb.ippool import IpPool
from controllers.fiberlb.metrics import FiberlbMetrics
from controllers.fiberlb.reconcile import SLICES_BY_SERVICE, Reconciler, slice_service_key
from controllers.fiberlb.settings import FiberlbSettings, add_arguments
from controllers.fiberlb.status import ServiceWriter
from controllers.machinery import ENDPOINT_SLICES, SERVICES, AppContext, ControllerApp, KubeObject

log = logging.getLogger(__name__)
ATTACH_INTERVAL = 2.0
"""Seconds between checks that new namespace switches carry the load-balancer group (ovn)."""


def make_backend(s: FiberlbSettings) -> Backend:
    if s.backend == "fiberlb":
        from controllers.fiberlb.grpc_backend import GrpcBackend

        assert s.plasmacloud is not None  # from_args requires it for this backend
        return GrpcBackend(s.fiberlb_endpoint, s.plasmacloud, s.org_id, s.project_id)
    from controllers.fiberlb.ovn_backend import OvnBackend
    from ovnaccess import tls

    tls.use(s.ovn_tls)
    return OvnBackend.connect(s.ovn_nb_db)


async def setup(ctx: AppContext) -> None:
    s = FiberlbSettings.from_args(ctx.args)
    backend = await asyncio.to_thread(make_backend, s)
    services = ctx.informer(SERVICES)
    slices = ctx.informer(ENDPOINT_SLICES)
    slices.add_index(SLICES_BY_SERVICE, slice_service_key)
    rec = Reconciler(
        settings=s, backend=backend, services=services.store, slices=slices.store,
        writer=ServiceWriter(ctx.client), events=ctx.events, pool=IpPool.from_text(s.external_ip_pool),
    )  # fmt: skip
    ctrl = ctx.controller("fiberlb", rec.reconcile, lookup=services.store.get_by_key)
    rec.requeue = ctrl.enqueue
    rec.metrics = FiberlbMetrics(ctx.metrics.registry, lambda: rec.pool, lambda: len(rec.pending))
    db = getattr(backend, "db", None)  # the ovn backend's NB connection
    if db is not None:
        from ovnaccess.metrics import OvsdbClientMetrics

        OvsdbClientMetrics(ctx.metrics.registry).watch(db, "OVN_Northbound")
        loop = asyncio.get_running_loop()

        def resync() -> None:  # the NB replaced by an empty one: every Service again, same IPs
            for obj in services.store.list():  # the pool is this term's memory, never the Services' status
                ctrl.enqueue_object(obj)

        db.on_replaced(lambda: loop.call_soon_threadsafe(resync))

    def endpoints_changed(obj: KubeObject) -> None:  # coalesced over --debounce
        for key in slice_service_key(obj):
            ctrl.queue.add_after(key, s.debounce)

    async def term() -> None:  # when this term ends, the next one rebuilds the pool from the backend
        try:
            await asyncio.Event().wait()
        finally:
            rec.new_term()

    ctx.run_while_leading(term)
    services.add_handler(ctrl.enqueue_object, lambda old, new: ctrl.enqueue_object(new), ctrl.enqueue_object)
    slices.add_handler(endpoints_changed, lambda old, new: endpoints_changed(new), endpoints_changed)
    attach = getattr(backend, "attach", None)
    if attach is not None:

        async def attach_new_switches() -> None:
            while True:
                await asyncio.sleep(ATTACH_INTERVAL)
                try:
                    await asyncio.to_thread(attach)
                except Exception as e:
                    log.warning("attaching the load-balancer group failed: %s", e)

        ctx.run_while_leading(attach_new_switches)  # followers never write

    async def close() -> None:
        await asyncio.to_thread(backend.close)

    ctx.on_cleanup(close)
    log.info("fiberlb-controller: backend %s, pools %s, class %s%s", s.backend, s.external_ip_pool,
             s.load_balancer_class, " (and no class)" if s.default_class else "")  # fmt: skip


app = ControllerApp(
    "fiberlb-controller",
    setup,
    description="FiberLB LoadBalancer controller: gives LoadBalancer Services of its class an external IP "
    "and programs a load balancer (OVN Load_Balancer rows, or the FiberLB gRPC API) from their "
    "EndpointSlices. Every flag falls back to the environment variable shown.",
    env_prefix="FIBERLB_",
    add_arguments=add_arguments,
    reporting_controller="fiberlb.plasmacloud.io/controller",
)


def main(argv: Sequence[str] | None = None) -> int:
    return app.main(argv)


__all__ = ["app", "main"]


if __name__ == "__main__":
    raise SystemExit(main())
