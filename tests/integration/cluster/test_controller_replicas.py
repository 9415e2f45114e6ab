"""Issue 18 item 6 on the session's cluster: the cluster-wide controllers (fiberlb-, netpol- and
node-controller) run as two replicas on two nodes, as their Deployments (replicas: 2, anti-affinity,
host network): each replica a daemon of its node, in the node's network namespace; exactly one
replica of each holds its Lease (named by its pod, `<program>-<node>_<uuid>`) and says so on its
/metrics; and the API double's request record (its audit log: source IP = the replica's node, user
agent = its program) shows writes only from the leaders, while the followers keep polling their Lease.
Killing the leader's node: test_controller_handover.py (a cluster of its own)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from nodeenv.cluster.cluster import Cluster
from nodeenv.cluster.control import CONTROLLERS
from nodeenv.cluster.replicas import addresses, holders, requests_by_replica, writes_while_not_leading
from nodeenv.daemons import http_get_in, is_alive
from nodeenv.kubeapi.auditlog import read_audit_log
from nodeenv.node import read_env_file
from tests.integration.cluster.kube import Api, eventually, ingress, namespace, service

METRICS = {"fiberlb-controller": "FIBERLB_METRICS", "netpol-controller": "NETPOL_METRICS",
           "node-controller": "NODE_CONTROLLER_METRICS"}  # fmt: skip
NS = "replicas"


def test_two_replicas_of_each_controller_run_on_two_nodes_in_their_namespaces(cluster: Cluster) -> None:
    hosts = [n.name for n in cluster.controller_nodes()]
    assert hosts == ["node1", "node2"]
    for n in cluster.nodes:
        records = {r.name: r for r in n.node.daemons.load()}
        for program in CONTROLLERS:
            if n.name not in hosts:
                assert program not in records, f"{program} on {n.name}"
                continue
            rec = records[program]
            assert is_alive(rec), f"{program} on {n.name}"
            netns = subprocess.run(["ip", "netns", "identify", str(rec.pid)], capture_output=True, text=True)
            assert netns.stdout.strip() == n.netns, f"{program} on {n.name} runs in {netns.stdout!r}"


def _leading(cluster: Cluster, program: str) -> dict[str, bool]:
    """node -> whether its replica of `program` says on its /metrics that it leads."""
    out = {}
    for n in cluster.controller_nodes():
        status, body = http_get_in(n.netns, n.env[METRICS[program]])
        assert status == 200, (n.name, program, body)
        m = re.search(rf'^leader_election_master_status{{name="{program}"}} (\S+)$', body, re.M)
        assert m, f"no leader_election_master_status on {program}'s /metrics on {n.name}"
        out[n.name] = float(m.group(1)) == 1.0
    return out


def test_exactly_one_replica_of_each_holds_its_lease(cluster: Cluster, api: Api) -> None:
    hosts = [n.name for n in cluster.controller_nodes()]
    for program, h in holders(api.client).items():
        assert h.node in hosts, f"{program}'s Lease is held by {h.identity!r}"
        assert h.identity.startswith(f"{program}-{h.node}_"), h
        assert _leading(cluster, program) == {n: n == h.node for n in hosts}, program


def test_only_the_leaders_write_to_the_api(cluster: Cluster, api: Api) -> None:
    """A LoadBalancer Service is handled by fiberlb-controller's leader (its status written); in the
    whole request record since cluster-up, no replica wrote anything but its Lease while it did not
    hold it, and the followers made only reads (their Lease polled every retry period)."""
    api.create(namespace(NS))
    api.create(service("web", NS, [{"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"}]))
    svc = eventually(lambda: api.get("Service", NS, "web"), lambda s: bool(ingress(s)))
    assert ingress(svc), f"fiberlb-controller gave {NS}/web no IP: {svc}"
    events = read_audit_log(Path(read_env_file(cluster.env_file)["KUBE_AUDIT_LOG"]))
    by_address = addresses(cluster)
    assert writes_while_not_leading(events, by_address) == []
    seen = requests_by_replica(events, by_address)
    hosts = [n.name for n in cluster.controller_nodes()]
    for program, h in holders(api.client).items():
        (follower,) = [n for n in hosts if n != h.node]
        made = seen.get((program, follower), {})
        assert made.get("get leases", 0) >= 2, f"{program} on {follower} in the record: {made}"
        wrote = {k: v for k, v in made.items() if k.split()[0] not in ("get", "list", "watch")}
        assert wrote == {}, f"{program} on {follower} (not leading) wrote {wrote}"
    fiberlb = seen.get(("fiberlb-controller", holders(api.client)["fiberlb-controller"].node), {})
    assert fiberlb.get("patch services", 0) >= 1, f"the leader's status write is not in the record: {fiberlb}"
