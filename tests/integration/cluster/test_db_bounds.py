"""Bounded databases under churn (issue 29 item 5), the short version of `make bench BENCH=dbsoak`:
a private 2-node cluster on 3-member NB/SB RAFT clusters, three rounds of churn of ROUND_S (pods
ADDed and DELeted through each node's plugin, LoadBalancer Services and NetworkPolicies made and
removed: bench/soak_cluster.py's ClusterChurn), each ended by a compaction of every member (the
`ovsdb-server/compact` ovsdb-server runs by itself past 10 MB, which a short run never reaches).
Every compaction shrinks every file; the compacted size of the last round is within 15 % of the one
before, and the live data sampled all along (each database compacted offline) has settled: its last
third within 25 % of its median (the live data does not grow with churn: nothing leaks into the NB
or SB); every ovsdb-server's RSS (memory-trim-on-compaction on) has settled: its last third of
samples within 25 % of their median."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.db_bounds import LIVE, RSS, DbSample, series, table, take
from bench.soak_cluster import ClusterChurn
from nodeenv.cluster.cluster import Cluster
from nodeenv.cluster.settings import ClusterSettings
from tests.conftest import require_ovn

ROUND_S = float(os.environ.get("K8SHOST_DB_BOUNDS_ROUND_S", "15"))
"""A round's churn (~1 pod ADD/DEL a second): 15 s makes every file grow past its compacted size and
the rounds' compacted sizes comparable (a 15 s run: compacted nb 31464/31471/31472 bytes, sb
181330/181350/181356, 43 pods); the long soak (hours, the slopes) is `make bench BENCH=dbsoak`."""


@pytest.fixture(scope="module")
def raft_cluster(short_tmp: Path) -> Iterator[Cluster]:
    require_ovn()
    settings = ClusterSettings(run_dir=short_tmp / "dbb", nodes=2, prefix="k8stdb", ovn_central="raft",
                               cluster_cidr="10.89.0.0/16", underlay_cidr="10.249.0.0/24")  # fmt: skip
    yield from private_cluster(settings)


def private_cluster(settings: ClusterSettings) -> Iterator[Cluster]:
    """A cluster of the test's own (its own prefix and addresses), up while the generator runs."""
    c = Cluster(settings)
    c.up()
    try:
        yield c
    finally:
        c.down()


def churn_round(cluster: Cluster, churn: ClusterChurn, samples: list[DbSample], t0: float) -> None:
    end, next_sample = time.monotonic() + ROUND_S, time.monotonic()
    while time.monotonic() < end:
        if time.monotonic() >= next_sample:
            samples.append(take(cluster, time.monotonic() - t0))
            next_sample += 5
        churn.step()
        time.sleep(0.5)


def test_compacted_databases_and_ovsdb_memory_stay_flat_under_churn(raft_cluster: Cluster) -> None:
    cluster, central = raft_cluster, raft_cluster.central_component
    churn = ClusterChurn(cluster, cluster.load())
    samples: list[DbSample] = []
    compacted: list[dict[str, tuple[int, int]]] = []
    t0 = time.monotonic()
    try:
        for _ in range(3):
            churn_round(cluster, churn, samples, t0)
            compacted.append(central.compact(cluster.central))
            samples.append(take(cluster, time.monotonic() - t0))
    finally:
        churn.finish()
    print("\n" + "\n".join(table(samples, warmup=ROUND_S)))
    for f in compacted[0]:
        print(f"{f} compacted (bytes before>after): " + " | ".join(f"{r[f][0]}>{r[f][1]}" for r in compacted))
    print("churn: " + ", ".join(f"{k} {v}" for k, v in sorted(churn.counts.items())))
    assert churn.counts["pod"] >= ROUND_S, churn.counts  # the churn did churn
    for f in compacted[0]:
        assert all(r[f][1] < r[f][0] for r in compacted), f"{f}: a compaction did not shrink it"
        last, before = compacted[2][f][1], compacted[1][f][1]
        assert abs(last - before) <= 0.15 * before, f"{f}: compacted {before} then {last} bytes"
    live = [s for s in series(samples) if s.kind == LIVE]
    assert len(live) == 2 and all(s.settled(0.25) for s in live), [(s.name, s.values[-6:]) for s in live]
    rss = [s for s in series(samples) if s.kind == RSS and s.name.startswith("central/ovsdb-server")]
    assert len(rss) == 6, [s.name for s in rss]
    unsettled = [s.name for s in rss if not s.settled(0.25)]
    assert not unsettled, f"ovsdb-server RSS still moving: {unsettled}"
