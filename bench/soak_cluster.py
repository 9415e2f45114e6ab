"""The cluster soak's churn and invariants: pods ADDed and DELeted on every node through that node's
installed plugin and conflist (run in the node's namespace, as its runtime does), and traffic between
pods on different nodes over Geneve (ICMP, and a TCP transfer checked end to end).

Invariants: nodeenv/cluster/invariants.py against the live pods (the fault tests' check), and no pod
namespace of the soak left."""

from __future__ import annotations

import itertools
import json
import os
import random
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from nodeenv.cluster import invariants
from nodeenv.cluster.cluster import Cluster, ClusterNode
from nodeenv.cluster.invariants import PodRef
from nodeenv.cluster.underlay import list_netns
from nodeenv.cni_component import installed_runtime
from nodeenv.ovn_central import DATABASES, central_dir, cluster_status

PEER = str(Path(__file__).resolve().parent.parent / "tests" / "integration" / "cluster" / "peer.py")
PODS_PER_NODE = 3
TRANSFER = 256 * 1024


@dataclass
class SoakPod:
    node: ClusterNode
    netns: str
    cid: str
    args: str
    result: dict[str, object]
    added: float = field(default_factory=time.monotonic)

    @property
    def name(self) -> str:
        return self.args.rsplit("K8S_POD_NAME=", 1)[1]

    @property
    def namespace(self) -> str:
        return self.args.split("K8S_POD_NAMESPACE=", 1)[1].split(";")[0]

    @property
    def lsp(self) -> str:
        return PodRef(self.node.name, self.namespace, self.name, self.cid, "").lsp

    @property
    def ip(self) -> str:
        ips = self.result["ips"]
        assert isinstance(ips, list)
        return str(ips[0]["address"]).split("/")[0]


@dataclass
class ClusterChurn:
    cluster: Cluster
    env: dict[str, str]
    pods: list[SoakPod] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    step_no: int = 0
    late: list[tuple[str, float, float]] = field(default_factory=list)
    """(from->to node, the target's age at the first lost ping, its age when one answered)"""
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def step(self) -> None:
        """One action: a pod ADD (with a DEL of the node's oldest beyond PODS_PER_NODE) on the next
        node, then, every other step, traffic between two pods on different nodes."""
        self.step_no += 1
        actions = [self.pod, self.traffic] if self.step_no % 2 == 0 else [self.pod]
        for action in actions:
            try:
                action()
                self.counts[action.__name__] += 1
            except Exception as e:  # counted and printed: the soak goes on
                self.errors[f"{action.__name__}: {str(e)[:160]}"] += 1

    def pod(self) -> None:
        node = self.cluster.nodes[self.step_no % len(self.cluster.nodes)]
        mine = [p for p in self.pods if p.node is node]
        if len(mine) >= PODS_PER_NODE:
            self.delete(mine[0])
            self.counts["delete"] += 1
        n = next(self._ids)
        netns = f"{self.cluster.settings.prefix}-s{os.getpid()}-{n}"
        subprocess.run(["ip", "netns", "add", netns], check=True)
        cid = f"soak{node.name}x{n:06d}".ljust(32, "0")
        args = f"IgnoreUnknown=1;K8S_POD_NAMESPACE=soak-{n % 3};K8S_POD_NAME=p{n}"
        call = installed_runtime(node.env, chained=False).add(cid, f"/run/netns/{netns}", args=args)
        if call.rc != 0:
            self._drop(node, netns, cid, args, None)
            raise RuntimeError(f"ADD on {node.name}: {call.out} {call.stderr.strip()[-200:]}")
        self.pods.append(SoakPod(node, netns, cid, args, call.out))

    def delete(self, pod: SoakPod) -> None:
        self.pods.remove(pod)
        self._drop(pod.node, pod.netns, pod.cid, pod.args, pod.result)

    def _drop(
        self, node: ClusterNode, netns: str, cid: str, args: str, result: dict[str, object] | None
    ) -> None:
        call = installed_runtime(node.env, chained=False).delete(
            cid, f"/run/netns/{netns}", result, args=args
        )
        subprocess.run(["ip", "netns", "del", netns], capture_output=True)
        if call.rc != 0:
            raise RuntimeError(f"DEL on {node.name}: {call.out} {call.stderr.strip()[-200:]}")

    def traffic(self) -> None:
        """A ping and a TCP transfer (sha256 checked) between two pods on different nodes."""
        pairs = [(a, b) for a in self.pods for b in self.pods if a.node is not b.node]
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
                raise RuntimeError(
                    f"TCP {a.node.name}->{b.node.name}: {sent.stdout.strip()} {sent.stderr[-200:]}"
                )
        finally:
            sink.kill()
            sink.wait()

    def _ping(self, a: SoakPod, b: SoakPod) -> None:
        """Pings until one answers (10 s at most): a pod just ADDed on one node is reachable from
        another once that node's ovn-controller has its binding, which the ADD does not wait for.
        A first ping lost is recorded with the target's age."""
        deadline, lost_at = time.monotonic() + 10, -1.0
        while True:
            ping = subprocess.run(["ip", "netns", "exec", a.netns, "ping", "-c1", "-W1", b.ip],
                                  capture_output=True, text=True)  # fmt: skip
            if ping.returncode == 0:
                if lost_at >= 0:
                    self.late.append((f"{a.node.name}->{b.node.name}", lost_at, time.monotonic() - b.added))
                return
            lost_at = time.monotonic() - b.added if lost_at < 0 else lost_at
            if time.monotonic() > deadline:
                why = unreachable_evidence(self.cluster, self.env, a, b)
                raise RuntimeError(f"ping {a.node.name}->{b.node.name} ({b.ip}) failed for 10 s: {why}")

    def finish(self) -> None:
        for pod in list(self.pods):
            try:
                self.delete(pod)
            except RuntimeError as e:
                self.errors[f"finish: {str(e)[:160]}"] += 1


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


def unreachable_evidence(cluster: Cluster, env: dict[str, str], a: SoakPod, b: SoakPod) -> str:
    """What each side knows of a pod another node cannot reach: its SB binding (chassis, up) and
    both nodes' ovn-controller connection to the SB."""
    sb = subprocess.run(
        ["ovn-sbctl", f"--db={env['OVN_SB_DB']}", "--timeout=10", "--bare", "--columns=chassis,up",
         "find", "Port_Binding", f"logical_port={b.lsp}"],
        capture_output=True, text=True,
    ).stdout.split()  # fmt: skip
    status = []
    for node in (a.node, b.node):
        ctls = sorted(central_dir(node.node).glob("ovn-controller.*.ctl"))  # OVN_RUNDIR: <name>.<pid>.ctl
        argv = ["ovn-appctl", "-t", str(ctls[-1]) if ctls else "ovn-controller", "connection-status"]
        ctl = subprocess.run(argv, capture_output=True, text=True).stdout.strip()
        status.append(f"{node.name} ovn-controller {ctl or '?'}")
    return f"SB binding {sb or 'none'}; {'; '.join(status)}"


def _peer(netns: str, *args: str) -> list[str]:
    return ["ip", "netns", "exec", netns, sys.executable, PEER, *args]


def cluster_invariants(cluster: Cluster, live: list[SoakPod]) -> list[str]:
    """nodeenv.cluster.invariants against the live pods (every pod's port in NB, OVS, SB and as a
    host veth on its node, installed; no port, veth or address without its pod; unique addresses;
    each node's egress set), and no soak pod namespace without its pod."""
    refs = [PodRef(p.node.name, p.namespace, p.name, p.cid, p.ip) for p in live]
    problems = invariants.check(cluster, refs)
    held = {p.netns for p in live}
    left = [n for n in list_netns(f"{cluster.settings.prefix}-s") if n not in held]
    return problems + ([f"pod namespaces left: {left[:3]}"] if left else [])
