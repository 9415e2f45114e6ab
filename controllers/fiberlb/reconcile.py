"""Level-triggered reconcile of one Service key (the work queue's unit).

For a LoadBalancer Service of our class: validate its annotations, add the cleanup finalizer
*before* any backend object exists, hold an external IP, program the backend from the Service
and its EndpointSlices, then write `status.loadBalancer.ingress` and our condition. Bad input
(annotations, a requested IP outside the pools or taken, no ports) and an exhausted pool become
a Warning Event plus `LoadBalancerReady=False` and are not retried in a loop: the Service's next
change, or an IP being freed, queues it again. Backend failures are retried with backoff.

Deletion (deletionTimestamp, or the Service left our class): every backend object is removed
and the IP freed, then the finalizer dropped. With the ovn backend every other Service with a
ClusterIP is programmed too (ClusterIP:port -> endpoints).

Restarts and leader changes move no IP, and no tenant chooses one: at the start of each term,
before the first reconcile, the pool is rebuilt from the backend's own record of allocations (the
OVN rows' external_ids, FiberLB's load balancers). A Service's `status.loadBalancer.ingress` is
output only: a tenant able to patch services/status changes nothing the backend is programmed
with, and the next reconcile rewrites it. Sharing keys are scoped to the Service's namespace.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from controllers.fiberlb.annotations import (
    ALLOW_SHARED_IP,
    LOAD_BALANCER_ID,
    InvalidAnnotation,
    LbOptions,
    ServiceConfigError,
)
from controllers.fiberlb.backend import Applied, Backend, BackendError
from controllers.fiberlb.desired import DesiredLB, NoPorts, desired_lb
from controllers.fiberlb.ippool import IpPool, PoolExhausted, Request, RequestedIPUnavailable
from controllers.fiberlb.metrics import FiberlbMetrics
from controllers.fiberlb.settings import FiberlbSettings
from controllers.fiberlb.status import FINALIZER, ServiceWriter
from controllers.machinery import EventRecorder, KubeObject, ReconcileError, Store
from controllers.resources import SERVICE_NAME_LABEL, EndpointSlice, Service

log = logging.getLogger(__name__)
SLICES_BY_SERVICE = "service"
WAIT_FOR_IP = (PoolExhausted, RequestedIPUnavailable)


def slice_service_key(obj: KubeObject) -> list[str]:
    """Index function: "namespace/service" of an EndpointSlice (from its service-name label)."""
    meta = obj.get("metadata")  # only what the key needs: the informer calls this on every event
    meta = meta if isinstance(meta, Mapping) else {}
    labels = meta.get("labels")
    name = labels.get(SERVICE_NAME_LABEL) if isinstance(labels, Mapping) else None
    return [f"{meta.get('namespace', '')}/{name}"] if name else []


def _ref(obj: KubeObject) -> KubeObject:
    return {**obj, "apiVersion": "v1", "kind": "Service"}  # list items carry no kind


@dataclass
class Reconciler:
    settings: FiberlbSettings
    backend: Backend
    services: Store
    slices: Store
    writer: ServiceWriter
    events: EventRecorder | None
    pool: IpPool
    requeue: Callable[[str], None] | None = None
    """Queues a key (the controller's enqueue); set once the controller exists."""
    pending: set[str] = field(default_factory=set)
    metrics: FiberlbMetrics | None = None
    _started: bool = False
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    def ours(self, svc: Service) -> bool:
        if svc.type != "LoadBalancer":
            return False
        cls = svc.load_balancer_class
        return cls == self.settings.load_balancer_class or (not cls and self.settings.default_class)

    def _request(self, svc: Service, opts: LbOptions) -> Request:
        ports = frozenset((p.protocol, p.port) for p in svc.ports)
        key = f"{svc.namespace}/{opts.sharing_key}" if opts.sharing_key else ""  # never across namespaces
        return Request(requested_ip=opts.requested_ip, sharing_key=key, ports=ports)

    def new_term(self) -> None:
        """This replica stopped leading: its next term's first reconcile rebuilds the pool from the
        backend (another leader may allocate meanwhile)."""
        self._started = False

    def _restore(self, svc: Service, ips: tuple[str, ...]) -> None:
        """Hold the IP the backend answers on for `svc` (rows written before the external-ips record
        list every VIP: the ClusterIP is not an external IP)."""
        ip = next((ip for ip in ips if ip and ip != svc.cluster_ip), "")
        if not ip:
            return
        try:
            req = self._request(svc, LbOptions.from_service(svc))
        except ServiceConfigError:
            req = Request()
        if not self.pool.restore(svc.key, ip, req):
            log.warning("%s: the backend has %s, already held by another Service", svc.key, ip)

    async def restore_all(self) -> None:
        """Every IP the backend holds for our Services (sorted by key: deterministic on conflict)."""
        self.pool.clear()
        held = await asyncio.to_thread(self.backend.allocations)
        for key in sorted(held):
            obj = self.services.get_by_key(key)
            svc = Service.from_dict(obj) if obj is not None else None
            if svc is not None and self.ours(svc):
                self._restore(svc, held[key])

    async def _start(self) -> None:
        """Once a term, before its first reconcile: restore every IP from the backend, then drop
        orphaned backend objects."""
        if self._started:
            return
        await self.restore_all()
        orphans = await asyncio.to_thread(self.backend.services) - set(self.services)
        for key in sorted(orphans):
            await asyncio.to_thread(self.backend.delete, key, "")
        log.info("holding %d external IPs from the backend; removed %d orphaned load balancers",
                 self.pool.in_use(), len(orphans))  # fmt: skip
        self._started = True

    async def reconcile(self, key: str) -> float | None:
        async with self._lock:
            try:
                await self._start()
            except Exception as e:  # the backend is unreachable: retried with backoff, reported
                raise ReconcileError(BackendError.reason, f"{self.backend.name} backend: {e}") from e
        obj = self.services.get_by_key(key)
        if obj is None:
            await self._forget(key)
            return None
        svc = Service.from_dict(obj)
        if self.ours(svc) and not svc.deleting:
            await self._ensure(svc, obj)
        elif FINALIZER in svc.finalizers:
            await self._cleanup(svc, obj)
        else:
            await self._cluster_ip_only(svc)
        return None

    async def _forget(self, key: str) -> None:
        if self.metrics is not None:
            self.metrics.forget(key)
        self._release(key)
        self.pending.discard(key)
        await self._backend(self.backend.delete, key, "")

    def _release(self, key: str) -> None:
        if self.pool.release(key) and self.requeue is not None:
            for waiting in sorted(self.pending):  # a freed IP: Services waiting for one try again
                self.requeue(waiting)

    async def _backend(self, fn: object, *args: object) -> object:
        try:
            return await asyncio.to_thread(fn, *args)  # type: ignore[arg-type]
        except ServiceConfigError:
            raise
        except Exception as e:
            raise BackendError(f"{self.backend.name} backend: {e}") from e

    async def _cleanup(self, svc: Service, obj: KubeObject) -> None:
        """Remove every backend object and free the IP, then drop the finalizer."""
        if self.backend.programs_cluster_ips and not svc.deleting and self._wants_cluster_ip(svc):
            await self._apply_cluster_ip(svc)
        else:
            await self._backend(self.backend.delete, svc.key, svc.uid)
        self._release(svc.key)
        self.pending.discard(svc.key)
        if not svc.deleting:
            await self.writer.clear_status(svc)
            current = self.services.get_by_key(svc.key)
            svc = Service.from_dict(current) if current is not None else svc
        try:
            await self.writer.remove_finalizer(svc)
        except Exception as e:
            if getattr(e, "status", None) != 404:
                raise
        if self.events is not None and svc.deleting:
            await self.events.record(_ref(obj), "Normal", "DeletedLoadBalancer", "Delete",
                                     "load balancer removed, external IP freed")  # fmt: skip

    def _wants_cluster_ip(self, svc: Service) -> bool:
        return (
            self.settings.cluster_ips
            and bool(svc.cluster_ip)
            and bool(svc.ports)
            and svc.type in ("ClusterIP", "NodePort", "LoadBalancer")
        )

    async def _cluster_ip_only(self, svc: Service) -> None:
        if not self.backend.programs_cluster_ips:
            return
        if svc.deleting or not self._wants_cluster_ip(svc):
            await self._backend(self.backend.delete, svc.key, svc.uid)
            return
        await self._apply_cluster_ip(svc)

    async def _apply_cluster_ip(self, svc: Service) -> None:
        try:
            opts = LbOptions.from_service(svc)
        except ServiceConfigError:
            opts = LbOptions()  # annotations are for our load balancers; ClusterIPs ignore them
        desired = desired_lb(svc, self._slices(svc), [svc.cluster_ip], opts)
        await self._backend(self.backend.apply, desired)

    def _slices(self, svc: Service) -> list[EndpointSlice]:
        return [EndpointSlice.from_dict(o) for o in self.slices.by_index(SLICES_BY_SERVICE, svc.key)]

    async def _ensure(self, svc: Service, obj: KubeObject) -> None:
        if self.metrics is not None and not svc.ingress_ips:
            self.metrics.waiting_for_address(svc.key)
        try:
            opts = LbOptions.from_service(svc)
            if opts.sharing_key and not self.backend.shares_ips:
                raise InvalidAnnotation(
                    f"{ALLOW_SHARED_IP}: the {self.backend.name} backend cannot share an IP"
                )
            if not svc.ports:
                raise NoPorts(f"Service {svc.key} has no ports: nothing to load-balance")
            if (patched := await self.writer.add_finalizer(svc)) is not None:
                svc, obj = Service.from_dict(patched), patched
            ip = self._chosen_by_backend(svc, opts) if self._backend_allocates else self._allocate(svc, opts)
        except ServiceConfigError as e:
            await self._refuse(svc, obj, e)
            return
        vips = [ip] if ip else []
        if self.backend.programs_cluster_ips and self.settings.cluster_ips:
            vips.append(svc.cluster_ip)
        try:
            applied = await self._apply(desired_lb(svc, self._slices(svc), vips, opts, [ip]))
        except BackendError as e:
            await self._refuse(svc, obj, e, event=False)  # the machinery records it with the retry
            raise ReconcileError(e.reason, str(e), regarding=_ref(obj)) from e
        except ServiceConfigError as e:  # the backend cannot do what the Service asks: no retry loop
            await self._refuse(svc, obj, e)
            return
        ip = applied.external_ip or ip
        if self._backend_allocates and ip:
            self.pool.restore(svc.key, ip, Request())  # FiberLB chose it: held for this term
        if applied.id:  # the spec keeps the FiberLB id on the Service
            patched = await self.writer.set_annotation(svc, LOAD_BALANCER_ID, applied.id)
            svc = Service.from_dict(patched) if patched is not None else svc
        fresh = ip not in svc.ingress_ips
        await self.writer.set_status(svc, [ip], True, "Ready", f"{self.backend.name} load balancer on {ip}")
        if self.metrics is not None:
            self.metrics.status_written(svc.key)
        if fresh and self.events is not None:
            await self.events.record(_ref(obj), "Normal", "IPAllocated", "Allocate", f"external IP {ip}")

    async def _apply(self, desired: DesiredLB) -> Applied:
        result = await self._backend(self.backend.apply, desired)
        return result if isinstance(result, Applied) else Applied()

    @property
    def _backend_allocates(self) -> bool:
        """No --external-ip-pool and a backend with a pool of its own (FiberLB): it picks the IPs."""
        return self.pool.size == 0 and self.backend.allocates_ips

    def _chosen_by_backend(self, svc: Service, opts: LbOptions) -> str:
        """The IP to ask the backend for: the requested one, else the one the backend already gave
        it ('' = keep its load balancer's, or any). Never the Service's status."""
        return opts.requested_ip or self.pool.lookup(svc.key)

    def _allocate(self, svc: Service, opts: LbOptions) -> str:
        req = self._request(svc, opts)
        try:
            ip = self.pool.assign(svc.key, req)
        except WAIT_FOR_IP as e:
            self.pending.add(svc.key)
            if self.metrics is not None:
                self.metrics.allocation_failed(e)
            raise
        self.pending.discard(svc.key)
        return ip

    async def _refuse(self, svc: Service, obj: KubeObject, e: ServiceConfigError, event: bool = True) -> None:
        log.warning("%s: %s: %s", svc.key, e.reason, e)
        if self.events is not None and event:
            await self.events.record(_ref(obj), "Warning", e.reason, "Ensure", str(e))
        held = self.pool.lookup(svc.key)  # status keeps only what the platform holds, never a forged IP
        ips = [held] if held and held in svc.ingress_ips else []
        await self.writer.set_status(svc, ips, False, e.reason, str(e))
