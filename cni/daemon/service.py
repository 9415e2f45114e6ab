"""PodNetworkService: ADD, DEL, CHECK, GC and STATUS as orchestration over the adapters.

Synchronous on purpose (ovsdbapp and pyroute2 block); the aiohttp edge runs it in worker
threads, one request per container id at a time.
"""

from __future__ import annotations

import ipaddress
import logging
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass

from cni.attachment import Attachment, mac_for, parse_alias
from cni.errors import (
    CheckFailed,
    ContainerUnknown,
    InvalidNetworkConfig,
    IpamFailure,
    PluginNotAvailable,
    PortNotReady,
)
from cni.ipam import OVN_IPAM_TYPES, AddressSource, Allocation, DelegatedIpam
from cni.links import HostEnd, Links, NetnsGone, PodLinkConfig
from cni.ovn import K_CID, K_IFNAME, K_LSP, K_NET, OvsPorts
from cni.ovn_nb import Northbound, SubnetOverlap
from cni.settings import AgentSettings
from cni.wire import CniRequest, CniResult, Interface, IpConfig, NetConf
from ovnaccess.connection import Ovsdb
from ovnaccess.watch import Expectation

log = logging.getLogger(__name__)
SLOW_PORT_AFTER = 5.0
"""Seconds after which a port not yet installed is logged as slow (the ADD keeps waiting)."""


@dataclass
class Adapters:
    links: Links
    ovs: OvsPorts
    nb: Northbound
    ovs_db: Ovsdb
    nb_db: Ovsdb
    ovn_ipam: AddressSource
    prismnet_ipam: Callable[[str], AddressSource] | None = None
    """Builds the gRPC source for a `prismnetEndpoint` (None: not available in this build)."""


class PodNetworkService:
    def __init__(self, settings: AgentSettings, adapters: Adapters, node: str) -> None:
        self._s, self._a, self.node = settings, adapters, node
        # independent steps of one request (kernel vs OVSDB) overlap on this pool
        self._pool = ThreadPoolExecutor(max_workers=32, thread_name_prefix="prismnet-step")

    # -- ADD ---------------------------------------------------------------------------
    def add(self, req: CniRequest) -> CniResult:
        timer = _Timer()
        att = Attachment.from_request(req, self.node)
        plog = _plog(req, att)
        source = self._source(req.netconf)
        if isinstance(source, DelegatedIpam) and (missing := source.problem(req)):
            raise InvalidNetworkConfig(missing)  # the config's error, found before anything is made
        if self._exists(att):
            self._teardown(req, att, source)  # an ADD retried with the same container id starts clean
        timer.mark("prepare_ms")
        try:
            host, alloc, mac = self._wire(req, att, source, timer)
        except BaseException:
            plog.warning("ADD failed; removing what it created", exc_info=True)
            try:
                self._teardown(req, att, source)
            except Exception:  # the ADD's own error is the one to report; kubelet's DEL or GC retries
                plog.warning("removing what the failed ADD created failed too", exc_info=True)
            raise
        log.info(  # not plog: a LoggerAdapter would drop the timing fields
            "added %s on %s via %s",
            ",".join(i.address for i in alloc.ips),
            att.lsp,
            source.name,
            extra={**_context(req, att), **timer.marks, "total_ms": timer.total_ms(), "host_if": att.host_if},
        )
        return self._result(req, att, alloc, mac, host.mac)

    def _exists(self, att: Attachment) -> bool:
        return (
            self._a.links.exists(att.host_if)
            or self._a.ovs.port(att.host_if) is not None
            or self._a.nb.port(att.lsp) is not None
        )

    def _wire(
        self, req: CniRequest, att: Attachment, source: AddressSource, timer: _Timer
    ) -> tuple[HostEnd, Allocation, str]:
        # The veth first (~0.5 ms; its alias records the attachment for GC, and a missing netns
        # fails here, before anything is allocated). For OVN IPAM the NB port (its own record) is
        # committed while the address and the pod end are configured; then the OVS bind (the
        # Interface carries the container id). Binding before the veth existed was
        # no faster (measured) and cost an ovs-vswitchd warning per pod.
        with self._a.ovs.expect_installed(att.host_if) as installed:
            host = self._a.links.create_veth(att.host_if, att.netns, att.ifname, req.netconf.mtu, att.alias)
            linked_at = time.perf_counter()
            timer.mark("veth_ms")
            alloc_f = self._pool.submit(source.allocate, req, att) if source.self_recording else None
            try:
                alloc, mac = self._address_pod(req, att, source, host, alloc_f, timer)
            finally:
                if alloc_f is not None:
                    wait([alloc_f])  # a failed ADD's teardown must see the port it created
            # Bound once the host end is up (configure_pod brings it up last): a packet socket that
            # ovs-vswitchd binds to a device still down gets ENETDOWN ("error receiving Ethernet
            # packet ... Network is down" in its log), which a quiet machine hit for most pods.
            bind_started, bound_at = self._bind(att)
            timer.marks["bind_ms"] = round((bound_at - bind_started) * 1000, 2)
            timer.mark("pod_and_bind_ms")
            if not self._port_installed(installed, att):
                raise PortNotReady(
                    f"ovn-controller did not install {att.lsp} within {self._s.port_up_timeout:.0f}s",
                    "is ovn-controller running?",
                )
            timer.mark("wait_ms")
            # from when the port is complete: bound in OVSDB and the host end in the kernel
            timer.marks["port_up_ms"] = round((installed.fired_at - max(bound_at, linked_at)) * 1000, 2)
            timer.marks["installed_seen_at"] = installed.fired_at  # CLOCK_MONOTONIC, for the benchmark
        return host, alloc, mac

    def _port_installed(self, installed: Expectation, att: Attachment) -> bool:
        """Waits for ovn-installed up to port_up_timeout, saying in the log when it is slow.

        A port waits for northd (NB -> SB) and ovn-controller; after an NB RAFT leader change
        northd's own reconnect backoff alone can take ~15-24 s here, so a short timeout would fail
        an ADD that is about to succeed and have kubelet start a new sandbox for it."""
        first = min(SLOW_PORT_AFTER, self._s.port_up_timeout)
        if installed.wait(first):
            return True
        rest = self._s.port_up_timeout - first
        if rest <= 0:
            return False
        log.warning(
            "%s not installed by ovn-controller after %.0f s; waiting up to %.0f s more "
            "(is northd connected to the NB leader? is ovn-controller connected?)",
            att.lsp, first, rest, extra={"lsp": att.lsp, "host_if": att.host_if},
        )  # fmt: skip
        return bool(installed.wait(rest))

    def _address_pod(
        self,
        req: CniRequest,
        att: Attachment,
        source: AddressSource,
        host: HostEnd,
        alloc_f: Future[Allocation] | None,
        timer: _Timer,
    ) -> tuple[Allocation, str]:
        """The address (allocated, or awaited), the pod's LSP if the source made none, the pod end."""
        alloc = alloc_f.result() if alloc_f else source.allocate(req, att)
        timer.mark("ipam_ms")
        mac = self._ensure_port(att, alloc)
        pod_if = PodLinkConfig(
            ifname=att.ifname,
            mac=mac,
            mtu=req.netconf.mtu,
            addresses=tuple(i.address for i in alloc.ips),
            routes=tuple((r.dst, r.gw) for r in alloc.routes),
        )
        self._a.links.configure_pod(att.netns, pod_if, host.peer_index, host.index)
        return alloc, mac

    def _bind(self, att: Attachment) -> tuple[float, float]:
        started = time.perf_counter()
        self._a.ovs.bind(att.host_if, att.lsp, att.external_ids())
        return started, time.perf_counter()

    def _ensure_port(self, att: Attachment, alloc: Allocation) -> str:
        """The pod's logical switch port, when the address source did not create it."""
        if alloc.port_created:
            return alloc.mac
        first = ipaddress.ip_interface(alloc.ips[0].address)
        if not isinstance(first, ipaddress.IPv4Interface):
            raise IpamFailure(f"{first} is not IPv4; PrismNET pod networks are IPv4")
        mac = alloc.mac or mac_for(str(first.ip))
        try:
            self._a.nb.ensure_switch(
                att.switch,
                self._s.cluster_network,
                self._s.subnet_prefix,
                subnet=first.network,
                gateway=alloc.ips[0].gateway,
            )
        except SubnetOverlap as e:  # the teardown releases the address the source gave
            raise IpamFailure(str(e), "give this network's IPAM a range no OVN IPAM switch uses") from e
        addr = " ".join([mac, *(str(ipaddress.ip_interface(i.address).ip) for i in alloc.ips)])
        self._a.nb.add_port(
            att.switch, att.lsp, [addr], [addr], att.external_ids(), address_set=att.egress_set
        )
        return mac

    def _result(
        self, req: CniRequest, att: Attachment, alloc: Allocation, mac: str, host_mac: str
    ) -> CniResult:
        prev = req.netconf.prev_result or CniResult()
        base = len(prev.interfaces)
        return CniResult(
            interfaces=(
                *prev.interfaces,
                Interface(name=att.host_if, mac=host_mac),
                Interface(name=att.ifname, mac=mac, mtu=req.netconf.mtu, sandbox=att.netns),
            ),
            ips=(
                *prev.ips,
                *(IpConfig(address=i.address, gateway=i.gateway, interface=base + 1) for i in alloc.ips),
            ),
            routes=(*prev.routes, *alloc.routes),
            dns=alloc.dns if alloc.dns.nameservers or alloc.dns.search else prev.dns,
        )

    # -- DEL ---------------------------------------------------------------------------
    def delete(self, req: CniRequest) -> None:
        timer = _Timer()
        att = Attachment.from_request(req, self.node)
        self._teardown(req, att, self._source(req.netconf), timer)
        log.info(
            "deleted %s", att.lsp, extra={**_context(req, att), **timer.marks, "total_ms": timer.total_ms()}
        )

    def _teardown(
        self, req: CniRequest, att: Attachment, source: AddressSource, timer: _Timer | None = None
    ) -> None:
        """Remove everything of one attachment; every step succeeds when its object is gone."""
        timer = timer or _Timer()
        # the kernel deletes the pair (the pod end with it, or it went with its netns) meanwhile
        kernel = self._pool.submit(self._a.links.delete, att.host_if)
        try:
            port = self._a.ovs.port(att.host_if)
            lsp = port.external_ids.get(K_LSP, att.lsp) if port else att.lsp
            if port is not None:
                self._a.ovs.unbind(att.host_if)
            self._a.nb.delete_port(lsp, address_set=att.egress_set)
            if lsp != att.lsp:
                self._a.nb.delete_port(att.lsp, address_set=att.egress_set)
            source.release(req, att)
            timer.mark("ovsdb_ipam_ms")
        finally:
            kernel.result()
            timer.mark("kernel_extra_ms")

    # -- CHECK -------------------------------------------------------------------------
    def check(self, req: CniRequest) -> None:
        prev = req.netconf.prev_result
        if prev is None:
            raise InvalidNetworkConfig("CHECK needs prevResult")
        att = Attachment.from_request(req, self.node)
        sandbox = [i for i in prev.interfaces if i.name == att.ifname and i.sandbox]
        if not sandbox:
            raise CheckFailed(f"prevResult has no interface {att.ifname} in a sandbox")
        want = sandbox[0]
        try:
            pod = self._a.links.pod_link(att.netns, att.ifname)
        except NetnsGone as e:
            raise ContainerUnknown(str(e)) from e
        problems = []
        if pod is None:
            raise CheckFailed(f"interface {att.ifname} is missing in {att.netns}")
        if want.mac and pod.mac.lower() != want.mac.lower():
            problems.append(f"{att.ifname} MAC is {pod.mac}, prevResult says {want.mac}")
        if want.mtu and pod.mtu != want.mtu:
            problems.append(f"{att.ifname} MTU is {pod.mtu}, prevResult says {want.mtu}")
        if not pod.up:
            problems.append(f"{att.ifname} is down")
        if pod.tx_checksum and self._a.links.tx_checksum_off:
            problems.append(f"{att.ifname} has TX checksum offload on")
        idx = prev.interfaces.index(want)
        for ip in prev.ips:
            if ip.interface in (None, idx) and ip.address not in pod.addresses:
                problems.append(f"{att.ifname} lacks address {ip.address} (has {', '.join(pod.addresses)})")
        for r in prev.routes:
            if (_norm(r.dst), r.gw) not in {(_norm(d), g) for d, g in pod.routes}:
                problems.append(f"route {r.dst} via {r.gw or '-'} is missing in {att.netns}")
        problems += self._check_host_side(att, prev)
        if problems:
            raise CheckFailed("; ".join(problems))

    def _check_host_side(self, att: Attachment, prev: CniResult) -> list[str]:
        out = []
        host = self._a.links.host_link(att.host_if)
        if host is None or not host.up:
            out.append(f"host veth {att.host_if} is {'down' if host else 'missing'}")
        port = self._a.ovs.port(att.host_if)
        if port is None or port.external_ids.get("iface-id") != att.lsp:
            out.append(f"OVS port {att.host_if} is not bound to {att.lsp}")
        elif not port.installed:
            out.append(f"ovn-controller has not installed {att.lsp}")
        lsp = self._a.nb.port(att.lsp)
        if lsp is None:
            out.append(f"logical switch port {att.lsp} is missing")
        else:
            held = " ".join(lsp.addresses).split()
            for ip in prev.ips:
                if str(ipaddress.ip_interface(ip.address).ip) not in held:
                    out.append(f"logical switch port {att.lsp} does not hold {ip.address}")
        return out

    # -- GC ----------------------------------------------------------------------------
    def gc(self, req: CniRequest) -> list[tuple[str, str]]:
        """Remove every attachment of this network on this node that is not in the valid list.

        The agent's edge does the same step by step, each removal under its container's lock.
        """
        stale = self.stale_attachments(req)
        for att in stale:
            self.remove_stale(req, att)
        self.resync_egress()
        return [a.key for a in stale]

    def resync_egress(self) -> None:
        """Rebuild this node's egress address set from its ports (a no-op without one)."""
        if self._a.nb.egress().resync(self.node):
            log.warning("egress address set of node %s had drifted from its ports; rebuilt", self.node)

    def stale_attachments(self, req: CniRequest) -> list[Attachment]:
        """Attachments of this network on this node (OVS ports, NB ports, veth aliases) not listed valid."""
        valid = req.netconf.valid_attachments or frozenset()
        net = req.netconf.name
        stale: dict[tuple[str, str], Attachment] = {}
        for port in self._a.ovs.owned_ports():
            a = Attachment.from_ids(port.external_ids)
            if a.network == net and a.key not in valid:
                stale[a.key] = a
        for lsp in self._a.nb.owned_ports(self.node):
            a = Attachment.from_ids(lsp.external_ids)
            if a.network == net and a.key not in valid:
                stale.setdefault(a.key, a)
        for _name, alias in self._a.links.owned_links().items():
            parsed = parse_alias(alias)
            if parsed and parsed[0] == net and (parsed[1], parsed[2]) not in valid:
                stale.setdefault(
                    (parsed[1], parsed[2]),
                    Attachment(
                        container_id=parsed[1],
                        ifname=parsed[2],
                        network=net,
                        namespace="default",
                        pod="",
                        netns="",
                        node=self.node,
                    ),
                )
        return [stale[k] for k in sorted(stale)]

    def remove_stale(self, req: CniRequest, att: Attachment) -> None:
        self._teardown(req, att, self._source(req.netconf))
        log.info("gc removed attachment %s/%s", *att.key, extra={"cid": att.container_id[:12]})

    # -- STATUS ------------------------------------------------------------------------
    def status(self, req: CniRequest) -> None:
        problems = []
        if not self._a.ovs_db.connected():
            problems.append(f"OVSDB {self._s.ovs_db} not connected")
        if not self._a.nb_db.connected():
            problems.append(f"OVN northbound {self._s.ovn_nb_db} not connected")
        reason = self._source(req.netconf).problem(req)
        if reason:
            problems.append(f"IPAM: {reason}")
        if problems:
            raise PluginNotAvailable("prismnet is not ready", "; ".join(problems))

    # -- helpers -----------------------------------------------------------------------
    def _source(self, netconf: NetConf) -> AddressSource:
        if netconf.prismnet_endpoint:
            if self._a.prismnet_ipam is None:
                raise InvalidNetworkConfig(
                    "prismnetEndpoint is set but this agent has no PrismNET client",
                    "the agent needs --plasmacloud-ca and --plasmacloud-token-file (TLS + IAM token)",
                )
            return self._a.prismnet_ipam(netconf.prismnet_endpoint)
        if netconf.ipam is None or netconf.ipam.type in OVN_IPAM_TYPES:
            self._check_ovn_conf(netconf)
            return self._a.ovn_ipam
        return DelegatedIpam(netconf.ipam.type)

    def _check_ovn_conf(self, netconf: NetConf) -> None:
        nb = netconf.ovn.northbound
        if nb and nb != self._s.ovn_nb_db:
            raise InvalidNetworkConfig(
                f"ovn.northbound is {nb} but prismnet-agent uses {self._s.ovn_nb_db}",
                "configure both the same",
            )
        subnet = _ipam_subnet(netconf)
        if subnet and subnet != self._s.cluster_network:
            raise InvalidNetworkConfig(
                f"ipam.subnet {subnet} differs from the agent's cluster CIDR {self._s.cluster_cidr}"
            )


def _ipam_subnet(netconf: NetConf) -> ipaddress.IPv4Network | None:
    import json

    if netconf.ipam is None:
        return None
    value = json.loads(netconf.ipam.raw).get("subnet")
    if value is None:
        return None
    try:
        return ipaddress.IPv4Network(value)
    except ValueError as e:
        raise InvalidNetworkConfig(f"ipam.subnet {value!r} is not an IPv4 CIDR") from e


class _Timer:
    """Milliseconds per ADD phase, logged with the result (the benchmark reads port_up_ms)."""

    def __init__(self) -> None:
        self._start = self._t = time.perf_counter()
        self.marks: dict[str, float] = {}

    def total_ms(self) -> float:
        return round((time.perf_counter() - self._start) * 1000, 2)

    def mark(self, name: str) -> None:
        now = time.perf_counter()
        self.marks[name] = round((now - self._t) * 1000, 2)
        self._t = now


def _norm(cidr: str) -> str:
    return str(ipaddress.ip_network(cidr, strict=False))


def _context(req: CniRequest, att: Attachment) -> dict[str, str]:
    return {"pod": req.pod.key, "cid": att.container_id[:12], "cmd": req.command}


def _plog(req: CniRequest, att: Attachment) -> logging.LoggerAdapter[logging.Logger]:
    return logging.LoggerAdapter(log, _context(req, att))


__all__ = ["K_CID", "K_IFNAME", "K_NET", "Adapters", "PodNetworkService"]
