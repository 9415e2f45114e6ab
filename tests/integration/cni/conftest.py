"""The PrismNET agent on the session's OVN node, the installed executable, pods in netns."""

from __future__ import annotations

import http.client
import itertools
import json
import os
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from nodeenv.cni_component import CniComponent, CniRuntime
from nodeenv.node import Node

CLUSTER_CIDR = "10.99.0.0/16"
_ids = itertools.count(1)


@dataclass
class Agent:
    node: Node
    component: CniComponent
    env: dict[str, str]
    conflist: dict[str, object]

    @property
    def socket(self) -> str:
        return self.env["PRISMNET_AGENT_SOCKET"]

    def runtime(self, conflist: dict[str, object] | None = None) -> CniRuntime:
        bindir = str(Path(self.env["PRISMNET_CNI_BIN"]).parent)
        # no PRISMNET_AGENT_SOCKET: like a real runtime, the executable finds the agent via agentSocket
        return CniRuntime(conflist or self.conflist, [bindir, "/usr/lib/cni"], {})

    def restart(self) -> None:
        self.stop()
        self.env.update(self.component.start(self.node))

    def stop(self) -> None:
        self.node.daemons.stop("prismnet-agent")

    def kill(self) -> None:
        for rec in self.node.daemons.load():
            if rec.name == "prismnet-agent":
                os.kill(rec.pid, 9)
                while Path(f"/proc/{rec.pid}").exists() and "Z" not in _state(rec.pid):
                    time.sleep(0.01)

    def nbctl(self, *args: str) -> str:
        return _run(["ovn-nbctl", f"--db={self.node.endpoints['OVN_NB_DB']}", "--timeout=10", *args])

    def vsctl(self, *args: str) -> str:
        return _run(["ovs-vsctl", f"--db={self.node.endpoints['OVS_DB']}", "--timeout=10", *args])


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "Z"


def _run(argv: list[str]) -> str:
    proc = subprocess.run(argv, capture_output=True, text=True)
    assert proc.returncode == 0, f"{argv}: {proc.stderr}"
    return proc.stdout


@pytest.fixture(scope="session")
def agent(ovn_node: Node) -> Iterator[Agent]:
    component = CniComponent(cluster_cidr=CLUSTER_CIDR)
    env = component.start(ovn_node)
    ovn_node.endpoints.update(env)
    conflist = json.loads(Path(env["PRISMNET_CNI_CONFLIST"]).read_text())
    conflist["plugins"] = conflist["plugins"][:1]  # portmap is chained in its own test
    ag = Agent(ovn_node, component, env, conflist)
    settings = component.settings(ovn_node)
    try:
        yield ag
    finally:
        ag.stop()
        component.cleanup(ovn_node)
        left = [p for p in (env["PRISMNET_CNI_BIN"], env["PRISMNET_CNI_CONFLIST"]) if Path(p).exists()]
        left += [settings.management_if] if Path(f"/sys/class/net/{settings.management_if}").exists() else []
        nat = subprocess.run(["iptables-save", "-t", "nat"], capture_output=True, text=True).stdout
        left += ["masquerade rule"] if f"prismnet:{settings.management_if}" in nat else []
        if left:
            pytest.fail(f"the CNI component's cleanup left behind: {', '.join(left)}")


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
