"""Soak on cluster mode (issue 20: "on cluster mode when that exists"): SOAK_MINUTES (default 30) of
pod churn across the nodes of a private cluster (SOAK_NODES, default 3; OVN central as RAFT clusters
unless SOAK_OVN_CENTRAL=standalone), with traffic between pods on different nodes over Geneve,
sampling every daemon of every node, of OVN central and of the control plane.

Churn (bench/soak_cluster.py), one step every SOAK_STEP seconds (default 1): a pod ADDed on the next
node through its installed plugin (the node's oldest DELeted beyond 3), every other step a ping
and a 256 KiB TCP transfer (sha256 checked) between two pods on different nodes, and in turn a
LoadBalancer Service over a pod of every node, a NetworkPolicy, or DNS queries from a pod through
its node's listener. Every SOAK_SAMPLE
seconds (default 60; a fifth of the run when shorter): RSS, fds, threads, CPU of every daemon, NB/SB
row counts, the daemons' health and the invariants against the live pods (so drift shows while it
happens). After the churn stops and every pod is deleted: the invariants against nothing, and per
daemon the RSS and fd slope per hour after warm-up (the first third) with a verdict (daemons of ours:
<= 5 MB/h RSS, no fd growth). A dead or wedged daemon ends the run and names its kept evidence.

    flock /tmp/k8shost-cluster.lock make bench BENCH=soak_cluster   # SOAK_MINUTES=3 for a short run
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

from bench.soak_cluster import ClusterChurn, cluster_invariants, controller_leftovers, raft_terms
from bench.soak_sampler import Sample, print_errors_and_rows, take_parts, verdict_table
from nodeenv.cluster.cluster import Cluster
from nodeenv.cluster.settings import ClusterSettings

MINUTES = float(os.environ.get("SOAK_MINUTES", "30"))
STEP = float(os.environ.get("SOAK_STEP", "1"))
SAMPLE = float(os.environ.get("SOAK_SAMPLE", str(min(60.0, MINUTES * 60 / 5))))
NODES = int(os.environ.get("SOAK_NODES", "3"))
CENTRAL = os.environ.get("SOAK_OVN_CENTRAL", "raft")


def sample(cluster: Cluster, env: dict[str, str], t: float) -> Sample:
    s = take_parts(cluster.parts(), env, t)
    s.rows.update(raft_terms(cluster))
    return s


def churn_for(cluster: Cluster, env: dict[str, str], churn: ClusterChurn, samples: list[Sample]) -> list[str]:
    """Churn until the time is up; at each sample also the faults and the invariants (stops on either)."""
    t0 = time.monotonic()
    next_sample, problems = t0, list[str]()
    while time.monotonic() - t0 < MINUTES * 60 and not problems:
        if time.monotonic() >= next_sample:
            samples.append(sample(cluster, env, time.monotonic() - t0))
            next_sample += SAMPLE
            problems = [*cluster.faults(), *cluster_invariants(cluster, churn.pods)]
        churn.step()
        time.sleep(max(0.0, STEP - (time.monotonic() - t0) % STEP))
    return problems


def report(
    churn: ClusterChurn, samples: list[Sample], during: list[str], after: list[str], took: float
) -> bool:
    print(
        f"soak_cluster: {took / 60:.1f} min of churn on {NODES} nodes (OVN central {CENTRAL}), "
        f"one step every {STEP:g} s; samples every {SAMPLE:g} s"
    )
    print("  churn counts: " + ", ".join(f"{k} {v}" for k, v in sorted(churn.counts.items())))
    if churn.late:
        worst = max(churn.late, key=lambda x: x[2])
        print(
            f"  first ping lost {len(churn.late)} times of {churn.counts['traffic']} "
            f"(the ADD does not wait for the other nodes): target age at the loss median "
            f"{sorted(x[1] for x in churn.late)[len(churn.late) // 2]:.2f} s, answered by "
            f"{worst[2]:.2f} s at worst ({worst[0]})"
        )
    print_errors_and_rows(churn.errors, samples)
    print(f"  faults or invariants broken during the churn: {during or 'none'}")
    print(f"  invariants after deleting every pod: {after or 'OK (nothing leaked or duplicated)'}")
    lines, ok = verdict_table(samples, warmup=took / 3)
    print("\n".join(lines))
    met = ok and not during and not after and not churn.errors
    print(
        f"  verdict: {'every target met' if met else 'TARGET MISSED'}"
        + (" (slopes from a run this short are noise-bound)" if took < 1200 else "")
    )
    return met


def main() -> None:
    # a prefix of its own: cluster-up cleans up namespaces of its prefix as stale, so two soaks (or
    # a soak and a short trial) sharing one would tear each other's nodes down (seen once)
    tmp = Path(tempfile.mkdtemp(prefix="ksc", dir="/tmp"))  # short: unix socket paths below it
    settings = ClusterSettings(run_dir=tmp / "c", nodes=NODES, prefix=f"ks{os.getpid() % 100000}",
                               cluster_cidr="10.95.0.0/16", underlay_cidr="10.251.0.0/24",
                               ovn_central=CENTRAL)  # fmt: skip
    cluster = Cluster(settings)
    env = cluster.up()
    try:
        samples: list[Sample] = []
        churn = ClusterChurn(cluster, env)
        t0 = time.monotonic()
        during = churn_for(cluster, env, churn, samples)
        took = time.monotonic() - t0
        churn.finish()
        time.sleep(3)  # OVN catches up with the deletes
        samples.append(sample(cluster, env, time.monotonic() - t0))
        last = max((n for n, _ in churn.services), default=0)
        time.sleep(2)  # the controllers catch up with the deletes
        after = [
            *cluster.faults(),
            *cluster_invariants(cluster, []),
            *controller_leftovers(cluster, env, last),
        ]
        report(churn, samples, during, after, took)
    finally:
        cluster.down()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
