"""The cluster bench (issue 18 item 8): 3 nodes over Geneve, OVN central as RAFT clusters.

    flock /tmp/k8shost-cluster.lock make bench BENCH=cluster

On one 3-node RAFT cluster of its own (prefix k8shb, beside nothing else of this machine), in
this order, with the single-node figures from the same run beside the cross-node ones:

1. Pod-ready latency: a pod is ready when its CNI ADD returns (the agent answers once
   ovn-controller has set ovn-installed on its port). `single node`: CLUSTER_PODS (100) pods on
   node1 alone at concurrency CLUSTER_CONC (8); `3 nodes, same load`: 3 x 100 pods, the same 8 in
   flight spread over the nodes; `3 nodes x 8`: 3 x 100 with 8 in flight on every node (24 here on
   2 cores, where a real cluster would have 3 machines). Pods in 4 namespaces, so agents on all
   nodes write the same switches. p50/p99 of ADD and DEL, pods/s.
2. CPU seconds per pod over every daemon of the cluster (each node's ovsdb-server, ovs-vswitchd,
   ovn-controller and agent, every RAFT member, both northds; the CNI executables), from /proc.
3. RAFT commit latency: CLUSTER_WRITES (200) one-row transactions one after another through
   ovnaccess to the NB and to the SB remote lists (each commit is on a majority of 3 members).
4. Failover (nodeenv/cluster/recovery.py): during a pod churn on every node, each fault of the
   fault tests (tests/integration/cluster/test_faults.py); the seconds from the fault until
   cross-node traffic between probe pods works again and until an ADD begun after it has succeeded
   on every node; for the NB (CLUSTER_NB_KILLS, 3 times: it varies with the member northd tries
   next) and SB leader kills also until a writer committing every 20 ms had a commit accepted
   again; then until the cluster is whole again (nodeenv/cluster/faults.py); for the node kill
   the seconds from its Node's deletion until the node-controller released it, and a new node's
   join.
5. Controller handover: the node whose replica leads fiberlb-controller (the cluster-wide
   controllers run as replicas on node1 and node2, nodeenv/cluster/replicas.py) killed; the seconds
   until the other replica holds each Lease that was held there, beside the Lease's duration, and
   until a new LoadBalancer Service has its external IP from the new leader.
6. The targets: cross-node ADD median within 1.2x of single-node; p99 < 200 ms at 3 x 100, beside
   OVN's own floor at the same load (bench/cluster_floor.py: the same ports bound with no CNI, one
   long-lived IDL per node and database, group commit, until ovn-installed, broken down by
   stage; and a script's ovn-nbctl + ovs-vsctl per port, which is no bound); after an NB leader
   kill writes accepted again within 5 s and no ADD failing more than one retry.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import cpu
from bench.cluster_floor import cluster_floor, cluster_idl_floor
from bench.scale.floor import StageClock, nb_to_installed, print_beside
from bench.stats import pct
from nodeenv.cluster import faults, recovery, replicas
from nodeenv.cluster.churn import Churn, ClusterPods, LivePod
from nodeenv.cluster.cluster import Cluster, ClusterNode
from nodeenv.cluster.invariants import settle
from nodeenv.cluster.settings import ClusterSettings
from nodeenv.kubelet.apiclient import KubeClient
from nodeenv.node import read_env_file
from nodeenv.ovn_central import Member
from ovnaccess.connection import Ovsdb, connect

PODS = int(os.environ.get("CLUSTER_PODS", "100"))
CONC = int(os.environ.get("CLUSTER_CONC", "8"))
WRITES = int(os.environ.get("CLUSTER_WRITES", "200"))
NB_KILLS = int(os.environ.get("CLUSTER_NB_KILLS", "3"))
"""How often the NB leader is killed (its recovery varies with which member northd tries next)."""
NAMESPACES = 4
PREFIX = os.environ.get("CLUSTER_PREFIX", "k8shb")
"""Its namespaces' prefix (another cluster running with the same prefix makes cluster-up refuse)."""
CHURN, PROBE = "bench-churn", "bench-probe"
SCOPE = (CHURN, PROBE, *(f"dens-{i}" for i in range(NAMESPACES)))


def cluster_labels(c: Cluster) -> dict[str, str]:
    """Command-line fragments of this cluster's daemons -> labels (bench/cpu.py, whole lines)."""
    central = c.central.run_dir / "ovs"
    out = {f"ovn-northd --ovnnb-db=unix:{central}/nb1.sock": "ovn-northd (2)"}
    for key, name in (("nb", "NB"), ("sb", "SB")):
        for i in (1, 2, 3):
            out[f"ovsdb-server {central}/{key}{i}.db"] = f"ovsdb-server {name} (3 RAFT members)"
    for n in c.nodes:
        run = n.node.run_dir / "ovs"
        out[f"ovsdb-server {run}/ovs.db"] = "ovsdb-server (OVS, per node)"
        out[f"ovs-vswitchd unix:{run}/ovs.sock"] = "ovs-vswitchd (per node)"
        out[f"ovn-controller unix:{run}/ovs.sock"] = "ovn-controller (per node)"
        out[f"cni.daemon.main --socket {n.node.run_dir}/prismnet"] = "prismnet-agent (per node)"
    return out


@dataclass
class Batch:
    name: str
    add_ms: list[float] = field(default_factory=list)
    del_ms: list[float] = field(default_factory=list)
    add_wall: float = 0.0
    del_wall: float = 0.0
    cpu_ms: dict[str, float] = field(default_factory=dict)
    failed: int = 0

    def line(self) -> str:
        n = len(self.add_ms)
        return (f"  {self.name:26s} {n:3d} pods  ADD p50 {statistics.median(self.add_ms):6.1f} ms "
                f"p99 {pct(self.add_ms, 99):6.1f} ms {n / self.add_wall:5.1f} pods/s | DEL p50 "
                f"{statistics.median(self.del_ms):6.1f} ms p99 {pct(self.del_ms, 99):6.1f} ms"
                f"{f'  ({self.failed} ADDs FAILED)' if self.failed else ''}")  # fmt: skip

    def cpu_line(self) -> str:
        daemons = {k: v for k, v in self.cpu_ms.items() if k != cpu.HARNESS}
        parts = sorted(daemons.items(), key=lambda kv: -kv[1])
        return (f"  {self.name:26s} CPU per pod {sum(daemons.values()) / 1000:.3f} s = "
                + " + ".join(f"{k} {v:.1f} ms" for k, v in parts if v >= 0.05))  # fmt: skip


def density(
    c: Cluster, pods: ClusterPods, name: str, nodes: Sequence[ClusterNode], n: int, conc: int
) -> Batch:
    """`n` pods round-robin over `nodes`, `conc` ADDs in flight in all; then all DELed the same way."""
    batch, labels = Batch(name), cluster_labels(c)
    jobs = [(nodes[i % len(nodes)], f"dens-{i % NAMESPACES}") for i in range(n)]
    before = cpu.sample(labels, words=None)
    t0 = time.perf_counter()
    with ThreadPoolExecutor(conc) as ex:
        made = list(ex.map(lambda job: pods.add(job[0], job[1]), jobs))
    batch.add_wall = time.perf_counter() - t0
    batch.cpu_ms = cpu.per_pod_ms(before, cpu.sample(labels, words=None), n)
    batch.add_ms = [o.ms for _, o in made if o.ok]
    batch.failed = sum(not o.ok for _, o in made)
    by_name = {x.name: x for x in c.nodes}
    live = [p for p, _ in made if p is not None]

    def delete(p: LivePod) -> float:
        t = time.perf_counter()
        if not pods.delete(p, by_name[p.node]):
            raise RuntimeError(f"DEL of {p.ref.name} on {p.node} failed")
        return (time.perf_counter() - t) * 1000

    t0 = time.perf_counter()
    with ThreadPoolExecutor(conc) as ex:
        batch.del_ms = list(ex.map(delete, live))
    batch.del_wall = time.perf_counter() - t0
    return batch


def commit_latency(remote: str, schema: str, table: str) -> list[float]:
    """WRITES one-row transactions on `table` one after another; each commit's milliseconds."""
    db = connect(remote, schema, {table: None}, timeout=10)
    try:
        if table == "Logical_Switch":
            db.api.ls_add("bench-raft", may_exist=True).execute(check_error=True)
        row = next(iter(db.api.tables[table].rows.values()))
        out = []
        for i in range(WRITES):
            t = time.perf_counter()
            db.api.db_set(table, row.uuid, ("external_ids", {"bench": str(i)})).execute(check_error=True)
            out.append((time.perf_counter() - t) * 1000)
        if table == "Logical_Switch":
            db.api.ls_del("bench-raft").execute(check_error=True)
        return out
    finally:
        db.stop()


class Writer:
    """A row written every 20 ms through ovnaccess (with its retry) while a leader is killed."""

    def __init__(self, remote: str, schema: str, table: str) -> None:
        self.db: Ovsdb = connect(remote, schema, {table: None}, timeout=10)
        self.table, self.commits, self.errors = table, list[float](), list[str]()
        if table == "Logical_Switch":
            self.db.api.ls_add("bench-writer", may_exist=True).execute(check_error=True)
        self.uuid = next(iter(self.db.api.tables[table].rows.values())).uuid
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            i += 1
            try:
                cmd = self.db.api.db_set(self.table, self.uuid, ("external_ids", {"writer": str(i)}))
                cmd.execute(check_error=True)
                self.commits.append(time.monotonic())
            except Exception as e:
                self.errors.append(repr(e))
            time.sleep(0.02)

    def accepted_after(self, t: float) -> float:
        return min((c for c in self.commits if c > t), default=float("nan")) - t

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)
        if self.table == "Logical_Switch":
            self.db.api.ls_del("bench-writer", if_exists=True).execute(check_error=True)
        self.db.stop()


@dataclass
class Failover:
    got: recovery.Recovery
    writes_s: float = float("nan")
    extra: str = ""


def failovers(c: Cluster, pods: ClusterPods, probes: dict[str, LivePod]) -> list[Failover]:
    env = read_env_file(c.env_file)
    out: list[Failover] = []

    def one(what: str, inject: Callable[[Churn], float], restore: Callable[[], None] = lambda: None,
            writer: Writer | None = None) -> Failover:  # fmt: skip
        live = [p for node, p in probes.items() if node in {n.name for n in c.nodes}]
        got = recovery.fault_round(pods, live, CHURN, what, inject, restore)
        f = Failover(got)
        if writer is not None:
            writer.stop()
            f.writes_s = writer.accepted_after(struck_at[-1])
        out.append(f)
        print("  " + got.summary() + (f"; writes accepted again {f.writes_s:.2f} s after" if writer else ""))
        return f

    struck_at: list[float] = []
    kills = [("nb", "OVN_Northbound", "Logical_Switch")] * NB_KILLS + [("sb", "OVN_Southbound", "SB_Global")]
    for key, schema, table in kills:
        killed: list[Member] = []

        def inject(_: Churn, key: str = key, killed: list[Member] = killed) -> float:
            m, at = faults.kill_leader(c, key)
            killed.append(m)
            struck_at.append(at)
            return at

        def restore(killed: list[Member] = killed) -> None:
            faults.restart_member(c, killed[0])

        one(
            f"{key.upper()} leader killed",
            inject,
            restore,
            Writer(env[f"OVN_{key.upper()}_DB"], schema, table),
        )
    northd: list[str] = []

    def kill_northd(_: Churn) -> float:
        northd.append(faults.active_northd(c))
        return faults.kill(c.central, northd[0])

    one("active northd killed", kill_northd, lambda: faults.restart_northd(c, northd[0]))

    def kill_controller(_: Churn) -> float:
        at = faults.kill(c.nodes[1].node, "ovn-controller")
        time.sleep(2)
        faults.restart_ovn_controller(c.nodes[1])
        return at

    one(f"ovn-controller of {c.nodes[1].name} killed 2 s", kill_controller)
    one(f"ovs-vswitchd of {c.nodes[2].name} restarted", lambda _: faults.restart_vswitchd(c, c.nodes[2]))
    victim = c.nodes[2]

    def kill_node(churn: Churn) -> float:
        churn.halt(victim.name)
        return faults.kill_node(victim)

    f = one(f"{victim.name} killed (traffic/ADDs of the others)", kill_node)
    pods.drop_node(victim.name)
    del probes[victim.name]
    released = recovery.release(c, victim, pods, SCOPE)
    t0 = time.monotonic()
    new = c.join()
    joined = time.monotonic() - t0
    first, outcome = pods.add(new, PROBE, "first-on-new")
    f.extra = (f"released {released:.2f} s after its Node was deleted; {new.name} joined in {joined:.2f} s, "
               f"its first pod ready in {outcome.ms:.0f} ms")  # fmt: skip
    print("  " + f.extra)
    if first is not None:
        probes[new.name] = first
    whole = faults.wait_whole(c)
    problems = settle(c, pods.pods(), SCOPE, timeout=30)
    print(f"  whole again {whole:.2f} s after the join")
    print(f"  invariants after all faults: {problems or 'hold'}")
    return out


def controller_handover(c: Cluster, pods: ClusterPods) -> list[replicas.Handover]:
    """The node of fiberlb-controller's leader killed: each handover, then how long the new leader
    takes to give a new LoadBalancer Service its external IP; the dead node released after."""
    client = KubeClient.from_kubeconfig(Path(read_env_file(c.env_file)["KUBECONFIG"]))
    victim, survivor, handed = replicas.kill_leaders_node(c, client)
    print("controller handover (replicas on two nodes; the leader's node killed):")
    for h in handed:
        print("  " + h.line())
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "bench-handover"},
           "spec": {"type": "LoadBalancer", "ports": [{"port": 80, "targetPort": 8080}]}}  # fmt: skip
    t0 = time.monotonic()
    client.create("/api/v1", "services", "default", svc)
    while not _ingress(client.get("/api/v1", "services", "default", "bench-handover")):
        if time.monotonic() - t0 > 30:
            raise RuntimeError(
                f"the new fiberlb-controller leader ({survivor.name}) gave no external IP in 30 s"
            )
        time.sleep(0.05)
    took = time.monotonic() - t0
    print(f"  a new LoadBalancer Service had its external IP from {survivor.name} {took:.2f} s after")
    client.delete("/api/v1", "services", "default", "bench-handover")
    pods.drop_node(victim.name)
    released = recovery.release(c, victim, pods, SCOPE)
    print(f"  {victim.name} released {released:.2f} s after its Node was deleted")
    return handed


def _ingress(svc: dict[str, Any] | None) -> list[Any]:
    return list((((svc or {}).get("status") or {}).get("loadBalancer") or {}).get("ingress") or [])


@contextmanager
def bench_cluster() -> Iterator[tuple[Cluster, ClusterPods]]:
    run = Path(tempfile.mkdtemp(prefix="kb", dir="/tmp"))  # short: unix socket paths below it
    c = Cluster(ClusterSettings(run_dir=run / "c", nodes=3, prefix=PREFIX, cluster_cidr="10.95.0.0/16",
                                ovn_central="raft"))  # fmt: skip
    t0 = time.monotonic()
    c.up()
    print(f"  3-node RAFT cluster up in {time.monotonic() - t0:.1f} s ({run})")
    pods = ClusterPods(c, tag="b", attempts=1)
    try:
        yield c, pods
    finally:
        pods.delete_all()
        c.down()
        subprocess.run(["rm", "-rf", str(run)])


def verdict(ok: bool) -> str:
    return "met" if ok else "NOT met"


def main() -> None:
    print(f"cluster bench: {PODS} pods per node, concurrency {CONC}, {WRITES} RAFT writes")
    with bench_cluster() as (c, pods):
        single = density(c, pods, "single node (node1)", c.nodes[:1], PODS, CONC)
        env = read_env_file(c.env_file)
        clock = StageClock(env["OVN_NB_DB"], env["OVN_SB_DB"], [x.env["OVS_DB"] for x in c.nodes])
        seen = clock.ours()
        same = density(c, pods, f"3 nodes, {CONC} in flight", c.nodes, 3 * PODS, CONC)
        ours_stages = nb_to_installed(clock, clock.ours() - seen)
        clock.close()
        each = density(c, pods, f"3 nodes x {CONC} in flight", c.nodes, 3 * PODS, 3 * CONC)
        switches = [f"k8s-dens-{i}" for i in range(NAMESPACES)]
        floor = cluster_floor(c, 3 * PODS, CONC, switches, cluster_labels(c))
        idl = cluster_idl_floor(c, 3 * PODS, CONC, switches)
        print("pod-ready latency (CNI ADD returns once the port is ovn-installed):")
        for b in (single, same, each):
            print(b.line())
        print(
            f"  {'floor, 3 nodes, ' + str(CONC) + ' in flight':26s} {len(floor.ms):3d} ports "
            f"p50 {statistics.median(floor.ms):6.1f} ms p99 {pct(floor.ms, 99):6.1f} ms {floor.per_s:5.1f} "
            "ports/s (no CNI: ovn-nbctl + ovs-vsctl per port until ovn-installed: a script, no bound)"
        )
        print(
            f"  {'IDL floor, 3 nodes, ' + str(CONC) + ' in flight':26s} {len(idl.total):3d} ports "
            f"p50 {pct(idl.total, 50):6.1f} ms p99 {pct(idl.total, 99):6.1f} ms {idl.per_s:5.1f} "
            "ports/s (no CNI: one IDL per node and db, group commit, until ovn-installed: the bound)"
        )
        print(f"  NB row -> ovn-installed by stage at 3 x {PODS}, {CONC} in flight (bench/scale/floor.py):")
        print_beside([("ours (NB row on)", ours_stages), ("IDL floor (write on)", idl)])  # fmt: skip
        print("CPU per pod over every daemon (and the CNI executables):")
        for b in (single, same, each):
            print(b.cpu_line())
        floor_cpu = {k: v for k, v in floor.cpu_ms.items() if k != cpu.HARNESS}
        print(f"  {'floor':26s} CPU per port {sum(floor_cpu.values()) / 1000:.3f} s = "
              + " + ".join(f"{k} {v:.1f} ms" for k, v in sorted(floor_cpu.items(), key=lambda kv: -kv[1])
                           if v >= 0.05))  # fmt: skip
        print("RAFT commit latency (one-row transactions through ovnaccess, one after another):")
        nb = commit_latency(env["OVN_NB_DB"], "OVN_Northbound", "Logical_Switch")
        sb = commit_latency(env["OVN_SB_DB"], "OVN_Southbound", "SB_Global")
        for name, ms in (("NB", nb), ("SB", sb)):
            p50, p99 = statistics.median(ms), pct(ms, 99)
            print(f"  {name}: p50 {p50:5.2f} ms  p99 {p99:5.2f} ms  ({len(ms)} commits)")
        print("failover during a pod churn on every node (seconds after the fault):")
        probes = {}
        for n in c.nodes:
            p, o = pods.add(n, PROBE, f"probe-{n.name}")
            if p is None:
                raise RuntimeError(f"probe on {n.name}: {o.error}")
            probes[n.name] = p
        pods.attempts = 3  # as kubelet: a failed ADD is DELed and tried again
        fo = failovers(c, pods, probes)
        handed = controller_handover(c, pods)
    ratio = statistics.median(same.add_ms) / statistics.median(single.add_ms)
    ratio_each = statistics.median(each.add_ms) / statistics.median(single.add_ms)
    print("targets:")
    print(f"  cross-node ADD median within 1.2x of single-node: {ratio:.2f}x at the same load "
          f"({verdict(ratio <= 1.2)}); {ratio_each:.2f}x with {CONC} in flight per node")  # fmt: skip
    p99 = max(pct(same.add_ms, 99), pct(each.add_ms, 99))
    print(f"  p99 < 200 ms at 3 x {PODS}: {pct(same.add_ms, 99):.0f} ms at the same load, "
          f"{pct(each.add_ms, 99):.0f} ms per-node load ({verdict(p99 < 200)})")  # fmt: skip
    floor_p99 = pct(idl.total, 99)
    print(f"    OVN's own floor at the same load (IDL, group commit): p99 {floor_p99:.0f} ms "
          f"({verdict(floor_p99 < 200)} by OVN itself, held by its {idl.p99_stage()} stage); ours "
          f"{pct(same.add_ms, 99) / floor_p99:.2f}x the floor's p99, median "
          f"{statistics.median(same.add_ms) / pct(idl.total, 50):.2f}x; a script's (ovn-nbctl) p99 "
          f"{pct(floor.ms, 99):.0f} ms")  # fmt: skip
    nb_kills = fo[:NB_KILLS]
    writes = max(f.writes_s for f in nb_kills)
    attempts = max(f.got.most_attempts for f in nb_kills)
    failed = sum(len(f.got.failed) for f in nb_kills)
    adds = ", ".join(f"{f.got.add_s:.1f}" for f in nb_kills)
    print(f"  NB leader killed ({NB_KILLS}x): writes accepted again after {writes:.2f} s at most "
          f"({verdict(writes <= 5)}); most attempts of one ADD {attempts}, failed ADDs {failed} "
          f"({verdict(attempts <= 2 and not failed)}); ADDs on every node again after {adds} s")  # fmt: skip
    worst = max(handed, key=lambda h: h.seconds)
    within = worst.seconds <= worst.lease_duration + 2 * 2  # the controllers' retry period: 2 s
    print(f"  controllers taken over within the lease duration + 2 retry periods: {worst.seconds:.1f} s at "
          f"most, lease {worst.lease_duration:g} s ({verdict(within)})")  # fmt: skip


if __name__ == "__main__":
    main()
