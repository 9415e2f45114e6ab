"""The flashdns node-up component on the OVN node environment and its sandbox scenario: lookups from a
pod's netns (glibc and dig) through the search path, to the DNS on 10.96.0.10 via the pod network."""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nodeenv.cni_component import CniComponent
from nodeenv.flashdns_component import CLUSTER_DNS_IP, FlashDnsComponent
from nodeenv.node import Node
from nodeenv.scenario import Scenario
from nodeenv.scenarios import flashdns as flashdns_scenario
from tests.integration.cni.conftest import CLUSTER_CIDR
from tests.integration.controllers.flashdns.flashdns_kit import SA

pytestmark = [pytest.mark.root, pytest.mark.ovn]


def _agent_running(node: Node) -> bool:
    path = node.endpoints.get("PRISMNET_AGENT_SOCKET")
    if not path or not Path(path).exists():
        return False
    with socket.socket(socket.AF_UNIX) as s:
        return s.connect_ex(path) == 0


@pytest.fixture
def dns_node(ovn_node: Node, kube_api: Any) -> Iterator[Node]:
    """ovn_node + the CNI agent (node-up's, which names the cluster DNS) + KUBECONFIG + flashdns."""
    started: list[tuple[Any, dict[str, str]]] = []
    if not _agent_running(ovn_node):
        cni = CniComponent(cluster_cidr=CLUSTER_CIDR)
        started.append((cni, cni.start(ovn_node)))
        ovn_node.endpoints.update(started[-1][1])
    ovn_node.endpoints["KUBECONFIG"] = str(kube_api.kubeconfig_for(SA))  # the controller's own identity
    dns = FlashDnsComponent()
    try:
        env = dns.start(ovn_node)
        ovn_node.endpoints["KUBECONFIG"] = str(kube_api.kubeconfig)  # the scenario's kubectl as admin
        started.append((dns, env))
        ovn_node.endpoints.update(env)
        yield ovn_node
    finally:
        for component, env in reversed(started):
            ovn_node.daemons.stop(component.name)
            component.cleanup(ovn_node)
            for key in env:
                ovn_node.endpoints.pop(key, None)
        ovn_node.endpoints.pop("KUBECONFIG", None)
        lo = subprocess.run(["ip", "-o", "addr", "show", "dev", "lo"], capture_output=True, text=True).stdout
        assert f" {CLUSTER_DNS_IP}/32 " not in lo, "the address must go with the component"


def test_node_env_names_the_cluster_dns_and_the_scenario_resolves_from_a_pod(dns_node: Node) -> None:
    env = dns_node.endpoints
    assert env["CLUSTER_DNS"] == f"{CLUSTER_DNS_IP}:53" and env["CLUSTER_DOMAIN"] == "cluster.local"
    node_side = subprocess.run(["dig", "+short", f"@{CLUSTER_DNS_IP}", "dns-version.cluster.local", "TXT"],
                               capture_output=True, text=True, timeout=10)  # fmt: skip
    assert node_side.stdout.strip() == '"1.1.0"', "the node reaches the cluster DNS"
    scn = Scenario(dns_node)
    try:
        flashdns_scenario.run(scn)
    finally:
        errors = scn.run_cleanups()
    assert all(r.ok for r in scn.results), scn.table()
    assert len(scn.results) == 7 and errors == []
    assert (
        flashdns_scenario.POD
        not in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    )
    assert not Path("/etc/netns", flashdns_scenario.POD).exists()
