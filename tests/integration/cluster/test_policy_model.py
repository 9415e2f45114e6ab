"""Generated policy scenarios: the reference evaluator's verdicts against real traffic across nodes.

Six pods (two per namespace gva/gvb/gvc, spread so every namespace spans two nodes) each echo TCP
8080 and 9000 and UDP 5353 and declare the named port `http` (8080 on even pods, 9000 on odd).
Hypothesis draws the pods' and namespaces' labels and up to three NetworkPolicies (the second test:
up to two NetworkPolicies, two AdminNetworkPolicies and a BaselineAdminNetworkPolicy); they are
written to the cluster's API, netpol-controller translates them, and once the NB has settled and
every chassis has it (ovn-nbctl --wait=hv sync), every ordered pod pair is probed on the three
ports at once. Every probe must give the evaluator's answer (tests/netpol_reference.py): a
connection that succeeds where the model denies is a mismatch at once; one that fails where the
model allows is probed twice more (a loaded 2-core machine may lose one echo) before it counts.
SCTP is not probed: the test kernel has no SCTP sockets (socket(IPPROTO_SCTP) fails with
EPROTONOSUPPORT), so neither the datapath nor a pod could carry it here.

Runtime is bounded: K8SHOST_MODEL_EXAMPLES examples (default 12), derandomized (the same examples
each run), no example database, no shrinking unless K8SHOST_MODEL_SHRINK=1; about 6-10 s per
example on the 3-node cluster.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings

from nodeenv.cluster.cluster import Cluster
from tests.integration.cluster.conftest import Pod, Pods
from tests.integration.cluster.kube import Api, namespace, nbctl
from tests.integration.controllers.netpol.traffic import EchoServers, reaches
from tests.netpol_reference import Pod as ModelPod
from tests.netpol_reference import World, allowed
from tests.policy_scenarios import NAMESPACES, TCP_PORTS, UDP_PORTS, Scenario, admin_scenarios, scenarios

pytestmark = [pytest.mark.root, pytest.mark.ovn]
EXAMPLES = int(os.environ.get("K8SHOST_MODEL_EXAMPLES", "12"))
PHASES = (Phase.explicit, Phase.generate) + (
    (Phase.shrink,) if os.environ.get("K8SHOST_MODEL_SHRINK") else ()
)
PROBES = [("TCP", p) for p in TCP_PORTS] + [("UDP", p) for p in UDP_PORTS]


def _named(i: int) -> int:
    return 8080 if i % 2 == 0 else 9000


@pytest.fixture(scope="module")
def layout(cluster: Cluster, api: Api) -> Iterator[list[Pod]]:
    n1, n2, n3 = cluster.nodes
    where = [("gva", n1), ("gva", n2), ("gvb", n2), ("gvb", n3), ("gvc", n3), ("gvc", n1)]
    pods, servers = Pods([]), []
    try:
        for ns in NAMESPACES:
            api.create(namespace(ns))
        out = []
        for i, (ns, node) in enumerate(where):
            pod = pods.add(node, namespace=ns, name=f"m{i}")
            api.create(_pod_object(pod, {}, _named(i)))
            servers.append(EchoServers(pod.netns, TCP_PORTS, UDP_PORTS))
            out.append(pod)
        yield out
    finally:
        for s in servers:
            s.close()
        pods.delete_all()


def _pod_object(pod: Pod, labels: dict[str, str], http: int) -> dict[str, Any]:
    container = {
        "name": "c",
        "image": "busybox",
        "ports": [{"name": "http", "containerPort": http, "protocol": "TCP"}],
    }
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": pod.name, "namespace": pod.namespace, "labels": labels},
            "spec": {"nodeName": pod.node.name, "containers": [container]}}  # fmt: skip


def _set_labels(api: Api, path: str, have: dict[str, str], want: dict[str, str]) -> None:
    patch = {"metadata": {"labels": {**{k: None for k in have if k not in want}, **want}}}
    api.client.request("PATCH", path, patch, "application/merge-patch+json")


def _labels(api: Api, path: str) -> dict[str, str]:
    return dict(api.client.request("GET", path)["metadata"].get("labels") or {})


def _nb_state(cluster: Cluster) -> str:
    return nbctl(cluster, "--columns=name,ports,acls", "list", "Port_Group") + nbctl(
        cluster, "--columns=name,addresses", "list", "Address_Set"
    )


def _settle(cluster: Cluster, quiet: float = 0.6, timeout: float = 20.0) -> None:
    """Until the NB has not changed for `quiet` s (the controller's reconciles done), then until
    every chassis has it."""
    deadline = time.monotonic() + timeout
    last, since = _nb_state(cluster), time.monotonic()
    while time.monotonic() - since < quiet and time.monotonic() < deadline:
        time.sleep(0.2)
        now = _nb_state(cluster)
        if now != last:
            last, since = now, time.monotonic()
    nbctl(cluster, "--wait=hv", "sync")


def _apply(api: Api, cluster: Cluster, pods: list[Pod], sc: Scenario) -> None:
    for ns in NAMESPACES:
        path = f"/api/v1/namespaces/{ns}"
        want = {"kubernetes.io/metadata.name": ns, **sc.ns_labels[ns]}
        _set_labels(api, path, _labels(api, path), want)
    for pod, want in zip(pods, sc.pod_labels, strict=True):
        path = f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}"
        _set_labels(api, path, _labels(api, path), want)
    for p in (*sc.network_policies, *sc.admin_policies, *([sc.baseline] if sc.baseline else [])):
        api.create(p)
    time.sleep(0.3)  # the informers' events reach the controller's queue
    _settle(cluster)


def _cleanup(api: Api, sc: Scenario) -> None:
    for p in (*sc.network_policies, *sc.admin_policies, *([sc.baseline] if sc.baseline else [])):
        api.delete(p["kind"], p["metadata"].get("namespace", ""), p["metadata"]["name"])


def _model(pods: list[Pod], sc: Scenario) -> tuple[World, list[ModelPod]]:
    mp = [ModelPod(p.namespace, p.name, labels, p.ip, {"http": ("TCP", _named(i))})
          for i, (p, labels) in enumerate(zip(pods, sc.pod_labels, strict=True))]  # fmt: skip
    return World(mp, sc.ns_labels, list(sc.network_policies), list(sc.admin_policies), sc.baseline), mp


def _probe(src: Pod, dst: Pod, proto: str, port: int) -> bool:
    return reaches(src.netns, dst.ip, proto.lower(), port)


def _mismatches(pods: list[Pod], sc: Scenario, tally: list[int]) -> list[str]:
    world, mp = _model(pods, sc)
    cases = [(i, j, proto, port) for i in range(len(pods)) for j in range(len(pods)) if i != j
             for proto, port in PROBES]  # fmt: skip
    want = [allowed(world, mp[i], mp[j], proto, port) for i, j, proto, port in cases]
    tally[0], tally[1] = tally[0] + len(want), tally[1] + want.count(False)
    with ThreadPoolExecutor(len(cases)) as pool:
        got = list(pool.map(lambda c: _probe(pods[c[0]], pods[c[1]], c[2], c[3]), cases))
    wrong = []
    for (i, j, proto, port), w, g in zip(cases, want, got, strict=True):
        if w and not g:  # the model allows: two more tries before it counts
            g = any(_probe(pods[i], pods[j], proto, port) for _ in range(2))
        if w != g:
            wrong.append(f"{pods[i].namespace}/{pods[i].name}({pods[i].node.name}) -> "
                         f"{pods[j].namespace}/{pods[j].name}({pods[j].node.name}) {proto}/{port}: "
                         f"model {'allows' if w else 'denies'}, "
                         f"traffic {'passed' if g else 'blocked'}")  # fmt: skip
    return wrong


def test_generated_networkpolicies_match_the_model(cluster: Cluster, api: Api, layout: list[Pod]) -> None:
    _check_generated(cluster, api, layout, scenarios(len(layout)))


def test_generated_admin_policies_match_the_model(cluster: Cluster, api: Api, layout: list[Pod]) -> None:
    """AdminNetworkPolicies (Allow/Deny/Pass by priority), a BaselineAdminNetworkPolicy and
    NetworkPolicies together. Admin policies already in the cluster (the platform's project
    isolation, when another test left projects) join the model; a generated BANP is left out while
    the platform's `default` exists (there is one BANP)."""
    _check_generated(cluster, api, layout, admin_scenarios(len(layout)))


def _existing_admin(api: Api) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    base = "/apis/policy.networking.k8s.io/v1alpha1"
    anps = api.client.request("GET", f"{base}/adminnetworkpolicies")["items"]
    banps = api.client.request("GET", f"{base}/baselineadminnetworkpolicies")["items"]
    return anps, (banps[0] if banps else None)


def _prepare(api: Api, sc: Scenario) -> tuple[Scenario, Scenario]:
    """(what to create, what the model judges by): the cluster's own admin policies join the model;
    a generated BANP is not created while the cluster has one."""
    anps, banp = _existing_admin(api)
    taken = {int(a["spec"]["priority"]) for a in anps}
    assert not taken & {int(a["spec"]["priority"]) for a in sc.admin_policies}, taken
    create = dataclasses.replace(sc, baseline=None) if banp is not None else sc
    model = dataclasses.replace(
        create, admin_policies=(*anps, *sc.admin_policies), baseline=banp or create.baseline
    )
    return create, model


def _check_generated(cluster: Cluster, api: Api, layout: list[Pod], strategy: Any) -> None:
    started, examples, tally = time.monotonic(), [], [0, 0]  # probes, of which the model denies

    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None, phases=PHASES,
              suppress_health_check=list(HealthCheck))  # fmt: skip
    @given(sc=strategy)
    def check(sc: Scenario) -> None:
        examples.append(sc)
        create, model = _prepare(api, sc)
        try:
            _apply(api, cluster, layout, create)
            wrong = _mismatches(layout, model, tally)
        finally:
            _cleanup(api, create)
        assert not wrong, {"mismatches": wrong, "scenario": create}

    check()
    spent = time.monotonic() - started
    print(
        f"\n{len(examples)} generated scenarios, {tally[0]} probes ({tally[1]} denied by the model) "
        f"checked by traffic in {spent:.0f} s"
    )
    assert 0 < tally[1] < tally[0], "the examples should both allow and deny"
