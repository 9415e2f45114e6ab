"""LB backend removal churn under live traffic: does the datapath survive? (issue 20 item 2)

Reproducer for the ovs-vswitchd hang seen right after a FiberLB backend left an EndpointSlice.
All real except the Kubernetes API (the API double): an OVN node with the PrismNET agent, three
backend pods and one client pod wired by the installed `prismnet` executable, `fiberlb-controller`
(ovn backend, so a `ct_flush=true` UDP row) following a LoadBalancer Service with TCP 80 and UDP 53.
In the client pod, LBCHURN_TCP + LBCHURN_UDP load generators open a new connection / socket per
request to the VIP without pause, and LBCHURN_BURN busy loops keep both cores loaded. Then, until
LBCHURN_SECONDS (default 300) pass: patch the EndpointSlice without one backend (a removal: OVN
flushes that backend's conntrack entries), check the datapath (every daemon alive,
ovs-vswitchd/ovn-controller answer `ovs-appctl version`, `ovs-vsctl show` answers), put it back.
Every 10th removal also counts the removed backend's conntrack entries 2 s later (was the flush
done?). Printed: removals, seconds the VIP did not answer, the flush check, vswitchd RSS, and the
verdict; a dead or wedged daemon stops the run and names the kept evidence (nodeenv.evidence).

    flock /tmp/k8shost-ovn.lock make bench BENCH=lbchurn        # LBCHURN_SECONDS=60 for a short run

It runs the node environment's ovs-vswitchd (nodeenv/vswitchd.py: Debian 13's 3.5.0 from
build/ovn-trixie). The crash it was written for was Debian 12's 3.1.0's, which aborted within a minute
(fixed upstream in 3.1.3; docs/troubleshooting.md).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from bench.bench_lb import Controller
from bench.pod_netns import BURN, LOADGEN, Pod, PodNets
from bench.private_node import private_node
from controllers.machinery import ENDPOINT_SLICES, NAMESPACES, SERVICES, KubeClient
from controllers.machinery.kubeconfig import load_api_client
from nodeenv.cni_component import CniComponent, installed_runtime
from nodeenv.kubeapi.server import ThreadedKubeApi
from nodeenv.node import Component, Node
from nodeenv.ovn_stack import OvnStack
from tests.integration.controllers.fiberlb.netns_traffic import Servers

NS, SVC = "lbchurn", "web"
SECONDS = float(os.environ.get("LBCHURN_SECONDS", "300"))
TCP = int(os.environ.get("LBCHURN_TCP", "2"))
UDP = int(os.environ.get("LBCHURN_UDP", "1"))
BURNERS = int(os.environ.get("LBCHURN_BURN", "2"))
REMOVE = os.environ.get("LBCHURN_REMOVE", "1") != "0"
"""LBCHURN_REMOVE=0: the control run, same traffic and checks without touching the EndpointSlice."""


def service() -> dict[str, Any]:
    ports = [
        {"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"},
        {"name": "dns", "port": 53, "targetPort": 8080, "protocol": "UDP"},
    ]
    return {
        "metadata": {"name": SVC, "namespace": NS},
        "spec": {"type": "LoadBalancer", "loadBalancerClass": "fiberlb.plasmacloud.io/lb", "ports": ports},
    }


def endpoint_slice(ips: list[str]) -> dict[str, Any]:
    return {
        "metadata": {"name": f"{SVC}-a", "namespace": NS, "labels": {"kubernetes.io/service-name": SVC}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": [ip], "conditions": {"ready": True}} for ip in ips],
        "ports": [
            {"name": "http", "port": 8080, "protocol": "TCP"},
            {"name": "dns", "port": 8080, "protocol": "UDP"},
        ],
    }


class Traffic:
    """Per-second counts of each load generator, read from its stdout."""

    def __init__(self, pods: PodNets, client: Pod, vip: str) -> None:
        self.seconds: dict[str, list[tuple[int, int]]] = {}
        for i in range(TCP):
            self._follow(f"tcp{i}", pods.run_in(client, LOADGEN, vip, "80", "tcp"))
        for i in range(UDP):
            self._follow(f"udp{i}", pods.run_in(client, LOADGEN, vip, "53", "udp"))
        for _ in range(BURNERS):
            pods.run_in(None, BURN)

    def _follow(self, name: str, proc: subprocess.Popen[str]) -> None:
        self.seconds[name] = []

        def read() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                d = json.loads(line)
                self.seconds[name].append((d["ok"], d["fail"]))

        threading.Thread(target=read, daemon=True).start()

    def report(self) -> list[str]:
        out = []
        for name, secs in sorted(self.seconds.items()):
            ok, fail = sum(s[0] for s in secs), sum(s[1] for s in secs)
            dark = sum(1 for s in secs if s[0] == 0)
            out.append(
                f"  {name}: {ok} answered, {fail} failed, {dark} of {len(secs)} seconds with no answer"
            )
        return out


def datapath_alive(node: Node) -> str:
    """ "" when every daemon lives and the datapath answers, else what is wrong (evidence kept)."""
    found = node.check(probe=("ovs-vswitchd", "ovn-controller"))
    if found:
        return "; ".join(map(str, found))
    vsctl = ["ovs-vsctl", f"--db={node.endpoints['OVS_DB']}", "--timeout=5", "show"]
    if subprocess.run(vsctl, capture_output=True).returncode != 0:
        return "ovs-vsctl show did not answer in 5 s"
    return ""


def conntrack_of(node: Node, ip: str) -> int:
    ctl = node.run_dir / "ovs" / "ovs-vswitchd.ctl"
    out = subprocess.run(
        ["ovs-appctl", "--timeout=5", "-t", str(ctl), "dpctl/dump-conntrack"], capture_output=True, text=True
    ).stdout
    return sum(1 for line in out.splitlines() if f"reply=(src={ip}," in line)


def rss_mb(node: Node, name: str) -> float:
    pid = next(r.pid for r in node.daemons.load() if r.name == name)
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def wait_vip(client: KubeClient) -> str:
    for _ in range(300):
        svc = await client.get(SERVICES, NS, SVC)
        ingress = svc.get("status", {}).get("loadBalancer", {}).get("ingress") or []
        if ingress:
            return str(ingress[0]["ip"])
        await asyncio.sleep(0.1)
    raise RuntimeError("the Service never got an external IP")


async def churn(
    node: Node, client: KubeClient, backends: list[str]
) -> tuple[int, list[tuple[int, int]], str]:
    removals, flush_checks, problem = 0, [], ""
    deadline = time.monotonic() + SECONDS
    while time.monotonic() < deadline and not problem:
        gone = backends[removals % len(backends)]
        if not REMOVE:
            gone = "none"
            await asyncio.sleep(0.6)
            problem = await asyncio.to_thread(datapath_alive, node)
            removals += 1
            continue
        await client.patch(
            ENDPOINT_SLICES,
            NS,
            f"{SVC}-a",
            {"endpoints": endpoint_slice([b for b in backends if b != gone])["endpoints"]},
        )
        removals += 1
        await asyncio.sleep(0.3)
        if removals % 10 == 0:
            await asyncio.sleep(2)
            flush_checks.append((removals, conntrack_of(node, gone)))
        problem = await asyncio.to_thread(datapath_alive, node)
        await client.patch(
            ENDPOINT_SLICES, NS, f"{SVC}-a", {"endpoints": endpoint_slice(backends)["endpoints"]}
        )
        await asyncio.sleep(0.3)
    return removals, flush_checks, problem


async def run(api: ThreadedKubeApi, node: Node, tmp: Path) -> None:
    client = KubeClient(await load_api_client(api.server.kubeconfig, in_cluster=False))
    pods, servers = PodNets(installed_runtime(node.endpoints, chained=False), "lbch"), Servers()
    ctrl = Controller(api.server.kubeconfig, node.endpoints["OVN_NB_DB"], tmp / "controller.log")
    try:
        await client.create(NAMESPACES, {"metadata": {"name": NS}})
        backends = []
        for i in range(3):
            pod = pods.add(NS, f"web-{i}")
            servers.start(pod.netns, f"web-{i}", 8080)
            backends.append(pod.ip)
        client_pod = pods.add("lbchurn-client", "client")
        ctrl.start()
        await client.create(ENDPOINT_SLICES, endpoint_slice(backends), NS)
        await client.create(SERVICES, service(), NS)
        vip = await wait_vip(client)
        await asyncio.sleep(3)  # the namespace switches join the load balancer group (every 2 s)
        traffic = Traffic(pods, client_pod, vip)
        rss0 = rss_mb(node, "ovs-vswitchd")
        t0 = time.monotonic()
        removals, flush_checks, problem = await churn(node, client, backends)
        took = time.monotonic() - t0
        print(
            f"LB backend removals under traffic: {removals} in {took:.0f} s (VIP {vip}, backends {backends}, "
            f"{TCP} TCP + {UDP} UDP generators, {BURNERS} CPU burners, 2 cores)"
        )
        print(f"  ovs-vswitchd {node.endpoints['OVS_VSWITCHD_VERSION']} ({node.endpoints['OVS_VSWITCHD']})")
        print("\n".join(traffic.report()))
        left = [n for _, n in flush_checks]
        print(
            f"  conntrack entries of the removed backend 2 s after removal: {left} "
            f"({sum(1 for n in left if n == 0)} of {len(left)} checks flushed to 0)"
        )
        if not problem:
            print(f"  ovs-vswitchd RSS {rss0:.0f} -> {rss_mb(node, 'ovs-vswitchd'):.0f} MB")
        verdict = (
            f"DATAPATH FAILED: {problem}; evidence in {node.evidence}"
            if problem
            else "datapath alive throughout"
        )
        print(f"  verdict: {verdict}")
    finally:
        ctrl.stop()
        servers.stop()
        pods.close()
        await client.api.close()


def main() -> None:
    components: list[Component] = [OvnStack(), CniComponent(cluster_cidr="10.93.0.0/16")]
    with private_node("k8sh-lbch-", "br-k8sbench", "k8shost-lbchurn", lambda _: components) as (node, tmp):
        api = ThreadedKubeApi(tmp / "api")
        api.start()
        try:
            asyncio.run(run(api, node, tmp))
        finally:
            api.stop()


if __name__ == "__main__":
    main()
