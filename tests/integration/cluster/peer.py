"""Traffic ends run inside a pod's or node's namespace (`python peer.py MODE ...`); one JSON line out.

tcp-sink PORT               accept one connection, read to EOF, answer "<bytes> <sha256>"
tcp-send IP PORT BYTES      send BYTES random bytes, print bytes, sha match, MB/s, MSS
udp-echo PORT               answer each datagram with itself (until killed)
udp-send IP PORT SIZE       send one SIZE-byte datagram with DF set, print whether it came back intact
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import sys
import time

IP_MTU_DISCOVER, IP_PMTUDISC_DO = 10, 2


def tcp_sink(port: int) -> None:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("0.0.0.0", port))
        s.listen(1)
        print(json.dumps({"ready": True}), flush=True)
        conn, _ = s.accept()
        h, n = hashlib.sha256(), 0
        while chunk := conn.recv(1 << 16):
            h.update(chunk)
            n += len(chunk)
        conn.sendall(f"{n} {h.hexdigest()}".encode())
        conn.close()


def tcp_send(ip: str, port: int, size: int) -> None:
    data = os.urandom(size)
    t0 = time.perf_counter()
    with socket.create_connection((ip, port), timeout=20) as c:
        mss = c.getsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG)
        c.sendall(data)
        c.shutdown(socket.SHUT_WR)
        n, digest = c.recv(200).decode().split()
    dt = time.perf_counter() - t0
    ok = int(n) == size and digest == hashlib.sha256(data).hexdigest()
    print(json.dumps({"bytes": int(n), "intact": ok, "mbps": size / dt / 1e6, "mss": mss}))


def udp_echo(port: int) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("0.0.0.0", port))
        print(json.dumps({"ready": True}), flush=True)
        while True:
            data, peer = s.recvfrom(1 << 16)
            s.sendto(data, peer)


def udp_send(ip: str, port: int, size: int) -> None:
    data = os.urandom(size)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.setsockopt(socket.IPPROTO_IP, IP_MTU_DISCOVER, IP_PMTUDISC_DO)
        s.settimeout(1)
        for _ in range(5):  # the first datagram may wait for ARP/tunnel neighbour resolution
            try:
                s.sendto(data, (ip, port))
                back, _ = s.recvfrom(1 << 16)
            except TimeoutError:
                continue
            except OSError as e:
                print(json.dumps({"error": e.strerror}))
                return
            print(json.dumps({"intact": back == data, "size": len(back)}))
            return
    print(json.dumps({"error": "no answer"}))


def main() -> None:
    mode, args = sys.argv[1], sys.argv[2:]
    if mode == "tcp-sink":
        tcp_sink(int(args[0]))
    elif mode == "tcp-send":
        tcp_send(args[0], int(args[1]), int(args[2]))
    elif mode == "udp-echo":
        udp_echo(int(args[0]))
    elif mode == "udp-send":
        udp_send(args[0], int(args[1]), int(args[2]))


if __name__ == "__main__":
    main()
