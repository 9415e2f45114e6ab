"""What the controller writes on a Service: its finalizer, `status.loadBalancer.ingress` and one
condition, each as a merge patch carrying the resourceVersion read (a concurrent writer makes it
409 Conflict, which the machinery retries). Nothing is written when nothing would change."""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from typing import Any

from controllers.machinery import SERVICES, KubeClient, KubeObject
from controllers.resources import Service

FINALIZER = "service.kubernetes.io/load-balancer-cleanup"
CONDITION = "fiberlb.plasmacloud.io/LoadBalancerReady"


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def merged_conditions(current: Sequence[Mapping[str, Any]], ok: bool, reason: str, message: str) -> list[Any]:
    """`current` with ours set (lastTransitionTime kept unless the status flips); others untouched."""
    status = "True" if ok else "False"
    mine = next((c for c in current if c.get("type") == CONDITION), None)
    since = mine.get("lastTransitionTime") if mine and mine.get("status") == status else None
    cond = {"type": CONDITION, "status": status, "reason": reason, "message": message[:32768],
            "lastTransitionTime": since or _now()}  # fmt: skip
    return [dict(c) for c in current if c.get("type") != CONDITION] + [cond]


def condition_differs(svc: Service, ok: bool, reason: str, message: str) -> bool:
    mine = next((c for c in svc.conditions if c.get("type") == CONDITION), None)
    want = ("True" if ok else "False", reason, message[:32768])
    return mine is None or (mine.get("status"), mine.get("reason"), mine.get("message")) != want


class ServiceWriter:
    """Patches on Services (metadata and the status subresource)."""

    def __init__(self, client: KubeClient) -> None:
        self.client = client
        self.writes = 0

    async def _patch(self, svc: Service, body: KubeObject, subresource: str | None = None) -> KubeObject:
        body.setdefault("metadata", {})["resourceVersion"] = svc.resource_version
        self.writes += 1
        return await self.client.patch(SERVICES, svc.namespace, svc.name, body, subresource=subresource)

    async def add_finalizer(self, svc: Service) -> KubeObject | None:
        if FINALIZER in svc.finalizers:
            return None
        return await self._patch(svc, {"metadata": {"finalizers": [*svc.finalizers, FINALIZER]}})

    async def remove_finalizer(self, svc: Service) -> None:
        if FINALIZER in svc.finalizers:
            await self._patch(
                svc, {"metadata": {"finalizers": [f for f in svc.finalizers if f != FINALIZER]}}
            )

    async def set_annotation(self, svc: Service, key: str, value: str) -> KubeObject | None:
        if svc.annotations.get(key) == value:
            return None
        return await self._patch(svc, {"metadata": {"annotations": {key: value}}})

    async def set_status(
        self, svc: Service, ips: Sequence[str], ok: bool, reason: str, message: str
    ) -> KubeObject | None:
        """Ingress IPs and our condition (ingress untouched when `ips` is None-like and not ok)."""
        same_ips = tuple(ips) == svc.ingress_ips
        if same_ips and not condition_differs(svc, ok, reason, message):
            return None
        status: dict[str, Any] = {"conditions": merged_conditions(svc.conditions, ok, reason, message)}
        if not same_ips:
            status["loadBalancer"] = {"ingress": [{"ip": ip} for ip in ips]}
        return await self._patch(svc, {"status": status}, subresource="status")

    async def clear_status(self, svc: Service) -> None:
        """Drop our ingress and condition (a Service that is no longer ours)."""
        if not svc.ingress_ips and not any(c.get("type") == CONDITION for c in svc.conditions):
            return
        others = [dict(c) for c in svc.conditions if c.get("type") != CONDITION]
        body = {"status": {"loadBalancer": {"ingress": None}, "conditions": others or None}}
        await self._patch(svc, body, subresource="status")
