"""A faithful in-process FiberLB LoadBalancerService (real gRPC server on loopback) for tests.

State lives in memory. It checks what protos/fiberlb.proto documents and answers with the
status codes the real API uses: NOT_FOUND for unknown ids, ALREADY_EXISTS for a second load
balancer of the same name or external IP and a second listener on one protocol+port,
INVALID_ARGUMENT for bad protocols, ports, algorithms, addresses and page tokens,
FAILED_PRECONDITION for deleting a pool a listener still uses. Deletes of missing objects
succeed (as the proto says). `calls` records every RPC name, `fail_next` injects one error.
"""

from __future__ import annotations

import ipaddress
import itertools
import threading
from typing import Any

import grpc

from nodeenv.plasmacloud_auth import DevPki
from protos import fiberlb_pb2, fiberlb_pb2_grpc
from tests.grpc_fake import CallLog

PROTOCOLS = ("TCP", "UDP", "HTTP", "HTTPS")
ALGORITHMS = ("ROUND_ROBIN", "LEAST_CONNECTIONS", "SOURCE_IP")
AFFINITIES = ("NONE", "CLIENT_IP")


class FakeFiberLB(CallLog, fiberlb_pb2_grpc.LoadBalancerServiceServicer):
    def __init__(self, pool: str = "203.0.113.0/24") -> None:
        super().__init__()
        self._free = (str(ip) for ip in ipaddress.IPv4Network(pool).hosts())
        self._ids = itertools.count(1)
        self._lock = threading.RLock()
        self.lbs: dict[str, Any] = {}
        self.listeners: dict[str, Any] = {}
        self.pools: dict[str, Any] = {}

    def _id(self, prefix: str) -> str:
        return f"{prefix}-{next(self._ids):06d}"

    def _lb(self, lb_id: str, context: Any) -> Any:
        lb = self.lbs.get(lb_id)
        if lb is None:
            context.abort(grpc.StatusCode.NOT_FOUND, f"load balancer {lb_id!r} not found")
        return lb

    def _full(self, lb: Any) -> Any:
        out = fiberlb_pb2.LoadBalancer()
        out.CopyFrom(lb)
        out.listeners.extend(x for x in self.listeners.values() if x.load_balancer_id == lb.id)
        return out

    # load balancers
    def CreateLoadBalancer(self, request, context):
        self._enter("CreateLoadBalancer", context)
        if not request.name:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "name is required")
        with self._lock:
            if any(lb.name == request.name for lb in self.lbs.values()):
                context.abort(
                    grpc.StatusCode.ALREADY_EXISTS, f"a load balancer named {request.name!r} exists"
                )
            ip = request.external_ip
            if ip:
                _check_ip(ip, context)
                if any(lb.external_ip == ip for lb in self.lbs.values()):
                    context.abort(grpc.StatusCode.ALREADY_EXISTS, f"external IP {ip} is in use")
            else:
                ip = next(self._free)
            lb = fiberlb_pb2.LoadBalancer(
                id=self._id("lb"), name=request.name, description=request.description, external_ip=ip,
                org_id=request.org_id, project_id=request.project_id, status="active",
            )  # fmt: skip
            self.lbs[lb.id] = lb
            return self._full(lb)

    def UpdateLoadBalancer(self, request, context):
        self._enter("UpdateLoadBalancer", context)
        with self._lock:
            lb = self._lb(request.load_balancer_id, context)
            if request.name:
                lb.name = request.name
            if request.description:
                lb.description = request.description
            return self._full(lb)

    def DeleteLoadBalancer(self, request, context):
        self._enter("DeleteLoadBalancer", context)
        with self._lock:
            if self.lbs.pop(request.load_balancer_id, None) is not None:
                for table in (self.listeners, self.pools):
                    for key in [
                        k for k, v in table.items() if v.load_balancer_id == request.load_balancer_id
                    ]:
                        del table[key]
        return fiberlb_pb2.Empty()

    def GetLoadBalancer(self, request, context):
        self._enter("GetLoadBalancer", context)
        with self._lock:
            return self._full(self._lb(request.load_balancer_id, context))

    def ListLoadBalancers(self, request, context):
        self._enter("ListLoadBalancers", context)
        size = request.page_size or 100
        try:
            start = int(request.page_token or "0")
        except ValueError:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "bad page_token")
        with self._lock:
            lbs = [
                lb
                for lb in sorted(self.lbs.values(), key=lambda x: x.id)
                if (not request.org_id or lb.org_id == request.org_id)
                and (not request.project_id or lb.project_id == request.project_id)
            ]
            page = [self._full(lb) for lb in lbs[start : start + size]]
        token = str(start + size) if start + size < len(lbs) else ""
        return fiberlb_pb2.ListLoadBalancersResponse(load_balancers=page, next_page_token=token)

    # listeners
    def CreateListener(self, request, context):
        self._enter("CreateListener", context)
        with self._lock:
            self._lb(request.load_balancer_id, context)
            if request.protocol not in PROTOCOLS:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"protocol {request.protocol!r} unsupported")
            if not 1 <= request.port <= 65535:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"port {request.port} out of range")
            pool = self.pools.get(request.default_pool_id)
            if pool is None or pool.load_balancer_id != request.load_balancer_id:
                context.abort(grpc.StatusCode.NOT_FOUND, f"pool {request.default_pool_id!r} not found")
            for x in self.listeners.values():
                if (x.load_balancer_id, x.protocol, x.port) == (
                    request.load_balancer_id, request.protocol, request.port,
                ):  # fmt: skip
                    context.abort(grpc.StatusCode.ALREADY_EXISTS, f"{request.protocol}/{request.port} exists")
            if request.HasField("health_check"):
                _check_health(request.health_check, context)
            listener = fiberlb_pb2.Listener(
                id=self._id("lsn"), load_balancer_id=request.load_balancer_id, protocol=request.protocol,
                port=request.port, default_pool_id=request.default_pool_id,
            )  # fmt: skip
            if request.HasField("health_check"):
                listener.health_check.CopyFrom(request.health_check)
            self.listeners[listener.id] = listener
            return listener

    def DeleteListener(self, request, context):
        self._enter("DeleteListener", context)
        with self._lock:
            self.listeners.pop(request.listener_id, None)
        return fiberlb_pb2.Empty()

    # pools
    def CreatePool(self, request, context):
        self._enter("CreatePool", context)
        with self._lock:
            self._lb(request.load_balancer_id, context)
            _check_pool(request.algorithm or "ROUND_ROBIN", request.session_affinity or "NONE", context)
            _check_members(request.members, context)
            pool = fiberlb_pb2.Pool(
                id=self._id("pool"),
                load_balancer_id=request.load_balancer_id,
                members=request.members,
                algorithm=request.algorithm or "ROUND_ROBIN",
                session_affinity=request.session_affinity or "NONE",
            )
            self.pools[pool.id] = pool
            return pool

    def UpdatePool(self, request, context):
        self._enter("UpdatePool", context)
        with self._lock:
            pool = self.pools.get(request.pool_id)
            if pool is None:
                context.abort(grpc.StatusCode.NOT_FOUND, f"pool {request.pool_id!r} not found")
            _check_pool(
                request.algorithm or pool.algorithm,
                request.session_affinity or pool.session_affinity,
                context,
            )
            _check_members(request.members, context)
            del pool.members[:]
            pool.members.extend(request.members)
            pool.algorithm = request.algorithm or pool.algorithm
            pool.session_affinity = request.session_affinity or pool.session_affinity
            return pool

    def GetPool(self, request, context):
        self._enter("GetPool", context)
        with self._lock:
            pool = self.pools.get(request.pool_id)
            if pool is None:
                context.abort(grpc.StatusCode.NOT_FOUND, f"pool {request.pool_id!r} not found")
            return pool

    def DeletePool(self, request, context):
        self._enter("DeletePool", context)
        with self._lock:
            if any(x.default_pool_id == request.pool_id for x in self.listeners.values()):
                context.abort(
                    grpc.StatusCode.FAILED_PRECONDITION, f"pool {request.pool_id} is used by a listener"
                )
            self.pools.pop(request.pool_id, None)
        return fiberlb_pb2.Empty()


def _check_ip(ip: str, context: Any) -> None:
    try:
        ipaddress.ip_address(ip)
    except ValueError:
        context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"{ip!r} is not an IP address")


def _check_pool(algorithm: str, affinity: str, context: Any) -> None:
    if algorithm not in ALGORITHMS:
        context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"algorithm {algorithm!r} unsupported")
    if affinity not in AFFINITIES:
        context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"session_affinity {affinity!r} unsupported")


def _check_members(members: Any, context: Any) -> None:
    for m in members:
        _check_ip(m.address, context)
        if not 1 <= m.port <= 65535:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"member port {m.port} out of range")


def _check_health(hc: Any, context: Any) -> None:
    if hc.type not in ("TCP", "HTTP", "HTTPS"):
        context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"health check type {hc.type!r} unsupported")
    if hc.type != "TCP" and not hc.path.startswith("/"):
        context.abort(grpc.StatusCode.INVALID_ARGUMENT, "HTTP health checks need an absolute path")
    if hc.interval_seconds <= 0 or hc.timeout_seconds <= 0 or hc.timeout_seconds > hc.interval_seconds:
        context.abort(grpc.StatusCode.INVALID_ARGUMENT, "need 0 < timeout_seconds <= interval_seconds")


class FakeServer:
    """The fake on a free loopback port, TLS and IAM tokens only as FiberLB: `.endpoint` is
    "127.0.0.1:PORT"."""

    def __init__(self, pki: DevPki) -> None:
        self.fake = FakeFiberLB()
        self._server, self.tokens = pki.server()
        fiberlb_pb2_grpc.add_LoadBalancerServiceServicer_to_server(self.fake, self._server)
        self.port = pki.add_port(self._server, "127.0.0.1:0")
        self.endpoint = f"127.0.0.1:{self.port}"
        self.pki = pki
        self.flags = ["--fiberlb-endpoint", self.endpoint, *pki.client_flags()]
        """The controller's flags to reach this fake (endpoint, CA, IAM token file)."""
        self._server.start()

    def stop(self) -> None:
        self._server.stop(grace=None).wait()
