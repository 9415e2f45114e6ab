"""Pods on the pod network booted by the runner on the session's OVN node with PrismNET installed
(conflist + executable + agent, the `agent` fixture): the runner makes each pod's netns, runs the
node's conflist (ADD), starts the containers in that netns with podman, reports the pod IP PrismNET
gave, probes the pod at that IP from the node, and on the pod's deletion runs DEL and removes the
netns. The API double listens on the node's management-port address, which pods reach over
PrismNET (standing in for kube-proxy's `kubernetes` Service)."""

from __future__ import annotations

import ipaddress
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nodeenv.kubeapi.state import ApiConfig
from nodeenv.kubelet.sandbox import node_cni
from tests.cni_agent_fixture import CLUSTER_CIDR, Agent
from tests.integration.kubeapi.test_kubeapi_kubectl import kubectl
from tests.integration.kubelet.conftest import NS, pods, wait_for
from tests.integration.kubelet.pod_network import api_on_management_port, keep_only
from tests.integration.kubelet.test_boot_fast import conditions
from tests.kubeapi_fixture import KubeApiHandle

POD_NETWORK_OURS = ("flashdns-controller", "project-controller")


@pytest.fixture
def kube_api(agent: Agent, tmp_path: Path, kube_api_config: ApiConfig) -> Iterator[KubeApiHandle]:
    with api_on_management_port(agent, tmp_path, kube_api_config) as api:
        yield api


def _in_netns(netns: str, *argv: str) -> str:
    return subprocess.run(["ip", "-n", netns, *argv], capture_output=True, text=True).stdout


def test_pod_network_workloads_get_prismnet_ips_and_ready(
    kube_api: KubeApiHandle, applied: Path, runner_factory: Any, agent: Agent
) -> None:
    keep_only(kube_api, (f"deployment.apps/{w}" for w in POD_NETWORK_OURS))
    runner = runner_factory(cni=node_cni(agent.env), sandbox_retry=1.0)

    def all_ready() -> dict[str, Any] | None:
        ps = pods(kube_api)
        ready = [n for n, p in ps.items() if conditions(p).get("Ready") == "True"]
        all_ready.last = {n: p.get("status", {}).get("containerStatuses") for n, p in ps.items()}  # type: ignore[attr-defined]
        return ps if len(ready) == len(POD_NETWORK_OURS) == len(ps) else None

    ps = wait_for(all_ready, 45, "flashdns-controller and project-controller Ready on the pod network",
                  lambda: f"pods: {all_ready.last}")  # type: ignore[attr-defined]  # fmt: skip
    bridge = agent.node.endpoints["OVS_BRIDGE"]
    seen: dict[str, tuple[str, str, str]] = {}
    for name, p in ps.items():
        ip = p["status"]["podIP"]
        assert ipaddress.ip_address(ip) in ipaddress.ip_network(CLUSTER_CIDR), (name, ip)
        assert p["status"]["phase"] == "Running" and p["status"]["podIPs"] == [{"ip": ip}]
        sandbox = runner.pods[p["metadata"]["uid"]].sandbox
        assert sandbox is not None and sandbox.ip == ip
        # the container runs in the netns PrismNET wired: its eth0 carries the pod IP
        assert f"inet {ip}/" in _in_netns(sandbox.netns_name, "-4", "addr", "show", "eth0")
        host_if = sandbox.result["interfaces"][0]["name"]
        lsp = f"{name}-{sandbox.sandbox_id}"
        assert host_if in agent.vsctl("list-ports", bridge).split()
        assert ip in agent.nbctl("lsp-get-addresses", lsp)
        seen[name] = (sandbox.netns_name, host_if, lsp)
    assert len({ip for ip in (p["status"]["podIP"] for p in ps.values())}) == len(ps)

    # the pods deleted (their Deployments first, so none comes back): DEL, netns gone, port gone
    kubectl(kube_api, "-n", NS, "delete", *(f"deployment/{w}" for w in POD_NETWORK_OURS))
    kubectl(kube_api, "-n", NS, "delete", "pod", *ps)

    def cleaned() -> bool:
        netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        ports = agent.vsctl("list-ports", bridge).split()
        lsps = agent.nbctl("--bare", "--columns=name", "list", "Logical_Switch_Port").split()
        cleaned.last = [x for ns, hif, lsp in seen.values() for x in (ns, hif, lsp)  # type: ignore[attr-defined]
                        if x in netns.split() or x in ports or x in lsps]  # fmt: skip
        return not cleaned.last  # type: ignore[attr-defined]

    wait_for(cleaned, 20, "CNI DEL and netns removal of the deleted pods",
             lambda: f"left: {cleaned.last}")  # type: ignore[attr-defined]  # fmt: skip
    wait_for(
        lambda: not runner.pods, 30, "the runner forgetting the deleted pods", lambda: str(list(runner.pods))
    )
