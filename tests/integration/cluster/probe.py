"""What a tenant pod tries, run inside its namespace (`python probe.py MODE ...`); one JSON line out.

connect TIMEOUT PROTO:IP:PORT...   try each at once; per target "open" (TCP connected / a UDP answer),
                                   "refused" (RST / ICMP unreachable) or "timeout" (dropped / silent)
https URL...                       GET each without credentials, certificate unchecked: status code
garp IFNAME IP COUNT               COUNT gratuitous ARP requests and replies from IFNAME's MAC claiming IP
udp-from SRC_IP DST_IP PORT COUNT  COUNT raw UDP datagrams with SRC_IP as their source
frame-from SRC_MAC DST_MAC SRC_IP DST_IP PORT COUNT   COUNT Ethernet frames with SRC_MAC as source
geneve NODE_IP VNI PORT_KEY DST_MAC DST_IP PORT COUNT   COUNT Geneve datagrams, a frame for a logical port
udp-log PORT                       print {"ready"}, then one line per datagram: its source address
"""

from __future__ import annotations

import json
import socket
import ssl
import struct
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

DNS_QUERY = bytes.fromhex("abcd01000001000000000000") + b"\x07example\x00\x00\x01\x00\x01"


def _tcp(ip: str, port: int, timeout: float) -> str:
    try:
        with socket.create_connection((ip, port), timeout=timeout):
            return "open"
    except ConnectionRefusedError:
        return "refused"
    except TimeoutError:
        return "timeout"
    except OSError as e:
        return e.strerror or type(e).__name__


def _udp(ip: str, port: int, timeout: float) -> str:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(timeout / 3)
        s.connect((ip, port))
        for _ in range(3):  # a datagram is an attempt, not a connection: a few, in case one is lost
            try:
                s.send(DNS_QUERY if port == 53 else b"probe\n")
                s.recv(4096)
                return "open"
            except ConnectionRefusedError:
                return "refused"
            except TimeoutError:
                continue
    return "timeout"


def connect(timeout: float, targets: list[str]) -> dict[str, str]:
    def one(target: str) -> str:
        proto, ip, port = target.split(":")
        return (_tcp if proto == "tcp" else _udp)(ip, int(port), timeout)

    with ThreadPoolExecutor(len(targets) or 1) as pool:
        return dict(zip(targets, pool.map(one, targets), strict=True))


def https(urls: list[str]) -> dict[str, int | str]:
    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    out: dict[str, int | str] = {}
    for url in urls:
        try:
            with urllib.request.urlopen(url, context=ctx, timeout=5) as r:
                out[url] = r.status
        except urllib.error.HTTPError as e:
            out[url] = e.code
        except OSError as e:
            out[url] = str(e)
    return out


def _mac(text: str) -> bytes:
    return bytes.fromhex(text.replace(":", ""))


def _checksum(data: bytes) -> int:
    total = int(sum(struct.unpack(f"!{len(data) // 2}H", data)))
    total = (total >> 16) + (total & 0xFFFF)
    return ~(total + (total >> 16)) & 0xFFFF


def _ipv4_udp(src: str, dst: str, port: int, payload: bytes) -> bytes:
    udp = struct.pack("!HHHH", 40000, port, 8 + len(payload), 0) + payload
    hdr = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 1, 0, 64, 17, 0,
                      socket.inet_aton(src), socket.inet_aton(dst))  # fmt: skip
    return hdr[:10] + struct.pack("!H", _checksum(hdr)) + hdr[12:] + udp


def _send_frames(ifname: str, frame: bytes, count: int) -> None:
    with socket.socket(socket.AF_PACKET, socket.SOCK_RAW) as s:
        s.bind((ifname, 0))
        for _ in range(count):
            s.send(frame)
            time.sleep(0.05)


def garp(ifname: str, ip: str, count: int) -> dict[str, object]:
    with open(f"/sys/class/net/{ifname}/address") as f:
        mac = _mac(f.read().strip())
    addr = socket.inet_aton(ip)
    # both forms: OVN's ARP responder answers a request for a known address itself (nobody else
    # sees it), so a reply is the one that reaches the neighbours
    frames = [b"\xff" * 6 + mac + b"\x08\x06"
              + struct.pack("!HHBBH6s4s6s4s", 1, 0x0800, 6, 4, op, mac, addr, b"\xff" * 6, addr)
              for op in (1, 2)]  # fmt: skip
    for frame in frames:
        _send_frames(ifname, frame, count)
    return {"sent": 2 * count}


def frame_from(src_mac: str, dst_mac: str, src: str, dst: str, port: int, count: int) -> dict[str, object]:
    packet = _ipv4_udp(src, dst, port, f"from {src_mac} {src}\n".encode())
    _send_frames("eth0", _mac(dst_mac) + _mac(src_mac) + b"\x08\x00" + packet, count)
    return {"sent": count}


def udp_from(src: str, dst: str, port: int, count: int) -> dict[str, object]:
    with socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW) as s:
        for _ in range(count):
            s.sendto(_ipv4_udp(src, dst, port, f"from {src}\n".encode()), (dst, 0))
            time.sleep(0.05)
    return {"sent": count}


def geneve(
    node: str, vni: int, port_key: int, dst_mac: str, dst: str, port: int, count: int
) -> dict[str, object]:
    """COUNT Geneve datagrams to `node`'s tunnel endpoint, each an Ethernet frame for logical port
    `port_key` of datapath `vni` (OVN's option: class 0x0102, type 0x80, egress port key) from a
    made-up source address 192.0.2.66."""
    option = struct.pack("!HBBI", 0x0102, 0x80, 1, port_key & 0xFFFF)
    header = struct.pack("!BBHI", len(option) // 4, 0, 0x6558, vni << 8)
    inner = _mac(dst_mac) + _mac("0a:58:c0:00:02:42") + b"\x08\x00"
    inner += _ipv4_udp("192.0.2.66", dst, port, b"from 192.0.2.66 geneve\n")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for _ in range(count):
            s.sendto(header + option + inner, (node, 6081))
            time.sleep(0.05)
    return {"sent": count}


def udp_log(port: int) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("0.0.0.0", port))
        print(json.dumps({"ready": True}), flush=True)
        while True:
            data, peer = s.recvfrom(4096)
            print(json.dumps({"from": peer[0], "data": data.decode(errors="replace").strip()}), flush=True)


def main(mode: str, args: list[str]) -> None:
    if mode == "udp-log":
        udp_log(int(args[0]))
        return
    out: object
    if mode == "connect":
        out = connect(float(args[0]), args[1:])
    elif mode == "https":
        out = https(args)
    elif mode == "garp":
        out = garp(args[0], args[1], int(args[2]))
    elif mode == "udp-from":
        out = udp_from(args[0], args[1], int(args[2]), int(args[3]))
    elif mode == "frame-from":
        src_mac, dst_mac, src, dst, port, count = args
        out = frame_from(src_mac, dst_mac, src, dst, int(port), int(count))
    elif mode == "geneve":
        node, vni, key, dst_mac, dst, port, count = args
        out = geneve(node, int(vni), int(key), dst_mac, dst, int(port), int(count))
    else:
        raise SystemExit(f"unknown mode {mode}")
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
