"""bench netpol, end to end: the netpol-controller app against the Kubernetes API double (HTTPS, watch),
so a figure runs from the API write (policy created, pod relabelled) to the first refused connection:
watch delivery, the work queue, the reconcile, the NB transaction, northd and ovn-controller."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.bench_cni import fmt, pct
from controllers.machinery import NAMESPACES, NETWORK_POLICIES, PODS, KubeClient, Store
from controllers.machinery.kubeconfig import load_api_client
from controllers.machinery.settings import parse
from controllers.netpol.main import make_app
from controllers.netpol.settings import PREFIX, add_arguments
from nodeenv.kubeapi.server import ThreadedKubeApi
from nodeenv.kubeapi.state import ApiConfig
from nodeenv.node import Node

SA = "system:serviceaccount:kube-system:netpol-controller"


async def _load(
    client: KubeClient, pods: Store, namespaces: Store, policies: list[dict[str, Any]], ips: dict[str, str]
) -> None:
    for ns in namespaces.list():
        await client.create(NAMESPACES, {"metadata": ns["metadata"]})
    for p in pods.list():
        meta = p["metadata"]
        created = await client.create(PODS, {"metadata": meta, "spec": p["spec"]})
        ip = ips.get(f"{meta['namespace']}/{meta['name']}")
        if ip:
            status = {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}]}
            await client.replace(PODS, {**created, "status": status}, "status")
    for obj in policies:
        await client.create(NETWORK_POLICIES, obj)


@dataclass
class Inputs:
    """The bench's world: the node, the pods/namespaces/policies to load, the real pods' IPs."""

    node: Node
    pods: Store
    namespaces: Store
    policies: list[dict[str, Any]]
    ips: dict[str, str]
    probe: Any
    rounds: int


async def _run(api: ThreadedKubeApi, w: Inputs) -> None:
    client_api = await load_api_client(api.server.kubeconfig, in_cluster=False)
    async with client_api:
        client = KubeClient(client_api)
        await _load(client, w.pods, w.namespaces, w.policies, w.ips)
        argv = [
            "--kubeconfig",
            str(api.server.kubeconfig_for(SA)),
            "--leader-elect=false",
            "--metrics-address=off",
            "--ovn-nb-db",
            w.node.endpoints["OVN_NB_DB"],
        ]
        settings = parse("netpol-controller", "", argv, {}, prefix=PREFIX, add_arguments=add_arguments)
        stop = asyncio.Event()
        task = asyncio.create_task(make_app().run(settings, stop))
        try:
            await asyncio.to_thread(w.probe.until, True, 60.0)
            await _measure(client, w.probe, w.rounds)
        finally:
            stop.set()
            await task


async def _timed(probe: Any, write: Any, want: bool) -> float:
    t0 = time.perf_counter()
    await write
    refused_at: float = await asyncio.to_thread(probe.until, want)
    return (refused_at - t0) * 1000


async def _measure(client: KubeClient, probe: Any, rounds: int) -> None:
    deny = {
        "metadata": {"namespace": "npbench", "name": "target-deny"},
        "spec": {"podSelector": {"matchLabels": {"app": "target"}}},
    }
    created, deleted, out, back = [], [], [], []
    for _ in range(rounds):
        created.append(await _timed(probe, client.create(NETWORK_POLICIES, deny), False))
        deleted.append(await _timed(probe, client.delete(NETWORK_POLICIES, "npbench", "target-deny"), True))
    allowed = [{"from": [{"podSelector": {"matchLabels": {"role": "allowed"}}}]}]
    await client.create(
        NETWORK_POLICIES,
        {
            "metadata": {"namespace": "npbench", "name": "target-in"},
            "spec": {"podSelector": {"matchLabels": {"app": "target"}}, "ingress": allowed},
        },
    )
    await asyncio.to_thread(probe.until, True)
    for _ in range(rounds):
        out.append(await _timed(probe, _relabel(client, "other"), False))
        back.append(await _timed(probe, _relabel(client, "allowed"), True))
    print("end to end (API write -> watch -> netpol-controller -> NB -> ovn-controller -> first probe):")
    print(f"  policy created -> first refused connection: {fmt(created)}   target p99 < 1000 ms")
    print(f"  policy deleted -> first allowed connection: {fmt(deleted)}")
    print(f"  pod label changed -> refused:               {fmt(out)}   target p99 < 1000 ms")
    print(f"  pod label changed -> allowed again:         {fmt(back)}")
    worst = max(pct(created, 99), pct(out, 99))
    print(f"  enforcement p99 {worst:.0f} ms vs target 1000 ms: {'met' if worst < 1000 else 'NOT met'}")


async def _relabel(client: KubeClient, role: str) -> None:
    await client.patch(PODS, "npbench", "client", {"metadata": {"labels": {"role": role}}})


def end_to_end(tmp: Path, w: Inputs) -> None:
    api = ThreadedKubeApi(tmp / "kubeapi", ApiConfig())
    api.start()
    try:
        asyncio.run(_run(api, w))
    finally:
        api.stop()
