"""A listening TCP socket in another network namespace, for a daemon that runs in this one.

setns(2) moves only the calling thread, and a socket stays in the namespace it was created in: a
short-lived thread enters `/run/netns/<name>`, creates, binds and listens, and the socket is then
served from this namespace like any other (the API double serves the cluster's nodes this way on
the underlay, while staying on this namespace's loopback for everything else).
"""

from __future__ import annotations

import ctypes
import os
import socket
import threading

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


def listening_socket(netns: str, host: str, port: int, backlog: int = 128) -> socket.socket:
    """A TCP socket listening on host:port inside the named network namespace."""
    made: list[socket.socket] = []
    failed: list[BaseException] = []

    def make() -> None:
        try:
            fd = os.open(f"/run/netns/{netns}", os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError as e:
            failed.append(OSError(e.errno, f"network namespace {netns} does not exist"))
            return
        try:
            if _libc.setns(fd, CLONE_NEWNET) != 0:
                err = ctypes.get_errno()
                raise OSError(err, f"setns {netns}: {os.strerror(err)}")
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((host, port))
            s.listen(backlog)
            made.append(s)
        except BaseException as e:  # handed to the caller's thread
            failed.append(e)
        finally:
            os.close(fd)

    t = threading.Thread(target=make, name=f"listen-in-{netns}")  # it exits, so its namespace goes with it
    t.start()
    t.join()
    if failed:
        raise failed[0]
    return made[0]
