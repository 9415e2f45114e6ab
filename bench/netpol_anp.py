"""AdminNetworkPolicy enforcement latency at 100 namespaces (part of `make bench BENCH=netpol`).

On the netpol bench's node: 90 more namespaces of 5 NB ports each beside its 10 x 50 (100 namespaces,
950 ports), every namespace a project isolated by project-controller's own admin policies (one ANP per
project denying the other projects, the DNS ANP, the BANP: admin_policies.desired). Then the time from
an ANP change to its effect on the real client -> target connection: an ANP denying the client created
(first refused connection) and deleted (first allowed one), through the controller's reconciler (parse,
translate, one NB transaction) as in the NetworkPolicy figures; the floor (one NB change until every
chassis applied it, measured at this scale) and the reconcile's own part are printed beside them.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from bench.bench_cni import fmt, pct
from controllers.machinery import Store
from controllers.netpol.ovn_apply import PolicyNorthbound
from controllers.netpol.reconcile import AdminStores, NetpolReconciler
from controllers.projects.admin_policies import desired
from controllers.projects.template import PROJECT_LABEL, ProjectTemplate
from nodeenv.node import Node

EXTRA_NAMESPACES, EXTRA_PODS = 90, 5
TARGET_P99_MS = 1000.0


def anp_bench(
    node: Node,
    nb: PolicyNorthbound,
    policies: Store,
    pods: Store,
    namespaces: Store,
    probe: Any,
    rounds: int,
    nbctl: Any,
    pod: Any,
) -> None:
    cmds: list[str] = []
    for i in range(EXTRA_NAMESPACES):
        ns = f"bnsa{i}"
        namespaces.upsert({"metadata": {"name": ns, "labels": {}}})
        cmds += ["--", "ls-add", f"k8s-{ns}"]
        for k in range(EXTRA_PODS):
            name, ip, lsp = f"p{k}", f"10.93.{10 + i}.{k + 10}", f"{ns}-p{k}"
            cmds += [
                "--",
                "lsp-add",
                f"k8s-{ns}",
                lsp,
                "--",
                "lsp-set-addresses",
                lsp,
                f"0a:58:0a:5d:{10 + i:02x}:{k + 10:02x} {ip}",
                "--",
                "set",
                "Logical_Switch_Port",
                lsp,
                f"external_ids:prismnet.namespace={ns}",
                f"external_ids:prismnet.pod={name}",
            ]
            pods.upsert(pod(ns, name, {"app": "x"}))
    nbctl(node, *cmds[1:])
    for o in namespaces.list():  # every namespace but the bench's own pair's is a project
        if o["metadata"]["name"] != "npbench":
            labels = {**(o["metadata"].get("labels") or {}), PROJECT_LABEL: o["metadata"]["name"]}
            namespaces.upsert({"metadata": {**o["metadata"], "labels": labels}})
    anps, banps = Store(), Store()
    for kind, body in desired(
        [str(o["metadata"]["name"]) for o in namespaces.list() if o["metadata"]["name"] != "npbench"],
        ProjectTemplate(),
    ):
        (banps if kind.kind.startswith("Baseline") else anps).upsert(body)
    admin = AdminStores(anps, banps, Store(), None)
    reconciler = NetpolReconciler(nb, policies, pods, namespaces, admin=admin)
    t0 = time.perf_counter()
    asyncio.run(reconciler.reconcile("cluster"))
    t1 = time.perf_counter()
    nbctl(node, "--wait=hv", "sync")
    c = nb.counts()
    print(
        f"ANP: {len(namespaces.list())} namespaces, {len(anps.list())} ANPs + the BANP: {c['acls']} ACLs, "
        f"{c['port_groups']} port groups, {c['address_sets']} address sets; first apply "
        f"{(t1 - t0) * 1000:.0f} ms, NB->hv {(time.perf_counter() - t1) * 1000:.0f} ms"
    )
    probe.until(True)
    deny = {
        "metadata": {"name": "bench-deny"},
        "spec": {
            "priority": 5,
            "subject": {"pods": {"namespaceSelector": {}, "podSelector": {"matchLabels": {"app": "target"}}}},
            "ingress": [
                {
                    "name": "client",
                    "action": "Deny",
                    "from": [
                        {
                            "pods": {
                                "namespaceSelector": {},
                                "podSelector": {"matchLabels": {"role": "allowed"}},
                            }
                        }
                    ],
                }
            ],
        },
    }
    created, deleted, reconciles = [], [], []
    for _ in range(rounds):
        created.append(_enforce(reconciler, probe, lambda: anps.upsert(deny), False, reconciles))
        deleted.append(_enforce(reconciler, probe, lambda: anps.remove("bench-deny"), True, reconciles))
    floor = _floor(node, rounds, nbctl)
    print(f"ANP created -> first refused connection: {fmt(created)}   target p99 < {TARGET_P99_MS:.0f} ms")
    print(f"ANP deleted -> first allowed connection: {fmt(deleted)}")
    print(f"  of which the reconcile (parse, translate, one NB transaction): {fmt(reconciles)}")
    print(f"  floor at this scale (one NB change until every chassis applied it): {fmt(floor)}")
    worst = pct(created, 99)
    print(
        f"ANP enforcement p99 {worst:.0f} ms vs target {TARGET_P99_MS:.0f} ms: "
        f"{'met' if worst < TARGET_P99_MS else 'NOT met'}"
    )


def _enforce(
    reconciler: NetpolReconciler, probe: Any, change: Any, want: bool, reconciles: list[float]
) -> float:
    t0 = time.perf_counter()
    change()
    asyncio.run(reconciler.reconcile("cluster"))
    reconciles.append((time.perf_counter() - t0) * 1000)
    return float((probe.until(want) - t0) * 1000)


def _floor(node: Node, rounds: int, nbctl: Any) -> list[float]:
    nbctl(node, "create", "Address_Set", "name=npbench_anp_floor")
    times = []
    for i in range(rounds):
        t0 = time.perf_counter()
        nbctl(node, "--wait=hv", "add", "Address_Set", "npbench_anp_floor", "addresses", f"192.0.2.{i + 1}")
        times.append((time.perf_counter() - t0) * 1000)
    nbctl(node, "destroy", "Address_Set", "npbench_anp_floor")
    return times
