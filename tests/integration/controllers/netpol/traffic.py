"""TCP and UDP echo servers and probes inside pod network namespaces, from the test process.

setns(2) moves only the calling thread, and a socket stays in the namespace it was created in:
each socket is made on a short-lived thread that entered the pod's netns, then served by a
thread of ours. Probes have a bounded timeout and say whether the echo came back.
"""

from __future__ import annotations

import ctypes
import os
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import TypeVar

CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)
T = TypeVar("T")


def in_netns(netns: str | None, fn: Callable[[], T]) -> T:
    """fn() run on a thread inside /run/netns/<netns> (the host's namespace for None)."""
    if netns is None:
        return fn()
    box: list[T] = []
    errors: list[BaseException] = []

    def run() -> None:
        fd = os.open(f"/run/netns/{netns}", os.O_RDONLY)
        try:
            if _libc.setns(fd, CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), f"setns {netns}")
            box.append(fn())
        except BaseException as e:
            errors.append(e)
        finally:
            os.close(fd)

    t = threading.Thread(target=run)
    t.start()
    t.join()
    if errors:
        raise errors[0]
    return box[0]


class EchoServers:
    """TCP and UDP echo on the given ports of one netns, until close()."""

    def __init__(self, netns: str, tcp: tuple[int, ...], udp: tuple[int, ...]) -> None:
        self.socks: list[socket.socket] = []
        for port in tcp:
            s = in_netns(netns, lambda p=port: _bound(socket.SOCK_STREAM, p))  # type: ignore[misc]
            s.listen(16)
            self._serve(self._tcp, s)
        for port in udp:
            self._serve(self._udp, in_netns(netns, lambda p=port: _bound(socket.SOCK_DGRAM, p)))  # type: ignore[misc]

    def _serve(self, loop: Callable[[socket.socket], None], s: socket.socket) -> None:
        self.socks.append(s)
        threading.Thread(target=loop, args=(s,), daemon=True).start()

    @staticmethod
    def _tcp(s: socket.socket) -> None:
        while True:
            try:
                conn, _ = s.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(2)
                with suppress(OSError):
                    conn.sendall(conn.recv(64))

    @staticmethod
    def _udp(s: socket.socket) -> None:
        while True:
            try:
                data, peer = s.recvfrom(64)
                s.sendto(data, peer)
            except OSError:
                return

    def close(self) -> None:
        for s in self.socks:
            s.shutdown(socket.SHUT_RDWR) if s.type == socket.SOCK_STREAM else None
            s.close()


def _bound(kind: int, port: int) -> socket.socket:
    s = socket.socket(socket.AF_INET, kind)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", port))
    return s


def reaches(src: str | None, ip: str, proto: str, port: int, timeout: float = 0.5) -> bool:
    """True when an echo through `proto` to ip:port comes back within `timeout`."""
    kind = socket.SOCK_STREAM if proto == "tcp" else socket.SOCK_DGRAM
    s = in_netns(src, lambda: socket.socket(socket.AF_INET, kind))
    s.settimeout(timeout)
    try:
        with s:
            if proto == "tcp":
                s.connect((ip, port))
                s.sendall(b"ping")
                return s.recv(64) == b"ping"
            s.sendto(b"ping", (ip, port))
            return s.recvfrom(64)[0] == b"ping"
    except OSError:
        return False


@contextmanager
def servers(netns: str, tcp: tuple[int, ...], udp: tuple[int, ...]) -> Iterator[EchoServers]:
    srv = EchoServers(netns, tcp, udp)
    try:
        yield srv
    finally:
        srv.close()
