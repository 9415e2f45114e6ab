"""The cluster soak's churn and invariants: pods ADDed and DELeted on every node through that node's
installed plugin and conflist (nodeenv/cluster/churn.py's ClusterPods, as the fault tests do), and
traffic between pods on different nodes over Geneve (ICMP, and a TCP transfer checked end to end).

Invariants: nodeenv/cluster/invariants.py against the live pods (the fault tests' check), and no pod
namespace of the soak left."""

from __future__ import annotations

import functools
import json
import logging
import random
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nodeenv.cluster import invariants
from nodeenv.cluster.churn import ClusterPods, LivePod
from nodeenv.cluster.cluster import Cluster, ClusterNode
from nodeenv.cluster.underlay import list_netns
from nodeenv.ovn_central import DATABASES, central_dir, cluster_status

log = logging.getLogger(__name__)
PEER = str(Path(__file__).resolve().parent.parent / "tests" / "integration" / "cluster" / "peer.py")
PODS_PER_NODE = 3
TRANSFER = 256 * 1024


@dataclass
class ClusterChurn:
    cluster: Cluster
    env: dict[str, str]
    counts: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    step_no: int = 0
    services: list[tuple[int, float]] = field(default_factory=list)
    """(step, when) of the live soak Services, oldest first"""
    late: list[tuple[str, float, float]] = field(default_factory=list)
    """(from->to node, the target's age at the first lost ping, its age when one answered)"""
    added: dict[str, float] = field(default_factory=dict)
    """container id -> when its ADD returned"""
    pods_per_step: int = 1
    """pod ADDs a step (each on the next node, with its DEL of that node's oldest)"""
    service_ports: int = 1
    """ports (so VIPs of its OVN load balancer, and their logical flows) of each soak Service"""
    policy_ports: int = 1
    """ports of each NetworkPolicy's ingress rule (ACLs, and their logical flows)"""

    def __post_init__(self) -> None:
        self.net = ClusterPods(self.cluster, tag="s", attempts=1)  # a failed ADD is the soak's error
        self.nodes = {n.name: n for n in self.cluster.nodes}

    @property
    def pods(self) -> list[LivePod]:
        """The live pods, oldest first."""
        return list(self.net.live.values())

    def step(self) -> None:
        """A pod ADD (with a DEL of the node's oldest beyond PODS_PER_NODE) on the next node; every
        other step traffic between two pods on different nodes; in turn every step a LoadBalancer
        Service over pods on several nodes, a NetworkPolicy, or DNS queries from a pod."""
        self.step_no += 1
        turn = [self.service, self.policy, self.dns][self.step_no % 3]
        actions: list[tuple[str, Callable[[], None]]] = [
            ("pod", functools.partial(self.pod, i)) for i in range(self.pods_per_step)
        ]
        actions += [(a.__name__, a) for a in (turn, *([self.traffic] if self.step_no % 2 == 0 else []))]
        for name, action in actions:
            try:
                action()
                self.counts[name] += 1
            except Exception as e:  # counted and printed: the soak goes on
                self.errors[f"{name}: {str(e)[:160]}"] += 1

    def pod(self, nth: int = 0) -> None:
        nodes = self.cluster.nodes
        node = nodes[(self.step_no * self.pods_per_step + nth) % len(nodes)]
        mine = [p for p in self.pods if p.node == node.name]
        if len(mine) >= PODS_PER_NODE:
            self.delete(mine[0])
            self.counts["delete"] += 1
        pod, outcome = self.net.add(node, f"soak-{self.step_no % 3}")
        if pod is None:
            raise RuntimeError(f"ADD on {node.name}: {outcome.error[-200:]}")
        self.added[pod.ref.container_id] = time.monotonic()

    def delete(self, pod: LivePod) -> None:
        self.added.pop(pod.ref.container_id, None)
        if not self.net.delete(pod, self.nodes[pod.node]):
            self.net.delete(pod)  # forgotten with its namespace: the invariants show what is left
            raise RuntimeError(f"DEL of {pod.ref.name} on {pod.node} failed")

    def traffic(self) -> None:
        """A ping and a TCP transfer (sha256 checked) between two pods on different nodes."""
        pairs = [(a, b) for a in self.pods for b in self.pods if a.node != b.node]
        if not pairs:
            return
        a, b = random.choice(pairs)
        self._ping(a, b)
        port = str(20000 + self.step_no % 20000)
        sink = subprocess.Popen(_peer(b.netns, "tcp-sink", port), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)  # fmt: skip
        try:
            assert sink.stdout is not None
            if not json.loads(sink.stdout.readline() or "{}").get("ready"):
                raise RuntimeError(f"tcp-sink in {b.netns} did not start")
            sent = subprocess.run(_peer(a.netns, "tcp-send", b.ip, port, str(TRANSFER)),
                                  capture_output=True, text=True, timeout=30)  # fmt: skip
            out = json.loads(sent.stdout or "{}")
            if sent.returncode or not out.get("intact"):
                raise RuntimeError(f"TCP {a.node}->{b.node}: {sent.stdout.strip()} {sent.stderr[-200:]}")
        finally:
            sink.kill()
            sink.wait()

    def _ping(self, a: LivePod, b: LivePod) -> None:
        """Pings until one answers (10 s at most): a pod just ADDed on one node is reachable from
        another once that node's ovn-controller has its binding, which the ADD does not wait for.
        A first ping lost is recorded with the target's age."""
        deadline, lost_at = time.monotonic() + 10, -1.0
        while True:
            ping = subprocess.run(["ip", "netns", "exec", a.netns, "ping", "-c1", "-W1", b.ip],
                                  capture_output=True, text=True)  # fmt: skip
            if ping.returncode == 0:
                if lost_at >= 0:
                    self.late.append(
                        (f"{a.node}->{b.node}", lost_at, time.monotonic() - self.added[b.ref.container_id])
                    )
                return
            lost_at = time.monotonic() - self.added[b.ref.container_id] if lost_at < 0 else lost_at
            if time.monotonic() > deadline:
                why = unreachable_evidence(self.nodes, self.env, a, b)
                raise RuntimeError(f"ping {a.node}->{b.node} ({b.ip}) failed for 10 s: {why}")

    def _kubectl(self, *args: str, stdin: dict[str, Any] | None = None) -> str:
        argv = ["kubectl", f"--kubeconfig={self.env['KUBECONFIG']}", "--request-timeout=10s", *args]
        proc = subprocess.run(argv, input=json.dumps(stdin) if stdin else None, capture_output=True,
                              text=True, timeout=30)  # fmt: skip
        if proc.returncode:
            raise RuntimeError(f"kubectl {' '.join(args)}: {proc.stderr.strip()[-200:]}")
        return proc.stdout

    def service(self) -> None:
        """A LoadBalancer Service whose EndpointSlice holds one live pod of each node; the one made
        six steps before deleted (the controllers write and remove its OVN load balancer)."""
        n, by_node = self.step_no, {p.node: p.ip for p in self.pods}
        ports = [(_port_name(i), 80 + i, 8080 + i) for i in range(self.service_ports)]
        slice_ports = [{"name": name, "port": target, "protocol": "TCP"} for name, _, target in ports]
        svc = {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": f"s{n}", "namespace": "default"},
            "spec": {"type": "LoadBalancer", "ports": [
                {"name": name, "port": port, "targetPort": target} for name, port, target in ports
            ]},
        }  # fmt: skip
        eps = {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "addressType": "IPv4",
               "metadata": {"name": f"s{n}-a", "namespace": "default",
                            "labels": {"kubernetes.io/service-name": f"s{n}"}},
               "endpoints": [{"addresses": [ip], "conditions": {"ready": True}} for ip in by_node.values()],
               "ports": slice_ports}  # fmt: skip
        self._kubectl("apply", "-f", "-", stdin={"apiVersion": "v1", "kind": "List", "items": [svc, eps]})
        self.services.append((n, time.monotonic()))
        while len(self.services) > 2:
            old, _ = self.services.pop(0)
            self._kubectl("delete", "service", f"s{old}", "--ignore-not-found", "--wait=false")
            self._kubectl("delete", "endpointslice", f"s{old}-a", "--ignore-not-found", "--wait=false")

    def policy(self) -> None:
        """A NetworkPolicy in one of the pods' namespaces, replacing that namespace's previous one."""
        n = self.step_no
        ns, ports = f"soak-{n % 3}", [{"port": 80 + i} for i in range(self.policy_ports)]
        if ns not in self._kubectl("get", "namespaces", "-o", "name").split():
            self._kubectl(
                "apply", "-f", "-", stdin={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
            )
        pol = {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
               "metadata": {"name": f"np{n}", "namespace": ns},
               "spec": {"podSelector": {},
                        "ingress": [{"from": [{"podSelector": {}}], "ports": ports}]}}  # fmt: skip
        self._kubectl("apply", "-f", "-", stdin=pol)
        for name in self._kubectl("get", "networkpolicy", "-n", ns, "-o", "name").split():
            if name != f"networkpolicy.networking.k8s.io/np{n}":
                self._kubectl("delete", "-n", ns, name, "--wait=false")

    def dns(self) -> None:
        """From a live pod, through its node's listener at the cluster DNS address: the oldest live
        soak Service (made at least 2 s before) and the API's name answer with an address."""
        if not self.pods:
            return
        pod = random.choice(self.pods)
        names = ["kubernetes.default"] + [
            f"s{n}.default" for n, t in self.services[:1] if time.monotonic() - t > 2
        ]
        for name in names:
            fqdn = f"{name}.svc.cluster.local"
            argv = [
                "ip",
                "netns",
                "exec",
                pod.netns,
                "dig",
                "+short",
                "+tries=2",
                "+time=2",
                "@10.96.0.10",
                fqdn,
            ]
            out = subprocess.run(argv, capture_output=True, text=True, timeout=20).stdout.split()
            if not out or out[0].count(".") != 3:
                raise RuntimeError(f"DNS {fqdn} from a pod on {pod.node}: {out or 'no answer'}")
            self.counts["dns answered"] += 1

    def finish(self) -> None:
        for kind in ("service", "endpointslice"):
            for name in self._kubectl("get", kind, "-n", "default", "-o", "name").split():
                if name.split("/")[1].startswith("s") and name.split("/")[1][1:2].isdigit():
                    self._kubectl("delete", "-n", "default", name, "--wait=false")
        for ns in self._kubectl("get", "namespaces", "-o", "name").split():
            if ns.split("/")[1].startswith("soak-"):
                self._kubectl("delete", ns, "--wait=false")
        for error in self.net.delete_all():
            self.errors[f"finish: {error}"] += 1
        self.added.clear()


def raft_terms(cluster: Cluster) -> dict[str, int]:
    """The highest RAFT term any member of each central database reports (each election adds one;
    nothing for standalone databases)."""
    central, out = cluster.central_component, dict[str, int]()
    if central.mode != "raft":
        return out
    for db in DATABASES:
        terms = [
            cluster_status(m.ctl, db.name).get("Term", "")
            for m in central.member_list(central_dir(cluster.central), db)
        ]
        out[f"{db.key.upper()} RAFT term"] = max((int(t) for t in terms if t.isdigit()), default=0)
    return out


def unreachable_evidence(nodes: dict[str, ClusterNode], env: dict[str, str], a: LivePod, b: LivePod) -> str:
    """What each side knows of a pod another node cannot reach: its SB binding (chassis, up) and
    both nodes' ovn-controller connection to the SB."""
    sb = subprocess.run(
        ["ovn-sbctl", f"--db={env['OVN_SB_DB']}", "--timeout=10", "--bare", "--columns=chassis,up",
         "find", "Port_Binding", f"logical_port={b.ref.lsp}"],
        capture_output=True, text=True,
    ).stdout.split()  # fmt: skip
    status = []
    for node in (nodes[a.node], nodes[b.node]):
        ctls = sorted(central_dir(node.node).glob("ovn-controller.*.ctl"))  # OVN_RUNDIR: <name>.<pid>.ctl
        argv = ["ovn-appctl", "-t", str(ctls[-1]) if ctls else "ovn-controller", "connection-status"]
        ctl = subprocess.run(argv, capture_output=True, text=True).stdout.strip()
        status.append(f"{node.name} ovn-controller {ctl or '?'}")
    return f"SB binding {sb or 'none'}; {'; '.join(status)}"


def _port_name(i: int) -> str:
    return "http" if i == 0 else f"http{i}"


def _peer(netns: str, *args: str) -> list[str]:
    return ["ip", "netns", "exec", netns, sys.executable, PEER, *args]


def cluster_invariants(cluster: Cluster, live: list[LivePod]) -> list[str]:
    """nodeenv.cluster.invariants against the live pods (every pod's port in NB, OVS, SB and as a
    host veth on its node, installed; no port, veth or address without its pod; unique addresses;
    each node's egress set), and no soak pod namespace without its pod."""
    refs = [p.ref for p in live]
    try:
        problems = invariants.check(cluster, refs)
    except invariants.Unreadable as e:  # a database that did not answer (seen once under load): again
        log.warning("invariant check: %s; again in 2 s", e)
        time.sleep(2)
        problems = invariants.check(cluster, refs)
    held = {p.netns for p in live}
    left = [n for n in list_netns(f"{cluster.settings.prefix}-s") if n not in held]
    return problems + ([f"pod namespaces left: {left[:3]}"] if left else [])


def controller_leftovers(cluster: Cluster, env: dict[str, str], last_service: int) -> list[str]:
    """After the churn: no soak load balancer or policy port group in the NB, and the last soak
    Service's name NXDOMAIN at every node's DNS listener."""
    nb = ["ovn-nbctl", f"--db={env['OVN_NB_DB']}", "--timeout=20", "--bare", "--columns=name", "list"]
    lbs = [n for n in subprocess.run([*nb, "Load_Balancer"], capture_output=True, text=True).stdout.split()
           if n.startswith("fiberlb:default/s")]  # fmt: skip
    pgs = [n for n in subprocess.run([*nb, "Port_Group"], capture_output=True, text=True).stdout.split()
           if n.startswith("pn_np")]  # fmt: skip
    out = ([f"LB rows left: {lbs[:3]}"] if lbs else []) + (
        [f"policy port groups left: {pgs[:3]}"] if pgs else []
    )
    for node in cluster.nodes if last_service else []:
        fqdn = f"s{last_service}.default.svc.cluster.local"
        argv = ["ip", "netns", "exec", node.netns, "dig", "+tries=2", "+time=2", "@10.96.0.10", fqdn]
        answer = subprocess.run(argv, capture_output=True, text=True, timeout=20).stdout
        if "status: NXDOMAIN" not in answer:
            out.append(f"{node.name}'s DNS still answers {fqdn} after its Service was deleted")
    return out
