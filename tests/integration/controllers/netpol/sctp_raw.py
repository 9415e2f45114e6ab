"""SCTP probes without an SCTP stack: the test kernel has none (socket(IPPROTO_SCTP, SOCK_STREAM) fails
with EPROTONOSUPPORT), but raw IP sockets of protocol 132 work. The probe sends one SCTP INIT (RFC 9260
3.3.2, CRC32c checksum) from a pod's netns and a raw socket in the destination pod's netns watches for
it: "reached" means the datapath (OVS, its ACLs, conntrack) carried the packet to the pod. Nothing
answers the INIT (no stack), so this sees one direction, which is what a policy decides."""

from __future__ import annotations

import os
import select
import socket
import struct
import time

import google_crc32c

from tests.integration.controllers.netpol.traffic import in_netns

IPPROTO_SCTP = 132
INIT = 1


def init_packet(sport: int, dport: int, tag: int) -> bytes:
    """An SCTP common header and INIT chunk (initiate tag `tag`), with its CRC32c."""
    chunk = struct.pack("!BBHIIHHI", INIT, 0, 20, tag, 65535, 1, 1, tag)
    body = struct.pack("!HHII", sport, dport, 0, 0) + chunk
    crc = google_crc32c.value(body)
    return (
        body[:8] + struct.pack("<I", crc) + body[12:]
    )  # the checksum field, little-endian per RFC 9260 App. A


def _raw() -> socket.socket:
    return socket.socket(socket.AF_INET, socket.SOCK_RAW, IPPROTO_SCTP)


def sctp_reaches(src_netns: str, dst_netns: str, dst_ip: str, port: int, timeout: float = 0.5) -> bool:
    """Whether an SCTP INIT to dst_ip:port from src_netns arrives in dst_netns within `timeout` s."""
    tag = int.from_bytes(os.urandom(4), "big") or 1
    sport = 30000 + tag % 20000
    with in_netns(dst_netns, _raw) as rx, in_netns(src_netns, _raw) as tx:
        tx.sendto(init_packet(sport, port, tag), (dst_ip, 0))
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            if not select.select([rx], [], [], left)[0]:
                return False
            data = rx.recv(2048)
            ihl = (data[0] & 0x0F) * 4
            got_sport, got_dport = struct.unpack("!HH", data[ihl : ihl + 4])
            (got_tag,) = struct.unpack("!I", data[ihl + 16 : ihl + 20]) if len(data) >= ihl + 20 else (0,)
            if (got_sport, got_dport, got_tag) == (sport, port, tag):
                return True
    return False
