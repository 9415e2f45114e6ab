"""The `flashdns` backend: PlasmaCloud's DNSService (protos/flashdns.proto) over gRPC.

Each record is one FlashDNS record in the cluster zone (PTRs in `in-addr.arpa` / `ip6.arpa`),
named relative to its zone, labelled with its owner (`k8s.owner`, `k8s.namespace`,
`k8s.service` or `k8s.pod`) and `managed-by: flashdns-controller`. The backend keeps the ids of
what it wrote, per owner. `replace` changes a record of the same name and type in place
(UpdateRecord: the value switches atomically) and creates what is still missing before it deletes
what is extra, so a name that stays never has no record. The first write and every `resync` list
everything we manage (ListRecords, paged) and diff it against what the caches want: missing
records are created, changed ones updated, duplicated or orphaned ones deleted; what matches is
left alone (a restart deletes nothing that should stay). Calls go over TLS with an IAM token
(common/plasmacloud_grpc.py); a refused token fails the reconcile, which the machinery retries with
backoff.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import grpc

from common.plasmacloud_grpc import secure_aio_channel
from controllers.flashdns.records import Record, RecordSet, fqdn, version_records
from controllers.flashdns.settings import FlashDnsSettings
from protos import flashdns_pb2, flashdns_pb2_grpc

log = logging.getLogger(__name__)
MANAGED_BY = {"managed-by": "flashdns-controller"}
REVERSE_ZONES = ("in-addr.arpa.", "ip6.arpa.")
RPC_TIMEOUT = 10.0
PAGE_SIZE = 500
ZONE_OWNER = "zone"


class GrpcBackend:
    name = "flashdns"
    serves_dns = False

    def __init__(self, s: FlashDnsSettings, channel: grpc.aio.Channel | None = None) -> None:
        self.origin, self.ttl = fqdn(s.cluster_domain), s.dns_ttl
        if channel is None:
            if s.plasmacloud is None:
                raise ValueError("the flashdns backend needs --plasmacloud-ca and --plasmacloud-token-file")
            channel = secure_aio_channel(s.flashdns_endpoint, s.plasmacloud)
        self._channel = channel
        self._stub = flashdns_pb2_grpc.DNSServiceStub(self._channel)
        self._ids: dict[str, dict[Record, str]] | None = None
        """owner → record → FlashDNS id: what we know the server holds (None: not listed yet)."""
        self._static = {ZONE_OWNER: version_records(self.origin)}
        self._lock = asyncio.Lock()

    async def start(self) -> None:
        """Nothing to do yet: the first write lists what the server holds (so nothing is created
        twice), and the leader's first resync writes the zone's own records. A FlashDNS that is down
        at start-up is an error of those reconciles, retried with backoff, not a crash."""

    async def stop(self) -> None:
        await self._channel.close()

    async def replace(self, owner: str, records: RecordSet) -> None:
        async with self._lock:
            if self._ids is None:
                self._ids = await self._list()
            await self._apply(owner, records)

    async def resync(self, desired: dict[str, RecordSet]) -> int:
        async with self._lock:
            self._ids = await self._list()
            want = {**desired, **self._static}
            changed = 0
            for owner in sorted(want.keys() | set(self._ids)):
                changed += await self._apply(owner, want.get(owner, frozenset()))
            return changed

    async def _apply(self, owner: str, records: RecordSet) -> int:
        assert self._ids is not None
        have = self._ids.setdefault(owner, {})
        changed, missing, extra = _pair(
            sorted(records - have.keys()), sorted(r for r in have if r not in records)
        )
        for old, new in changed:  # one record of a name and type changes value: one atomic update
            rid = have.pop(old)
            await self._stub.UpdateRecord(
                flashdns_pb2.UpdateRecordRequest(id=rid, value=new.value), timeout=RPC_TIMEOUT
            )
            have[new] = rid
        for rec in missing:  # before any delete: the name never goes empty
            have[rec] = await self._create(owner, rec)
        for rec in extra:
            await self._delete(have.pop(rec))
        if not have:
            del self._ids[owner]
        return len(changed) + len(missing) + len(extra)

    def _split(self, name: str) -> tuple[str, str]:
        """Absolute name → (zone, name relative to it)."""
        for zone in (self.origin, *REVERSE_ZONES):
            if name.endswith("." + zone):
                return zone.rstrip("."), name[: -len(zone) - 1]
            if name == zone:
                return zone.rstrip("."), "@"
        raise ValueError(f"{name} is in none of our zones")

    def _join(self, zone: str, name: str) -> str:
        return f"{zone}." if name == "@" else f"{name}.{zone}."

    async def _create(self, owner: str, rec: Record) -> str:
        zone, name = self._split(rec.name)
        req = flashdns_pb2.CreateRecordRequest(zone=zone, name=name, type=rec.type, value=rec.value,
                                               ttl=self.ttl, labels=_labels(owner))  # fmt: skip
        created = await self._stub.CreateRecord(req, timeout=RPC_TIMEOUT)
        return str(created.id)

    async def _delete(self, rid: str) -> None:
        await self._stub.DeleteRecord(flashdns_pb2.DeleteRecordRequest(id=rid), timeout=RPC_TIMEOUT)

    async def _list(self) -> dict[str, dict[Record, str]]:
        """Everything labelled as ours; duplicates of one record (same owner) are deleted."""
        out: dict[str, dict[Record, str]] = {}
        token = ""
        while True:
            req = flashdns_pb2.ListRecordsRequest(
                label_selector=MANAGED_BY, page_size=PAGE_SIZE, page_token=token
            )
            resp = await self._stub.ListRecords(req, timeout=RPC_TIMEOUT)
            for r in resp.records:
                await self._adopt(out, r)
            token = resp.next_page_token
            if not token:
                return out

    async def _adopt(self, out: dict[str, dict[Record, str]], r: Any) -> None:
        owner = r.labels.get("k8s.owner", "")
        rec = Record(self._join(r.zone, r.name).lower(), r.type, r.value)
        have = out.setdefault(owner, {})
        if rec in have or not owner or r.ttl != self.ttl:
            await self._delete(r.id)  # a duplicate, an unowned or a changed-TTL record: drift
            return
        have[rec] = r.id


def _pair(
    missing: list[Record], extra: list[Record]
) -> tuple[list[tuple[Record, Record]], list[Record], list[Record]]:
    """(old, new) pairs of the same name and type (updated in place), then what is left to create
    and to delete."""
    olds: dict[tuple[str, str], list[Record]] = {}
    for rec in extra:
        olds.setdefault((rec.name, rec.type), []).append(rec)
    pairs, create = [], []
    for rec in missing:
        same = olds.get((rec.name, rec.type))
        if same:
            pairs.append((same.pop(0), rec))
        else:
            create.append(rec)
    return pairs, create, [r for rest in olds.values() for r in rest]


def _labels(owner: str) -> dict[str, str]:
    kind, _, key = owner.partition("/")
    labels = {**MANAGED_BY, "k8s.owner": owner}
    if kind in ("service", "pod"):
        ns, _, name = key.partition("/")
        labels.update({"k8s.namespace": ns, f"k8s.{kind}": name})
    return labels
