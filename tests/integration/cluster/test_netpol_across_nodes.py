"""NetworkPolicy across nodes, through the cluster's netpol-controller, with real traffic.

npx/web runs on node1 (TCP 8080 and UDP 5353 echo); its peers are labelled pods on node1 (its own
node), node2 and node3, and one in another namespace. The Namespaces, Pods and the policy are API
objects; the controller writes the ACLs into the central NB and every chassis enforces them. The
same label gets the same answer whatever node the peer is on: allowed peers' echoes come back,
denied peers' connections fail (nothing within 0.5 s); deleting the policy opens everything again.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest

from nodeenv.cluster.cluster import Cluster
from nodeenv.node import read_env_file
from tests.integration.cluster.conftest import Pod, Pods
from tests.integration.cluster.kube import Api, eventually, namespace, pod_object
from tests.integration.controllers.netpol.traffic import EchoServers, reaches

NS, OTHER_NS = "npx", "npy"
FE, OTHER = {"app": "fe"}, {"app": "other"}
POLICY = {
    "apiVersion": "networking.k8s.io/v1",
    "kind": "NetworkPolicy",
    "metadata": {"name": "web-in", "namespace": NS},
    "spec": {
        "podSelector": {"matchLabels": {"app": "web"}},
        "ingress": [
            {"from": [{"podSelector": {"matchLabels": FE}}], "ports": [{"protocol": "TCP", "port": 8080}]}
        ],
    },
}
Case = tuple[str, str, int, bool]
"""(peer, protocol, port, allowed)"""


@pytest.fixture(scope="module")
def peers(cluster: Cluster, api: Api) -> Iterator[dict[str, Pod]]:
    """web (node1) and its peers by name: fe-node<i> on every node, other-node1/3, fe-npy-node2."""
    n1, n2, n3 = cluster.nodes
    layout = [(NS, "web", n1, {"app": "web"})]
    layout += [(NS, f"fe-{n.name}", n, FE) for n in (n1, n2, n3)]
    layout += [(NS, f"other-{n.name}", n, OTHER) for n in (n1, n3)]
    layout += [(OTHER_NS, "fe-npy-node2", n2, FE)]
    pods, servers = Pods([]), None
    try:
        api.create(namespace(NS, {"team": "x"}))
        api.create(namespace(OTHER_NS))
        out = {}
        for ns, name, node, labels in layout:
            out[name] = pod = pods.add(node, namespace=ns, name=name)
            api.create(pod_object(pod, labels))
        servers = EchoServers(out["web"].netns, (8080,), (5353,))
        yield out
    finally:
        if servers is not None:
            servers.close()
        pods.delete_all()


def _reach(peers: dict[str, Pod], src: str, proto: str, port: int, tries: int = 1) -> bool:
    netns = peers["web"].node.netns if src == "node1" else peers[src].netns
    return any(reaches(netns, peers["web"].ip, proto, port) for _ in range(tries))


def _check(peers: dict[str, Pod], cases: list[Case]) -> None:
    # allowed: up to 3 echoes (a loaded 2-core machine may drop one); denied: one, 0.5 s
    got = [_reach(peers, src, proto, port, 3 if want else 1) for src, proto, port, want in cases]
    wrong = [f"{src} -> web {proto}/{port}: {'allowed' if g else 'denied'}"
             for (src, proto, port, want), g in zip(cases, got, strict=True) if g != want]  # fmt: skip
    assert not wrong, wrong


def _sync(cluster: Cluster) -> None:
    """Until every chassis has what the NB says."""
    db = read_env_file(cluster.env_file)["OVN_NB_DB"]
    subprocess.run(["ovn-nbctl", f"--db={db}", "--timeout=20", "--wait=hv", "sync"], check=True)


EVERYONE = ["fe-node1", "fe-node2", "fe-node3", "other-node1", "other-node3", "fe-npy-node2", "node1"]


def test_policy_allows_and_denies_peers_on_other_nodes_as_on_its_own(
    cluster: Cluster, api: Api, peers: dict[str, Pod]
) -> None:
    _check(peers, [(src, "tcp", 8080, True) for src in EVERYONE])  # not isolated yet
    api.create(POLICY)
    denied = eventually(lambda: _reach(peers, "other-node3", "tcp", 8080), lambda ok: not ok)
    assert not denied, "netpol-controller never isolated npx/web"
    _sync(cluster)
    _check(peers, [
        ("fe-node1", "tcp", 8080, True),  # web's own node
        ("fe-node2", "tcp", 8080, True),
        ("fe-node3", "tcp", 8080, True),
        ("other-node1", "tcp", 8080, False),  # web's own node
        ("other-node3", "tcp", 8080, False),
        ("fe-npy-node2", "tcp", 8080, False),  # podSelector alone: web's namespace only
        ("fe-node2", "udp", 5353, False),  # a port the policy does not name
        ("fe-node1", "udp", 5353, False),
        ("node1", "tcp", 8080, True),  # web's node (kubelet's probes)
    ])  # fmt: skip

    api.delete("NetworkPolicy", NS, "web-in")
    opened = eventually(lambda: _reach(peers, "other-node3", "tcp", 8080), bool)
    assert opened, "npx/web stayed isolated after its policy was deleted"
    _sync(cluster)
    _check(peers, [(src, "tcp", 8080, True) for src in EVERYONE] + [("fe-node2", "udp", 5353, True)])
