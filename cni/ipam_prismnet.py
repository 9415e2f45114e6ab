"""IPAM through the PrismNET NetworkService gRPC API (`prismnetEndpoint` in the netconf).

The allocation key is the container id (as the API defines it); ReleaseIP with an empty
address releases whatever that container holds, so DEL and GC need nothing but the id.
The channel (`host:port` or `unix:/path`) is TLS against the pinned PlasmaCloud CA with an IAM
token on every call (common/plasmacloud_grpc.py); a refused token is an IPAM failure naming the
token file.
"""

from __future__ import annotations

import ipaddress
import logging

import grpc

from cni.attachment import Attachment
from cni.errors import CniError, InvalidNetworkConfig, IpamFailure, TryAgainLater
from cni.ipam import Allocation
from cni.wire import CniRequest, Dns, IpConfig, Route
from common.plasmacloud_grpc import PlasmaCloudAuth, secure_channel
from protos import prismnet_pb2, prismnet_pb2_grpc

log = logging.getLogger(__name__)
RPC_TIMEOUT = 10.0
_RETRYABLE = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.ABORTED)


def _error(op: str, e: grpc.RpcError) -> CniError:
    code, details = e.code(), e.details() or ""
    msg = f"PrismNET {op} failed: {code.name}"
    if code in _RETRYABLE:
        return TryAgainLater(msg, details)
    if code == grpc.StatusCode.INVALID_ARGUMENT:
        return InvalidNetworkConfig(msg, details)
    return IpamFailure(msg, details)


class PrismnetIpam:
    name = "prismnet"
    self_recording = False

    def __init__(self, endpoint: str, auth: PlasmaCloudAuth) -> None:
        self.endpoint = endpoint
        self._channel = secure_channel(endpoint, auth)
        self._stub = prismnet_pb2_grpc.NetworkServiceStub(self._channel)

    def allocate(self, req: CniRequest, att: Attachment) -> Allocation:
        request = prismnet_pb2.AllocateIPRequest(
            namespace=att.namespace, pod_name=att.pod, container_id=att.container_id
        )
        try:
            resp = self._stub.AllocateIP(request, timeout=RPC_TIMEOUT)
        except grpc.RpcError as e:
            raise _error("AllocateIP", e) from e
        try:
            iface = ipaddress.ip_interface(resp.ip_address)
            if resp.gateway:
                ipaddress.ip_address(resp.gateway)
        except ValueError as e:
            raise IpamFailure(f"PrismNET returned an invalid address {resp.ip_address!r}", str(e)) from e
        if iface.network.prefixlen == iface.max_prefixlen and resp.prefix_length:
            iface = ipaddress.ip_interface(f"{iface.ip}/{resp.prefix_length}")
        routes = (Route(dst="0.0.0.0/0", gw=resp.gateway),) if resp.gateway else ()
        return Allocation(
            ips=(IpConfig(address=str(iface), gateway=resp.gateway, interface=1),),
            routes=routes,
            dns=Dns(nameservers=tuple(resp.dns_servers)),
            mac=resp.mac_address,
        )

    def release(self, req: CniRequest, att: Attachment) -> None:
        request = prismnet_pb2.ReleaseIPRequest(
            namespace=att.namespace, pod_name=att.pod, container_id=att.container_id
        )
        try:
            self._stub.ReleaseIP(request, timeout=RPC_TIMEOUT)
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.NOT_FOUND:
                raise _error("ReleaseIP", e) from e

    def problem(self, req: CniRequest) -> str:
        try:
            grpc.channel_ready_future(self._channel).result(timeout=2)
        except grpc.FutureTimeoutError:
            return f"PrismNET endpoint {self.endpoint} is unreachable"
        return ""

    def close(self) -> None:
        self._channel.close()
