"""Reconciles from informer stores into a backend: whole sets per owner, deletion, desired() for resyncs."""

from __future__ import annotations

from typing import Any

from controllers.flashdns.reconcile import SLICES_BY_SERVICE, DnsReconciler, slice_service_key
from controllers.flashdns.records import RecordSet
from controllers.machinery import Store


class RecordingBackend:
    name, serves_dns = "recording", True

    def __init__(self) -> None:
        self.owners: dict[str, RecordSet] = {}
        self.writes: list[str] = []

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def replace(self, owner: str, records: RecordSet) -> None:
        self.writes.append(owner)
        if records:
            self.owners[owner] = records
        else:
            self.owners.pop(owner, None)

    async def resync(self, desired: dict[str, RecordSet]) -> int:
        return 0


def obj(kind: str, name: str, ns: str = "ns1", **fields: Any) -> dict[str, Any]:
    return {"kind": kind, "metadata": {"name": name, "namespace": ns, **fields.pop("meta", {})}, **fields}


def setup() -> tuple[DnsReconciler, RecordingBackend, Store, Store, Store]:
    services, slices, pods = Store(), Store(), Store()
    slices.add_index(SLICES_BY_SERVICE, slice_service_key)
    backend = RecordingBackend()
    return DnsReconciler(services, slices, pods, backend, "cluster.local"), backend, services, slices, pods


async def test_headless_service_joins_its_slices_only() -> None:
    rec, backend, services, slices, _ = setup()
    services.upsert(obj("Service", "db", spec={"clusterIP": "None"}))
    label = {"labels": {"kubernetes.io/service-name": "db"}}
    slices.upsert(obj("EndpointSlice", "db-1", meta=label, addressType="IPv4",
                      endpoints=[{"addresses": ["10.244.0.7"]}]))  # fmt: skip
    other = {"labels": {"kubernetes.io/service-name": "db"}}
    slices.upsert(obj("EndpointSlice", "db-x", ns="ns2", meta=other, addressType="IPv4",
                      endpoints=[{"addresses": ["10.244.9.9"]}]))  # fmt: skip
    await rec.service("ns1/db")
    values = {r.value for r in backend.owners["service/ns1/db"] if r.type == "A"}
    assert values == {"10.244.0.7"}, "a slice of the same Service name in another namespace is not ours"


async def test_deleted_objects_write_the_empty_set_and_desired_lists_what_exists() -> None:
    rec, backend, services, _, pods = setup()
    services.upsert(obj("Service", "web", spec={"clusterIP": "10.96.0.5"}))
    pods.upsert(obj("Pod", "p", status={"phase": "Running", "podIP": "10.244.0.5"}))
    pods.upsert(obj("Pod", "pending", status={"phase": "Pending"}))
    await rec.service("ns1/web")
    await rec.pod("ns1/p")
    assert set(rec.desired()) == {"service/ns1/web", "pod/ns1/p"}, "owners without records are left out"
    services.remove("ns1/web")
    await rec.service("ns1/web")
    assert set(backend.owners) == {"pod/ns1/p"}
    assert backend.writes == ["service/ns1/web", "pod/ns1/p", "service/ns1/web"]


def test_slice_index_function() -> None:
    assert slice_service_key(
        obj("EndpointSlice", "a", meta={"labels": {"kubernetes.io/service-name": "s"}})
    ) == ["ns1/s"]
    assert slice_service_key(obj("EndpointSlice", "a")) == []
