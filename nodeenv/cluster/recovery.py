"""One fault during a churn of pods, and how long the cluster took to recover (tests and the bench).

`fault_round` keeps pods coming and going on every node (nodeenv/cluster/churn.py), injects the
fault, waits until every probe pod reaches every other node's probe again and until a new ADD has
succeeded on every node after the restore, stops the churn and returns the figures: the seconds
from the fault until cross-node traffic worked and until an ADD begun after the fault had
succeeded on every node, and every ADD's attempts. Judging them (and the invariant check) is the
caller's: the tests assert, the bench prints.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from nodeenv.cluster import faults
from nodeenv.cluster.churn import AddOutcome, Churn, ClusterPods, LivePod, wait_cross_node
from nodeenv.cluster.cluster import Cluster, ClusterNode
from nodeenv.cluster.invariants import settle
from nodeenv.daemons import wait_for
from nodeenv.kubelet.apiclient import KubeClient
from nodeenv.node import read_env_file


@dataclass
class Recovery:
    what: str
    traffic_s: float
    """from the fault until every cross-node pair of probes answered"""
    add_s: float
    """from the fault until an ADD begun after it had succeeded on every node"""
    outcomes: list[AddOutcome] = field(default_factory=list)
    """the ADDs begun from 10 s before the fault to the end of the round (on nodes not killed)"""
    errors: list[str] = field(default_factory=list)
    """DELs that failed and anything else the churn met"""
    whole_s: float = float("nan")
    """from the end of the round until the cluster was whole again (faults.not_whole)"""

    @property
    def failed(self) -> list[AddOutcome]:
        return [o for o in self.outcomes if not o.ok]

    @property
    def most_attempts(self) -> int:
        return max((o.attempts for o in self.outcomes), default=0)

    @property
    def retried(self) -> int:
        return sum(o.attempts > 1 for o in self.outcomes)

    def summary(self) -> str:
        whole = "" if math.isnan(self.whole_s) else f"; whole again {self.whole_s:.2f} s after the round"
        return (f"{self.what}: cross-node traffic {self.traffic_s:.2f} s, first ADD on every node "
                f"{self.add_s:.2f} s after; {len(self.outcomes)} ADDs, {self.retried} retried "
                f"(most attempts {self.most_attempts}), {len(self.failed)} failed{whole}")  # fmt: skip


def added_on_every_node(pods: ClusterPods, nodes: Sequence[ClusterNode], since: float) -> bool:
    done = {o.node for o in pods.outcomes if o.ok and o.started >= since}
    return done >= {n.name for n in nodes}


def add_recovery(pods: ClusterPods, nodes: Sequence[ClusterNode], since: float) -> float:
    """Seconds from `since` until an ADD begun after it had succeeded on every one of `nodes`."""
    firsts = []
    for n in nodes:
        ends = [o.ended for o in pods.outcomes if o.ok and o.node == n.name and o.started >= since]
        firsts.append(min(ends, default=float("nan")))
    return max(firsts) - since


def fault_round(
    pods: ClusterPods,
    probes: Sequence[LivePod],
    namespace: str,
    what: str,
    inject: Callable[[Churn], float],
    restore: Callable[[], None] = lambda: None,
    *,
    live: int = 3,
    warmup: float = 1.0,
    timeout: float = 60.0,
    on_failure: Callable[[Churn], None] = lambda churn: None,
) -> Recovery:
    """Churn on every node of the cluster; `inject(churn)` the fault (returns time.monotonic() of
    it; it may `churn.halt` a node it kills); wait for traffic among the `probes` that are still
    there and for ADDs on the nodes still churning; `restore`; wait for ADDs after it; stop."""
    churn = Churn(pods, list(pods.cluster.nodes), namespace, live=live).start()
    try:
        time.sleep(warmup)
        struck = inject(churn)
        alive = [p for p in probes if p.node not in churn.halted]
        traffic_s = wait_cross_node(alive, struck, timeout=timeout)
        restore()
        after = time.monotonic()
        nodes = [n for n in churn.nodes if n.name not in churn.halted]
        wait_for(lambda: added_on_every_node(pods, nodes, after), f"ADDs after {what}", timeout=timeout)
    except BaseException:
        on_failure(churn)
        raise
    finally:
        churn.stop()
    with pods.lock:
        outcomes = [o for o in pods.outcomes if o.started >= struck - 10 and o.node not in churn.halted]
    got = Recovery(what, traffic_s, add_recovery(pods, nodes, struck), outcomes, list(churn.errors))
    if not churn.halted:  # a killed node is whole again only once it is released (`release`)
        got.whole_s = faults.wait_whole(pods.cluster, timeout=timeout)
    return got


def release(
    cluster: Cluster, victim: ClusterNode, pods: ClusterPods, namespaces: Collection[str], timeout: float = 30
) -> float:
    """A dead node taken off the machine (`Cluster.remove`) and its Node deleted from the API; the
    seconds from the deletion until the invariants hold without it (its state released by the
    node-controller, which must be running)."""
    cluster.remove(victim)
    client = KubeClient.from_kubeconfig(Path(read_env_file(cluster.env_file)["KUBECONFIG"]))
    t0 = time.monotonic()
    client.request("DELETE", f"/api/v1/nodes/{victim.name}")
    problems = settle(cluster, pods.pods(), namespaces, timeout=timeout)
    if problems:
        raise AssertionError(f"{victim.name} not released:\n" + "\n".join(problems))
    return time.monotonic() - t0
