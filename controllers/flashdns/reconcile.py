"""Level-triggered reconciles: a Service or Pod key → its whole record set → the backend, in one call.

Owners: `service/<ns>/<name>` (the Service with its EndpointSlices) and `pod/<ns>/<name>`. A key
whose object is gone from the cache writes the empty set (removes exactly that owner's records).
`desired()` computes every owner's records from the caches for full resyncs.
"""

from __future__ import annotations

import logging

from controllers.flashdns.backend import RecordBackend
from controllers.flashdns.records import RecordSet, pod_records, service_records
from controllers.machinery import KubeObject, Store
from controllers.resources import SERVICE_NAME_LABEL, EndpointSlice, Pod, Service

log = logging.getLogger(__name__)

SLICES_BY_SERVICE = "service"


def slice_service_key(obj: KubeObject) -> list[str]:
    """Index function: an EndpointSlice → the "namespace/name" of its Service."""
    meta = obj.get("metadata") or {}
    name = (meta.get("labels") or {}).get(SERVICE_NAME_LABEL)
    return [f"{meta.get('namespace', '')}/{name}"] if name else []


def service_owner(key: str) -> str:
    return f"service/{key}"


def pod_owner(key: str) -> str:
    return f"pod/{key}"


class DnsReconciler:
    def __init__(
        self, services: Store, slices: Store, pods: Store, backend: RecordBackend, domain: str
    ) -> None:
        """`slices` must carry the SLICES_BY_SERVICE index (slice_service_key)."""
        self.services, self.slices, self.pods = services, slices, pods
        self.backend, self.domain = backend, domain

    async def service(self, key: str) -> None:
        await self.backend.replace(service_owner(key), self.service_records(key))

    async def pod(self, key: str) -> None:
        await self.backend.replace(pod_owner(key), self.pod_records(key))

    def service_records(self, key: str) -> RecordSet:
        obj = self.services.get_by_key(key)
        if obj is None:
            return frozenset()
        slices = [EndpointSlice.from_dict(s) for s in self.slices.by_index(SLICES_BY_SERVICE, key)]
        return service_records(Service.from_dict(obj), slices, self.domain)

    def pod_records(self, key: str) -> RecordSet:
        obj = self.pods.get_by_key(key)
        return pod_records(Pod.from_dict(obj), self.domain) if obj is not None else frozenset()

    def desired(self) -> dict[str, RecordSet]:
        """Every owner with records, from the caches."""
        out = {service_owner(k): self.service_records(k) for k in self.services}
        out.update({pod_owner(k): self.pod_records(k) for k in self.pods})
        return {owner: recs for owner, recs in out.items() if recs}
