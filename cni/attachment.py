"""What one pod attachment is called everywhere: switch, logical port, host veth, external_ids.

Names are derived deterministically from the request, so DEL and GC find everything an
ADD (even a crashed one) created, with or without the agent's memory.
"""

from __future__ import annotations

import hashlib
import ipaddress
from dataclasses import dataclass
from typing import Self

from cni.ovn import K_CID, K_IFNAME, K_LSP, K_NET, K_NETNS, K_NODE, K_NS, K_POD
from cni.ovn_egress import pods_set_name
from cni.wire import CniRequest

HOST_IF_PREFIX = "pn"


@dataclass(frozen=True, slots=True, kw_only=True)
class Attachment:
    container_id: str
    ifname: str
    network: str
    namespace: str
    pod: str
    netns: str
    node: str

    @classmethod
    def from_request(cls, req: CniRequest, node: str) -> Self:
        return cls(
            container_id=req.container_id,
            ifname=req.ifname,
            network=req.netconf.name,
            namespace=req.pod.namespace,
            pod=req.pod.name,
            netns=req.netns,
            node=node,
        )

    @classmethod
    def from_ids(cls, ids: dict[str, str]) -> Self:
        return cls(
            container_id=ids.get(K_CID, ""),
            ifname=ids.get(K_IFNAME, ""),
            network=ids.get(K_NET, ""),
            namespace=ids.get(K_NS, "default"),
            pod=ids.get(K_POD, ""),
            netns=ids.get(K_NETNS, ""),
            node=ids.get(K_NODE, ""),
        )

    @property
    def key(self) -> tuple[str, str]:
        return (self.container_id, self.ifname)

    @property
    def switch(self) -> str:
        return f"k8s-{self.namespace}"

    @property
    def lsp(self) -> str:
        """Spec: `<pod-name>-<container-id>` (plus the interface when it is not eth0)."""
        base = f"{self.pod or 'pod'}-{self.container_id}"
        return base if self.ifname == "eth0" else f"{base}-{self.ifname}"

    @property
    def egress_set(self) -> str:
        """The address set of this node's pods (cni/ovn_egress.py)."""
        return pods_set_name(self.node)

    @property
    def host_if(self) -> str:
        digest = hashlib.sha1(f"{self.container_id}/{self.ifname}".encode()).hexdigest()
        return HOST_IF_PREFIX + digest[:11]

    @property
    def alias(self) -> str:
        """Kernel ifalias of the host veth (after `prismnet:`): how GC recognises our links."""
        return f"{self.network}/{self.container_id}/{self.ifname}"

    def external_ids(self) -> dict[str, str]:
        return {
            K_CID: self.container_id,
            K_IFNAME: self.ifname,
            K_NET: self.network,
            K_NS: self.namespace,
            K_POD: self.pod,
            K_NETNS: self.netns,
            K_NODE: self.node,
            K_LSP: self.lsp,
        }


def parse_alias(alias: str) -> tuple[str, str, str] | None:
    """(network, container id, ifname) from a host veth alias, None if it is not ours."""
    parts = alias.split("/")
    return (parts[0], parts[1], parts[2]) if len(parts) == 3 else None


def mac_for(ip: str) -> str:
    """A locally administered MAC derived from the IPv4 address (as ovn-kubernetes does)."""
    return "0a:58:" + ":".join(f"{b:02x}" for b in ipaddress.IPv4Address(ip).packed)
