"""CNI ADD latency with OVN over mutual TLS (this checkout) and over plaintext TCP (a checkout from
before, main by default), in one run, on the same machine, alternating:

    flock /tmp/k8shost-test-cluster.lock make bench BENCH=ovn_tls   (OVNTLS_BEFORE=/work/main)

Each round brings up a 2-node cluster (standalone central: the nodes' agents and ovn-controllers
reach NB/SB over the underlay, `ssl:` here, `tcp:` there) with the code of one checkout, ADDs
OVNTLS_PODS pods on node1 at OVNTLS_CONC in flight through its installed plugin and conflist
(bench_cluster.density: the same measure both checkouts have), and tears it down. This file is
run by each checkout's own interpreter with that checkout first on sys.path, so it uses only what
both have (Cluster, ClusterSettings, ClusterPods, bench_cluster.density). The TLS handshake is
once per connection: what an ADD pays is the per-message encryption of its NB transactions and
of ovn-controller's SB updates.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

PODS = int(os.environ.get("OVNTLS_PODS", "60"))
CONC = int(os.environ.get("OVNTLS_CONC", "4"))
ROUNDS = int(os.environ.get("OVNTLS_ROUNDS", "2"))
BEFORE = Path(os.environ.get("OVNTLS_BEFORE", "/work/main"))
AFTER = Path(__file__).resolve().parent.parent


def one_round() -> dict[str, object]:
    """In the child: a 2-node cluster of this interpreter's checkout, PODS ADDs on node1."""
    from bench.bench_cluster import density
    from nodeenv.cluster.churn import ClusterPods
    from nodeenv.cluster.cluster import Cluster
    from nodeenv.cluster.settings import ClusterSettings
    from nodeenv.node import read_env_file

    run = Path(tempfile.mkdtemp(prefix="kt", dir="/tmp"))
    c = Cluster(ClusterSettings(run_dir=run / "c", nodes=2, prefix="k8sot", cluster_cidr="10.94.0.0/16"))
    c.up()
    pods = ClusterPods(c, tag="t", attempts=1)
    try:
        density(c, pods, "warm-up", c.nodes[:1], 10, CONC)
        batch = density(c, pods, "node1", c.nodes[:1], PODS, CONC)
        remote = read_env_file(c.nodes[0].env_file)["OVN_NB_DB"]
    finally:
        pods.delete_all()
        c.down()
        subprocess.run(["rm", "-rf", str(run)])
    return {"remote": remote, "add_ms": batch.add_ms, "failed": batch.failed, "wall": batch.add_wall}


def run_in(checkout: Path) -> dict[str, object]:
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    argv = [str(checkout / ".venv/bin/python"), str(Path(__file__).resolve()), "--one"]
    out = subprocess.run(argv, cwd=checkout, env=env, capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(f"round in {checkout} failed: {out.stderr[-2000:]}")
    result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    from bench.stats import pct

    print(f"ovn tls bench: {PODS} ADDs on node1 of a 2-node cluster, {CONC} in flight, {ROUNDS} rounds each")
    runs: dict[str, list[float]] = {"before": [], "after": []}
    remotes: dict[str, str] = {}
    for i in range(ROUNDS):
        for label, checkout in (("before", BEFORE), ("after", AFTER)):
            got = run_in(checkout)
            ms = [float(x) for x in got["add_ms"]]  # type: ignore[attr-defined]
            runs[label] += ms
            remotes[label] = str(got["remote"]).split(",")[0]
            print(f"  round {i + 1} {label:6s} ({remotes[label]}): ADD p50 {statistics.median(ms):6.1f} ms "
                  f"p99 {pct(ms, 99):6.1f} ms, {got['failed']} failed")  # fmt: skip
    print("CNI ADD latency, all rounds:")
    for label in ("before", "after"):
        ms = runs[label]
        print(f"  {label:6s} {remotes[label]:22s} p50 {statistics.median(ms):6.1f} ms  "
              f"p99 {pct(ms, 99):6.1f} ms  ({len(ms)} ADDs)")  # fmt: skip


if __name__ == "__main__":
    if sys.argv[1:] == ["--one"]:
        print(json.dumps(one_round()))
    else:
        main()
