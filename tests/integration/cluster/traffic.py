"""Traffic between namespaces with tests/integration/cluster/peer.py at both ends."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

PEER = str(Path(__file__).with_name("peer.py"))


def peer_argv(netns: str, *args: str) -> list[str]:
    return ["ip", "netns", "exec", netns, sys.executable, PEER, *args]


@contextmanager
def serving(netns: str, *args: str) -> Iterator[subprocess.Popen[str]]:
    """A peer server (tcp-sink, udp-echo) in `netns`, ready when entered, killed on exit."""
    proc = subprocess.Popen(
        peer_argv(netns, *args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert json.loads(line or "{}").get("ready"), f"peer {args} in {netns} did not start: {proc.stderr}"
        yield proc
    finally:
        proc.kill()
        proc.wait()


def client(netns: str, *args: str) -> dict[str, Any]:
    proc = subprocess.run(peer_argv(netns, *args), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    out: dict[str, Any] = json.loads(proc.stdout)
    return out


def ping(netns: str, ip: str, *opts: str, timeout: float = 5.0) -> subprocess.CompletedProcess[str]:
    """One ping (retried until `timeout`: the first may wait for the tunnel's neighbour entry)."""
    deadline = time.monotonic() + timeout
    while True:
        proc = subprocess.run(
            ["ip", "netns", "exec", netns, "ping", "-c1", "-W1", *opts, ip], capture_output=True, text=True
        )
        if proc.returncode == 0 or time.monotonic() > deadline:
            return proc
