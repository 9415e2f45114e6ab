"""NetworkPolicy enforcement latency and OVN object counts at 100 policies over 500 pods.

A private node (OVN + the PrismNET agent, bridge br-npbench). 500 pods exist as logical ports
created directly in the NB (10 namespaces x 50, labelled in the bench's caches); 2 real pods in
netns through the CNI: a client and a TCP echo target. The reconciler is the controller's own
(NetpolReconciler: parse, join pods to ports, translate, one NB transaction) on in-memory caches;
enforcement is measured from the start of the reconcile to the start of the client's first
refused connection (50 ms probes). Then the same end to end (bench/netpol_e2e.py): the
netpol-controller app on the Kubernetes API double, from the API write to the first refusal. Then
AdminNetworkPolicy at 100 namespaces (bench/netpol_anp.py).

    flock /tmp/k8shost-ovn.lock make bench BENCH=netpol
"""

from __future__ import annotations

import asyncio
import os
import socket
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.bench_cni import fmt, pct
from bench.netpol_anp import anp_bench
from bench.netpol_e2e import Inputs, end_to_end
from controllers.machinery import Store
from controllers.netpol.ovn_apply import PolicyNorthbound
from controllers.netpol.reconcile import NetpolReconciler
from nodeenv.cni_component import CniComponent, CniRuntime, installed_runtime
from nodeenv.node import Node, NodeSettings
from nodeenv.ovn_stack import OvnStack
from tests.integration.controllers.netpol.traffic import EchoServers, in_netns

CLUSTER = "10.93.0.0/16"
NAMESPACES, PODS_PER_NS, POLICIES_PER_NS = 10, 50, 10
ROUNDS = 20
TARGET_P99_MS = 1000.0


@contextmanager
def bench_node(tmp: Path) -> Iterator[Node]:
    settings = NodeSettings(run_dir=tmp / "node", bridge="br-npbench", system_id="np-bench",
                            install_root=tmp / "root")  # fmt: skip
    node = Node(settings, [OvnStack(), CniComponent(cluster_cidr=CLUSTER)])
    node.up()
    try:
        yield node
    finally:
        node.down()


def nbctl(node: Node, *args: str) -> str:
    argv = ["ovn-nbctl", f"--db={node.endpoints['OVN_NB_DB']}", "--timeout=60", *args]
    return subprocess.run(argv, check=True, capture_output=True, text=True).stdout


def synthetic_ports(node: Node, pods: Store, namespaces: Store) -> None:
    """10 switches x 50 ports with addresses and the CNI's external_ids, in one ovn-nbctl call."""
    cmds: list[str] = []
    for i in range(NAMESPACES):
        ns = f"bns{i}"
        namespaces.upsert({"metadata": {"name": ns, "labels": {"team": f"t{i % 3}"}}})
        cmds += ["--", "ls-add", f"k8s-{ns}"]
        for k in range(PODS_PER_NS):
            name, ip = f"p{k:03d}", f"10.93.{100 + i}.{k + 10}"
            lsp = f"{ns}-{name}"
            mac = f"0a:58:0a:5d:{100 + i:02x}:{k + 10:02x}"
            cmds += ["--", "lsp-add", f"k8s-{ns}", lsp, "--", "lsp-set-addresses", lsp, f"{mac} {ip}",
                     "--", "set", "Logical_Switch_Port", lsp, f"external_ids:prismnet.namespace={ns}",
                     f"external_ids:prismnet.pod={name}"]  # fmt: skip
            labels = {"app": f"web{k % 5}", "role": f"client{k % 3}"}
            pods.upsert(pod(ns, name, labels))
    nbctl(node, *cmds[1:])


def pod(ns: str, name: str, labels: dict[str, str]) -> dict[str, Any]:
    ports = [{"name": "http", "containerPort": 8080}]
    return {"metadata": {"namespace": ns, "name": name, "labels": labels},
            "spec": {"containers": [{"name": "c", "ports": ports}]}}  # fmt: skip


def scale_policies(count: int) -> list[dict[str, Any]]:
    out = []
    for n in range(count):
        ns, j = f"bns{n // POLICIES_PER_NS}", n % POLICIES_PER_NS
        spec: dict[str, Any] = {
            "podSelector": {"matchLabels": {"app": f"web{j % 5}"}},
            "ingress": [
                {"from": [{"podSelector": {"matchLabels": {"role": f"client{j % 3}"}}},
                          {"namespaceSelector": {"matchLabels": {"team": f"t{j % 3}"}}}],
                 "ports": [{"port": 8000 + j}, {"port": "http"}]},
                {"from": [{"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.93.0.0/16"]}}]},
            ],
        }  # fmt: skip
        if j % 2:
            spec["policyTypes"] = ["Ingress", "Egress"]
            spec["egress"] = [{"to": [{"namespaceSelector": {}}], "ports": [{"protocol": "UDP", "port": 53}]}]
        out.append({"metadata": {"namespace": ns, "name": f"np{j}"}, "spec": spec})
    return out


class Probe:
    """Client -> target TCP connects back to back; the start time of each attempt and its result."""

    def __init__(self, netns: str, ip: str, port: int) -> None:
        self.netns, self.addr = netns, (ip, port)

    def once(self) -> tuple[float, bool]:
        s = in_netns(self.netns, socket.socket)
        s.settimeout(0.05)
        started = time.perf_counter()
        try:
            with s:
                s.connect(self.addr)
                s.sendall(b"x")
                return started, s.recv(8) == b"x"
        except OSError:
            return started, False

    def until(self, want: bool, timeout: float = 10.0) -> float:
        deadline = time.perf_counter() + timeout
        while time.perf_counter() < deadline:
            started, ok = self.once()
            if ok is want:
                return started
            if not ok:
                time.sleep(0.05 - min(0.05, time.perf_counter() - started))
        raise RuntimeError(f"connection never became {'allowed' if want else 'refused'}")


def enforce(reconciler: NetpolReconciler, probe: Probe, change: Callable[[], object], want: bool) -> float:
    t0 = time.perf_counter()
    change()
    asyncio.run(reconciler.reconcile("cluster"))
    return (probe.until(want) - t0) * 1000


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="npb-", dir="/tmp") as tmp, bench_node(Path(tmp)) as node:
        run(Path(tmp), node)


def run(tmp: Path, node: Node) -> None:
    policies, pods, namespaces = Store(), Store(), Store()
    synthetic_ports(node, pods, namespaces)
    nb = PolicyNorthbound(node.endpoints["OVN_NB_DB"])
    netnses: list[tuple[str, str, Any]] = []
    rt = _runtime(node)
    try:
        client = _real_pod(rt, netnses, pods, "client", {"role": "allowed"})
        target = _real_pod(rt, netnses, pods, "target", {"app": "target"})
        namespaces.upsert({"metadata": {"name": "npbench", "labels": {}}})
        servers = EchoServers(target[0], (8080,), ())
        reconciler = NetpolReconciler(nb, policies, pods, namespaces)
        counts_and_apply(node, nb, reconciler, policies, pods)
        probe = Probe(client[0], target[1], 8080)
        probe.until(True)
        latency(reconciler, probe, policies, pods)
        floor(node)
        scale = [p for p in policies.list() if p["metadata"]["namespace"] != "npbench"]
        ips = {"npbench/client": client[1], "npbench/target": target[1]}
        end_to_end(tmp, Inputs(node, pods, namespaces, scale, ips, probe, ROUNDS))
        anp_bench(node, nb, policies, pods, namespaces, probe, ROUNDS, nbctl, pod)  # at 100 namespaces
        servers.close()
    finally:
        nb.close()
        for netns, cid, result in netnses:
            rt.delete(cid, f"/run/netns/{netns}", result, args=_args(netns))
            subprocess.run(["ip", "netns", "del", netns], capture_output=True)


def _runtime(node: Node) -> CniRuntime:
    env = node.endpoints
    return installed_runtime(env, chained=False)


def _args(netns: str) -> str:
    return f"IgnoreUnknown=1;K8S_POD_NAMESPACE=npbench;K8S_POD_NAME={netns.split('-')[-1]}"


def _real_pod(
    rt: CniRuntime, netnses: list[tuple[str, str, Any]], pods: Store, name: str, labels: dict[str, str]
) -> tuple[str, str]:
    netns, cid = f"npb-{os.getpid()}-{name}", f"npb{os.getpid()}{name}".ljust(40, "0")
    subprocess.run(["ip", "netns", "add", netns], check=True)
    call = rt.add(cid, f"/run/netns/{netns}", args=_args(netns))
    if call.rc:
        raise RuntimeError(f"ADD {name}: {call.out}")
    netnses.append((netns, cid, call.out))
    pods.upsert(pod("npbench", name, labels))
    return netns, str(call.out["ips"][0]["address"]).split("/")[0]  # type: ignore[index]


def counts_and_apply(
    node: Node, nb: PolicyNorthbound, reconciler: NetpolReconciler, policies: Store, pods: Store
) -> None:
    print(f"scale: {NAMESPACES * PODS_PER_NS} NB ports + 2 real pods")
    print(
        f"{'policies':>8} {'ACLs':>6} {'port groups':>11} {'address sets':>12} {'reconcile':>10} {'NB→hv':>8}"
    )
    for count in (10, 50, 100):
        for obj in scale_policies(count):
            policies.upsert(obj)
        t0 = time.perf_counter()
        asyncio.run(reconciler.reconcile("cluster"))
        t1 = time.perf_counter()
        nbctl(node, "--wait=hv", "sync")
        t2 = time.perf_counter()
        c = nb.counts()
        print(f"{count:>8} {c['acls']:>6} {c['port_groups']:>11} {c['address_sets']:>12} "
              f"{(t1 - t0) * 1000:>8.0f}ms {(t2 - t1) * 1000:>6.0f}ms")  # fmt: skip
    times = []
    for _ in range(5):  # one pod's label flipped: the incremental reconcile at full scale
        current = pods.get("bns0", "p000")
        assert current is not None
        obj = current
        flipped = "web9" if obj["metadata"]["labels"]["app"] == "web0" else "web0"
        pods.upsert({**obj, "metadata": {**obj["metadata"], "labels": {"app": flipped, "role": "client0"}}})
        t0 = time.perf_counter()
        asyncio.run(reconciler.reconcile("cluster"))
        times.append((time.perf_counter() - t0) * 1000)
    print(f"incremental reconcile at 100 policies (one label changed): {fmt(times)}")
    print("target: ACL count linear in policies (not pods x policies)")


def latency(reconciler: NetpolReconciler, probe: Probe, policies: Store, pods: Store) -> None:
    allowed = [{"from": [{"podSelector": {"matchLabels": {"role": "allowed"}}}]}]
    isolate = {"metadata": {"namespace": "npbench", "name": "target-in"},
               "spec": {"podSelector": {"matchLabels": {"app": "target"}}, "ingress": allowed}}  # fmt: skip
    deny_all = {"metadata": {"namespace": "npbench", "name": "target-deny"},
                "spec": {"podSelector": {"matchLabels": {"app": "target"}}}}  # fmt: skip
    created, deleted, label_out, label_in = [], [], [], []
    for _ in range(ROUNDS):
        created.append(enforce(reconciler, probe, lambda: policies.upsert(deny_all), False))
        deleted.append(enforce(reconciler, probe, lambda: policies.remove("npbench/target-deny"), True))
    policies.upsert(isolate)
    asyncio.run(reconciler.reconcile("cluster"))
    probe.until(True)
    for _ in range(ROUNDS):
        label_out.append(enforce(reconciler, probe, lambda: relabel(pods, "other"), False))
        label_in.append(enforce(reconciler, probe, lambda: relabel(pods, "allowed"), True))
    print(f"policy created -> first refused connection: {fmt(created)}   target p99 < {TARGET_P99_MS:.0f} ms")
    print(f"policy deleted -> first allowed connection: {fmt(deleted)}")
    print(
        f"label change -> refused:                    {fmt(label_out)}   target p99 < {TARGET_P99_MS:.0f} ms"
    )
    print(f"label change -> allowed again:              {fmt(label_in)}")
    worst = max(pct(created, 99), pct(label_out, 99))
    print(f"enforcement p99 {worst:.0f} ms vs target {TARGET_P99_MS:.0f} ms: "
          f"{'met' if worst < TARGET_P99_MS else 'NOT met'}")  # fmt: skip


def relabel(pods: Store, role: str) -> None:
    obj = pods.get("npbench", "client")
    assert obj is not None
    pods.upsert({**obj, "metadata": {**obj["metadata"], "labels": {"role": role}}})


def floor(node: Node) -> None:
    """OVN alone: one address-set change committed with --wait=hv (northd + ovn-controller)."""
    nbctl(node, "create", "Address_Set", "name=npbench_floor")
    times = []
    for i in range(ROUNDS):
        t0 = time.perf_counter()
        nbctl(node, "--wait=hv", "add", "Address_Set", "npbench_floor", "addresses", f"192.0.2.{i + 1}")
        times.append((time.perf_counter() - t0) * 1000)
    nbctl(node, "destroy", "Address_Set", "npbench_floor")
    print(f"floor: one NB change until every chassis reported it applied (ovn-nbctl --wait=hv): {fmt(times)}")
    print(
        f"  (~{statistics.median(times):.0f} ms of each enforcement figure is OVN's own propagation; the "
        "report back comes after the flows, so a probe may see enforcement a little sooner)"
    )


if __name__ == "__main__":
    main()
