"""ADD/CHECK/DEL through the real `prismnet` executable, on real netns + OVS/OVN."""

from __future__ import annotations

import json
import os
import subprocess

from tests.integration.cni.conftest import Agent, Pods, ping, pod_ip


def test_add_check_del_round_trip(agent: Agent, pods: Pods) -> None:
    name, cid, result = pods.add("rt", "web-1")
    assert result["cniVersion"] == agent.conflist["cniVersion"] == "1.0.0"
    ifaces = result["interfaces"]
    assert ifaces[1]["name"] == "eth0" and ifaces[1]["sandbox"] == f"/run/netns/{name}"
    assert result["ips"][0]["interface"] == 1
    ip = pod_ip(result)
    addr = subprocess.run(["ip", "-n", name, "-j", "addr", "show", "eth0"], capture_output=True, text=True)
    info = json.loads(addr.stdout)[0]
    assert info["mtu"] == 1400 and info["address"] == ifaces[1]["mac"]
    assert ip in [a["local"] for a in info["addr_info"]]
    # the userspace datapath needs TX checksum offload off on the pod end; the host end keeps it
    # (every change of a host link costs ovs-vswitchd a reconfiguration; see Links.create_veth)
    pod_k = subprocess.run(
        ["ip", "netns", "exec", name, "ethtool", "-k", "eth0"], capture_output=True, text=True
    )
    assert "tx-checksumming: off" in pod_k.stdout
    lsp = f"web-1-{cid}"
    assert ip in agent.nbctl("lsp-get-addresses", lsp)
    assert "k8s-rt" in agent.nbctl("lsp-get-ls", lsp)
    host_if = ifaces[0]["name"]
    assert agent.vsctl("get", "Interface", host_if, "external_ids:iface-id").strip().strip('"') == lsp
    rt = agent.runtime()
    args = "K8S_POD_NAMESPACE=rt;K8S_POD_NAME=web-1"
    check = rt.check(cid, f"/run/netns/{name}", result, args=args)
    assert check.rc == 0, check.out
    dele = rt.delete(cid, f"/run/netns/{name}", result, args=args)
    assert dele.rc == 0, dele.out
    assert lsp not in agent.nbctl("--bare", "--columns=name", "list", "Logical_Switch_Port")
    assert host_if not in agent.vsctl("list-ports", agent.node.endpoints["OVS_BRIDGE"])
    assert subprocess.run(["ip", "-n", name, "link", "show", "eth0"], capture_output=True).returncode != 0


def test_pods_ping_within_and_across_namespaces_and_node(agent: Agent, pods: Pods) -> None:
    a, _, ra = pods.add("alpha", "a")
    b, _, rb = pods.add("alpha", "b")
    ping(b, pod_ip(ra))
    c, _, rc = pods.add("beta", "c")
    assert pod_ip(ra).rsplit(".", 1)[0] == pod_ip(rb).rsplit(".", 1)[0] != pod_ip(rc).rsplit(".", 1)[0]
    ping(a, pod_ip(rb))
    ping(a, pod_ip(rc))
    ping(c, pod_ip(ra))
    ping(None, pod_ip(rc))  # node -> pod through the management port


def test_first_pod_of_a_namespace_logs_no_error(agent: Agent, pods: Pods) -> None:
    """Its switch does not exist yet: allocation says so and the agent creates it, quietly."""
    log = agent.node.run_dir / "prismnet" / "agent.log"
    mark = len(log.read_text().splitlines())
    pods.add(f"fresh{os.getpid()}", "first")
    new = [json.loads(line) for line in log.read_text().splitlines()[mark:] if line.startswith("{")]
    assert any(rec["msg"].startswith("added ") for rec in new), new
    assert [rec for rec in new if rec["level"] not in ("debug", "info")] == []


def test_del_removes_every_row_even_for_ports_moved_by_hand(agent: Agent, pods: Pods) -> None:
    """DEL drops the references; OVSDB then deletes the (non-root) Port, Interface and LSP rows."""
    name, cid, result = pods.add("movea", "m")
    host_if = result["interfaces"][0]["name"]
    lsp = f"m-{cid}"
    uuid = agent.nbctl("--bare", "--columns=_uuid", "find", "Logical_Switch_Port", f"name={lsp}").strip()
    agent.nbctl("ls-add", "k8s-moveb")
    agent.vsctl("add-br", "br-cnimove", "--", "set", "Bridge", "br-cnimove", "datapath_type=netdev")
    try:
        port = agent.vsctl("--bare", "--columns=_uuid", "find", "Port", f"name={host_if}").strip()
        bridge = agent.node.endpoints["OVS_BRIDGE"]
        agent.vsctl(
            "remove", "Bridge", bridge, "ports", port, "--", "add", "Bridge", "br-cnimove", "ports", port
        )
        agent.nbctl(  # one transaction: a port referenced by no switch is deleted at once
            "remove",
            "Logical_Switch",
            "k8s-movea",
            "ports",
            uuid,
            "--",
            "add",
            "Logical_Switch",
            "k8s-moveb",
            "ports",
            uuid,
        )
        args = pods.created[-1][2]
        assert agent.runtime().delete(cid, f"/run/netns/{name}", result, args=args).rc == 0
        assert (
            agent.nbctl("--bare", "--columns=name", "find", "Logical_Switch_Port", f"name={lsp}").strip()
            == ""
        )
        for table in ("Port", "Interface"):
            assert agent.vsctl("--bare", "--columns=name", "find", table, f"name={host_if}").strip() == ""
    finally:
        agent.nbctl("--if-exists", "ls-del", "k8s-moveb")
        agent.vsctl("--if-exists", "del-br", "br-cnimove")


def test_add_gives_ovs_vswitchd_nothing_to_warn_about(agent: Agent, pods: Pods) -> None:
    """The host end exists before its OVS port: no "could not open network device" per pod."""
    log = agent.node.run_dir / "ovs" / "ovs-vswitchd.log"
    mark = len(log.read_text(errors="replace").splitlines())
    hosts = [pods.add("quiet", f"q{i}")[2]["interfaces"][0]["name"] for i in range(12)]
    new = log.read_text(errors="replace").splitlines()[mark:]
    assert [line for line in new if any(h in line for h in hosts) and "|WARN|" in line] == []


SERVE = """
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 8099)); s.listen(); print("ready", flush=True)
for _ in range(int(sys.argv[1])):
    c, _ = s.accept()
    c.sendall(b"x" * (4 << 20)); c.close()
"""
FETCH = """
import socket, sys
c = socket.create_connection((sys.argv[1], 8099), timeout=10); n = 0
while (chunk := c.recv(1 << 16)):
    n += len(chunk)
print(n)
"""


def _fetch(netns: str | None, ip: str) -> int:
    prefix = ["ip", "netns", "exec", netns] if netns else []
    out = subprocess.run([*prefix, "python3", "-c", FETCH, ip], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    return int(out.stdout)


def test_tcp_streams_between_pods_and_from_the_node(agent: Agent, pods: Pods) -> None:
    """4 MiB TCP streams pod -> pod (same and other namespace) and pod -> node's management port:
    they stall if a pod end transmits with checksum offload on the userspace datapath."""
    a, _, ra = pods.add("tcp-a", "server")
    b, _, _ = pods.add("tcp-a", "client")
    c, _, _ = pods.add("tcp-b", "client")
    server = subprocess.Popen(
        ["ip", "netns", "exec", a, "python3", "-c", SERVE, "3"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert server.stdout is not None and server.stdout.readline().strip() == "ready"
        for netns in (b, c, None):
            assert _fetch(netns, pod_ip(ra)) == 4 << 20
        assert server.wait(timeout=10) == 0
    finally:
        server.kill()
        server.wait()


def test_a_new_namespace_switch_has_the_services_group_from_its_first_row(agent: Agent, pods: Pods) -> None:
    """The switch the first pod of a namespace makes carries fiberlb's Load_Balancer_Group already: its
    pods' first packets to a ClusterIP are DNATed on their own switch (through the router alone, a
    reply processed on another chassis comes back un-DNATed and is dropped)."""
    had = agent.nbctl("--bare", "--columns=_uuid", "find", "Load_Balancer_Group", "name=fiberlb").strip()
    group = had or agent.nbctl("create", "Load_Balancer_Group", "name=fiberlb").strip()
    ns = f"lbg{os.getpid()}"
    try:
        pods.add(ns, "first")
        attached = agent.nbctl("get", "Logical_Switch", f"k8s-{ns}", "load_balancer_group").strip()
        assert attached == f"[{group}]", attached
    finally:
        agent.nbctl("--if-exists", "clear", "Logical_Switch", f"k8s-{ns}", "load_balancer_group")
        if not had:
            agent.nbctl("destroy", "Load_Balancer_Group", group)
