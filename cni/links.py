"""Kernel links through pyroute2 (the only pyroute2 importer): veth pairs, addresses, routes.

Per-request work uses plain `IPRoute` sockets. A socket for a pod's namespace is opened
by entering that namespace with setns(2) in the calling worker thread just long enough to
create the socket (~3 ms), not with `IPRoute(netns=...)`, which forks a helper per socket
and re-creates a missing namespace (exactly wrong for DEL after the pod is gone). The
namespace is opened by path; a missing path is `NetnsGone`, never re-created.
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
from typing import Any

from pyroute2 import IPRoute
from pyroute2.netlink.exceptions import NetlinkError

from cni.errors import CniError, ContainerUnknown

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
def netns_sockets(path: str) -> Iterator[tuple[IPRoute, socket.socket]]:
    """An IPRoute and an ioctl socket bound to the namespace at `path` (the thread returns at once)."""
    target = open_netns(path)
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    try:
        _setns(target)
        try:
            ipr = IPRoute()
            sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        finally:
            _setns(own)
    finally:
        os.close(own)
        os.close(target)
    try:
        yield ipr, sock
    finally:
        sock.close()
        ipr.close()


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
    """Host and pod side of pod interfaces."""

    def create_veth(self, host_if: str, netns: str, pod_if: str, mtu: int, alias: str) -> HostEnd:
        """Create the pair with the pod end directly in `netns`; the host end is up, tagged with `alias`.

        The alias is written before any address is allocated, so GC can always find (and
        release) an attachment whose ADD died half-way. Every pyroute2 call costs ~1 ms here,
        so this makes three: add, set alias (not accepted at creation), get.
        """
        fd = open_netns(netns)
        try:
            with IPRoute() as host:
                spec = {
                    "ifname": host_if,
                    "kind": "veth",
                    "mtu": mtu,
                    "state": "up",
                    "peer": {"ifname": pod_if, "net_ns_fd": fd, "mtu": mtu},
                }
                try:
                    host.link("add", **spec)
                except NetlinkError as e:
                    if e.code != errno.EEXIST:
                        raise CniError(f"cannot create {pod_if} in {netns}", os.strerror(e.code)) from e
                    _delete(host, host_if)  # leftover of a crashed ADD (or the pod end exists)
                    try:
                        host.link("add", **spec)
                    except NetlinkError as e2:
                        raise CniError(f"cannot create {pod_if} in {netns}", os.strerror(e2.code)) from e2
                host.link("set", ifname=host_if, ifalias=ALIAS_PREFIX + alias)
                (link,) = host.link("get", ifname=host_if)
        finally:
            os.close(fd)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            set_tx_checksum(s, host_if, False)
        return HostEnd(host_if, link["index"], link.get("IFLA_ADDRESS"), link.get("IFLA_LINK"))

    def configure_pod(self, netns: str, pod: PodLinkConfig, index: int | None = None) -> None:
        """MAC, MTU, checksum offload off, up, addresses and routes of the pod end (`index` if known)."""
        with netns_sockets(netns) as (ipr, sock):
            _configure_pod_end(ipr, sock, pod, index)

    def delete(self, ifname: str) -> bool:
        """Delete a host-side link; False when it was already gone."""
        with IPRoute() as host:
            return _delete(host, ifname)

    def host_link(self, ifname: str) -> LinkState | None:
        with IPRoute() as host:
            idx = host.link_lookup(ifname=ifname)
            return _state(host, idx[0]) if idx else None

    def pod_link(self, netns: str, ifname: str) -> LinkState | None:
        with netns_sockets(netns) as (ipr, sock):
            idx = ipr.link_lookup(ifname=ifname)
            if not idx:
                return None
            state = _state(ipr, idx[0])
            return _with_csum(state, get_tx_checksum(sock, ifname))

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


def _configure_pod_end(ipr: IPRoute, sock: socket.socket, pod: PodLinkConfig, index: int | None) -> None:
    idx = index if index is not None else ipr.link("get", ifname=pod.ifname)[0]["index"]
    set_tx_checksum(sock, pod.ifname, False)
    ipr.link("set", index=idx, address=pod.mac, mtu=pod.mtu, state="up")
    ipr.link("set", index=1, state="up")  # lo is always index 1 in a network namespace
    _replace_addresses(ipr, idx, pod.addresses)
    for dst, gw in pod.routes:
        ipr.route("replace", dst=dst, gateway=gw or None, oif=idx)


def _delete(ipr: IPRoute, ifname: str) -> bool:
    try:
        ipr.link("del", ifname=ifname)
    except NetlinkError as e:
        if e.code != errno.ENODEV:
            raise
        return False
    return True


def _replace_addresses(ipr: IPRoute, idx: int, addresses: tuple[str, ...]) -> None:
    for cidr in addresses:
        iface = ipaddress.ip_interface(cidr)
        try:
            ipr.addr("add", index=idx, address=str(iface.ip), prefixlen=iface.network.prefixlen)
        except NetlinkError as e:
            if e.code != errno.EEXIST:
                raise


def _state(ipr: IPRoute, idx: int) -> LinkState:
    (link,) = ipr.get_links(idx)
    addrs = []
    for a in ipr.get_addr(index=idx):
        if a.get("family") == socket.AF_INET6 and a.get("scope", 0) != 0:
            continue  # link-local
        addrs.append(f"{a.get('IFA_ADDRESS')}/{a.get('prefixlen')}")
    routes = []
    for r in ipr.get_routes(oif=idx, family=socket.AF_INET, table=254):
        dst = r.get("RTA_DST")
        routes.append((f"{dst}/{r.get('dst_len')}" if dst else "0.0.0.0/0", r.get("RTA_GATEWAY") or ""))
    return LinkState(
        name=link.get("IFLA_IFNAME"),
        index=idx,
        mac=link.get("IFLA_ADDRESS"),
        mtu=link.get("IFLA_MTU"),
        up=bool(link.get("flags", 0) & 1),
        addresses=tuple(addrs),
        routes=tuple(routes),
        alias=_attr(link, "IFLA_IFALIAS") or "",
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


def _attr(msg: Any, name: str) -> Any:
    return msg.get(name)
