"""rtnetlink message encoding (no kernel needed): attributes, padding, nesting, parsing."""

from __future__ import annotations

import socket
import struct

from cni import netlink


def test_attributes_are_padded_and_parse_back() -> None:
    raw = netlink._str(netlink.IFLA_IFNAME, "eth0") + netlink._u32(netlink.IFLA_MTU, 1400)
    assert len(raw) % 4 == 0
    attrs = netlink._attrs(raw)
    assert attrs[netlink.IFLA_IFNAME] == b"eth0\0"
    assert struct.unpack("=I", attrs[netlink.IFLA_MTU])[0] == 1400


def test_nested_flag_bits_are_masked() -> None:
    nested = struct.pack("=HH", 8, netlink.IFLA_LINKINFO | 0x8000) + b"abcd"
    assert netlink._attrs(nested) == {netlink.IFLA_LINKINFO: b"abcd"}


class FakeSock:
    """Records what is sent and replies with canned netlink messages."""

    def __init__(self, replies: list[bytes]) -> None:
        self.sent: list[bytes] = []
        self.replies = replies

    def bind(self, addr: object) -> None:
        pass

    def send(self, data: bytes) -> int:
        self.sent.append(data)
        return len(data)

    def recv(self, n: int) -> bytes:
        return self.replies.pop(0)

    def close(self) -> None:
        pass


def _msg(kind: int, seq: int, body: bytes) -> bytes:
    return netlink._HDR.pack(netlink._HDR.size + len(body), kind, 0, seq, 0) + body


def test_errors_carry_errno_and_missing_link_is_none() -> None:
    err = _msg(netlink.NLMSG_ERROR, 1, struct.pack("=i", -19) + b"\0" * 16)
    rt = netlink.Rtnl(FakeSock([err]))  # type: ignore[arg-type]
    assert rt.get_link("nope") is None


def test_get_link_reads_index_mac_peer_mtu_and_alias() -> None:
    body = netlink._IFINFO.pack(socket.AF_UNSPEC, 1, 7, netlink.IFF_UP, 0)
    body += netlink._attr(netlink.IFLA_ADDRESS, bytes.fromhex("0a580a000005"))
    body += netlink._u32(netlink.IFLA_LINK, 2) + netlink._u32(netlink.IFLA_MTU, 1400)
    body += netlink._str(netlink.IFLA_IFALIAS, "prismnet:x")
    sock = FakeSock([_msg(netlink.RTM_NEWLINK, 1, body)])
    link = netlink.Rtnl(sock).get_link("pn1")  # type: ignore[arg-type]
    assert link == netlink.Link(7, "0a:58:0a:00:00:05", 2, 1400, True, "prismnet:x")
    length, kind, flags, seq, _ = netlink._HDR.unpack_from(sock.sent[0])
    assert (kind, flags, seq, length) == (netlink.RTM_GETLINK, netlink.NLM_F_REQUEST, 1, len(sock.sent[0]))


def test_veth_request_nests_the_peer_with_its_netns_fd() -> None:
    sock = FakeSock([_msg(netlink.NLMSG_ERROR, 1, struct.pack("=i", 0) + b"\0" * 16)])
    netlink.Rtnl(sock).add_veth("pnabc", "eth0", 42, 1400)  # type: ignore[arg-type]
    body = sock.sent[0][netlink._HDR.size + netlink._IFINFO.size :]
    info = netlink._attrs(netlink._attrs(body)[netlink.IFLA_LINKINFO])
    assert info[netlink.IFLA_INFO_KIND] == b"veth\0"
    peer = netlink._attrs(info[netlink.IFLA_INFO_DATA])[netlink.VETH_INFO_PEER]
    peer_attrs = netlink._attrs(peer[netlink._IFINFO.size :])
    assert peer_attrs[netlink.IFLA_IFNAME] == b"eth0\0"
    assert struct.unpack("=I", peer_attrs[netlink.IFLA_NET_NS_FD])[0] == 42
