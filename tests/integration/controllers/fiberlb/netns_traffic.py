"""Small servers and a client run inside pod network namespaces (`ip netns exec`), by PID.

The server answers every TCP connection (HTTP/1.0) and UDP datagram with its own name, so a
client learns which backend it reached. The client makes N requests in one process and prints
one JSON list: a backend name, "refused", "timeout" or "error:<text>" per request. The load
generator (LOADGEN, also used by the stress benches) opens a new connection per request without
pause and prints its counts once a second.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass, field

SERVER = r"""
import socket, sys, threading
name, port = sys.argv[1], int(sys.argv[2])
body = name.encode()
def tcp():
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", port)); s.listen(64)
    while True:
        c, _ = s.accept()
        threading.Thread(target=answer, args=(c,), daemon=True).start()
def answer(c):
    try:
        c.settimeout(30); c.recv(4096)
        c.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
    except OSError:
        pass
    finally:
        c.close()
def udp():
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(("0.0.0.0", port))
    while True:
        _, addr = u.recvfrom(2048); u.sendto(body, addr)
threading.Thread(target=udp, daemon=True).start()
print("ready", flush=True)
tcp()
"""

CLIENT = r"""
import json, socket, sys
host, port, n, proto = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
timeout = float(sys.argv[5])
out = []
for _ in range(n):
    try:
        if proto == "udp":
            u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.settimeout(timeout)
            u.connect((host, port)); u.send(b"hi"); out.append(u.recv(2048).decode()); u.close()
            continue
        s = socket.create_connection((host, port), timeout=timeout)
        s.sendall(b"GET / HTTP/1.0\r\n\r\n")
        data = b""
        while chunk := s.recv(4096):
            data += chunk
        s.close()
        out.append(data.split(b"\r\n\r\n", 1)[1].decode())
    except ConnectionRefusedError:
        out.append("refused")
    except (socket.timeout, TimeoutError):
        out.append("timeout")
    except OSError as e:
        out.append("error:%s" % e)
print(json.dumps(out))
"""


HELD = r"""
import json, socket, sys
host, tcp_port, udp_port = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
t = socket.create_connection((host, tcp_port), timeout=5)
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.settimeout(5); u.connect((host, udp_port))
def ask_udp():
    try:
        u.send(b"hi"); return u.recv(2048).decode()
    except OSError as e:
        return "error:%s" % e
print(json.dumps({"udp": ask_udp()}), flush=True)
sys.stdin.readline()
try:
    t.sendall(b"GET / HTTP/1.0\r\n\r\n"); data = b""
    while chunk := t.recv(4096):
        data += chunk
    tcp = data.split(b"\r\n\r\n", 1)[-1].decode() or "closed"
except OSError as e:
    tcp = "error:%s" % e
print(json.dumps({"tcp": tcp, "udp": ask_udp()}), flush=True)
"""
"""A TCP connection and a connected UDP socket (one conntrack entry each) opened first, asked again
after a line on stdin: which backend answers each, before and after."""


class HeldFlows:
    """HELD in `netns`: one TCP connection (no request yet) and one UDP flow to host, kept open."""

    def __init__(self, netns: str, host: str, tcp_port: int, udp_port: int) -> None:
        argv = [*_prefix(netns), sys.executable, "-c", HELD, host, str(tcp_port), str(udp_port)]
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        self.first_udp: str = json.loads(self.proc.stdout.readline())["udp"]

    def again(self) -> dict[str, str]:
        """{"tcp": who answers the held connection's request, "udp": who answers the same flow now}."""
        out, _ = self.proc.communicate("go\n", timeout=30)
        return dict(json.loads(out))

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


LOADGEN = r"""
import json, socket, sys, time
host, port, proto = sys.argv[1], int(sys.argv[2]), sys.argv[3]
ok = fail = 0
last = time.monotonic()
while True:
    try:
        if proto == "udp":
            u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.settimeout(1)
            u.connect((host, port)); u.send(b"x"); u.recv(64); u.close()
        else:
            s = socket.create_connection((host, port), timeout=1)
            s.sendall(b"GET / HTTP/1.0\r\n\r\n")
            while s.recv(4096):
                pass
            s.close()
        ok += 1
    except OSError:
        fail += 1
    now = time.monotonic()
    if now - last >= 1:
        print(json.dumps({"ok": ok, "fail": fail}), flush=True)
        ok = fail = 0
        last = now
"""
"""A client looping on new connections (TCP) or new sockets (UDP) to host:port: every request is a
new conntrack entry. Prints {"ok": n, "fail": m} once a second."""


def start_loadgen(netns: str, host: str, port: int, proto: str = "tcp") -> subprocess.Popen[str]:
    """LOADGEN in `netns` against host:port until stopped (stop_loadgen)."""
    argv = [*_prefix(netns), sys.executable, "-c", LOADGEN, host, str(port), proto]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)


def stop_loadgen(proc: subprocess.Popen[str]) -> list[tuple[int, int]]:
    """Kill it; its (answered, failed) count of each second it ran."""
    proc.kill()
    out, _ = proc.communicate()
    return [(d["ok"], d["fail"]) for d in map(json.loads, out.splitlines())]


def _prefix(netns: str | None) -> list[str]:
    return ["ip", "netns", "exec", netns] if netns else []


@dataclass
class Servers:
    procs: list[subprocess.Popen[str]] = field(default_factory=list)

    def start(self, netns: str, name: str, port: int) -> None:
        proc = subprocess.Popen(
            [*_prefix(netns), sys.executable, "-c", SERVER, name, str(port)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self.procs.append(proc)
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"

    def stop(self) -> None:
        for proc in self.procs:
            proc.kill()
            proc.wait()
        self.procs.clear()


def requests(
    netns: str | None, host: str, port: int, n: int, proto: str = "tcp", timeout: float = 2.0
) -> list[str]:
    argv = [*_prefix(netns), sys.executable, "-c", CLIENT, host, str(port), str(n), proto, str(timeout)]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60 + n * timeout)
    assert proc.returncode == 0, proc.stderr
    return list(json.loads(proc.stdout))


def eventually(fn, expect, timeout: float = 10.0, interval: float = 0.1):  # type: ignore[no-untyped-def]
    """Call fn() until expect(result) holds; returns the last result (the caller asserts)."""
    deadline = time.monotonic() + timeout
    while True:
        result = fn()
        if expect(result) or time.monotonic() > deadline:
            return result
        time.sleep(interval)
