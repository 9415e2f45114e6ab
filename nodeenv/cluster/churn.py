"""Pods on a cluster's nodes, ADDed and DELed through each node's installed plugin and conflist as
its runtime does, one at a time or as a churn on every node at once (fault tests and the bench).

`ClusterPods` makes each pod's network namespace (named `<cluster prefix>-q<pid>-<n>`, so
cluster-down removes any left over), ADDs it through the node's CNI runtime (run in the node's
namespace), and DELs it; a failed ADD is DELed and tried again, as kubelet does with a new
sandbox, and every attempt is recorded (`AddOutcome`). `Churn` keeps `live` pods per node coming
and going on every node at once until stopped. `cross_node_ok` pings from each probe pod to
each probe pod on another node.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from nodeenv.cluster.cluster import Cluster, ClusterNode
from nodeenv.cluster.invariants import PodRef
from nodeenv.cni_component import CniRuntime, installed_runtime


@dataclass
class LivePod:
    ref: PodRef
    netns: str
    args: str
    result: dict[str, Any]

    @property
    def node(self) -> str:
        return self.ref.node

    @property
    def ip(self) -> str:
        return self.ref.ip


@dataclass(frozen=True, slots=True)
class AddOutcome:
    node: str
    started: float
    ended: float
    """time.monotonic() of the first attempt's start and of the last attempt's end"""
    attempts: int
    ok: bool
    error: str = ""

    @property
    def ms(self) -> float:
        return (self.ended - self.started) * 1000


class ClusterPods:
    """Pods on the cluster's nodes; thread-safe; `delete_all` removes what is left."""

    def __init__(self, cluster: Cluster, tag: str = "q", attempts: int = 3, retry_pause: float = 0.3) -> None:
        self.cluster, self.tag = cluster, tag
        self.attempts, self.retry_pause = attempts, retry_pause
        self.live: dict[str, LivePod] = {}
        """container id -> pod"""
        self.outcomes: list[AddOutcome] = []
        self.lock = threading.Lock()
        self._ids = itertools.count(1)
        self._runtimes: dict[str, CniRuntime] = {}

    def runtime(self, node: ClusterNode) -> CniRuntime:
        with self.lock:
            if node.name not in self._runtimes:
                self._runtimes[node.name] = installed_runtime(node.env)
            return self._runtimes[node.name]

    def forget_runtime(self, node: str) -> None:
        with self.lock:
            self._runtimes.pop(node, None)

    def pods(self, nodes: Iterable[str] | None = None) -> list[PodRef]:
        wanted = set(nodes) if nodes is not None else None
        with self.lock:
            return [p.ref for p in self.live.values() if wanted is None or p.node in wanted]

    def add(self, node: ClusterNode, namespace: str, name: str = "") -> tuple[LivePod | None, AddOutcome]:
        """ADD one pod (retried after a DEL, up to `attempts`); the pod (None if every attempt
        failed: nothing of it is left) and how it went."""
        seq = next(self._ids)
        netns = f"{self.cluster.settings.prefix}-{self.tag}{os.getpid()}-{seq}"
        subprocess.run(["ip", "netns", "add", netns], check=True)
        name = name or f"{self.tag}{seq}"
        cid = f"{node.name}{self.tag}{os.getpid()}x{seq:06d}".ljust(32, "0")[:64]
        args = f"IgnoreUnknown=1;K8S_POD_NAMESPACE={namespace};K8S_POD_NAME={name}"
        rt, started, error = self.runtime(node), time.monotonic(), ""
        for attempt in range(1, self.attempts + 1):
            call = rt.add(cid, f"/run/netns/{netns}", args=args)
            if call.rc == 0:
                ips = call.out["ips"]
                assert isinstance(ips, list)
                ref = PodRef(node.name, namespace, name, cid, str(ips[0]["address"]).split("/")[0])
                pod = LivePod(ref, netns, args, call.out)
                outcome = AddOutcome(node.name, started, time.monotonic(), attempt, True)
                with self.lock:
                    self.live[cid] = pod
                    self.outcomes.append(outcome)
                return pod, outcome
            error = f"{call.out.get('msg', '')} {call.out.get('details', '')} {call.stderr.strip()}".strip()
            rt.delete(cid, f"/run/netns/{netns}", None, args=args)  # as kubelet before a new sandbox
            if attempt < self.attempts:
                time.sleep(self.retry_pause)
        subprocess.run(["ip", "netns", "del", netns], capture_output=True)
        outcome = AddOutcome(node.name, started, time.monotonic(), self.attempts, False, error)
        with self.lock:
            self.outcomes.append(outcome)
        return None, outcome

    def delete(self, pod: LivePod, node: ClusterNode | None = None) -> bool:
        """DEL through the pod's node (True when it succeeded) and remove its namespace."""
        ok = True
        if node is not None:
            call = self.runtime(node).delete(pod.ref.container_id, f"/run/netns/{pod.netns}", pod.result,
                                             args=pod.args)  # fmt: skip
            ok = call.rc == 0
        if ok:
            with self.lock:
                self.live.pop(pod.ref.container_id, None)
            subprocess.run(["ip", "netns", "del", pod.netns], capture_output=True)
        return ok

    def drop_node(self, node: str) -> list[PodRef]:
        """Forget the pods of a node that is gone (their namespaces removed): no DEL can reach it."""
        with self.lock:
            gone = [p for p in self.live.values() if p.node == node]
            for p in gone:
                del self.live[p.ref.container_id]
            self._runtimes.pop(node, None)
        for p in gone:
            subprocess.run(["ip", "netns", "del", p.netns], capture_output=True)
        return [p.ref for p in gone]

    def delete_all(self) -> list[str]:
        """DEL every live pod on its node; the errors."""
        nodes = {n.name: n for n in self.cluster.nodes}
        errors = []
        for pod in list(self.live.values()):
            if not self.delete(pod, nodes.get(pod.node)):
                errors.append(f"DEL of {pod.ref.name} on {pod.node} failed")
                self.delete(pod)  # forget it anyway: the node's teardown removes the rest
        return errors


@dataclass
class Churn:
    """`live` pods per node in `namespace`, each node's oldest DELed and a new one ADDed in turn,
    on every node at once until `stop()`."""

    pods: ClusterPods
    nodes: Sequence[ClusterNode]
    namespace: str
    live: int = 4
    errors: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    halted: set[str] = field(default_factory=set)
    _threads: list[threading.Thread] = field(default_factory=list)

    def start(self) -> Churn:
        for n in self.nodes:
            t = threading.Thread(target=self._run, args=(n,), name=f"churn-{n.name}", daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def halt(self, node: str) -> None:
        """Stop churning on one node (it is about to die): returns once its ADD or DEL in flight is done."""
        self.halted.add(node)
        for t in self._threads:
            if t.name == f"churn-{node}":
                t.join(120)

    def _run(self, node: ClusterNode) -> None:
        mine: list[LivePod] = []
        while not self._stop.is_set() and node.name not in self.halted:
            try:
                if len(mine) >= self.live:
                    old = mine.pop(0)
                    if not self.pods.delete(old, node):
                        self.errors.append(f"DEL of {old.ref.name} on {node.name} failed")
                        self.pods.delete(old)
                pod, _ = self.pods.add(node, self.namespace)
                if pod is not None:
                    mine.append(pod)
                else:
                    time.sleep(0.2)
            except Exception as e:  # recorded; the test fails on it
                self.errors.append(f"churn on {node.name}: {e!r}")
                time.sleep(0.2)

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(120)

    def outcomes_since(self, t: float) -> list[AddOutcome]:
        with self.pods.lock:
            return [o for o in self.pods.outcomes if o.started >= t]


def ping(netns: str, ip: str, wait: float = 1.0) -> bool:
    argv = ["ip", "netns", "exec", netns, "ping", "-c1", "-W", f"{wait:g}", ip]
    return subprocess.run(argv, capture_output=True).returncode == 0


def cross_node_ok(probes: Sequence[LivePod], tries: int = 1) -> list[str]:
    """Ping from every probe to every probe on another node (a pair passes when one of `tries`
    pings is answered: on a loaded machine a single one may time out); the pairs that failed."""
    bad = []
    for a, b in itertools.permutations(probes, 2):
        if a.node != b.node and not any(ping(a.netns, b.ip) for _ in range(tries)):
            bad.append(f"{a.node}->{b.node}")
    return bad


def wait_cross_node(probes: Sequence[LivePod], since: float, timeout: float = 30.0) -> float:
    """Seconds from `since` until every cross-node pair of probes answers (raises on timeout)."""
    deadline = time.monotonic() + timeout
    bad: list[str] = []
    while time.monotonic() < deadline:
        bad = cross_node_ok(probes)
        if not bad:
            return time.monotonic() - since
        time.sleep(0.1)
    raise TimeoutError(f"cross-node traffic still failing after {timeout:.0f} s: {bad}")


def wait_add(pods: ClusterPods, nodes: Sequence[ClusterNode], namespace: str, since: float) -> float:
    """Seconds from `since` until a new pod was ADDed on every node in `nodes` (one each, kept)."""
    done = since
    for n in nodes:
        pod, outcome = pods.add(n, namespace)
        if pod is None:
            raise AssertionError(f"a new ADD on {n.name} failed {outcome.attempts} times: {outcome.error}")
        done = max(done, outcome.ended)
    return done - since
