"""Cost as the cluster grows (issue 33 item 1): curves of sizes on one 3-node RAFT cluster of its own.

    make bench BENCH=scale                       # SCALE_MAX=1000 for a ~7 minute run

Each curve steps its sizes in order on the same cluster (bench/scale/frame.py) and prints a table
per size (latencies by traffic, RSS and CPU per object of our controllers, northd's CPU per change,
NB/SB cells, the API double's own cost) and every metric's growth exponent (log-log slope between
sizes), naming the steepest, and ours against their target. Curves: Services with 3 endpoints each
(bench/scale/services.py: 100, 1,000, 10,000) and NetworkPolicies over 100 namespaces
(bench/scale/policies.py: 10, 100, 1,000) and pods per node (bench/scale/pods.py: 100, 300, 1,000 on
a private node of its own, with OVN's IDL floor beside); another curve is a `Curve` added to CURVES.

Environment: SCALE_MAX (default 10000: every size; here the Services curve alone took 740 s, the
policies alone 206 s, at SCALE_ROUNDS=10, so ~20-25 minutes for both at the default 20) bounds
the largest size of every curve; SCALE_ROUNDS (default 20) timed changes per size; SCALE_CURVES
(comma-separated names, default all); SCALE_PREFIX (default k8shz) the cluster's namespace prefix.
It takes /tmp/k8shost-test-cluster.lock itself (the cluster tests take it too), and for the pods
curve /tmp/k8shost-ovn.lock before it.
"""

from __future__ import annotations

import fcntl
import os
import time
from contextlib import ExitStack

from bench.scale import pods, policies, services
from bench.scale.context import scale_cluster
from bench.scale.frame import Curve, run

CURVES: tuple[Curve, ...] = (services.CURVE, policies.CURVE, pods.CURVE)
LOCK = "/tmp/k8shost-test-cluster.lock"
OVN_LOCK = "/tmp/k8shost-ovn.lock"
"""Also taken when the pods curve runs (its node is in the machine's own namespace), first: the order
the test sessions take both in (tests/conftest.py), so that no two wait on each other."""


def locks(names: list[str]) -> list[str]:
    return sorted({LOCK, *([OVN_LOCK] if "pods" in names else [])})


def main() -> None:
    limit = int(os.environ.get("SCALE_MAX", "10000"))
    rounds = int(os.environ.get("SCALE_ROUNDS", "20"))
    wanted = [n for n in os.environ.get("SCALE_CURVES", "").split(",") if n]
    unknown = set(wanted) - {c.name for c in CURVES}
    if unknown:
        raise SystemExit(f"SCALE_CURVES: unknown {sorted(unknown)}; have {[c.name for c in CURVES]}")
    curves = [c for c in CURVES if not wanted or c.name in wanted]
    names = [c.name for c in curves]
    print(f"scale bench: curves {names}, SCALE_MAX {limit}, {rounds} timed changes per size "
          f"(2 shared cores, load average {os.getloadavg()[0]:.1f})")  # fmt: skip
    with ExitStack() as held:
        for path in locks(names):
            fcntl.flock(held.enter_context(open(path, "a")), fcntl.LOCK_EX)
        t0 = time.monotonic()
        with scale_cluster(os.environ.get("SCALE_PREFIX", "k8shz"), rounds) as ctx:
            run(ctx, curves, limit)
        print(f"scale bench done in {time.monotonic() - t0:.0f} s (load average {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
