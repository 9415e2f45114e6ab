"""Bounded databases (issue 29 item 5): DBSOAK_MINUTES (default 30) of churn on a private cluster
of DBSOAK_NODES nodes (default 3) with OVN central as 3-member RAFT clusters -- pods ADDed and
DELeted through each node's plugin, LoadBalancer Services and NetworkPolicies made and removed,
traffic and DNS between nodes (bench/soak_cluster.py's ClusterChurn, one step every DBSOAK_STEP s,
default 1) -- sampling every DBSOAK_SAMPLE s (default 10) the NB and SB file of each member and the
RSS of every ovsdb-server, ovn-northd and ovn-controller. Prints per file and process min/max/last,
the slope per hour after warm-up (the first third) and each compaction seen (a file that shrank: its
sizes and its ovsdb-server's RSS before and after, what ovsdb-server logged about it; as they happen
too); ovsdb-server compacts by itself (docs/database-bounds.md), nothing forces it here.

Heavier churn, to reach ovsdb-server's automatic-compaction rule (a file over 10 MB and twice its
size after the last compaction, 10-20 min after the last) within the run: DBSOAK_PODS pod ADDs a
step (default 1), DBSOAK_PORTS ports a Service (default 1), DBSOAK_RULE_PORTS ports a NetworkPolicy
rule (default 1). The cluster's prefix is K8SHOST_CLUSTER_PREFIX (default kd<pid>).

    make bench BENCH=dbsoak                      # DBSOAK_MINUTES=5 for a short run
    DBSOAK_PODS=2 DBSOAK_PORTS=16 DBSOAK_RULE_PORTS=8 make bench BENCH=dbsoak   # compactions in 30 min
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

from bench import db_compactions
from bench.db_bounds import FILE, DbSample, series, table, take
from bench.soak_cluster import ClusterChurn
from nodeenv.cluster.cluster import Cluster
from nodeenv.cluster.settings import ClusterSettings
from nodeenv.ovn_central import DATABASES, central_dir

MINUTES = float(os.environ.get("DBSOAK_MINUTES", "30"))
STEP = float(os.environ.get("DBSOAK_STEP", "1"))
SAMPLE = float(os.environ.get("DBSOAK_SAMPLE", "10"))
NODES = int(os.environ.get("DBSOAK_NODES", "3"))
PODS = int(os.environ.get("DBSOAK_PODS", "1"))
PORTS = int(os.environ.get("DBSOAK_PORTS", "1"))
RULE_PORTS = int(os.environ.get("DBSOAK_RULE_PORTS", "1"))
PROGRESS = 60.0
"""seconds between progress lines (file sizes, churn counts)"""


def soak(cluster: Cluster, churn: ClusterChurn) -> list[DbSample]:
    t0, samples, next_sample, next_progress = time.monotonic(), list[DbSample](), 0.0, PROGRESS
    while (now := time.monotonic() - t0) < MINUTES * 60:
        if now >= next_sample:
            samples.append(take(cluster, now))
            next_sample += SAMPLE
            for c in db_compactions.found(samples[-2:]):
                print("\n".join(db_compactions.report([c])[1:]), flush=True)
            if now >= next_progress:
                print(progress(samples[-1], churn), flush=True)
                next_progress += PROGRESS
        churn.step()
        time.sleep(max(0.0, STEP - (time.monotonic() - t0) % STEP))
    samples.append(take(cluster, time.monotonic() - t0))
    return samples


def progress(sample: DbSample, churn: ClusterChurn) -> str:
    sizes = sorted((name.removesuffix(".db"), v) for (kind, name), v in sample.values.items() if kind == FILE)
    files = " ".join(f"{name} {v / 2**20:.1f}" for name, v in sizes)
    counts = f"steps {churn.step_no}, pods {churn.counts['pod']}, errors {churn.errors.total()}"
    return f"  {sample.t / 60:5.1f} min: files (MiB) {files}; {counts}"


def rates(churn: ClusterChurn, took: float) -> str:
    """Objects made or deleted per second: pods (ADD + DEL), Services and their EndpointSlices
    (apply + delete), NetworkPolicies (apply + delete)."""
    c = churn.counts
    pods, services, policies = c["pod"] + c["delete"], 2 * c["service"], 2 * c["policy"]
    return (f"  churn rate: {pods / took:.2f} pod ADD/DEL/s, {services / took:.2f} Service create/delete/s "
            f"({PORTS} port(s) each, with an EndpointSlice), {policies / took:.2f} NetworkPolicy "
            f"create/delete/s ({RULE_PORTS} port(s) each); {churn.step_no / took:.2f} steps/s")  # fmt: skip


def verdict(samples: list[DbSample]) -> list[str]:
    """Files that broke the bound ovsdb-server keeps (db_compactions.overdue: over 10 MiB and twice
    their size after the last compaction, and no compaction in the rule's longest wait)."""
    return [
        o for s in series(samples) if s.kind == FILE for o in db_compactions.overdue(s.name, s.points, SAMPLE)
    ]


def debug_logs(cluster: Cluster) -> dict[str, Path]:
    """Every member's compaction lines into its log (db_compactions.debug_compaction_log); member
    label -> its log file."""
    central, out = cluster.central_component, dict[str, Path]()
    for db in DATABASES:
        for m in central.member_list(central_dir(cluster.central), db):
            if error := db_compactions.debug_compaction_log(m.ctl):
                print(f"  {m.label}: debug log not set: {error}")
            out[m.label] = m.dir / f"ovsdb-{m.label}.log"
    return out


def main() -> None:
    tmp = Path(tempfile.mkdtemp(prefix="kdb", dir="/tmp"))  # short: unix socket paths below it
    prefix = os.environ.get("K8SHOST_CLUSTER_PREFIX", f"kd{os.getpid() % 100000}")
    settings = ClusterSettings(run_dir=tmp / "c", nodes=NODES, prefix=prefix,
                               cluster_cidr="10.91.0.0/16", underlay_cidr="10.253.0.0/24",
                               ovn_central="raft")  # fmt: skip
    cluster = Cluster(settings)
    env = cluster.up()
    try:
        members = debug_logs(cluster)
        churn = ClusterChurn(cluster, env, pods_per_step=PODS, service_ports=PORTS, policy_ports=RULE_PORTS)
        start = (f"dbsoak: churn on {NODES} nodes, {PODS} pod(s) a step, Services of {PORTS} port(s), "
                 f"policies of {RULE_PORTS} port(s); load average {os.getloadavg()[0]:.1f}")  # fmt: skip
        print(start, flush=True)
        samples = soak(cluster, churn)
        load = os.getloadavg()
        took = samples[-1].t
        churn.finish()
        print(f"dbsoak: {took / 60:.1f} min of churn on {NODES} nodes (RAFT central), a step every "
              f"{STEP:g} s, samples every {SAMPLE:g} s ({len(samples)}); load average at the end "
              f"{load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")  # fmt: skip
        print("  churn counts: " + ", ".join(f"{k} {v}" for k, v in sorted(churn.counts.items())))
        print(rates(churn, took))
        for err, n in churn.errors.most_common(3):
            print(f"  churn error x{n}: {err}")
        print("\n".join(table(samples, warmup=took / 3)))
        seen = db_compactions.found(samples)
        db_compactions.attach_logs(seen, samples, members)
        print("\n".join(db_compactions.report(seen)))
        over = verdict(samples)
        print(f"  verdict: {'files bounded' if not over else 'OVER BOUND: ' + '; '.join(over)}")
    finally:
        cluster.down()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
