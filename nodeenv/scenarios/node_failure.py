"""A node fails (cluster only; runs last, after every earlier part's cleanup): a pod serving HTTP on
every node behind a LoadBalancer Service, then the last node's daemons all killed at once, as when
its machine dies (nodeenv/cluster/faults.py). The pods on the other nodes keep reaching each other;
the dead node's backend leaves the EndpointSlice (written here as kube-controller-manager's
EndpointSlice controller writes it once the node's pods are not ready) and the external IP answers
from the surviving backends, from a pod and from a node; then the dead node is taken off the machine
and its Node deleted from the API, and the node-controller (the cluster's, whose replicas run on
node1 and node2: the last node has none, so no handover is waited for) releases everything it held
in OVN (its chassis, management port, egress set, its pods' ports and addresses): the shared
invariants hold for the cluster that is left (nodeenv/cluster/invariants.py)."""

from __future__ import annotations

import time

from nodeenv.cluster import faults, recovery
from nodeenv.cluster.churn import ClusterPods, LivePod, cross_node_ok
from nodeenv.scenario import Scenario
from nodeenv.scenarios.fiberlb import _address, _answers, _apply, _kubectl, _serve, _until

NS = "sandbox-nodefail"
SERVICE = "web-nf"
HTTP = {"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"}


def run(scn: Scenario) -> None:
    cluster = scn.cluster
    if cluster is None or len(cluster.nodes) < 3:
        return  # one node: nothing survives its failure
    with scn.step("cleanup: every earlier part's pods, Services and volumes removed", on="all"):
        errors = scn.run_cleanups()
        if errors:
            raise RuntimeError("; ".join(errors))
    env, pods = scn.env, ClusterPods(cluster, tag="n")
    scn.defer(pods.delete_all)
    web: dict[str, LivePod] = {}
    places = {p.name: p for p in scn.places}
    every = ",".join(n.name for n in cluster.nodes)
    with scn.step("node failure: an HTTP pod on every node behind a LoadBalancer", on=every):
        _apply(env, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        scn.defer(lambda: _kubectl(env, "delete", "namespace", NS, "--wait=false", check=False))
        for n in cluster.nodes:
            pod, outcome = pods.add(n, NS, f"web-{n.name}")
            if pod is None:
                raise RuntimeError(f"ADD on {n.name}: {outcome.error}")
            web[n.name] = pod
            _serve(scn, pod.ref.name, pod.netns)
        _apply(env, _slice(list(web.values())))
        spec = {"type": "LoadBalancer", "selector": {"app": "web"}, "ports": [HTTP]}
        _apply(env, {"apiVersion": "v1", "kind": "Service",
                     "metadata": {"name": SERVICE, "namespace": NS}, "spec": spec})  # fmt: skip
        vip = _until(lambda: _address(env, SERVICE, "LoadBalancer", NS), bool, f"{SERVICE} has no address")
        names = {p.ref.name for p in web.values()}
        first = web[cluster.nodes[0].name]
        _until(lambda: _answers(first.netns, vip), lambda r: r == names, f"{vip} from every backend", 30)
    victim = cluster.nodes[-1]
    survivors = [web[n.name] for n in cluster.nodes if n is not victim]
    left = ",".join(p.node for p in survivors)
    with scn.step(f"node failure: {victim.name} killed; pods on {left} still reach each other", on=left):
        faults.kill_node(victim)
        deadline = time.monotonic() + 10
        while bad := cross_node_ok(survivors, tries=2):
            if time.monotonic() > deadline:
                raise RuntimeError(f"after {victim.name} died these pairs do not answer: {bad}")
    out = f"node failure: {victim.name}'s backend out of the EndpointSlice; the IP answers from the rest"
    with scn.step(out, on=left):
        _apply(env, _slice(survivors))
        want = {p.ref.name for p in survivors}
        node = places[survivors[1].node]
        for netns in (survivors[0].netns, node.netns):
            _until(lambda n=netns: _answers(n, vip), lambda r: r == want, f"{vip} from {want} only", 30)  # type: ignore[misc]
    with scn.step(f"node failure: {victim.name} removed, its Node deleted: node-controller releases it",
                  on="control") as step:  # fmt: skip
        pods.drop_node(victim.name)
        scn.places[:] = [p for p in scn.places if p.name != victim.name]
        released = recovery.release(cluster, victim, pods, [NS])
        if bad := cross_node_ok(survivors, tries=3):
            raise RuntimeError(f"after the release these pairs do not answer: {bad}")
        step.detail = f"released {released:.2f} s after the Node was deleted; the invariants hold"


def _slice(pods: list[LivePod]) -> dict[str, object]:
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "addressType": "IPv4",
            "metadata": {"name": f"{SERVICE}-sbx", "namespace": NS,
                         "labels": {"kubernetes.io/service-name": SERVICE}},
            "endpoints": [{"addresses": [p.ip], "conditions": {"ready": True}, "nodeName": p.node}
                          for p in pods],
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]}  # fmt: skip
