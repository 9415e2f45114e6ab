"""TCP sockets in another network namespace, for a process that runs in this one.

setns(2) moves only the calling thread, and a socket stays in the namespace it was created in: a
short-lived thread enters `/run/netns/<name>`, makes the socket there, and the socket is then used
from this namespace like any other. The API double serves the cluster's nodes this way on the
underlay (a listening socket), while staying on this namespace's loopback for everything else; the
node environment asks a daemon on a node's own loopback whether it is ready (a connected socket).
`enter` moves a whole daemon (the thread that starts it) into a namespace instead.
"""

from __future__ import annotations

import ctypes
import os
import socket
import threading
from collections.abc import Callable

CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


def enter(netns: str) -> None:
    """Move the calling thread into `/run/netns/<netns>` (threads and processes it starts from then
    on are there too): a whole daemon's network, entered before it starts any thread, while its
    mounts stay the machine's (unlike `ip netns exec`, which also makes a mount namespace)."""
    try:
        fd = os.open(f"/run/netns/{netns}", os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError as e:
        raise OSError(e.errno, f"network namespace {netns} does not exist") from e
    try:
        if _libc.setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns {netns}: {os.strerror(err)}")
    finally:
        os.close(fd)


def _made_in(netns: str, make: Callable[[], socket.socket]) -> socket.socket:
    """`make()` run by a thread inside the named network namespace; its socket."""
    made: list[socket.socket] = []
    failed: list[BaseException] = []

    def run() -> None:
        try:
            enter(netns)
            made.append(make())
        except BaseException as e:  # handed to the caller's thread
            failed.append(e)

    t = threading.Thread(target=run, name=f"socket-in-{netns}")  # it exits, so its namespace goes with it
    t.start()
    t.join()
    if failed:
        raise failed[0]
    return made[0]


def listening_socket(netns: str, host: str, port: int, backlog: int = 128) -> socket.socket:
    """A TCP socket listening on host:port inside the named network namespace."""

    def make() -> socket.socket:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((host, port))
            s.listen(backlog)
        except BaseException:
            s.close()
            raise
        return s

    return _made_in(netns, make)


def unconnected_socket(netns: str, family: int, kind: int, proto: int = 0) -> socket.socket:
    """A socket of the named network namespace, not connected yet (a client library connects it)."""
    return _made_in(netns, lambda: socket.socket(family, kind, proto))


def connected_socket(netns: str, host: str, port: int, timeout: float = 1.0) -> socket.socket:
    """A TCP socket connected to host:port from inside the named network namespace."""
    return _made_in(netns, lambda: socket.create_connection((host, port), timeout=timeout))
