"""Leader election on a coordination.k8s.io/v1 Lease (client-go's leaderelection, LeaseLock).

A candidate acquires the Lease when it is absent, released (no holder) or expired: its record did
not change for `lease_duration` seconds as observed on our own clock (never by comparing clocks
across machines). Writes are optimistic: they carry the resourceVersion read, so when two
candidates race the API server answers 409 to one of them, which stays a follower.

The leader renews every `retry_period`. When it cannot renew for `renew_deadline` (shorter than
the lease duration) it stops leading at once, before any follower can consider the Lease expired,
so two replicas never both act. `release()` (SIGTERM) clears holderIdentity and sets a 1 s
duration so a follower takes over within about one retry period.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import aiohttp
from kubernetes_asyncio.client.exceptions import ApiException

from controllers.machinery.events import micro_time
from controllers.machinery.kinds import LEASES
from controllers.machinery.metrics import MachineryMetrics
from controllers.machinery.rest import KubeClient
from controllers.machinery.store import KubeObject

log = logging.getLogger(__name__)

Callback = Callable[[], Awaitable[None]]
API_ERRORS = (ApiException, aiohttp.ClientError, OSError, TimeoutError, ValueError)  # ValueError: bad JSON


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaseSettings:
    name: str
    namespace: str
    identity: str
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0

    def __post_init__(self) -> None:
        if not self.lease_duration > self.renew_deadline > self.retry_period > 0:
            raise ValueError("need lease duration > renew deadline > retry period > 0")
        if not self.identity:
            raise ValueError("leader election needs an identity")


class LeaderElector:
    def __init__(
        self,
        client: KubeClient,
        settings: LeaseSettings,
        *,
        on_started_leading: Callback,
        on_stopped_leading: Callback,
        metrics: MachineryMetrics | None = None,
    ) -> None:
        self.client, self.settings = client, settings
        self._on_started, self._on_stopped = on_started_leading, on_stopped_leading
        self._gauge = (metrics or MachineryMetrics()).leader_status.labels(settings.name)
        self._gauge.set(0)
        self._observed: KubeObject | None = None  # the Lease as last read or written
        self._observed_spec: object = None
        self._observed_at = 0.0  # monotonic time the record last changed, as we saw it
        self._stop = asyncio.Event()
        self._finished = asyncio.Event()
        self._running = False
        self.is_leader = False

    @property
    def holder(self) -> str | None:
        """holderIdentity of the Lease as last observed."""
        spec = (self._observed or {}).get("spec") or {}
        return spec.get("holderIdentity") or None

    async def run(self) -> None:
        """Acquire, lead, and on loss go back to acquiring, until `release()`."""
        self._running = True
        try:
            while not self._stop.is_set():
                if not await self._acquire():
                    return
                self._set_leader(True)
                log.info("became leader of lease %s/%s", self.settings.namespace, self.settings.name,
                         extra={"identity": self.settings.identity})  # fmt: skip
                try:
                    await self._on_started()
                    await self._renew_until_lost()
                finally:
                    self._set_leader(False)
                    if not self._stop.is_set():
                        log.error("lost lease %s/%s: stopping all work", self.settings.namespace,
                                  self.settings.name)  # fmt: skip
                    await self._on_stopped()
        finally:
            self._finished.set()

    async def release(self) -> None:
        """Stop competing and leading (on_stopped_leading runs first); if we held the Lease, give it
        up so a follower takes over at once. Stop the controllers gracefully before calling this."""
        self._stop.set()
        if self._running:
            await self._finished.wait()
        if self._observed is None or self.holder != self.settings.identity:
            return
        spec = dict(self._observed.get("spec") or {})
        now = micro_time(time.time())
        spec.update(holderIdentity=None, leaseDurationSeconds=1, renewTime=now, acquireTime=now)
        try:
            await self.client.replace(LEASES, {**self._observed, "spec": spec})
            log.info("released lease %s/%s", self.settings.namespace, self.settings.name)
        except API_ERRORS as e:
            log.warning("could not release lease %s: %s (followers wait for it to expire)",
                        self.settings.name, e)  # fmt: skip

    def _set_leader(self, leading: bool) -> None:
        self.is_leader = leading
        self._gauge.set(1 if leading else 0)

    async def _sleep(self, seconds: float) -> bool:
        """Sleep unless released meanwhile; False once released."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stop.wait(), seconds)
        return not self._stop.is_set()

    async def _acquire(self) -> bool:
        while not self._stop.is_set():
            if await self._try_acquire_or_renew():
                return not self._stop.is_set()
            if not await self._sleep(self.settings.retry_period):
                break
        return False

    async def _renew_until_lost(self) -> None:
        s = self.settings
        last_renew = time.monotonic()
        while await self._sleep(s.retry_period):
            remaining = s.renew_deadline - (time.monotonic() - last_renew)
            renewed = False
            if remaining > 0:
                try:
                    renewed = await asyncio.wait_for(self._try_acquire_or_renew(), remaining)
                except TimeoutError:
                    renewed = False
            if renewed:
                last_renew = time.monotonic()
            elif time.monotonic() - last_renew >= s.renew_deadline:
                return

    async def _try_acquire_or_renew(self) -> bool:
        """One attempt (client-go's tryAcquireOrRenew); True when we hold the Lease afterwards."""
        s = self.settings
        try:
            lease = await self.client.get(LEASES, s.namespace, s.name)
        except ApiException as e:
            if e.status != 404:
                log.warning("cannot read lease %s/%s: HTTP %s", s.namespace, s.name, e.status)
                return False
            return await self._write(None)
        except API_ERRORS as e:
            log.warning("cannot read lease %s/%s: %s", s.namespace, s.name, e)
            return False
        self._observe(lease)
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity")
        duration = float(spec.get("leaseDurationSeconds") or 0)
        if holder and holder != s.identity and self._observed_at + duration > time.monotonic():
            return False  # held by another and not expired
        return await self._write(lease)

    def _observe(self, lease: KubeObject) -> None:
        spec = lease.get("spec")
        if spec != self._observed_spec:
            self._observed_spec, self._observed_at = spec, time.monotonic()
        self._observed = lease

    async def _write(self, lease: KubeObject | None) -> bool:
        s = self.settings
        now = micro_time(time.time())
        old = (lease or {}).get("spec") or {}
        ours = old.get("holderIdentity") == s.identity
        spec = {
            "holderIdentity": s.identity,
            "leaseDurationSeconds": max(1, math.ceil(s.lease_duration)),
            "acquireTime": old.get("acquireTime", now) if ours else now,
            "renewTime": now,
            "leaseTransitions": int(old.get("leaseTransitions") or 0) + (0 if ours or lease is None else 1),
        }
        meta = {"name": s.name, "namespace": s.namespace}
        try:
            if lease is None:
                written = await self.client.create(LEASES, {"apiVersion": LEASES.api_version, "kind": "Lease",
                                                            "metadata": meta, "spec": spec})  # fmt: skip
            else:
                written = await self.client.replace(LEASES, {**lease, "spec": spec})
        except ApiException as e:
            if e.status != 409:  # 409: another candidate wrote first
                log.warning("cannot write lease %s/%s: HTTP %s", s.namespace, s.name, e.status)
            return False
        except API_ERRORS as e:
            log.warning("cannot write lease %s/%s: %s", s.namespace, s.name, e)
            return False
        self._observe(written)
        return True
