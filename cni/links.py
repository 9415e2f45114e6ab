"""Kernel links of pod attachments: veth pairs, addresses, routes, checksum offload.

The per-request path (ADD, DEL, CHECK) speaks rtnetlink through `cni/netlink.py` (plain
sockets, ~60x less CPU per request than pyroute2 0.9); GC's link listing and the node's
management port use pyroute2's `IPRoute` (this is the only pyroute2 importer).

A socket for a pod's namespace is opened by entering that namespace with setns(2) in the
calling worker thread just long enough to create the socket, not with
`IPRoute(netns=...)`, which forks a helper per socket and re-creates a missing namespace
(exactly wrong for DEL after the pod is gone). The namespace is opened by path; a missing
path is `NetnsGone`, never re-created.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import ipaddress
import logging
import os
import socket
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from pyroute2 import IPRoute  # type: ignore[import-untyped]
from pyroute2.netlink.exceptions import NetlinkError  # type: ignore[import-untyped]

from cni import netlink
from cni.errors import CniError, ContainerUnknown
from cni.netlink import Rtnl

log = logging.getLogger(__name__)

CLONE_NEWNET = 0x40000000
SIOCETHTOOL = 0x8946
ETHTOOL_GTXCSUM, ETHTOOL_STXCSUM = 0x16, 0x17
ALIAS_PREFIX = "prismnet:"
_libc = ctypes.CDLL(None, use_errno=True)


class NetnsGone(ContainerUnknown):
    """The pod's network namespace path does not exist (any more)."""


@dataclass(frozen=True, slots=True)
class LinkState:
    name: str
    index: int
    mac: str
    mtu: int
    up: bool
    addresses: tuple[str, ...]
    """CIDR strings, IPv4 and global IPv6."""
    routes: tuple[tuple[str, str], ...]
    """(dst CIDR, gateway or '') through this link."""
    alias: str = ""
    tx_checksum: bool | None = None


@dataclass(frozen=True, slots=True)
class HostEnd:
    name: str
    index: int
    mac: str
    peer_index: int | None
    """ifindex of the pod end inside the pod's namespace."""


@dataclass(frozen=True, slots=True)
class PodLinkConfig:
    ifname: str
    mac: str
    mtu: int
    addresses: tuple[str, ...]
    routes: tuple[tuple[str, str], ...]


def _setns(fd: int) -> None:
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


def open_netns(path: str) -> int:
    """An fd on the namespace at `path`; NetnsGone when it does not exist."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError as e:
        raise NetnsGone(f"network namespace {path} does not exist") from e
    return fd


@contextmanager
def netns_rtnl(path: str) -> Iterator[tuple[Rtnl, socket.socket]]:
    """A raw rtnetlink socket and an ioctl socket in the namespace at `path`."""
    target = open_netns(path)
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    try:
        _setns(target)
        try:
            nl = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)
            sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        finally:
            _setns(own)
    finally:
        os.close(own)
        os.close(target)
    with Rtnl(nl) as rtnl, sock:
        yield rtnl, sock


def set_tx_checksum(sock: socket.socket, ifname: str, on: bool) -> None:
    """ETHTOOL_STXCSUM: TCP through the userspace datapath stalls with TX checksum offload on."""
    _ethtool(sock, ifname, ETHTOOL_STXCSUM, int(on))


def get_tx_checksum(sock: socket.socket, ifname: str) -> bool:
    return bool(_ethtool(sock, ifname, ETHTOOL_GTXCSUM, 0))


def _ethtool(sock: socket.socket, ifname: str, cmd: int, data: int) -> int:
    value = ctypes.create_string_buffer(struct.pack("II", cmd, data))
    ifreq = struct.pack("16sP", ifname.encode(), ctypes.addressof(value)).ljust(40, b"\0")
    fcntl.ioctl(sock.fileno(), SIOCETHTOOL, ifreq)
    return int(struct.unpack("II", value.raw[:8])[1])


class Links:
    """Host and pod side of pod interfaces.

    `tx_checksum_off`: turn TX checksum offload off on the pod end of each veth, which the userspace
    datapath needs (TCP through it silently stalls otherwise); the kernel datapath does not.
    """

    def __init__(self, tx_checksum_off: bool = True) -> None:
        self.tx_checksum_off = tx_checksum_off

    def create_veth(self, host_if: str, netns: str, pod_if: str, mtu: int, alias: str) -> HostEnd:
        """Create the pair with the pod end directly in `netns`; the host end is up, tagged with `alias`.

        The alias is written before any address is allocated, so GC can always find (and
        release) an attachment whose ADD died half-way. Raw rtnetlink (`cni/netlink.py`):
        add, set alias (not accepted at creation), get.

        ovs-vswitchd reconfigures every bridge on each link change it sees in its namespace
        (O(ports): 1.5 ms of its CPU per change at 100 pods, 2 ms at 200; `make bench BENCH=cni`,
        density run), so the host end changes as few times as it can: it is created down and
        comes up only when the pod end is up (`configure_pod`: no separate carrier-down and
        carrier-up changes), and checksum offload is turned off on the pod end only (in the pod's
        namespace, unseen here): what the host end transmits is what ovs-vswitchd hands it,
        already checksummed. Made inside the pod and moved out, the host end would show only the
        arrival, but a move between namespaces waits for an RCU grace period: 16 ms per ADD.
        """
        fd = open_netns(netns)
        try:
            with Rtnl() as host:
                try:
                    host.add_veth(host_if, pod_if, fd, mtu, up=False)
                except netlink.NetlinkError as e:
                    if e.errno != errno.EEXIST:
                        raise CniError(f"cannot create {pod_if} in {netns}", e.strerror or "") from e
                    host.delete_link(host_if)  # leftover of a crashed ADD (or the pod end exists)
                    try:
                        host.add_veth(host_if, pod_if, fd, mtu, up=False)
                    except netlink.NetlinkError as e2:
                        raise CniError(f"cannot create {pod_if} in {netns}", e2.strerror or "") from e2
                link = host.get_link(host_if)
                if link is None:
                    raise CniError(f"{host_if} vanished right after its creation")
                host.set_link(link.index, alias=ALIAS_PREFIX + alias)
        finally:
            os.close(fd)
        return HostEnd(host_if, link.index, link.mac, link.peer_index)

    def configure_pod(
        self, netns: str, pod: PodLinkConfig, index: int | None = None, host_index: int | None = None
    ) -> None:
        """MAC, MTU, checksum offload off, up, addresses and routes of the pod end (`index` if known);
        then the host end (`host_index`, made down by `create_veth`) up."""
        with netns_rtnl(netns) as (rtnl, sock):
            if index is None:
                link = rtnl.get_link(pod.ifname)
                if link is None:
                    raise CniError(f"{pod.ifname} is missing in {netns}")
                index = link.index
            if self.tx_checksum_off:
                set_tx_checksum(sock, pod.ifname, False)
            rtnl.set_link(index, up=True, mac=pod.mac, mtu=pod.mtu)
            rtnl.set_link(1, up=True)  # lo is always index 1 in a network namespace
            for cidr in pod.addresses:
                rtnl.add_address(index, cidr)
            for dst, gw in pod.routes:
                rtnl.replace_route(index, dst, gw)
        if host_index is not None:
            with Rtnl() as host:
                host.set_link(host_index, up=True)

    def delete(self, ifname: str) -> bool:
        """Delete a host-side link; False when it was already gone."""
        with Rtnl() as host:
            return host.delete_link(ifname)

    def host_link(self, ifname: str) -> LinkState | None:
        with Rtnl() as host:
            return _rtnl_state(host, ifname)

    def pod_link(self, netns: str, ifname: str) -> LinkState | None:
        with netns_rtnl(netns) as (rtnl, sock):
            state = _rtnl_state(rtnl, ifname)
            return _with_csum(state, get_tx_checksum(sock, ifname)) if state else None

    def owned_links(self) -> dict[str, str]:
        """Host links carrying our alias: name -> alias without the prefix."""
        out = {}
        with IPRoute() as host:
            for link in host.get_links():
                alias = link.get("IFLA_IFALIAS") or ""
                if alias.startswith(ALIAS_PREFIX):
                    out[link.get("IFLA_IFNAME")] = alias.removeprefix(ALIAS_PREFIX)
        return out

    def configure_host_port(
        self, ifname: str, mac: str, mtu: int, address: str, routes: tuple[tuple[str, str], ...]
    ) -> None:
        """The node's management port: MAC, address, routes to the pod network, checksum offload off."""
        with IPRoute() as host:
            (idx,) = host.link_lookup(ifname=ifname)
            host.link("set", index=idx, address=mac, mtu=mtu, state="up")
            _replace_addresses(host, idx, (address,))
            for dst, gw in routes:
                host.route("replace", dst=dst, gateway=gw or None, oif=idx)
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                set_tx_checksum(s, ifname, False)

    def exists(self, ifname: str) -> bool:
        return os.path.exists(f"/sys/class/net/{ifname}")

    def ipv4_addresses(self) -> list[str]:
        """Every IPv4 address of this network namespace but loopback's 127/8 (the platform guard's)."""
        with IPRoute() as host:
            found = {a.get("IFA_ADDRESS") for a in host.get_addr(family=socket.AF_INET)}
        return sorted(a for a in found if a and not ipaddress.IPv4Address(a).is_loopback)


def _replace_addresses(ipr: IPRoute, idx: int, addresses: tuple[str, ...]) -> None:
    for cidr in addresses:
        iface = ipaddress.ip_interface(cidr)
        try:
            ipr.addr("add", index=idx, address=str(iface.ip), prefixlen=iface.network.prefixlen)
        except NetlinkError as e:
            if e.code != errno.EEXIST:
                raise


def _rtnl_state(rtnl: Rtnl, ifname: str) -> LinkState | None:
    link = rtnl.get_link(ifname)
    if link is None:
        return None
    return LinkState(
        ifname,
        link.index,
        link.mac,
        link.mtu,
        link.up,
        tuple(rtnl.addresses(link.index)),
        tuple(rtnl.routes(link.index)),
        link.alias,
    )


def _with_csum(state: LinkState, on: bool) -> LinkState:
    return LinkState(
        state.name,
        state.index,
        state.mac,
        state.mtu,
        state.up,
        state.addresses,
        state.routes,
        state.alias,
        on,
    )
