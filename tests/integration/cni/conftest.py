"""The PrismNET agent on the session's OVN node, the installed executable, pods in netns."""

from __future__ import annotations

import http.client
import itertools
import os
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

from tests.cni_agent_fixture import CLUSTER_CIDR, Agent, _run

__all__ = ["CLUSTER_CIDR", "Agent"]

_ids = itertools.count(1)


@dataclass
class Pods:
    """Network namespaces created by one test, deleted (with their attachments) at its end."""

    agent: Agent
    created: list[tuple[str, str, str, dict[str, object]]]

    def delete_all(self) -> None:
        """DEL every attachment made and delete every netns, as the test's teardown."""
        rt = self.agent.runtime()
        for name, cid, args, result in self.created:
            if cid:
                rt.delete(cid, f"/run/netns/{name}", result or None, args=args)
            subprocess.run(["ip", "netns", "del", name], capture_output=True)

    def netns(self) -> tuple[str, str]:
        name = f"cnit-{os.getpid()}-{next(_ids)}"
        _run(["ip", "netns", "add", name])
        self.created.append((name, "", "", {}))
        return name, f"/run/netns/{name}"

    def add(self, namespace: str = "default", pod: str = "") -> tuple[str, str, dict[str, object]]:
        """ADD through the real executable; returns (netns name, container id, result)."""
        name, path = self.netns()
        cid = f"c{os.getpid()}x{next(_ids):04d}" + "0" * 20
        args = f"IgnoreUnknown=1;K8S_POD_NAMESPACE={namespace};K8S_POD_NAME={pod or name}"
        call = self.agent.runtime().add(cid, path, args=args)
        assert call.rc == 0, (call.out, call.stderr)
        self.created[-1] = (name, cid, args, call.out)
        return name, cid, call.out


@pytest.fixture
def pods(agent: Agent) -> Iterator[Pods]:
    p = Pods(agent, [])
    yield p
    p.delete_all()


def ping(netns: str | None, ip: str, timeout: float = 5.0) -> None:
    prefix = ["ip", "netns", "exec", netns] if netns else []
    deadline = time.monotonic() + timeout
    while True:
        proc = subprocess.run([*prefix, "ping", "-c1", "-W1", ip], capture_output=True, text=True)
        if proc.returncode == 0:
            return
        assert time.monotonic() < deadline, f"{netns or 'node'} cannot ping {ip}: {proc.stdout}"


def pod_ip(result: dict[str, object]) -> str:
    ips = result["ips"]
    assert isinstance(ips, list)
    return str(ips[0]["address"]).split("/")[0]


ProbeFn = Callable[[], None]


def post_to_agent(
    socket_path: str, body: bytes, method: str = "POST", url: str = "/cni"
) -> tuple[int, bytes, str]:
    """One raw HTTP/1.1 request over the agent's unix socket: (status, body, content type)."""

    class _Unix(http.client.HTTPConnection):
        def connect(self) -> None:
            self.sock = socket.socket(socket.AF_UNIX)
            self.sock.settimeout(30)
            self.sock.connect(socket_path)

    conn = _Unix("prismnet")
    try:
        conn.request(method, url, body=body)
        resp = conn.getresponse()
        return resp.status, resp.read(), resp.getheader("Content-Type", "")
    finally:
        conn.close()
