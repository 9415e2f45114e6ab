"""A faithful in-process FlashDNS DNSService (protos/flashdns.proto) on a real gRPC server on loopback.

It keeps records in memory and enforces what the proto documents: CreateRecord of an identical
record (zone, name, type, value) returns the existing one; UpdateRecord keeps fields given empty
or 0 and answers NOT_FOUND for an unknown id; DeleteRecord of a missing id succeeds; ListRecords
filters by zone, name, type and label subset and pages with an opaque token (INVALID_ARGUMENT for
a token it did not issue). Bad input (empty zone or name, unknown type, a value that does not
parse for its type, negative TTL) is INVALID_ARGUMENT. `calls` records each RPC, `fail_next`
injects one error.
"""

from __future__ import annotations

import ipaddress
import itertools
import threading
from typing import Any

import grpc

from nodeenv.plasmacloud_auth import DevPki
from protos import flashdns_pb2, flashdns_pb2_grpc
from tests.grpc_fake import CallLog

TYPES = ("A", "AAAA", "SRV", "CNAME", "PTR", "TXT", "NS")
DEFAULT_PAGE = 100


def value_problem(rtype: str, value: str) -> str:
    try:
        if rtype == "A":
            ipaddress.IPv4Address(value)
        elif rtype == "AAAA":
            ipaddress.IPv6Address(value)
        elif rtype == "SRV":
            prio, weight, port, target = value.split()
            if not all(0 <= int(x) <= 65535 for x in (prio, weight, port)) or not target.endswith("."):
                return "SRV needs 'priority weight port target.'"
        elif rtype in ("CNAME", "PTR", "NS") and not value.endswith("."):
            return f"{rtype} needs an absolute name"
    except ValueError as e:
        return str(e) or "bad value"
    return ""


class FakeFlashDns(CallLog, flashdns_pb2_grpc.DNSServiceServicer):
    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.RLock()
        self._ids = itertools.count(1)
        self.records: dict[str, Any] = {}

    def CreateRecord(self, request: Any, context: Any) -> Any:
        with self._lock:
            self._enter("CreateRecord", context)
            problem = self._check(request)
            if problem:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, problem)
            for r in self.records.values():
                if (r.zone, r.name, r.type, r.value) == (
                    request.zone,
                    request.name,
                    request.type,
                    request.value,
                ):
                    return r
            fields = {f: getattr(request, f) for f in ("zone", "name", "type", "value", "ttl")}
            return self.records[self.add_direct(**fields, labels=dict(request.labels))]

    def _check(self, request: Any) -> str:
        if not request.zone or not request.name:
            return "zone and name are required"
        if request.type not in TYPES:
            return f"unknown type {request.type!r}"
        if request.ttl < 0:
            return "ttl must not be negative"
        return value_problem(request.type, request.value)

    def UpdateRecord(self, request: Any, context: Any) -> Any:
        with self._lock:
            self._enter("UpdateRecord", context)
            rec = self.records.get(request.id)
            if rec is None:
                context.abort(grpc.StatusCode.NOT_FOUND, f"record {request.id!r} not found")
            if request.value:
                problem = value_problem(rec.type, request.value)
                if problem:
                    context.abort(grpc.StatusCode.INVALID_ARGUMENT, problem)
                rec.value = request.value
            if request.ttl:
                rec.ttl = request.ttl
            if request.labels:
                rec.labels.clear()
                rec.labels.update(dict(request.labels))
            return rec

    def DeleteRecord(self, request: Any, context: Any) -> Any:
        with self._lock:
            self._enter("DeleteRecord", context)
            self.records.pop(request.id, None)
            return flashdns_pb2.Empty()

    def ListRecords(self, request: Any, context: Any) -> Any:
        with self._lock:
            self._enter("ListRecords", context)
            start = 0
            if request.page_token:
                if not request.page_token.startswith("after:"):
                    context.abort(grpc.StatusCode.INVALID_ARGUMENT, "invalid page token")
                start = int(request.page_token.removeprefix("after:"))
            want = dict(request.label_selector)
            matches = [
                r for r in sorted(self.records.values(), key=lambda r: r.id)
                if int(r.id.removeprefix("rec-")) > start
                and (not request.zone or r.zone == request.zone)
                and (not request.name or r.name == request.name)
                and (not request.type or r.type == request.type)
                and all(r.labels.get(k) == v for k, v in want.items())
            ]  # fmt: skip
            size = request.page_size or DEFAULT_PAGE
            page = matches[:size]
            token = f"after:{int(page[-1].id.removeprefix('rec-'))}" if len(matches) > size else ""
            return flashdns_pb2.ListRecordsResponse(records=page, next_page_token=token)

    # test helpers (not RPCs)
    def add_direct(self, **fields: Any) -> str:
        with self._lock:
            rec = flashdns_pb2.DNSRecord(id=f"rec-{next(self._ids):06d}", **fields)
            self.records[rec.id] = rec
            return str(rec.id)

    def find(self, **match: str) -> list[Any]:
        with self._lock:
            return [r for r in self.records.values() if all(getattr(r, k) == v for k, v in match.items())]

    def presentation(self) -> set[tuple[str, str, str, str]]:
        with self._lock:
            return {(r.zone, r.name, r.type, r.value) for r in self.records.values()}


class FakeServer:
    """TLS and IAM tokens only, as FlashDNS."""

    def __init__(self, pki: DevPki) -> None:
        self.service = FakeFlashDns()
        self.server, self.tokens = pki.server()
        flashdns_pb2_grpc.add_DNSServiceServicer_to_server(self.service, self.server)
        self.port = pki.add_port(self.server, "127.0.0.1:0")
        self.pki = pki
        self.server.start()

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def flags(self) -> tuple[str, ...]:
        """The controller's flags to reach this fake (endpoint, CA, IAM token file)."""
        return ("--flashdns-endpoint", self.endpoint, *self.pki.client_flags())

    def stop(self) -> None:
        self.server.stop(0)
