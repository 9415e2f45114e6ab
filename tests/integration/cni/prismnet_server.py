"""A faithful in-process PrismNET NetworkService (real gRPC server on a unix socket) for tests.

Per-namespace subnets carved from a pool, allocations keyed by container id (AllocateIP
returns the existing one), ReleaseIP reports whether something was released, and the
status codes the API would use for bad or impossible requests.
"""

from __future__ import annotations

import ipaddress
import threading
from dataclasses import dataclass, field

import grpc

from nodeenv.plasmacloud_auth import DevPki
from protos import prismnet_pb2, prismnet_pb2_grpc


@dataclass
class _Switch:
    subnet: ipaddress.IPv4Network
    gateway: ipaddress.IPv4Address
    used: dict[str, prismnet_pb2.Allocation] = field(default_factory=dict)


class FakePrismnet(prismnet_pb2_grpc.NetworkServiceServicer):
    def __init__(
        self, pool: str = "10.97.0.0/16", prefix: int = 24, dns: tuple[str, ...] = ("10.96.0.10",)
    ) -> None:
        self._subnets = ipaddress.IPv4Network(pool).subnets(new_prefix=prefix)
        self._switches: dict[str, _Switch] = {}
        self._lock = threading.Lock()
        self.dns = dns
        self.calls: list[str] = []

    def _switch(self, namespace: str) -> _Switch:
        if namespace not in self._switches:
            subnet = next(self._subnets)
            self._switches[namespace] = _Switch(subnet, next(subnet.hosts()))
        return self._switches[namespace]

    def AllocateIP(self, request, context):
        self.calls.append("AllocateIP")
        if not request.namespace or not request.container_id:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "namespace and container_id are required")
        with self._lock:
            sw = self._switch(request.namespace)
            alloc = sw.used.get(request.container_id)
            if alloc is None:
                taken = {ipaddress.ip_interface(a.ip_address).ip for a in sw.used.values()} | {sw.gateway}
                free = next((ip for ip in sw.subnet.hosts() if ip not in taken), None)
                if free is None:
                    context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, f"{sw.subnet} is full")
                mac = "0a:58:" + ":".join(f"{b:02x}" for b in free.packed)
                alloc = prismnet_pb2.Allocation(
                    namespace=request.namespace,
                    pod_name=request.pod_name,
                    container_id=request.container_id,
                    ip_address=f"{free}/{sw.subnet.prefixlen}",
                    mac_address=mac,
                )
                sw.used[request.container_id] = alloc
        return prismnet_pb2.AllocateIPResponse(
            ip_address=alloc.ip_address,
            gateway=str(sw.gateway),
            dns_servers=list(self.dns),
            mac_address=alloc.mac_address,
            prefix_length=sw.subnet.prefixlen,
        )

    def ReleaseIP(self, request, context):
        self.calls.append("ReleaseIP")
        if not request.container_id:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "container_id is required")
        with self._lock:
            for sw in self._switches.values():
                alloc = sw.used.get(request.container_id)
                if alloc and (
                    not request.ip_address
                    or ipaddress.ip_interface(request.ip_address).ip
                    == ipaddress.ip_interface(alloc.ip_address).ip
                ):
                    del sw.used[request.container_id]
                    return prismnet_pb2.ReleaseIPResponse(released=True)
        return prismnet_pb2.ReleaseIPResponse(released=False)

    def CreateLogicalSwitch(self, request, context):
        with self._lock:
            sw = self._switch(request.namespace)
        return prismnet_pb2.CreateLogicalSwitchResponse(
            name=f"k8s-{request.namespace}", subnet=str(sw.subnet), gateway=str(sw.gateway)
        )

    def ListAllocations(self, request, context):
        with self._lock:
            allocs = [
                a
                for ns, sw in self._switches.items()
                if not request.namespace or ns == request.namespace
                for a in sw.used.values()
            ]
        return prismnet_pb2.ListAllocationsResponse(allocations=allocs)

    def allocated(self) -> dict[str, str]:
        with self._lock:
            return {a.container_id: a.ip_address for sw in self._switches.values() for a in sw.used.values()}


def serve(path: str, pki: DevPki) -> tuple[grpc.Server, FakePrismnet]:
    """TLS and IAM tokens only, as PrismNET."""
    fake = FakePrismnet()
    server, _ = pki.server(workers=8)
    prismnet_pb2_grpc.add_NetworkServiceServicer_to_server(fake, server)
    pki.add_port(server, f"unix:{path}")
    server.start()
    return server, fake
