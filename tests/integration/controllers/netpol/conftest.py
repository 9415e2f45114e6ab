"""Pods in netns through the real PrismNET agent on the session's OVN node (the session's one
`agent`, shared with the CNI and kubelet tests), with echo servers."""

from __future__ import annotations

import subprocess
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from controllers.machinery import NAMESPACES, PODS, KubeClient
from controllers.netpol.ovn_apply import PolicyNorthbound
from controllers.netpol.translate import Desired, Member
from controllers.resources import ContainerPort
from tests.integration.cni.conftest import Agent, Pods, pod_ip
from tests.integration.controllers.machinery_kit import client_for
from tests.integration.controllers.netpol.traffic import EchoServers

TCP_PORTS, UDP_PORTS = (8080, 9000), (5353,)


@pytest.fixture(scope="session")
def cni_agent(agent: Agent) -> Agent:
    """The session's one PrismNET agent (tests/cni_agent_fixture.py): one agent per node."""
    return agent


@dataclass
class PodNet:
    namespace: str
    name: str
    netns: str
    ip: str
    labels: dict[str, str]
    ports: tuple[ContainerPort, ...] = ()


@dataclass
class Cluster:
    """Pods with labels, namespaces with labels, as the translation sees them."""

    agent: Agent
    nb: PolicyNorthbound
    pods: dict[str, PodNet] = field(default_factory=dict)
    namespaces: dict[str, dict[str, str]] = field(default_factory=dict)

    def members(self) -> list[Member]:
        lsps = {(p.namespace, p.pod): p.lsp for p in self.nb.ports()}
        return [
            Member(
                namespace=p.namespace,
                name=p.name,
                labels=p.labels,
                lsp=lsps[(p.namespace, p.name)],
                ips=(p.ip,),
                ports=p.ports,
            )
            for p in self.pods.values()
        ]

    def node_ips(self) -> list[str]:
        return [ip for p in self.nb.ports() if p.management for ip in p.ips]

    def sync(self) -> None:
        """Until every chassis has what the NB says (ovn-nbctl --wait=hv: ovn-controller installed the
        OpenFlow rules) and ovs-vswitchd's datapath flow cache was revalidated against them: a megaflow
        cached by a probe before the change can carry the next probe's packet until the revalidators'
        round after the change, so a refusal probed at once can pass on a loaded machine (seen once:
        an SCTP INIT through a Deny ANP just applied)."""
        db = self.agent.node.endpoints["OVN_NB_DB"]
        subprocess.run(["ovn-nbctl", f"--db={db}", "--wait=hv", "--timeout=20", "sync"], check=True)
        ctl = self.agent.node.run_dir / "ovs" / "ovs-vswitchd.ctl"
        subprocess.run(["ovs-appctl", "--timeout=20", "-t", str(ctl), "revalidator/wait"], check=True)


@pytest.fixture(scope="module")
def cluster(cni_agent: Agent) -> Iterator[Cluster]:
    """np-a: web (port http=8080), fe; np-b: fe, db. Every pod echoes TCP 8080/9000 and UDP 5353."""
    pods = Pods(cni_agent, [])
    nb = PolicyNorthbound(cni_agent.node.endpoints["OVN_NB_DB"])
    c = Cluster(cni_agent, nb, namespaces={"np-a": {"team": "a"}, "np-b": {"team": "b"}})
    servers: list[EchoServers] = []
    try:
        for ns, name, labels in (
            ("np-a", "web", {"app": "web"}),
            ("np-a", "fe", {"app": "fe"}),
            ("np-b", "fe", {"app": "fe"}),
            ("np-b", "db", {"app": "db"}),
        ):
            netns, _, result = pods.add(ns, name)
            ports = (ContainerPort(name="http", container_port=8080),) if name == "web" else ()
            c.pods[f"{ns}/{name}"] = PodNet(ns, name, netns, pod_ip(result), labels, ports)
            servers.append(EchoServers(netns, TCP_PORTS, UDP_PORTS))
        yield c
    finally:
        for s in servers:
            s.close()
        nb.apply(Desired())
        nb.close()
        pods.delete_all()


@pytest.fixture
async def api(kube_api: Any, cluster: Cluster) -> AsyncIterator[KubeClient]:
    """Namespaces and pods in the API as kubelet would have them (labels, podIPs, container ports)."""
    async with client_for(kube_api.kubeconfig) as c:
        for ns, labels in cluster.namespaces.items():
            await c.create(NAMESPACES, {"metadata": {"name": ns, "labels": labels}})
        for p in cluster.pods.values():
            ports = [{"name": cp.name, "containerPort": cp.container_port} for cp in p.ports]
            body = {"metadata": {"namespace": p.namespace, "name": p.name, "labels": p.labels},
                    "spec": {"containers": [{"name": "c", "image": "x", "ports": ports}]}}  # fmt: skip
            created = await c.create(PODS, body)
            await c.replace(
                PODS, {**created, "status": {"phase": "Running", "podIPs": [{"ip": p.ip}]}}, "status"
            )
        yield c
