"""What a tenant pod on every node reaches of the platform (issue 27, items 2 and 5).

The pods are ADDed through each node's installed plugin and conflist, in a namespace whose own
NetworkPolicy allows every egress (so what stops them is the platform guard above any tenant
policy, docs/security.md). From each: every TCP/UDP listener of its node and of OVN
central, as `ss` lists them now, is refused unless docs/security.md's must-answer list names it; the OVN
databases do not even open a connection (no read, no write); the Kubernetes API answers an
anonymous request only on kube-apiserver's public-info paths; a pod of another project is refused.
The guard taken off (its router policy deleted), the same probe opens the NB: the checks can fail.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import pytest

from cni.ovn import ROUTER
from cni.platform_guard import K_GUARD
from controllers.machinery import NETWORK_POLICIES
from controllers.projects.template import ProjectTemplate, desired_objects
from nodeenv.cluster import faults
from nodeenv.cluster.cluster import Cluster
from nodeenv.node import read_env_file
from tests.integration.cluster.conftest import Pod, Pods
from tests.integration.cluster.kube import Api, eventually, namespace, nbctl, pod_object
from tests.integration.cluster.listeners import LOOPBACK, MUST_ANSWER, addresses, listening, targets
from tests.integration.controllers.netpol.traffic import EchoServers, reaches, servers

PROBE = str(Path(__file__).with_name("probe.py"))
NS = "tenant-open"
ALLOW_ALL_EGRESS = {
    "apiVersion": "networking.k8s.io/v1",
    "kind": "NetworkPolicy",
    "metadata": {"name": "allow-all-egress", "namespace": NS},
    "spec": {"podSelector": {}, "policyTypes": ["Egress"], "egress": [{}]},
}
PUBLIC = ("/version", "/healthz", "/livez", "/readyz")
PRIVATE = ("/api", "/apis", "/api/v1/namespaces", "/api/v1/secrets", "/api/v1/nodes", "/metrics",
           "/openapi/v2", "/apis/coordination.k8s.io/v1/leases")  # fmt: skip


@pytest.fixture(scope="module")
def tenants(cluster: Cluster, api: Api) -> Iterator[list[Pod]]:
    """One pod per node in a namespace that lets its pods send anywhere."""
    pods = Pods([])
    try:
        api.create(namespace(NS))
        api.create(ALLOW_ALL_EGRESS)
        out = [pods.add(n, namespace=NS, name=f"t-{n.name}") for n in cluster.nodes]
        for pod in out:
            api.create(pod_object(pod, {"app": "tenant"}))
        yield out
    finally:
        pods.delete_all()


def probe(pod: Pod, *args: str, timeout: float = 60) -> dict[str, object]:
    out = pod.run(sys.executable, PROBE, *args, timeout=timeout)
    assert out.returncode == 0, out.stderr
    result: dict[str, object] = json.loads(out.stdout)
    return result


def central_netns(cluster: Cluster) -> str:
    return read_env_file(cluster.env_file)["K8SHOST_UNDERLAY_NETNS"]


def test_every_listener_of_its_node_and_central_refused_or_must_answer(
    cluster: Cluster, tenants: list[Pod]
) -> None:
    central = central_netns(cluster)
    rows, wrong = [], []
    for pod in tenants:
        places = [(pod.node.name, pod.node.netns), ("central", central)]
        plan = [(where, ls, t) for where, netns in places for ls in listening(netns)
                for t in targets(ls, addresses(netns)) or [""]]  # fmt: skip
        got = probe(pod, "connect", "1.5", *sorted({t for _, _, t in plan if t}))
        for where, ls, target in plan:
            must = MUST_ANSWER.get((ls.proto, ls.port))
            result = str(got[target]) if target else "-"
            if not target:
                verdict, reason = "unreachable", LOOPBACK if ls.loopback else "IPv6 only: pods have no IPv6"
            elif must:
                verdict, reason = ("answers" if result == "open" else f"NOT ANSWERING ({result})"), must
            else:
                verdict, reason = ("refused" if result != "open" else "OPEN"), f"platform only ({result})"
            if verdict in ("OPEN",) or verdict.startswith("NOT"):
                wrong.append(f"{pod.name} -> {target} ({ls.process}): {verdict}")
            rows.append((pod.name, where, target or f"{ls.proto}:{ls.address}:{ls.port}",
                         ls.process, verdict, reason))  # fmt: skip
    _print_table(rows)
    assert len({r[1] for r in rows}) == len(tenants) + 1, "no listener found on some node or on central"
    assert not wrong, wrong


def _print_table(rows: Sequence[Sequence[str]]) -> None:
    head = ("from pod", "on", "listener", "process", "verdict", "reason")
    widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]
    for row in [head, *rows]:
        print(" | ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)))


def _ovsdb_remotes(cluster: Cluster) -> list[str]:
    """tcp:IP:PORT of every ovsdb-server listening in OVN central's namespace, as `ss` lists them now."""
    central = central_netns(cluster)
    return sorted(
        t for ls in listening(central) if ls.process == "ovsdb-server" and ls.proto == "tcp"
        for t in targets(ls, addresses(central))
    )  # fmt: skip


def test_ovn_databases_do_not_even_open(cluster: Cluster, tenants: list[Pod]) -> None:
    remotes = _ovsdb_remotes(cluster)
    assert remotes, "no ovsdb-server listens in OVN central's namespace"
    tries = []
    for pod in tenants:
        got = probe(pod, "connect", "1.5", *remotes)
        assert set(got.values()) == {"timeout"}, (pod.name, got)  # dropped: not even a RST
        for remote in remotes:
            db = "tcp:" + remote.split(":", 1)[1]
            tries += [(pod, ["ovn-nbctl", f"--db={db}", "--timeout=3", "ls-list"]),
                      (pod, ["ovn-nbctl", f"--db={db}", "--timeout=3", "ls-add", f"x-{pod.name}"]),
                      (pod, ["ovn-sbctl", f"--db={db}", "--timeout=3", "show"])]  # fmt: skip
    with ThreadPoolExecutor(len(tries)) as pool:  # each waits out its --timeout: all at once
        outs = list(pool.map(lambda t: t[0].run(*t[1]), tries))
    for (pod, argv), out in zip(tries, outs, strict=True):
        assert out.returncode != 0, (pod.name, argv, out.stdout)
    assert not [ls for ls in nbctl(cluster, "--bare", "--columns=name", "list", "Logical_Switch").split()
                if ls.startswith("x-t-")]  # fmt: skip


def test_kubernetes_api_answers_anonymous_pods_only_public_info(cluster: Cluster, tenants: list[Pod]) -> None:
    api = read_env_file(cluster.env_file)["NODES_KUBE_API_URL"]
    for pod in tenants:
        got = probe(pod, "https", *(api + p for p in PUBLIC + PRIVATE))
        public = {p: got[api + p] for p in PUBLIC}
        private = {p: got[api + p] for p in PRIVATE}
        assert set(public.values()) == {200}, (pod.name, public)
        assert set(private.values()) <= {401, 403}, (pod.name, private)


def guards(cluster: Cluster) -> list[str]:
    """The uuids of the nodes' guard policies."""
    rows = json.loads(
        nbctl(cluster, "--format=json", "--columns=_uuid,external_ids", "list", "Logical_Router_Policy")
    )
    return [r[0][1] for r in rows["data"] if K_GUARD in dict(r[1][1])]


@contextmanager
def guards_off(cluster: Cluster) -> Iterator[None]:
    """Every node's guard policy deleted while the agents are paused (SIGSTOP: a running agent hears
    its rows go and puts them back at once); the agents resumed on the way out, which restore them."""
    agents = [faults.record(n.node, "prismnet-agent").pid for n in cluster.nodes]
    try:
        for pid in agents:
            os.kill(pid, signal.SIGSTOP)
        uuids = guards(cluster)
        if uuids:
            nbctl(cluster, "--wait=hv", *(a for u in uuids for a in ("--", "lr-policy-del", ROUTER, u)))
        yield
    finally:
        for pid in agents:
            os.kill(pid, signal.SIGCONT)


def test_probe_sees_a_plaintext_listener(cluster: Cluster, tenants: list[Pod]) -> None:
    """The same probe, against the guard left off: the agents paused (SIGSTOP), every node's guard
    policy deleted (each guards OVN central's address): the NB opens, and a listener of the node's on a
    port the guard does not name answers. Resumed, the agents hear their guards' rows gone and put them
    back at once (not at their 15 s refresh: a bound of 5 s)."""
    pod, remote = tenants[0], _ovsdb_remotes(cluster)[0]
    with servers(pod.node.netns, (18080,), ()):
        node_ip = addresses(pod.node.netns)[0]
        assert probe(pod, "connect", "1.5", f"tcp:{node_ip}:18080")[f"tcp:{node_ip}:18080"] == "open"
    assert len(guards(cluster)) == len(cluster.nodes)
    with guards_off(cluster):
        got = probe(pod, "connect", "1.5", remote)
    assert got[remote] == "open", got
    back = eventually(lambda: guards(cluster), lambda g: len(g) == len(cluster.nodes), timeout=5, every=0.1)
    assert len(back) == len(cluster.nodes), "the agents did not restore their platform guards within 5 s"
    nbctl(cluster, "--wait=hv", "sync")
    assert probe(pod, "connect", "1.5", remote)[remote] == "timeout"


def test_another_projects_pods_are_refused(cluster: Cluster, api: Api) -> None:
    """Two project namespaces with the policies project-controller writes: a pod of the same project
    on another node reaches the server, one of the other project does not."""
    n1, n2, n3 = cluster.nodes
    pods, servers = Pods([]), None
    try:
        for ns, project in (("tiso-x", "px"), ("tiso-y", "py")):
            made = api.create(namespace(ns, {"plasmacloud.io/project-id": project}))
            for o in desired_objects(made, ProjectTemplate()):
                if o.kind == NETWORK_POLICIES:
                    api.create(o.body)
        server, friend, stranger = (pods.add(n1, "tiso-x", "srv"), pods.add(n2, "tiso-x", "friend"),
                                    pods.add(n3, "tiso-y", "stranger"))  # fmt: skip
        for p in (server, friend, stranger):
            api.create(pod_object(p, {"app": p.name}))
        servers = EchoServers(server.netns, (8080,), ())
        isolated = eventually(lambda: reaches(stranger.netns, server.ip, "tcp", 8080), lambda ok: not ok)
        assert not isolated, "the other project's pod still reaches the server"
        assert any(reaches(friend.netns, server.ip, "tcp", 8080) for _ in range(3))
        assert not reaches(stranger.netns, server.ip, "tcp", 8080, timeout=1.0)
    finally:
        if servers is not None:
            servers.close()
        pods.delete_all()


def _guarded(cluster: Cluster) -> set[str]:
    rows = json.loads(
        nbctl(cluster, "--format=json", "--columns=addresses,external_ids", "list", "Address_Set")
    )
    return {a for r in rows["data"] if K_GUARD in dict(r[1][1]) for a in _ovs_set(r[0])}


def _ovs_set(datum: object) -> list[str]:
    """An OVSDB JSON set: ["set", [...]] or its one element alone."""
    if isinstance(datum, list) and datum and datum[0] == "set":
        return [str(x) for x in datum[1]]
    return [str(datum)]


def test_an_address_the_node_gains_later_is_guarded(cluster: Cluster) -> None:
    """The agent hears the address appear (rtnetlink) and guards it then, not at its 15 s refresh
    (a bound of 5 s: the refresh alone would miss it two times in three); gone, it leaves the guard."""
    node, extra = cluster.nodes[0], "10.250.99.7"
    assert extra not in _guarded(cluster)
    subprocess.run(["ip", "-n", node.netns, "addr", "add", f"{extra}/32", "dev", "lo"], check=True)
    try:
        got = eventually(lambda: _guarded(cluster), lambda g: extra in g, timeout=5, every=0.1)
        assert extra in got, "the node's new address is not guarded within 5 s"
    finally:
        subprocess.run(["ip", "-n", node.netns, "addr", "del", f"{extra}/32", "dev", "lo"], check=True)
    assert extra not in eventually(lambda: _guarded(cluster), lambda g: extra not in g, timeout=5, every=0.1)
