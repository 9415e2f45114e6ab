"""Issue 18 item 6: killing the node of the controllers' leader hands over within the lease
duration, the new leader does the work, and the request log shows no write from a non-leader.

On a 3-node cluster of this module's own (a node is killed; prefix k8shr, beside the session's):
fiberlb-, netpol- and node-controller run as replicas on node1 and node2. The node whose replica
holds fiberlb-controller's Lease is killed whole (every daemon SIGKILLed, nodeenv/cluster/faults.py),
and every controller that was led from there is taken over by the replica on the other node: not
before the Lease expired, and within its duration plus two retry periods (the follower sees the
last renewal up to one retry period late, and tries once per retry period). Then the new leaders do
their work: a new LoadBalancer Service over a pod on node3 gets its OVN load balancer and an external
IP that answers from node3; a new NetworkPolicy gets its port group and ACLs; and first, the dead
node's Node deleted, its OVN state is released (the invariants hold without it). Through all of it, the API
double's audit log shows no replica writing anything but its Lease while it did not hold it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from controllers.netpol.translate import policy_group
from nodeenv.cluster import recovery
from nodeenv.cluster.churn import ClusterPods
from nodeenv.cluster.cluster import Cluster
from nodeenv.cluster.replicas import (
    addresses,
    holders,
    kill_leaders_node,
    requests_by_replica,
    writes_while_not_leading,
)
from nodeenv.cluster.settings import ClusterSettings
from nodeenv.cluster.underlay import list_netns
from nodeenv.daemons import is_alive
from nodeenv.kubeapi.auditlog import read_audit_log
from nodeenv.kubelet.apiclient import KubeClient
from nodeenv.node import read_env_file
from tests.conftest import require_ovn
from tests.integration.cluster.kube import Api, endpoint_slice, eventually, ingress, namespace, nbctl, service
from tests.integration.controllers.fiberlb.netns_traffic import Servers, requests

PREFIX = "k8shr"
NS = "handover"
RETRY_PERIOD = 2.0  # the controllers' --leader-elect-retry-period (the machinery's default)
HTTP = {"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"}


@pytest.fixture(scope="module")
def replicated(short_tmp: Path) -> Iterator[Cluster]:
    require_ovn()
    c = Cluster(
        ClusterSettings(run_dir=short_tmp / "rep", nodes=3, prefix=PREFIX, cluster_cidr="10.94.0.0/16")
    )
    c.up()
    records = [r for part in c.parts().values() for r in part.daemons.load()]
    try:
        yield c
    finally:
        c.down()
        left = [r.name for r in records if is_alive(r)] + list_netns(PREFIX)
        assert not left, f"cluster-down left behind: {left}"


def test_killing_the_leaders_node_hands_over_and_the_new_leader_works(replicated: Cluster) -> None:
    c = replicated
    env = read_env_file(c.env_file)
    client, api = KubeClient.from_kubeconfig(Path(env["KUBECONFIG"])), Api(c)
    pods, servers = ClusterPods(c, tag="h"), Servers()
    web_node = c.nodes[2]
    assert not c.settings.runs_controllers(web_node.index)
    try:
        web, outcome = pods.add(web_node, NS, "web")
        assert web is not None, outcome
        servers.start(web.netns, "web", 8080)
        before = holders(client)
        victim, survivor, handed = kill_leaders_node(c, client, "fiberlb-controller")
        print("\n" + "\n".join(h.line() for h in handed))
        assert victim.name == before["fiberlb-controller"].node
        assert {h.program for h in handed} == {p for p, h in before.items() if h.node == victim.name}
        for h in handed:
            assert h.after == survivor.name != victim.name, h
            assert h.lease_duration - RETRY_PERIOD <= h.seconds <= h.lease_duration + 2 * RETRY_PERIOD, (
                h.line()
            )
        assert {p: h.node for p, h in holders(client).items()} == dict.fromkeys(before, survivor.name)

        # node-controller's leader: the dead node's Node deleted, its OVN state (its chassis too) released
        pods.drop_node(victim.name)
        released = recovery.release(c, victim, pods, [NS])
        print(f"{victim.name}'s state released {released:.2f} s after its Node was deleted")

        # fiberlb-controller's new leader: a new LoadBalancer Service answers through its external IP
        api.create(namespace(NS))
        api.create(service("web", NS, [HTTP]))
        api.create(endpoint_slice("web", NS, [web.ip], [{"name": "http", "port": 8080, "protocol": "TCP"}]))
        svc = eventually(lambda: api.get("Service", NS, "web"), lambda s: bool(ingress(s)), timeout=20)
        assert ingress(svc), f"no external IP from the new leader: {svc}"
        lb_ip = ingress(svc)[0]
        vips = eventually(lambda: nbctl(c, "--bare", "--columns=vips", "list", "Load_Balancer"),
                          lambda v: f"{lb_ip}:80={web.ip}:8080" in v)  # fmt: skip
        assert f"{lb_ip}:80={web.ip}:8080" in vips, vips
        nbctl(c, "--wait=hv", "sync")  # every chassis left (the dead one released) has it
        assert requests(web_node.netns, lb_ip, 80, 3) == ["web"] * 3

        # netpol-controller's leader: a new policy gets its port group and ACLs
        api.create(_policy())
        group = policy_group(f"{NS}/only-fe")
        find = ["--bare", "--columns=acls", "find", "Port_Group", f"name={group}"]
        acls = eventually(lambda: nbctl(c, *find), lambda out: bool(out.strip()))
        assert acls.strip(), f"no ACLs for {NS}/only-fe in port group {group}"

        events = read_audit_log(Path(env["KUBE_AUDIT_LOG"]))
        by_address = addresses(c, [victim])
        assert writes_while_not_leading(events, by_address) == []
        seen = requests_by_replica(events, by_address)
        assert seen[("fiberlb-controller", survivor.name)]["patch services"] >= 1, seen
    finally:
        servers.stop()
        pods.delete_all()
        api.delete_all()


def _policy() -> dict[str, object]:
    spec = {"podSelector": {"matchLabels": {"app": "web"}}, "policyTypes": ["Ingress"],
            "ingress": [{"from": [{"podSelector": {"matchLabels": {"app": "fe"}}}]}]}  # fmt: skip
    meta = {"name": "only-fe", "namespace": NS}
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": meta, "spec": spec}
