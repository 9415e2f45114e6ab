"""The Services curve: ClusterIP Services with 3 endpoints each at 100, 1,000, 10,000.

fiberlb-controller (its two replicas, `ovn` backend, as the cluster runs them) programs each Service's
ClusterIP into one OVN Load_Balancer row in the `fiberlb` Load_Balancer_Group; northd turns it into
logical flows and each node's ovn-controller into OpenFlow. At each size, after the Services up to it
are loaded (every one's EndpointSlice names the same 3 backend pods, one per node):
- `vip`: a new Service (its EndpointSlice first) created -> its ClusterIP answering a request from a
  client pod (on node3), SCALE_ROUNDS times;
- `eps`: that Service's EndpointSlice changed to another backend pod -> the first answer from it;
- fiberlb's and the API double's RSS and CPU per Service loaded, fiberlb's CPU per timed change,
  northd's CPU per timed change, the NB and SB databases in thousands of cells.
"""

from __future__ import annotations

import time
from functools import partial
from typing import Any

from bench.scale.context import ScaleContext, in_batches, until
from bench.scale.frame import Curve, Row
from bench.scale.sample import costs, usage
from bench.stats import pct
from controllers.machinery import ENDPOINT_SLICES, NAMESPACES, SERVICES
from nodeenv.cluster.churn import LivePod

NS = "scale-svc"
SIZES = (100, 1000, 3000, 10_000)


def service(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": NS},
        "spec": {"ports": [{"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"}]},
    }


def endpoint_slice(name: str, ips: list[str]) -> dict[str, Any]:
    return {
        "metadata": {"name": f"{name}-x", "namespace": NS, "labels": {"kubernetes.io/service-name": name}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": [ip], "conditions": {"ready": True}} for ip in ips],
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
    }


class World:
    """The backends (one pod per node, each answering its own name), the client pod, what is loaded."""

    def __init__(self, ctx: ScaleContext) -> None:
        ctx.run(ctx.client.create(NAMESPACES, {"metadata": {"name": NS}}))
        self.backends: list[LivePod] = [ctx.pod(i, NS, f"backend-{i}") for i in range(3)]
        for b in self.backends:
            ctx.serve(b)
        self.client = ctx.pod(2, NS, "client")
        self.loaded = 0
        self.timed = 0

    @property
    def ips(self) -> list[str]:
        return [b.ip for b in self.backends]


async def _create(ctx: ScaleContext, name: str, ips: list[str]) -> str:
    await ctx.client.create(ENDPOINT_SLICES, endpoint_slice(name, ips), NS)
    made = await ctx.client.create(SERVICES, service(name), NS)
    return str(made["spec"]["clusterIP"])


def load(ctx: ScaleContext, w: World, size: int) -> tuple[int, float]:
    """Services up to `size`; (how many were added, seconds until the last one answered)."""
    names = [f"svc-{i}" for i in range(w.loaded, size)]
    if not names:
        return 0, 0.0
    t0 = time.perf_counter()
    ctx.run(in_batches(partial(_create, ctx, n, w.ips) for n in names[:-1]))
    last = ctx.run(_create(ctx, names[-1], w.ips))
    until(w.client.netns, last, 80, bool, timeout=1800)
    w.loaded = size
    return len(names), time.perf_counter() - t0


def timed(ctx: ScaleContext, w: World) -> tuple[list[float], list[float]]:
    vip, eps = [], []
    for _ in range(ctx.rounds):
        w.timed += 1
        name = f"timed-{w.timed}"
        first, second = w.backends[w.timed % 3], w.backends[(w.timed + 1) % 3]
        t0 = time.perf_counter()
        ip = ctx.run(_create(ctx, name, [first.ip]))
        vip.append((until(w.client.netns, ip, 80, bool) - t0) * 1000)
        t0 = time.perf_counter()
        body = {"endpoints": endpoint_slice(name, [second.ip])["endpoints"]}
        ctx.run(ctx.client.patch(ENDPOINT_SLICES, NS, f"{name}-x", body))
        eps.append((until(w.client.netns, ip, 80, second.ref.name.__eq__) - t0) * 1000)
    return vip, eps


def step(ctx: ScaleContext, size: int) -> Row:
    w: World = ctx.state.get("services") or ctx.state.setdefault("services", World(ctx))
    u0 = usage(ctx.cluster)
    added, took = load(ctx, w, size)
    u1 = usage(ctx.cluster)
    time.sleep(2)  # the load's tail (the follower's cache, northd's last run) out of the timed part
    u2 = usage(ctx.cluster)
    vip, eps = timed(ctx, w)
    u3 = usage(ctx.cluster)
    return {
        "vip p50 ms": pct(vip, 50),
        "vip p99 ms": pct(vip, 99),
        "eps p50 ms": pct(eps, 50),
        "eps p99 ms": pct(eps, 99),
        **costs(ctx.cluster, "fiberlb", (u0, u1), (u2, u3), added, 2 * ctx.rounds, took),
        "flashdns MB": u3.rss["flashdns"],  # the largest of the nodes' (each holds every Service)
    }


CURVE = Curve("services", SIZES, step, {"fiberlb MB": 1.2, "fiberlb ms/obj": 0.2, "fiberlb ms/chg": 0.2,
                                        "flashdns MB": 1.2})  # fmt: skip
