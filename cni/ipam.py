"""Address allocation behind one Protocol, with three sources.

- `OvnIpam` (default): the OVN northbound database is the source of truth. The namespace
  switch carries its subnet (carved from the cluster CIDR, see `ovn_nb`); the pod's port is
  created with a free address of it in one verified NB transaction (`ovn_nb._AllocatePort`),
  so addresses are unique cluster-wide even with many agents adding at once, and released
  with the port row, so nothing leaks across agent restarts (GC deletes ports).
- `DelegatedIpam`: `ipam.type` names another CNI IPAM plugin (e.g. host-local) found in
  CNI_PATH; we run it with the same environment and netconf, as the CNI conventions say.
- `PrismnetIpam` (`cni/ipam_prismnet.py`): the PrismNET AllocateIP/ReleaseIP gRPC API when
  `prismnetEndpoint` is configured.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from cni.attachment import Attachment
from cni.errors import CniError, DelegatedPluginError, InvalidNetworkConfig, IpamFailure
from cni.ovn_nb import Allocated, Northbound, NotOurSwitch, SubnetsExhausted, SwitchMissing
from cni.wire import CniRequest, CniResult, Dns, IpConfig, Route

log = logging.getLogger(__name__)

OVN_IPAM_TYPES = ("", "prismnet-ipam", "ovn")
"""ipam.type values meaning 'OVN's own IPAM' (the spec's conflist says prismnet-ipam)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Allocation:
    ips: tuple[IpConfig, ...]
    routes: tuple[Route, ...] = ()
    dns: Dns = field(default_factory=Dns)
    mac: str = ""
    """Set when the source chose the MAC too (OVN IPAM)."""
    port_created: bool = False
    """True when the source already created the pod's logical switch port (OVN IPAM)."""


class AddressSource(Protocol):
    name: str
    self_recording: bool
    """True when the allocation itself is a durable record GC can find (OVN's port row)."""

    def allocate(self, req: CniRequest, att: Attachment) -> Allocation: ...

    def release(self, req: CniRequest, att: Attachment) -> None:
        """Idempotent: succeeds when nothing is held."""

    def problem(self, req: CniRequest) -> str:
        """'' when usable, else why not (for STATUS)."""


class OvnIpam:
    name = "ovn"
    self_recording = True

    def __init__(
        self,
        nb: Northbound,
        cluster: ipaddress.IPv4Network,
        prefix: int,
        dns: Dns,
        ovn_connected: Callable[[], bool],
        cluster_domain: str = "",
    ) -> None:
        self._nb, self._cluster, self._prefix = nb, cluster, prefix
        self._dns, self._connected, self._domain = dns, ovn_connected, cluster_domain

    def allocate(self, req: CniRequest, att: Attachment) -> Allocation:
        try:
            try:
                got = self._allocate(att)
            except SwitchMissing:  # the namespace's first pod: create its switch, subnet, router port
                self._nb.ensure_switch(att.switch, self._cluster, self._prefix)
                got = self._allocate(att)
        except (SubnetsExhausted, NotOurSwitch) as e:
            raise IpamFailure(str(e)) from e
        return Allocation(
            ips=(IpConfig(address=f"{got.ip}/{got.prefixlen}", gateway=got.gateway, interface=1),),
            routes=(Route(dst="0.0.0.0/0", gw=got.gateway),),
            dns=pod_dns(self._dns, self._domain, att.namespace),
            mac=got.mac,
            port_created=True,
        )

    def _allocate(self, att: Attachment) -> Allocated:
        return self._nb.allocate_port(att.switch, att.lsp, att.external_ids(), address_set=att.egress_set)

    def release(self, req: CniRequest, att: Attachment) -> None:
        """Nothing to do: the address is the port's, and the service deletes the port."""

    def problem(self, req: CniRequest) -> str:
        return "" if self._connected() else "OVN northbound database not connected"


def pod_dns(base: Dns, cluster_domain: str, namespace: str) -> Dns:
    """What kubelet writes into a pod's resolv.conf (ClusterFirst): the cluster search path first."""
    if not cluster_domain:
        return base
    d = cluster_domain.strip(".")
    search = (f"{namespace}.svc.{d}", f"svc.{d}", d)
    return Dns(
        nameservers=base.nameservers,
        domain=base.domain,
        search=search + tuple(x for x in base.search if x not in search),
        options=base.options or ("ndots:5",),
    )


class DelegatedIpam:
    """Runs `ipam.type` from CNI_PATH with our own environment and netconf."""

    self_recording = False

    def __init__(self, plugin: str) -> None:
        self.name = plugin

    def allocate(self, req: CniRequest, att: Attachment) -> Allocation:
        result = CniResult.from_dict(self._run(req, "ADD", att))
        if not result.ips:
            raise IpamFailure(f"IPAM plugin {self.name} returned no address")
        gateway = result.ips[0].gateway
        # CNI: a route without gw uses the default gateway the plugin determines; ours is the IP's.
        routes = tuple(Route(dst=r.dst, gw=r.gw or gateway) for r in result.routes)
        return Allocation(
            ips=tuple(IpConfig(address=i.address, gateway=i.gateway, interface=1) for i in result.ips),
            routes=routes,
            dns=result.dns,
        )

    def release(self, req: CniRequest, att: Attachment) -> None:
        self._run(req, "DEL", att)

    def problem(self, req: CniRequest) -> str:
        try:
            self._find(req)
        except CniError as e:
            return e.msg
        return ""

    def _find(self, req: CniRequest) -> str:
        for d in req.path:
            exe = os.path.join(d, self.name)
            if os.access(exe, os.X_OK):
                return exe
        raise InvalidNetworkConfig(f"IPAM plugin {self.name!r} not found in CNI_PATH {':'.join(req.path)!r}")

    def _run(self, req: CniRequest, command: str, att: Attachment) -> dict[str, object]:
        env = {
            "CNI_COMMAND": command,
            "CNI_CONTAINERID": att.container_id,
            "CNI_NETNS": att.netns,
            "CNI_IFNAME": att.ifname,
            "CNI_ARGS": _ignore_unknown(req.cni_args),
            "CNI_PATH": ":".join(req.path),
        }
        proc = subprocess.run(
            [self._find(req)], input=req.netconf.raw.encode(), env=env, capture_output=True, timeout=60
        )
        out = proc.stdout.decode(errors="replace").strip()
        try:
            reply = json.loads(out) if out else {}
        except ValueError:
            reply = {}
        if proc.returncode != 0:
            code = reply.get("code", 999) if isinstance(reply, dict) else 999
            msg = (
                reply.get("msg", out or proc.stderr.decode(errors="replace"))
                if isinstance(reply, dict)
                else out
            )
            raise DelegatedPluginError(
                int(code),
                f"IPAM plugin {self.name} {command} failed: {msg}",
                str(reply.get("details", "")) if isinstance(reply, dict) else "",
            )
        return reply if isinstance(reply, dict) else {}


def _ignore_unknown(cni_args: str) -> str:
    """Kubelet's K8S_POD_* args mean nothing to IPAM plugins; tell them so (as kubelet does)."""
    if not cni_args or "IgnoreUnknown=" in cni_args:
        return cni_args
    return f"IgnoreUnknown=1;{cni_args}"
