"""How the double reaches a node's kubelet API, as kube-apiserver does: HTTPS to the Node's
InternalIP (or Hostname) at its status.daemonEndpoints.kubeletEndpoint.Port, presenting
--kubelet-client-certificate/--kubelet-client-key and verifying the kubelet's serving certificate
against --kubelet-certificate-authority (kube-apiserver verifies nothing without it, and so does
this; metrics-server's scrape, metricsserver.py, goes the same way). --kubelet-netns: the network
namespace the nodes are reached from (a cluster's underlay), its sockets made there
(nodeenv/netns_socket.py)."""

from __future__ import annotations

import socket
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from nodeenv import netns_socket
from nodeenv.kubeapi.errors import BadRequest

PORT = 10250
ADDRESS_TYPES = ("InternalIP", "Hostname", "ExternalIP")
"""k3s's --kubelet-preferred-address-types."""


@dataclass(frozen=True, slots=True, kw_only=True)
class KubeletClientConfig:
    cert: Path | None = None
    key: Path | None = None
    ca: Path | None = None
    netns: str = ""

    def ssl_context(self) -> ssl.SSLContext:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        if self.ca is not None:
            ctx.load_verify_locations(self.ca)
        else:
            ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
        if self.cert is not None and self.key is not None:
            ctx.load_cert_chain(self.cert, self.key)
        return ctx


def node_endpoint(node: dict[str, Any]) -> str:
    """The kubelet API's base URL from the Node object."""
    status = node.get("status") or {}
    addresses = {a.get("type"): a.get("address") for a in status.get("addresses") or []}
    host = next((addresses[t] for t in ADDRESS_TYPES if addresses.get(t)), None)
    if host is None:
        raise BadRequest(f"node {node['metadata']['name']} has no address")
    port = ((status.get("daemonEndpoints") or {}).get("kubeletEndpoint") or {}).get("Port") or PORT
    return f"https://{f'[{host}]' if ':' in host else host}:{port}"


class KubeletClient:
    """One HTTPS client session for every kubelet, made on first use on the serving loop."""

    def __init__(self, config: KubeletClientConfig) -> None:
        self.config = config
        self._session: aiohttp.ClientSession | None = None

    def _socket(self, addr_info: Any) -> socket.socket:
        family, kind, proto = addr_info[0], addr_info[1], addr_info[2]
        return netns_socket.unconnected_socket(self.config.netns, family, kind, proto)

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            factory = self._socket if self.config.netns else None
            connector = aiohttp.TCPConnector(ssl=self.config.ssl_context(), socket_factory=factory)
            self._session = aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(
                total=None, sock_connect=10))  # fmt: skip
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
