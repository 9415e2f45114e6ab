"""Per-node egress: each node's pods leave through their own node (cni/ovn_egress.py).

A second agent on the session's OVN stands for a second node: its own node name, management
port and masquerade rule. Both share the cluster router, as every node of a cluster does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from cni.management import management_names, teardown_host
from cni.ovn_egress import pods_set_name
from cni.settings import AgentSettings
from nodeenv.cni_component import REPO, CniRuntime
from tests.integration.cni.conftest import CLUSTER_CIDR, Agent, Pods, pod_ip
from tests.integration.cni.test_chaining import outside  # noqa: F401 (fixture)

OUTSIDE_PINGS = 20


def members(agent: Agent, node: str) -> list[str]:
    out = agent.nbctl("--bare", "--columns=addresses", "find", "Address_Set", f"name={pods_set_name(node)}")
    return sorted(out.split())


def node_of(agent: Agent) -> str:
    return agent.node.endpoints["OVN_CHASSIS"]


def test_pod_addresses_follow_their_node_egress_set(agent: Agent, pods: Pods) -> None:
    node = node_of(agent)
    policies = agent.nbctl("lr-policy-list", "k8s-cluster-router")
    assert f"ip4.src == ${pods_set_name(node)} && ip4.dst != {CLUSTER_CIDR}" in policies
    assert "reroute" in policies
    before = members(agent, node)
    _, keep_cid, keep = pods.add("egset", "keep")
    gone_ns, gone_cid, gone = pods.add("egset", "gone")
    assert members(agent, node) == sorted([*before, pod_ip(keep), pod_ip(gone)])
    rt = agent.runtime()
    assert rt.delete(gone_cid, f"/run/netns/{gone_ns}", gone).rc == 0
    assert members(agent, node) == sorted([*before, pod_ip(keep)])

    # drift (a port deleted behind our back, a hand edit): CNI GC rebuilds the set from the ports
    name = pods_set_name(node)
    agent.nbctl("add", "Address_Set", name, "addresses", '"10.99.250.250"')
    agent.nbctl("remove", "Address_Set", name, "addresses", f'"{pod_ip(keep)}"')
    conf = {
        **agent.conflist["plugins"][0],
        "name": "prismnet",
        "cniVersion": "1.1.0",
        "cni.dev/valid-attachments": [{"containerID": keep_cid, "ifname": "eth0"}],
    }
    assert rt.exec("prismnet", {"CNI_COMMAND": "GC"}, conf).rc == 0
    assert members(agent, node) == sorted([*before, pod_ip(keep)])


@dataclass
class SecondNode:
    name: str
    settings: AgentSettings
    proc: subprocess.Popen[bytes]
    runtime: CniRuntime


@pytest.fixture
def second_node(agent: Agent, tmp_path: Path) -> Iterator[SecondNode]:
    e = agent.node.endpoints
    name = f"nodeb-{os.getpid()}"
    s = AgentSettings(
        socket=tmp_path / "b" / "cni.sock",
        ovs_db=e["OVS_DB"],
        ovn_nb_db=e["OVN_NB_DB"],
        bridge=e["OVS_BRIDGE"],
        cluster_cidr=CLUSTER_CIDR,
        metrics_address="",
        node_name=name,
        management_interface=f"pnmb{os.getpid() % 100000}",
    )
    argv = [sys.executable, "-m", "cni.daemon.main", "--socket", str(s.socket), "--ovs-db", s.ovs_db,
            "--ovn-nb-db", s.ovn_nb_db, "--bridge", s.bridge, "--cluster-cidr", s.cluster_cidr,
            "--metrics-address", "", "--node-name", name,
            "--management-interface", s.management_if]  # fmt: skip
    log = (tmp_path / "agent-b.log").open("wb")
    proc = subprocess.Popen(
        argv, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONPATH": str(REPO)}
    )
    try:
        deadline = time.monotonic() + 30
        while not s.socket.exists():
            assert proc.poll() is None, (tmp_path / "agent-b.log").read_text()
            assert time.monotonic() < deadline, "the second agent did not start"
            time.sleep(0.05)
        plugins = [{**p, "agentSocket": str(s.socket)} for p in agent.conflist["plugins"]]  # type: ignore[attr-defined]
        conflist = {**agent.conflist, "plugins": plugins}  # node B's conflist names node B's agent
        bindir = str(Path(agent.env["PRISMNET_CNI_BIN"]).parent)
        yield SecondNode(name, s, proc, CniRuntime(conflist, [bindir], {}))
    finally:
        proc.terminate()
        proc.wait(30)
        log.close()
        # what node B leaves in the cluster and on this machine: its ports, its egress, its kernel state
        switch, lsp = management_names(name)
        agent.vsctl("--if-exists", "del-port", s.management_if)
        agent.nbctl("--if-exists", "lsp-del", lsp)
        agent.nbctl("--if-exists", "ls-del", switch)
        agent.nbctl("--if-exists", "lrp-del", f"rtr-{switch}")
        for policy in json.loads(agent.nbctl("--format=json", "--columns=_uuid,external_ids", "list",
                                             "Logical_Router_Policy"))["data"]:  # fmt: skip
            if ["prismnet.node", name] in policy[1][1]:
                agent.nbctl("lr-policy-del", "k8s-cluster-router", policy[0][1])
        agent.nbctl("--if-exists", "destroy", "Address_Set", pods_set_name(name))
        teardown_host(s)
        agent.restart()  # node B's start pointed the fallback default route at itself


def rx_packets(ifname: str) -> int:
    return int(Path(f"/sys/class/net/{ifname}/statistics/rx_packets").read_text())


def egress_through(netns: str, world_ip: str, ports: list[str]) -> dict[str, int]:
    """Ping the outside from a pod; how many packets each management port received meanwhile."""
    before = {p: rx_packets(p) for p in ports}
    ping = ["ip", "netns", "exec", netns, "ping", "-c", str(OUTSIDE_PINGS), "-i", "0.01", "-W", "2", world_ip]
    proc = subprocess.run(ping, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return {p: rx_packets(p) - before[p] for p in ports}


def test_each_node_egresses_through_its_own_node(
    agent: Agent,
    pods: Pods,
    second_node: SecondNode,
    outside: tuple[str, str, str],  # noqa: F811
) -> None:
    _, world_ip, _ = outside
    mgmt_a = agent.component.settings(agent.node).management_if
    mgmt_b = second_node.settings.management_if
    netns_a, _, _ = pods.add("egress2", "on-a")
    netns_b, path_b = pods.netns()
    cid_b = f"b{os.getpid()}" + "0" * 24
    args = "IgnoreUnknown=1;K8S_POD_NAMESPACE=egress2;K8S_POD_NAME=on-b"
    call = second_node.runtime.add(cid_b, path_b, args=args)
    assert call.rc == 0, call.out
    try:
        assert members(agent, second_node.name) == [pod_ip(call.out)]
        via_a = egress_through(netns_a, world_ip, [mgmt_a, mgmt_b])
        via_b = egress_through(netns_b, world_ip, [mgmt_a, mgmt_b])
        assert via_a[mgmt_a] >= OUTSIDE_PINGS > via_a[mgmt_b], f"node A's pod left through {via_a}"
        assert via_b[mgmt_b] >= OUTSIDE_PINGS > via_b[mgmt_a], f"node B's pod left through {via_b}"
    finally:
        assert second_node.runtime.delete(cid_b, path_b, call.out, args=args).rc == 0
    assert members(agent, second_node.name) == []
