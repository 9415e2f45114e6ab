"""The NetworkPolicies curve: policies over 100 namespaces at 10, 100, 1,000.

netpol-controller (its two replicas, as the cluster runs them) translates every policy into port
groups, address sets and ACLs in the central NB. The 100 namespaces hold 2 pods each (Pods in the API
double, their logical ports written into the NB as the CNI writes them, on a switch per namespace),
so the policies select and admit real members. Two real pods, a client on node1 and a target on
node2 answering on 8080, in a namespace of their own. At each size, after the policies up to it are
loaded (policy k in namespace k mod 100, as bench/bench_netpol.py's):
- `pol`: a policy isolating the target created -> the client's first refused request of a run that
  lasts 0.5 s, SCALE_ROUNDS times; `unpol`: that policy deleted -> the first answered request (of a
  run as long). A single refusal is not taken: a connect slow for 0.1 s on a loaded datapath reads
  as one, and once ended the wait for the load's own reconcile while netpol was still applying it,
  so that the first timed rounds measured the load's tail (2-4 s at 1,000 policies);
- netpol's and the API double's RSS and CPU per policy loaded, netpol's and northd's CPU per timed
  change, the NB and SB databases in thousands of cells.
"""

from __future__ import annotations

import time
from functools import partial
from typing import Any

from bench.scale.context import ScaleContext, in_batches, until, until_steady
from bench.scale.frame import Curve, Row
from bench.scale.sample import costs, usage
from bench.stats import pct
from controllers.machinery import NAMESPACES, NETWORK_POLICIES, PODS
from nodeenv.cluster.churn import LivePod

SIZES = (10, 100, 1000)
SPREAD, PODS_PER_NS = 100, 2
PROBE_NS = "scale-pol"
DENY = {"metadata": {"namespace": PROBE_NS, "name": "isolate"},
        "spec": {"podSelector": {"matchLabels": {"app": "target"}}}}  # fmt: skip


def namespace(i: int) -> str:
    return f"pol-{i}"


def pod(ns: str, name: str, labels: dict[str, str]) -> dict[str, Any]:
    container = {"name": "c", "image": "x", "ports": [{"name": "http", "containerPort": 8080}]}
    return {
        "metadata": {"namespace": ns, "name": name, "labels": labels},
        "spec": {"containers": [container]},
    }


def policy(k: int) -> dict[str, Any]:
    ns, j = namespace(k % SPREAD), k // SPREAD
    spec: dict[str, Any] = {
        "podSelector": {"matchLabels": {"app": f"web{j % 2}"}},
        "ingress": [
            {"from": [{"podSelector": {"matchLabels": {"role": f"client{j % 3}"}}},
                      {"namespaceSelector": {"matchLabels": {"team": f"t{j % 3}"}}}],
             "ports": [{"port": 8000 + j}, {"port": "http"}]},
            {"from": [{"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.94.0.0/16"]}}]},
        ],
    }  # fmt: skip
    if j % 2:
        spec["policyTypes"] = ["Ingress", "Egress"]
        spec["egress"] = [{"to": [{"namespaceSelector": {}}], "ports": [{"protocol": "UDP", "port": 53}]}]
    return {"metadata": {"namespace": ns, "name": f"np{j}"}, "spec": spec}


class World:
    def __init__(self, ctx: ScaleContext) -> None:
        self.loaded = 0
        ctx.run(self._api(ctx))
        self._ports(ctx)
        self.client = ctx.pod(0, PROBE_NS, "client")
        self.target = ctx.pod(1, PROBE_NS, "target")
        ctx.serve(self.target)
        ctx.run(self._real(ctx, self.client, {"role": "allowed"}))
        ctx.run(self._real(ctx, self.target, {"app": "target"}))
        until(self.client.netns, self.target.ip, 8080, bool)

    async def _api(self, ctx: ScaleContext) -> None:
        await ctx.client.create(NAMESPACES, {"metadata": {"name": PROBE_NS}})
        for i in range(SPREAD):
            ns = namespace(i)
            await ctx.client.create(NAMESPACES, {"metadata": {"name": ns, "labels": {"team": f"t{i % 3}"}}})
        await in_batches(
            partial(
                ctx.client.create,
                PODS,
                pod(namespace(i), f"p{k}", {"app": f"web{k}", "role": f"client{i % 3}"}),
            )
            for i in range(SPREAD)
            for k in range(PODS_PER_NS)
        )

    def _ports(self, ctx: ScaleContext) -> None:
        """The namespaces' pods as the CNI writes their logical ports (addresses, external_ids)."""
        cmds: list[str] = []
        for i in range(SPREAD):
            ns = namespace(i)
            cmds += ["--", "ls-add", f"k8s-{ns}"]
            for k in range(PODS_PER_NS):
                lsp, ip, mac = (
                    f"{ns}-p{k}",
                    f"10.94.{200 + i // 50}.{(i % 50) * 4 + k + 2}",
                    f"0a:58:0a:5e:{i:02x}:{k + 2:02x}",
                )
                cmds += ["--", "lsp-add", f"k8s-{ns}", lsp, "--", "lsp-set-addresses", lsp, f"{mac} {ip}",
                         "--", "set", "Logical_Switch_Port", lsp, f"external_ids:prismnet.namespace={ns}",
                         f"external_ids:prismnet.pod=p{k}"]  # fmt: skip
        ctx.nbctl(*cmds[1:])

    async def _real(self, ctx: ScaleContext, p: LivePod, labels: dict[str, str]) -> None:
        made = await ctx.client.create(PODS, pod(PROBE_NS, p.ref.name, labels))
        status = {"phase": "Running", "podIP": p.ip, "podIPs": [{"ip": p.ip}]}
        await ctx.client.replace(PODS, {**made, "status": status}, "status")

    def isolate(self, ctx: ScaleContext) -> float:
        t0 = time.perf_counter()
        ctx.run(ctx.client.create(NETWORK_POLICIES, DENY))
        return (until_steady(self.client.netns, self.target.ip, 8080, lambda a: not a) - t0) * 1000

    def release(self, ctx: ScaleContext) -> float:
        t0 = time.perf_counter()
        ctx.run(ctx.client.delete(NETWORK_POLICIES, PROBE_NS, "isolate"))
        return (until_steady(self.client.netns, self.target.ip, 8080, bool) - t0) * 1000


def step(ctx: ScaleContext, size: int) -> Row:
    w: World = ctx.state.get("policies") or ctx.state.setdefault("policies", World(ctx))
    u0 = usage(ctx.cluster)
    t0 = time.perf_counter()
    added = size - w.loaded
    ctx.run(
        in_batches(partial(ctx.client.create, NETWORK_POLICIES, policy(k)) for k in range(w.loaded, size))
    )
    w.isolate(ctx)  # the reconcile after the load: every policy is in (one key, the whole cluster)
    took = time.perf_counter() - t0
    w.release(ctx)
    w.loaded = size
    u1 = usage(ctx.cluster)
    time.sleep(2)
    u2 = usage(ctx.cluster)
    isolated, released = [], []
    for _ in range(ctx.rounds):
        isolated.append(w.isolate(ctx))
        released.append(w.release(ctx))
    u3 = usage(ctx.cluster)
    return {
        "pol p50 ms": pct(isolated, 50),
        "pol p99 ms": pct(isolated, 99),
        "unpol p99 ms": pct(released, 99),
        **costs(ctx.cluster, "netpol", (u0, u1), (u2, u3), added, 2 * ctx.rounds, took),
    }


CURVE = Curve("policies", SIZES, step, {"netpol MB": 1.2, "netpol ms/obj": 0.2, "netpol ms/chg": 0.2})
