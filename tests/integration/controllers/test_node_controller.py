"""node-controller on the session's real NB/SB and the API double (issue 18 item 4).

Two other nodes' state is written the way their agents and ovn-controllers write it (cni/'s own
Northbound: management switch and port, pods' ports with addresses, egress set and policy, the
default route via the management address; a Chassis with its Geneve Encap in the SB). Deleting
one Node releases exactly that node's rows; the other node, this session's own node and a chassis
that is no Kubernetes node (a hypervisor sharing the OVN) keep everything.
"""

from __future__ import annotations

import asyncio
import ipaddress
import subprocess
from collections.abc import AsyncIterator
from typing import Any

import pytest

from cni.management import K_CHASSIS, management_names
from cni.ovn import K_NODE, connect
from cni.ovn_egress import pods_set_name
from cni.ovn_nb import Northbound
from cni.platform_ports import parse_ports
from controllers.machinery import NODES, KubeClient
from controllers.machinery.settings import parse
from controllers.nodes.main import PREFIX, add_arguments, make_app
from nodeenv.node import Node
from tests.integration.controllers.machinery_kit import client_for, eventually

pytestmark = [pytest.mark.root, pytest.mark.ovn]
CLUSTER = ipaddress.ip_network("10.77.0.0/16")
SA = "system:serviceaccount:kube-system:node-controller"  # its RBAC is checked (tests/rbac_coverage.py)


def _sbctl(node: Node, *args: str) -> str:
    db = node.endpoints["OVN_SB_DB"]
    return subprocess.run(["ovn-sbctl", f"--db={db}", "--timeout=10", *args],
                          capture_output=True, text=True, check=True).stdout  # fmt: skip


def _nbctl(node: Node, *args: str) -> str:
    db = node.endpoints["OVN_NB_DB"]
    return subprocess.run(["ovn-nbctl", f"--db={db}", "--timeout=10", *args],
                          capture_output=True, text=True, check=True).stdout  # fmt: skip


def _as_its_agent(node: Node, nb: Northbound, name: str, pods: int, route: str) -> tuple[str, list[str]]:
    """What `name`'s agent writes: the management port, `pods` pods in k8s-nodes-test, a route via
    its management address (as the default route is; the session's own stays untouched).
    Returns (management IP, pod IPs)."""
    switch, lsp = management_names(name)
    nb.ensure_switch(switch, CLUSTER, 24)
    mgmt = nb.allocate_port(
        switch, lsp, {K_NODE: name, "prismnet.role": "management"}, mac_only_security=True
    )
    nb.egress().ensure(name, mgmt.ip, str(CLUSTER))
    nb.guard().ensure(name, [mgmt.ip], parse_ports("tcp:6641"))
    _nbctl(node, "lr-route-add", "k8s-cluster-router", route, mgmt.ip)
    nb.ensure_switch("k8s-nodes-test", CLUSTER, 24)
    ips = [nb.allocate_port("k8s-nodes-test", f"nodes-test_{name}-{i}", {K_NODE: name},
                            address_set=pods_set_name(name)).ip for i in range(pods)]  # fmt: skip
    return mgmt.ip, ips


def _ports_of(nb: Northbound, node: str) -> list[str]:
    return sorted(p.name for p in nb.owned_ports(node))


def _start(ovn_node: Node, kube_api: Any) -> tuple[Any, asyncio.Event, asyncio.Task[int]]:
    """node-controller on the session's NB/SB as its ServiceAccount: (app, its stop, its task)."""
    app, stop = make_app(), asyncio.Event()
    e = ovn_node.endpoints
    argv = ["--kubeconfig", str(kube_api.kubeconfig_for(SA)), "--leader-elect=true",
            "--leader-elect-lease-namespace=kube-system", "--metrics-address=off",
            "--ovn-nb-db", e["OVN_NB_DB"], "--ovn-sb-db", e["OVN_SB_DB"]]  # fmt: skip
    task = asyncio.create_task(app.run(parse("node-controller", "", argv, {}, prefix=PREFIX,
                                             add_arguments=add_arguments), stop))  # fmt: skip
    return app, stop, task


@pytest.fixture
async def api(kube_api: Any) -> AsyncIterator[KubeClient]:
    async with client_for(kube_api.kubeconfig) as c:
        yield c


async def test_a_deleted_node_is_released_and_nothing_else(
    ovn_node: Node, kube_api: Any, api: KubeClient
) -> None:
    db = connect(ovn_node.endpoints["OVN_NB_DB"], "OVN_Northbound")
    nb = Northbound(db, owner="test")
    here = ovn_node.settings.system_id  # this session's node: its chassis and agent state stay
    for name in ("gone-1", "stays-1", here):
        await api.create(NODES, {"metadata": {"name": name}})
    gone_ip, gone_pods = _as_its_agent(ovn_node, nb, "gone-1", 3, "198.51.100.0/24")
    stays_ip, _ = _as_its_agent(ovn_node, nb, "stays-1", 2, "198.51.101.0/24")
    for chassis, ip in (("gone-1", "192.0.2.61"), ("stays-1", "192.0.2.62"), ("hypervisor-7", "192.0.2.63")):
        _sbctl(ovn_node, "chassis-add", chassis, "geneve", ip)
    app, stop, task = _start(ovn_node, kube_api)
    try:
        await eventually(lambda: app.is_leader, what="controller running")
        await asyncio.sleep(1)  # the start's sweep: every node is listed, nothing is released
        assert len(_ports_of(nb, "gone-1")) == 4 and len(_ports_of(nb, "stays-1")) == 3
        assert "gone-1" in _sbctl(ovn_node, "--columns=name", "list", "Chassis")

        await api.delete(NODES, "", "gone-1")

        def released() -> bool:
            return not _ports_of(nb, "gone-1") and "gone-1" not in _sbctl(
                ovn_node, "--columns=name", "list", "Chassis"
            )

        await eventually(released, what="gone-1 released", timeout=10)
        assert nb.egress().members("gone-1") is None  # its egress set, with its policy and route
        assert nb.guard().policy("gone-1") is None and nb.guard().policy("stays-1") is not None
        routes = _nbctl(ovn_node, "lr-route-list", "k8s-cluster-router")
        assert gone_ip not in routes and stays_ip in routes
        assert f"rtr-{management_names('gone-1')[0]}" not in _nbctl(
            ovn_node, "lrp-list", "k8s-cluster-router"
        )
        assert "192.0.2.61" not in _sbctl(ovn_node, "--columns=ip", "list", "Encap")  # no tunnel to it
        assert len(_ports_of(nb, "stays-1")) == 3 and nb.egress().members("stays-1") is not None
        chassis = _sbctl(ovn_node, "--columns=name", "list", "Chassis")
        assert "stays-1" in chassis and "hypervisor-7" in chassis and here in chassis
        # its pods' addresses are free again: a new pod gets the lowest one gone-1 held
        again = nb.allocate_port("k8s-nodes-test", "nodes-test_new", {K_NODE: "stays-1"})
        assert again.ip == min(gone_pods, key=ipaddress.ip_address)
        # gone-1's agent still runs (its Node deleted on a live node): it writes its management port
        # back and names its chassis there; that report releases nothing (no release/write-back loop)
        _as_its_agent(ovn_node, nb, "gone-1", 0, "198.51.104.0/24")
        nb.set_port_ids(management_names("gone-1")[1], {K_CHASSIS: "gone-1"})
        await asyncio.sleep(1)
        assert len(_ports_of(nb, "gone-1")) == 1, "an agent's chassis report released its node"
    finally:
        stop.set()
        assert await asyncio.wait_for(task, 30) == 0
        for node in ("gone-1", "stays-1"):
            nb.egress().delete(node)
            nb.guard().delete(node)
            for port in _ports_of(nb, node):
                nb.delete_port(port)
        for chassis in ("gone-1", "stays-1", "hypervisor-7"):
            _sbctl(ovn_node, "--if-exists", "chassis-del", chassis)
        for prefix in ("198.51.100.0/24", "198.51.101.0/24", "198.51.104.0/24"):
            _nbctl(ovn_node, "--if-exists", "lr-route-del", "k8s-cluster-router", prefix)
        for switch in ("k8s-nodes-test", management_names("gone-1")[0], management_names("stays-1")[0]):
            _nbctl(ovn_node, "--if-exists", "ls-del", switch)
            _nbctl(ovn_node, "--if-exists", "lrp-del", f"rtr-{switch}")
        db.stop()


async def test_a_reinstalled_nodes_stale_chassis_goes_once_its_agent_reports_the_new_one(
    ovn_node: Node, kube_api: Any, api: KubeClient
) -> None:
    """Issue 29 item 3: a node reinstalled under its old name has a new system-id; its old Chassis
    (its hostname, its Encap address) keeps the new one out of the SB until node-controller removes
    it, which it does once the node's agent names the new chassis on its management port."""
    db = connect(ovn_node.endpoints["OVN_NB_DB"], "OVN_Northbound")
    nb = Northbound(db, owner="test")
    # every node of the cluster is a Node, this session's own too: without it, the start's sweep
    # releases its management switch under the running agent (later tests' pods then got its subnet)
    here = management_names(ovn_node.settings.system_id)[0]
    had_here = here in _nbctl(ovn_node, "--bare", "--columns=name", "list", "Logical_Switch").split()
    for node in ("reinst-1", "twin-1", ovn_node.settings.system_id):
        await api.create(NODES, {"metadata": {"name": node}})
    _as_its_agent(ovn_node, nb, "reinst-1", 0, "198.51.102.0/24")
    # another node whose chassis reports the same hostname (nodes sharing one): its agent reports it
    _as_its_agent(ovn_node, nb, "twin-1", 0, "198.51.103.0/24")
    nb.set_port_ids(management_names("twin-1")[1], {K_CHASSIS: "twin-1-ch"})
    _sbctl(ovn_node, "chassis-add", "twin-1-ch", "geneve", "192.0.2.74")
    _sbctl(ovn_node, "set", "Chassis", "twin-1-ch", "hostname=reinst-1")
    for name, host, ip in (("reinst-1-old", "reinst-1", "192.0.2.71"), ("stays-2", "stays-2", "192.0.2.72"),
                           ("hypervisor-9", "hv9.example", "192.0.2.73")):  # fmt: skip
        _sbctl(ovn_node, "chassis-add", name, "geneve", ip)
        _sbctl(ovn_node, "set", "Chassis", name, f"hostname={host}")
    # the failure mode: the new chassis cannot register while the old one holds the Encap address
    refused = subprocess.run(["ovn-sbctl", f"--db={ovn_node.endpoints['OVN_SB_DB']}", "--timeout=10",
                              "chassis-add", "reinst-1-new", "geneve", "192.0.2.71"],
                             capture_output=True, text=True)  # fmt: skip
    assert refused.returncode != 0 and "constraint violation" in refused.stderr, refused.stderr
    app, stop, task = _start(ovn_node, kube_api)

    def chassis() -> str:
        return _sbctl(ovn_node, "--columns=name", "list", "Chassis")

    try:
        await eventually(lambda: app.is_leader, what="controller running")
        await asyncio.sleep(1)  # the start's sweep: no agent named a chassis yet, nothing removed
        assert "reinst-1-old" in chassis()

        nb.set_port_ids(management_names("reinst-1")[1], {K_CHASSIS: "reinst-1-new"})  # the new agent
        await eventually(lambda: "reinst-1-old" not in chassis(), what="stale chassis removed", timeout=10)
        _sbctl(ovn_node, "chassis-add", "reinst-1-new", "geneve", "192.0.2.71")  # it registers now
        _sbctl(ovn_node, "set", "Chassis", "reinst-1-new", "hostname=reinst-1")
        await asyncio.sleep(1)
        now = chassis()
        assert "reinst-1-new" in now and "stays-2" in now and "hypervisor-9" in now and "twin-1-ch" in now
        assert ovn_node.settings.system_id in now  # this session's own node: no agent report, untouched
        switches = _nbctl(ovn_node, "--bare", "--columns=name", "list", "Logical_Switch").split()
        assert (here in switches) == had_here, "this session's node (a Node) keeps its management switch"
    finally:
        stop.set()
        assert await asyncio.wait_for(task, 30) == 0
        for node in ("reinst-1", "twin-1"):
            nb.egress().delete(node)
            nb.guard().delete(node)
            for port in _ports_of(nb, node):
                nb.delete_port(port)
            switch = management_names(node)[0]
            _nbctl(ovn_node, "--if-exists", "ls-del", switch)
            _nbctl(ovn_node, "--if-exists", "lrp-del", f"rtr-{switch}")
        for name in ("reinst-1-old", "reinst-1-new", "stays-2", "hypervisor-9", "twin-1-ch"):
            _sbctl(ovn_node, "--if-exists", "chassis-del", name)
        for prefix in ("198.51.102.0/24", "198.51.103.0/24"):
            _nbctl(ovn_node, "--if-exists", "lr-route-del", "k8s-cluster-router", prefix)
        for node in ("reinst-1", "twin-1"):
            await api.delete(NODES, "", node)
        db.stop()
