"""The `agent` fixture: the PrismNET agent, its installed executable and conflist on the session's
OVN node (one per session: the CNI tests and the runner's pod-network boot test share it)."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from nodeenv.cni_component import CniComponent, CniRuntime
from nodeenv.node import Node
from nodeenv.plasmacloud_auth import DevPki

CLUSTER_CIDR = "10.99.0.0/16"


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
        env = self.component.start(self.node)  # a new metrics port: node.endpoints must say so too
        self.env.update(env)
        self.node.endpoints.update(env)

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
def agent(ovn_node: Node, plasmacloud_pki: DevPki) -> Iterator[Agent]:
    component = CniComponent(cluster_cidr=CLUSTER_CIDR, plasmacloud=plasmacloud_pki.client_auth())
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
