"""Bounded databases (issue 29 item 5): DBSOAK_MINUTES (default 30) of churn on a private cluster
of DBSOAK_NODES nodes (default 3) with OVN central as 3-member RAFT clusters -- pods ADDed and
DELeted through each node's plugin, LoadBalancer Services and NetworkPolicies made and removed,
traffic and DNS between nodes (bench/soak_cluster.py's ClusterChurn, one step every DBSOAK_STEP s,
default 1) -- sampling every DBSOAK_SAMPLE s (default 10) the NB and SB file of each member and the
RSS of every ovsdb-server, ovn-northd and ovn-controller. Prints per file and process min/max/last,
the slope per hour after warm-up (the first third) and the compactions seen (a file that shrank);
ovsdb-server compacts by itself (docs/database-bounds.md), nothing forces it here.

    make bench BENCH=dbsoak                      # DBSOAK_MINUTES=5 for a short run
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

from bench.db_bounds import FILE, DbSample, series, table, take
from bench.soak_cluster import ClusterChurn
from nodeenv.cluster.cluster import Cluster
from nodeenv.cluster.settings import ClusterSettings

MINUTES = float(os.environ.get("DBSOAK_MINUTES", "30"))
STEP = float(os.environ.get("DBSOAK_STEP", "1"))
SAMPLE = float(os.environ.get("DBSOAK_SAMPLE", "10"))
NODES = int(os.environ.get("DBSOAK_NODES", "3"))
TEN_MB = 10 * 1024 * 1024


def soak(cluster: Cluster, churn: ClusterChurn) -> list[DbSample]:
    t0, samples, next_sample = time.monotonic(), list[DbSample](), 0.0
    while (now := time.monotonic() - t0) < MINUTES * 60:
        if now >= next_sample:
            samples.append(take(cluster, now))
            next_sample += SAMPLE
        churn.step()
        time.sleep(max(0.0, STEP - (time.monotonic() - t0) % STEP))
    samples.append(take(cluster, time.monotonic() - t0))
    return samples


def verdict(samples: list[DbSample], warmup: float) -> list[str]:
    """Files that broke the bound ovsdb-server keeps: after warm-up, above both 10 MB and twice
    their smallest size (what auto-compaction allows before it compacts)."""
    out = []
    for s in series(samples):
        after = [v for t, v in s.points if t >= warmup]
        if s.kind == FILE and after and max(after) > max(TEN_MB, 2 * min(s.values)) * 1.1:
            out.append(f"{s.name} reached {max(after) / 1024:.0f} KiB")
    return out


def main() -> None:
    tmp = Path(tempfile.mkdtemp(prefix="kdb", dir="/tmp"))  # short: unix socket paths below it
    settings = ClusterSettings(run_dir=tmp / "c", nodes=NODES, prefix=f"kd{os.getpid() % 100000}",
                               cluster_cidr="10.91.0.0/16", underlay_cidr="10.253.0.0/24",
                               ovn_central="raft")  # fmt: skip
    cluster = Cluster(settings)
    env = cluster.up()
    try:
        churn = ClusterChurn(cluster, env)
        samples = soak(cluster, churn)
        took = samples[-1].t
        churn.finish()
        print(f"dbsoak: {took / 60:.1f} min of churn on {NODES} nodes (RAFT central), a step every "
              f"{STEP:g} s, samples every {SAMPLE:g} s ({len(samples)})")  # fmt: skip
        print("  churn counts: " + ", ".join(f"{k} {v}" for k, v in sorted(churn.counts.items())))
        for err, n in churn.errors.most_common(3):
            print(f"  churn error x{n}: {err}")
        print("\n".join(table(samples, warmup=took / 3)))
        over = verdict(samples, took / 3)
        print(f"  verdict: {'files bounded' if not over else 'OVER BOUND: ' + '; '.join(over)}")
    finally:
        cluster.down()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
