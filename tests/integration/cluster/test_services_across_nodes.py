"""Services, DNS, node <-> pod and egress across the cluster's nodes, with real traffic.

The cluster runs fiberlb-controller and netpol-controller as replicas on node1 and node2 (one
leader each; against the API's underlay listener and the central NB) and a node-local FlashDNS
listener on 10.96.0.10 in every node; the nodes reach the API on the underlay
(nodeenv/cluster/control.py). Here a LoadBalancer Service has its two backends on
node2 and node3; a pod on every node (`spread`) and every node itself reach both through the
external IP and the ClusterIP, every pod resolves the Service at its own node's DNS listener, every
node reaches its own pods, and every pod's egress leaves through its own node (the source address
a listener in the underlay sees)."""

from __future__ import annotations

import re
import socket
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import pytest

from nodeenv.cluster.cluster import Cluster, ClusterNode
from nodeenv.kubelet.apiclient import KubeClient
from nodeenv.netns_socket import listening_socket
from nodeenv.node import read_env_file
from tests.integration.cluster.conftest import Pod, Pods
from tests.integration.cluster.kube import Api, endpoint_slice, eventually, ingress, namespace, nbctl, service
from tests.integration.cluster.traffic import client, ping, serving
from tests.integration.controllers.fiberlb.netns_traffic import Servers, requests
from tests.integration.controllers.netpol.traffic import in_netns

NS = "svc"
HTTP = {"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"}
ECHO = {"name": "echo", "port": 53, "targetPort": 8080, "protocol": "UDP"}
SLICE_PORTS = [
    {"name": "http", "port": 8080, "protocol": "TCP"},
    {"name": "echo", "port": 8080, "protocol": "UDP"},
]
CLUSTER_DNS = "10.96.0.10"


@dataclass
class Web:
    lb_ip: str
    cluster_ip: str
    backends: dict[str, Pod]


@pytest.fixture(scope="module")
def web(cluster: Cluster, api: Api) -> Iterator[Web]:
    """Service svc/web (LoadBalancer, TCP 80 and UDP 53 -> 8080) backed by one pod on node2 and one
    on node3, each answering its own name; once fiberlb-controller's load balancer is on every chassis."""
    pods, servers = Pods([]), Servers()
    try:
        backends = {}
        for n in cluster.nodes[1:]:
            pod = pods.add(n, namespace=NS, name=f"web-{n.name}")
            servers.start(pod.netns, pod.name, 8080)
            backends[pod.name] = pod
        api.create(namespace(NS))
        api.create(service("web", NS, [HTTP, ECHO]))
        api.create(endpoint_slice("web", NS, sorted(p.ip for p in backends.values()), SLICE_PORTS))
        svc = eventually(lambda: api.get("Service", NS, "web"), lambda s: bool(s and ingress(s)))
        assert svc and ingress(svc), f"fiberlb-controller gave svc/web no external IP: {svc}"
        lb_ip, cluster_ip = ingress(svc)[0], svc["spec"]["clusterIP"]
        want = ",".join(sorted(f"{p.ip}:8080" for p in backends.values()))
        vips = eventually(lambda: nbctl(cluster, "--bare", "--columns=vips", "list", "Load_Balancer"),
                          lambda v: f"{lb_ip}:80={want}" in v and f"{cluster_ip}:80={want}" in v)  # fmt: skip
        assert f"{lb_ip}:80={want}" in vips and f"{cluster_ip}:80={want}" in vips, vips
        nbctl(cluster, "--wait=hv", "sync")  # every chassis has the load balancer
        yield Web(lb_ip, cluster_ip, backends)
    finally:
        servers.stop()
        pods.delete_all()


def test_the_api_double_answers_every_node_on_the_underlay(cluster: Cluster) -> None:
    """The nodes' kubeconfig names the underlay listener; this namespace keeps using loopback."""
    env = read_env_file(cluster.env_file)
    assert env["NODES_KUBE_API_URL"] == f"https://{cluster.settings.central_address}:6443"
    assert env["KUBE_API_URL"].startswith("https://127.0.0.1:")
    nodes_client = KubeClient.from_kubeconfig(Path(env["NODES_KUBECONFIG"]))

    def node_names() -> list[str]:
        return [o["metadata"]["name"] for o in nodes_client.list("/api/v1", "nodes")]

    for n in cluster.nodes:
        names = in_netns(n.netns, node_names)
        assert sorted(names) == [m.name for m in cluster.nodes], n.name
        assert read_env_file(n.env_file)["KUBECONFIG"] == env["NODES_KUBECONFIG"]


def test_every_node_runs_its_dns_listener(cluster: Cluster) -> None:
    """(The controllers' replicas: test_controller_replicas.py.)"""
    for n in cluster.nodes:
        daemons = [r.name for r in n.node.daemons.load()]
        assert daemons.count("flashdns-controller") == 1, n.name
        lo = subprocess.run(["ip", "-n", n.netns, "-4", "-o", "addr", "show", "dev", "lo"],
                            capture_output=True, text=True, check=True).stdout  # fmt: skip
        assert f" {CLUSTER_DNS}/32 " in lo, n.name


def _reached(netns: str, host: str, port: int, proto: str = "tcp") -> set[str]:
    return set(requests(netns, host, port, 12, proto))


def test_vips_with_backends_on_other_nodes_answer_from_pods_and_nodes_on_every_node(
    cluster: Cluster, spread: list[Pod], web: Web
) -> None:
    names = set(web.backends)
    clients = [(f"pod on {p.node.name}", p.netns) for p in spread]
    clients += [(n.name, n.netns) for n in cluster.nodes]
    wrong = {}
    cases = [(who, netns, vip, 80, "tcp") for vip in (web.lb_ip, web.cluster_ip) for who, netns in clients]
    cases += [(f"pod on {p.node.name}", p.netns, web.lb_ip, 53, "udp") for p in spread]
    for who, netns, vip, port, proto in cases:
        got = eventually(partial(_reached, netns, vip, port, proto), lambda r: r == names, timeout=10)
        if got != names:
            wrong[f"{who} -> {vip}:{port}/{proto}"] = got
    assert not wrong, f"want every backend ({sorted(names)}) from every client: {wrong}"


def dig(netns: str, name: str) -> list[str]:
    argv = ["ip", "netns", "exec", netns, "dig", "+short", "+time=2", "+tries=2", f"@{CLUSTER_DNS}", name]
    return subprocess.run(argv, capture_output=True, text=True, timeout=20).stdout.split()


def _sorted_answer(netns: str, name: str) -> list[str]:
    return sorted(dig(netns, name))


def dns_queries(node: ClusterNode) -> float:
    """UDP queries the node's FlashDNS listener has answered (its /metrics, on the node's loopback)."""
    url = read_env_file(node.env_file)["FLASHDNS_METRICS"]
    text = subprocess.run(["ip", "netns", "exec", node.netns, "curl", "-sf", url],
                          capture_output=True, text=True, check=True).stdout  # fmt: skip
    found = re.search(r'^flashdns_dns_queries_total\{transport="udp"\} (\S+)$', text, re.M)
    assert found, text[:500]
    return float(found.group(1))


def test_dns_from_pods_and_nodes_on_every_node_is_answered_by_their_own_node(
    cluster: Cluster, spread: list[Pod], web: Web
) -> None:
    name = f"web.{NS}.svc.cluster.local"
    want = sorted([web.cluster_ip, web.lb_ip])  # the spec: a LoadBalancer's first ingress IP too
    askers = [(p.node, p.netns, f"pod on {p.node.name}") for p in spread]
    askers += [(n, n.netns, n.name) for n in cluster.nodes]
    for node, netns, who in askers:
        before = {n.name: dns_queries(n) for n in cluster.nodes}
        answer = eventually(partial(_sorted_answer, netns, name), lambda a: a == want)
        assert answer == want, f"{who}: {name} A -> {answer}"
        answered = {n.name for n in cluster.nodes if dns_queries(n) > before[n.name]}
        assert answered == {node.name}, f"{who} was answered by {answered}"
    assert dig(spread[0].netns, f"nothing.{NS}.svc.cluster.local") == []


def test_every_node_reaches_its_own_pods(cluster: Cluster, spread: list[Pod]) -> None:
    """node -> pod (ICMP, TCP 1 MiB intact) from the node's namespace, as kubelet's probes do;
    pod -> node is test_cross_node.py's test_every_pod_reaches_its_own_node."""
    for pod in spread:
        proc = ping(pod.node.netns, pod.ip)
        assert proc.returncode == 0, f"{pod.node.name} -> its pod {pod.ip}: {proc.stdout}"
        with serving(pod.netns, "tcp-sink", "5204"):
            out = client(pod.node.netns, "tcp-send", pod.ip, "5204", str(1 << 20))
        assert out["intact"], (pod.node.name, out)


class SourceEcho:
    """A TCP listener in the underlay namespace (the central's address) answering each connection
    with the source address it saw; served from a thread here, the socket lives in the underlay."""

    def __init__(self, netns: str, host: str, port: int) -> None:
        self.sock = listening_socket(netns, host, port)
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, peer = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.sendall(peer[0].encode())

    def close(self) -> None:
        self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()


def _seen_from(netns: str, host: str, port: int) -> str:
    def ask() -> str:
        with socket.create_connection((host, port), timeout=5) as c:
            return c.recv(64).decode()

    return in_netns(netns, ask)


def test_each_pods_egress_leaves_through_its_own_node(cluster: Cluster, spread: list[Pod]) -> None:
    """A pod's packet to the underlay (outside the cluster CIDR) is rerouted by the cluster router to
    its own node's management port and masqueraded there: the underlay sees that node's address."""
    central = cluster.settings.central_address
    echo = SourceEcho(cluster.underlay.netns, central, 7000)
    try:
        seen = {pod.node.name: _seen_from(pod.netns, central, 7000) for pod in spread}
    finally:
        echo.close()
    assert seen == {n.name: n.address for n in cluster.nodes}
    policies = nbctl(cluster, "lr-policy-list", "k8s-cluster-router")
    for pod in spread:  # the reroute each took: its node's pod address set -> its node's management port
        shown = subprocess.run(["ip", "-n", pod.node.netns, "-4", "-o", "addr", "show", "pnm-br-int"],
                               capture_output=True, text=True, check=True).stdout  # fmt: skip
        mgmt = shown.split()[3].split("/")[0]
        assert re.search(rf"reroute\s+{re.escape(mgmt)}\b", policies), (pod.node.name, mgmt, policies)
