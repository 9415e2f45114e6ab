"""AdminNetworkPolicy and BaselineAdminNetworkPolicy across nodes, through the cluster's netpol-controller,
with real traffic (README "AdminNetworkPolicy and BaselineAdminNetworkPolicy").

anp-a/srv runs on node1 (TCP 8080 named `http`, TCP 8081, UDP 5353 echo); its peers: anp-a/c-a on node2,
anp-b/c-b (app=client) on node3, anp-b/other (app=other) on node2. Each step writes policies through the
API and checks every peer's answer once the change is seen on every chassis: a higher-priority ANP over a
lower one (priorities), Allow / Deny / Pass, Pass handing the decision to NetworkPolicy and, without one,
to the BANP; peers by namespaces, by pods, by nodes, by networks; ports by number, range and name; TCP
and UDP; SCTP by raw INIT packets (this kernel has no SCTP sockets: sctp_raw.py);
the Ready status condition. Deleting everything opens the pods again.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from nodeenv.cluster.cluster import Cluster
from nodeenv.node import read_env_file
from tests.integration.cluster.conftest import Pod, Pods
from tests.integration.cluster.kube import Api, eventually, namespace, pod_object
from tests.integration.controllers.netpol.sctp_raw import sctp_reaches
from tests.integration.controllers.netpol.traffic import EchoServers, reaches

A, B = "anp-a", "anp-b"
GROUP = "/apis/policy.networking.k8s.io/v1alpha1"
TENANT_A = {"matchLabels": {"anp-tenant": "a"}}
TENANT_B = {"matchLabels": {"anp-tenant": "b"}}
CLIENT = {"matchLabels": {"app": "client"}}
FAKE_NODE = "anp-fake-node"
Case = tuple[str, str, int, bool]
"""(peer, protocol, port, allowed)"""


def anp(name: str, priority: int, subject: dict[str, Any], **rules: Any) -> dict[str, Any]:
    return {
        "apiVersion": "policy.networking.k8s.io/v1alpha1",
        "kind": "AdminNetworkPolicy",
        "metadata": {"name": name},
        "spec": {"priority": priority, "subject": subject, **rules},
    }


@pytest.fixture(scope="module")
def peers(cluster: Cluster, api: Api) -> Iterator[dict[str, Pod]]:
    n1, n2, n3 = cluster.nodes
    layout = [
        (A, "srv", n1, {"app": "srv"}),
        (A, "c-a", n2, {"app": "client"}),
        (B, "c-b", n3, {"app": "client"}),
        (B, "other", n2, {"app": "other"}),
    ]
    pods, servers = Pods([]), None
    try:
        api.create(namespace(A, {"anp-tenant": "a"}))
        api.create(namespace(B, {"anp-tenant": "b"}))
        out = {}
        for ns, name, node, labels in layout:
            out[name] = pod = pods.add(node, namespace=ns, name=name)
            obj = pod_object(pod, labels)
            if name == "srv":
                obj["spec"]["containers"][0]["ports"] = [{"name": "http", "containerPort": 8080}]
            api.create(obj)
        servers = EchoServers(out["srv"].netns, (8080, 8081), (5353,))
        yield out
    finally:
        if servers is not None:
            servers.close()
        api.delete_all()
        pods.delete_all()


def _sync(cluster: Cluster) -> None:
    db = read_env_file(cluster.env_file)["OVN_NB_DB"]
    subprocess.run(["ovn-nbctl", f"--db={db}", "--timeout=20", "--wait=hv", "sync"], check=True)


def _check(peers: dict[str, Pod], cases: list[Case]) -> None:
    # allowed: up to 3 echoes (a loaded 2-core machine may drop one); denied: one, 0.5 s
    got = [
        any(reaches(peers[src].netns, peers["srv"].ip, proto, port) for _ in range(3 if want else 1))
        for src, proto, port, want in cases
    ]
    wrong = [
        f"{src} -> srv {proto}/{port}: {'allowed' if g else 'denied'}"
        for (src, proto, port, want), g in zip(cases, got, strict=True)
        if g != want
    ]
    assert not wrong, wrong


def _step(cluster: Cluster, peers: dict[str, Pod], flip: Case, cases: list[Case]) -> None:
    """Wait until `flip` gives its answer (the controller applied the change), then check every case."""
    src, proto, port, want = flip
    got = eventually(lambda: reaches(peers[src].netns, peers["srv"].ip, proto, port), lambda ok: ok == want)
    assert got == want, f"never {'allowed' if want else 'denied'}: {flip}"
    _sync(cluster)
    _check(peers, [flip, *cases])


def _ready(api: Api, kind: str, name: str) -> dict[str, Any]:
    def condition() -> dict[str, Any]:
        obj = api.client.request("GET", f"{GROUP}/{kind}/{name}")
        got = [c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"]
        return got[0] if got else {}

    return eventually(condition, bool)


def test_every_field_of_the_admin_policies_by_traffic(
    cluster: Cluster, api: Api, peers: dict[str, Pod]
) -> None:
    everyone = [
        ("c-a", "tcp", 8080, True),
        ("c-b", "tcp", 8080, True),
        ("other", "tcp", 8080, True),
        ("c-b", "udp", 5353, True),
        ("c-b", "tcp", 8081, True),
    ]
    _check(peers, everyone)

    # Deny, namespaces peer, ingress: project b refused by a's subject, whatever node
    subject_a = {"namespaces": TENANT_A}
    api.create(
        anp(
            "deny-b",
            20,
            subject_a,
            ingress=[{"name": "no-b", "action": "Deny", "from": [{"namespaces": TENANT_B}]}],
        )
    )
    _step(
        cluster,
        peers,
        ("c-b", "tcp", 8080, False),
        [("other", "tcp", 8080, False), ("c-b", "udp", 5353, False), ("c-a", "tcp", 8080, True)],
    )
    assert _ready(api, "adminnetworkpolicies", "deny-b")["status"] == "True"

    # priorities: an Allow at 10 above the Deny at 20; pods peer; named port (srv's `http` = 8080)
    pods_b = {"pods": {"namespaceSelector": TENANT_B, "podSelector": CLIENT}}
    api.create(
        anp(
            "allow-client",
            10,
            subject_a,
            ingress=[
                {"name": "client-http", "action": "Allow", "from": [pods_b], "ports": [{"namedPort": "http"}]}
            ],
        )
    )
    _step(
        cluster,
        peers,
        ("c-b", "tcp", 8080, True),
        [("c-b", "tcp", 8081, False), ("c-b", "udp", 5353, False), ("other", "tcp", 8080, False)],
    )

    # Pass (port range, UDP) skips the Deny at 20; no NetworkPolicy selects srv, so the BANP decides
    api.create(
        anp(
            "pass-udp",
            5,
            subject_a,
            ingress=[
                {
                    "name": "udp-to-np",
                    "action": "Pass",
                    "from": [{"namespaces": TENANT_B}],
                    "ports": [{"portRange": {"protocol": "UDP", "start": 5000, "end": 5400}}],
                }
            ],
        )
    )
    banp = {
        "apiVersion": "policy.networking.k8s.io/v1alpha1",
        "kind": "BaselineAdminNetworkPolicy",
        "metadata": {"name": "default"},
        "spec": {
            "subject": subject_a,
            "ingress": [
                {
                    "name": "b-client-udp",
                    "action": "Allow",
                    "from": [pods_b],
                    "ports": [{"portNumber": {"protocol": "UDP", "port": 5353}}],
                },
                {"name": "no-b", "action": "Deny", "from": [{"namespaces": TENANT_B}]},
            ],
        },
    }
    api.create(banp)
    _step(
        cluster,
        peers,
        ("c-b", "udp", 5353, True),
        [("other", "udp", 5353, False), ("c-b", "tcp", 8081, False)],
    )
    assert _ready(api, "baselineadminnetworkpolicies", "default")["status"] == "True"

    # a NetworkPolicy now selects srv: it decides the passed traffic (BANP under NP), other's UDP allowed
    # by it, c-b's no longer (the NP does not name c-b); the ANP Allow at 10 still wins over the NP
    np = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "srv-in", "namespace": A},
        "spec": {
            "podSelector": {},
            "ingress": [
                {
                    "from": [
                        {"namespaceSelector": TENANT_B, "podSelector": {"matchLabels": {"app": "other"}}}
                    ],
                    "ports": [{"protocol": "UDP", "port": 5353}],
                }
            ],
        },
    }
    api.create(np)
    _step(
        cluster,
        peers,
        ("other", "udp", 5353, True),
        [("c-b", "udp", 5353, False), ("c-b", "tcp", 8080, True), ("c-a", "tcp", 8080, False)],
    )
    api.delete("NetworkPolicy", A, "srv-in")
    api.delete("BaselineAdminNetworkPolicy", "", "default")
    api.delete("AdminNetworkPolicy", "", "pass-udp")
    _step(cluster, peers, ("c-a", "tcp", 8080, True), [("c-b", "udp", 5353, False)])

    # egress: networks (srv/32 on 8081) and nodes (a Node whose address is srv's: a node's real address
    # is behind the platform guard for every pod, so only a stand-in shows the peer by traffic)
    api.create(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": FAKE_NODE, "labels": {"anp-test": "yes"}},
            "status": {"addresses": [{"type": "InternalIP", "address": peers["srv"].ip}]},
        }
    )
    subject_c = {"pods": {"namespaceSelector": {}, "podSelector": CLIENT}}
    api.create(
        anp(
            "egress",
            30,
            subject_c,
            egress=[
                {
                    "name": "net",
                    "action": "Deny",
                    "to": [{"networks": [f"{peers['srv'].ip}/32"]}],
                    "ports": [{"portNumber": {"protocol": "TCP", "port": 8081}}],
                },
            ],
        )
    )
    _step(
        cluster,
        peers,
        ("c-a", "tcp", 8081, False),
        [("c-a", "tcp", 8080, True), ("other", "tcp", 8081, False)],
    )
    api.create(
        anp(
            "egress-nodes",
            25,
            subject_c,
            egress=[
                {
                    "name": "node",
                    "action": "Deny",
                    "to": [{"nodes": {"matchLabels": {"anp-test": "yes"}}}],
                    "ports": [{"portNumber": {"protocol": "TCP", "port": 8080}}],
                },
            ],
        )
    )
    _step(cluster, peers, ("c-a", "tcp", 8080, False), [("c-b", "tcp", 8080, False)])

    # an unsupported priority is refused with the condition, and changes nothing
    api.create(
        anp(
            "too-low",
            100,
            subject_a,
            ingress=[{"name": "all", "action": "Deny", "from": [{"namespaces": {}}]}],
        )
    )
    cond = _ready(api, "adminnetworkpolicies", "too-low")
    assert cond["status"] == "False" and "above 99" in cond["message"], cond

    for name in ("too-low", "egress-nodes", "egress", "allow-client", "deny-b"):
        api.delete("AdminNetworkPolicy", "", name)
    api.delete("Node", "", FAKE_NODE)
    _step(cluster, peers, ("other", "tcp", 8080, True), everyone)


def test_egress_peers_actions_and_the_banp_egress_by_traffic(
    cluster: Cluster, api: Api, peers: dict[str, Pod]
) -> None:
    """The egress half: subjects by pods with matchExpressions, Deny to namespaces (matchExpressions) on a
    TCP portRange, Allow above it to pods on a namedPort, Pass to NetworkPolicy and the BANP's egress
    (Allow before Deny), a NetworkPolicy deciding passed egress above the BANP, and a domainNames Allow
    (not implemented: matches nothing, Ready=False) that opens nothing; and an ingress Deny on a TCP
    portNumber from pods selected by matchExpressions."""
    everyone = [("c-a", "tcp", 8080, True), ("c-b", "tcp", 8080, True), ("other", "tcp", 8080, True),
                ("c-b", "tcp", 8081, True), ("c-b", "udp", 5353, True)]  # fmt: skip
    _check(peers, everyone)
    in_b = {"matchExpressions": [{"key": "anp-tenant", "operator": "In", "values": ["b"]}]}
    to_a = {"namespaces": {"matchExpressions": [{"key": "anp-tenant", "operator": "NotIn", "values": ["b"]},
                                                {"key": "anp-tenant", "operator": "Exists"}]}}  # fmt: skip
    subject_b = {"pods": {"namespaceSelector": in_b, "podSelector": {}}}
    range_8000 = {"portRange": {"protocol": "TCP", "start": 8000, "end": 8080}}
    udp_5353 = {"portNumber": {"protocol": "UDP", "port": 5353}}
    deny = {"name": "to-a", "action": "Deny", "to": [to_a], "ports": [range_8000, udp_5353]}
    api.create(anp("eg-deny", 20, subject_b, egress=[deny]))
    _step(cluster, peers, ("c-b", "tcp", 8080, False),
          [("other", "tcp", 8080, False), ("c-b", "tcp", 8081, True), ("c-b", "udp", 5353, False),
           ("other", "udp", 5353, False), ("c-a", "tcp", 8080, True)])  # fmt: skip

    # an Allow at 10 to srv's pod by its named port wins over the Deny at 20; a domainNames Allow: nothing
    srv = {
        "pods": {
            "namespaceSelector": TENANT_A,
            "podSelector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["srv"]}]},
        }
    }
    clients_b = {"pods": {"namespaceSelector": in_b, "podSelector": CLIENT}}
    api.create(
        anp(
            "eg-domains",
            15,
            subject_b,
            egress=[{"name": "dns-names", "action": "Allow", "to": [{"domainNames": ["srv.example.com"]}]}],
        )
    )
    cond = _ready(api, "adminnetworkpolicies", "eg-domains")
    assert cond["status"] == "False" and "domainNames" in cond["message"], cond
    _sync(cluster)
    _check(peers, [("c-b", "tcp", 8080, False), ("other", "tcp", 8080, False)])
    api.create(anp("eg-allow", 10, clients_b, egress=[{"name": "srv-http", "action": "Allow", "to": [srv],
                                                       "ports": [{"namedPort": "http"}]}]))  # fmt: skip
    _step(cluster, peers, ("c-b", "tcp", 8080, True), [("other", "tcp", 8080, False)])

    # Pass (UDP) at 5 skips the Deny at 20 and hands the UDP to NetworkPolicy (none selects c-b or other),
    # then the BANP: its egress Allows UDP 5300-5400 to srv before its Deny to anp-a (so c-b's TCP 8081,
    # which no ANP decides, is refused); `other` is no BANP subject: its passed UDP is allowed
    api.create(anp("eg-pass", 5, subject_b, egress=[{"name": "udp", "action": "Pass", "to": [to_a],
                                                     "ports": [udp_5353]}]))  # fmt: skip
    banp = {"apiVersion": "policy.networking.k8s.io/v1alpha1", "kind": "BaselineAdminNetworkPolicy",
            "metadata": {"name": "default"},
            "spec": {"subject": clients_b,
                     "egress": [{"name": "udp-srv", "action": "Allow", "to": [srv],
                                 "ports": [{"portRange": {"protocol": "UDP", "start": 5300, "end": 5400}}]},
                                {"name": "no-a", "action": "Deny", "to": [to_a]}]}}  # fmt: skip
    api.create(banp)
    _step(cluster, peers, ("c-b", "tcp", 8081, False),
          [("c-b", "udp", 5353, True), ("c-b", "tcp", 8080, True), ("other", "tcp", 8081, True),
           ("other", "udp", 5353, True), ("other", "tcp", 8080, False)])  # fmt: skip
    assert _ready(api, "baselineadminnetworkpolicies", "default")["status"] == "True"

    # a NetworkPolicy selecting c-b for egress (TCP 8081 only) decides above the BANP: 8081 allowed, the
    # passed UDP no longer (the NP does not allow it); the ANP Allow at 10 still wins over the NP
    to_8081 = {"to": [{"namespaceSelector": TENANT_A}], "ports": [{"protocol": "TCP", "port": 8081}]}
    np = {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
          "metadata": {"name": "c-b-out", "namespace": B},
          "spec": {"podSelector": CLIENT, "policyTypes": ["Egress"], "egress": [to_8081]}}  # fmt: skip
    api.create(np)
    _step(
        cluster, peers, ("c-b", "tcp", 8081, True), [("c-b", "udp", 5353, False), ("c-b", "tcp", 8080, True)]
    )

    # and the ingress side on a TCP portNumber from pods by matchExpressions: srv refuses `other` on 8081
    other = {
        "pods": {
            "namespaceSelector": in_b,
            "podSelector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["other"]}]},
        }
    }
    tcp_8081 = {"portNumber": {"protocol": "TCP", "port": 8081}}
    in_deny = {"name": "other-8081", "action": "Deny", "from": [other], "ports": [tcp_8081]}
    api.create(anp("in-tcp", 40, {"namespaces": TENANT_A}, ingress=[in_deny]))
    _step(cluster, peers, ("other", "tcp", 8081, False),
          [("other", "udp", 5353, True), ("c-b", "tcp", 8081, True), ("c-a", "tcp", 8081, True)])  # fmt: skip

    api.delete("NetworkPolicy", B, "c-b-out")
    api.delete("BaselineAdminNetworkPolicy", "", "default")
    for name in ("in-tcp", "eg-pass", "eg-allow", "eg-domains", "eg-deny"):
        api.delete("AdminNetworkPolicy", "", name)
    _step(cluster, peers, ("other", "tcp", 8080, True), everyone)


def test_sctp_ports_across_nodes_by_raw_init_packets(
    cluster: Cluster, api: Api, peers: dict[str, Pod]
) -> None:
    """protocol SCTP by traffic across nodes: raw SCTP INITs (the kernel has no SCTP stack;
    tests/integration/controllers/netpol/sctp_raw.py) from c-b (node3) and c-a (node2) to srv (node1)."""

    def sctp(src: str, port: int) -> bool:
        srv = peers["srv"]
        return any(sctp_reaches(peers[src].netns, srv.netns, srv.ip, port) for _ in range(3))

    assert sctp("c-b", 9999) and sctp("c-a", 7050), "SCTP not carried across nodes without a policy"
    ports = [{"portNumber": {"protocol": "SCTP", "port": 9999}},
             {"portRange": {"protocol": "SCTP", "start": 7000, "end": 7100}}]  # fmt: skip
    rule = {"name": "b-sctp", "action": "Deny", "from": [{"namespaces": TENANT_B}], "ports": ports}
    api.create(anp("sctp-in", 20, {"namespaces": TENANT_A}, ingress=[rule]))
    got = eventually(lambda: sctp("c-b", 9999), lambda ok: not ok)
    assert not got, "c-b's SCTP to srv:9999 never refused"
    _sync(cluster)
    checked = {"c-b 7050": sctp("c-b", 7050), "c-b 9998": sctp("c-b", 9998), "c-a 9999": sctp("c-a", 9999)}
    api.delete("AdminNetworkPolicy", "", "sctp-in")
    assert checked == {"c-b 7050": False, "c-b 9998": True, "c-a 9999": True}
    assert eventually(lambda: sctp("c-b", 9999), bool), "c-b's SCTP not allowed again after the delete"
