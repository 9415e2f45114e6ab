"""Soak: mixed churn through the real callers for SOAK_MINUTES (default 30), sampling every daemon
(issue 20 item 3).

A private node environment with every component `make node-up` starts (own run dir, bridge
br-k8ssoak). Churn (bench/soak_churn.py), one action every SOAK_STEP seconds (default 1) in rotation:
pods ADDed/DELeted by the installed `prismnet` executable, LoadBalancer Services with EndpointSlices
created and deleted with kubectl on the API double, NetworkPolicies replaced, project namespaces
created and deleted, a whole CSI volume lifecycle with a snapshot over the gRPC socket, 20 cluster DNS
queries, 10 TokenReviews over mTLS. Every SOAK_SAMPLE seconds (default 60; a fifth of the run when
shorter): RSS, fds, threads, CPU of every daemon; work-queue depths; NB/SB row counts
(bench/soak_sampler.py). After the churn stops and everything is deleted: seconds until every queue
is empty (target 5 s), the invariants (CNI: NB ports = OVS ports = kernel links = no pod, no
duplicate IP, egress set; no fiberlb LB row, no netpol ACL/port group, no CSI loop device, mount or
directory left; the DNS zone back to its names before the churn, the last Service's name NXDOMAIN),
and per daemon the RSS and fd slope per hour after warm-up (the first third) with a verdict (daemons
of ours: <= 5 MB/h RSS, no fd growth). A dead or wedged daemon ends the run and
names its kept evidence.

    flock /tmp/k8shost-ovn.lock make bench BENCH=soak      # SOAK_MINUTES=3 for a short run
"""

from __future__ import annotations

import os
import re
import subprocess
import time
import urllib.request

from bench.bench_cni import ours_invariants
from bench.private_node import private_node
from bench.soak_churn import Churn, csi_leftovers
from bench.soak_sampler import Sample, print_errors_and_rows, queue_depths, take, verdict_table
from nodeenv.components import default_components
from nodeenv.node import Node

MINUTES = float(os.environ.get("SOAK_MINUTES", "30"))
STEP = float(os.environ.get("SOAK_STEP", "1"))
SAMPLE = float(os.environ.get("SOAK_SAMPLE", str(min(60.0, MINUTES * 60 / 5))))


def churn_for(node: Node, churn: Churn, samples: list[Sample]) -> str:
    t0 = time.monotonic()
    next_sample, problem = t0, ""
    while time.monotonic() - t0 < MINUTES * 60 and not problem:
        if time.monotonic() >= next_sample:
            samples.append(take(node, time.monotonic() - t0))
            next_sample += SAMPLE
            found = node.check()
            problem = "; ".join(map(str, found))
        churn.step()
        time.sleep(max(0.0, STEP - (time.monotonic() - t0) % STEP))
    return problem


def drained(node: Node, timeout: float = 60) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        depths = queue_depths(node.endpoints)
        if depths and not any(depths.values()):
            return time.monotonic() - t0
        time.sleep(0.1)
    return float("inf")


def zone_names(env: dict[str, str]) -> int:
    """Names in the cluster DNS zone (flashdns-controller's flashdns_zone_names gauge)."""
    text = urllib.request.urlopen(env["FLASHDNS_METRICS"], timeout=5).read().decode()
    found = re.search(r"^flashdns_zone_names (\S+)$", text, re.M)
    if found is None:
        raise RuntimeError("flashdns_zone_names missing from flashdns-controller's /metrics")
    return int(float(found.group(1)))


def dns_leftovers(env: dict[str, str], names_before: int, churn: Churn) -> list[str]:
    """The zone holds as many names as before the churn, and the last Service's name is NXDOMAIN."""
    out, names = [], zone_names(env)
    if names != names_before:
        out.append(f"DNS zone names {names_before} before the churn, {names} after")
    last = f"s{churn.last_service}.default.svc.{env['CLUSTER_DOMAIN']}"
    rcode = churn.lookup(last)
    if churn.last_service and rcode != "NXDOMAIN":
        out.append(f"DNS {last} answers {rcode} after its Service was deleted")
    return out


def leftovers(node: Node) -> list[str]:
    e, out = node.endpoints, ours_invariants(node)(set())
    nb = ["ovn-nbctl", f"--db={e['OVN_NB_DB']}", "--bare", "--columns=name"]
    lbs = [
        n
        for n in subprocess.run([*nb, "list", "Load_Balancer"], capture_output=True, text=True).stdout.split()
        if n.startswith("fiberlb:default/s")
    ]
    pgs = [
        n
        for n in subprocess.run([*nb, "list", "Port_Group"], capture_output=True, text=True).stdout.split()
        if n.startswith("pn_np")
    ]
    out += [f"LB rows left: {lbs[:3]}"] if lbs else []
    out += [f"netpol port groups left: {pgs[:3]}"] if pgs else []
    out += [f"CSI left: {x}" for x in csi_leftovers(e)[:3]]
    return out


def report(churn: Churn, samples: list[Sample], drain: float, problems: list[str], took: float) -> None:
    print(f"soak: {took / 60:.1f} min of churn, one action every {STEP:g} s; samples every {SAMPLE:g} s")
    print("  churn counts: " + ", ".join(f"{k} {v}" for k, v in sorted(churn.counts.items())))
    print_errors_and_rows(churn.errors, samples)
    print(
        f"  queue depths (max during churn): {max_depths(samples)}; "
        f"drained {drain:.1f} s after the churn stopped (target 5 s)"
    )
    print(f"  invariants after deleting everything: {problems or 'OK (nothing leaked or duplicated)'}")
    lines, ok = verdict_table(samples, warmup=took / 3)
    print("\n".join(lines))
    print(
        f"  verdict: {'every target met' if ok and drain <= 5 and not problems else 'TARGET MISSED'}"
        + (
            " (slopes from a run this short are noise-bound; the lead's 30-minute run decides)"
            if took < 1200
            else ""
        )
    )


def max_depths(samples: list[Sample]) -> dict[str, float]:
    out: dict[str, float] = {}
    for s in samples:
        for k, v in s.queues.items():
            out[k] = max(out.get(k, 0.0), v)
    return out


def main() -> None:
    with private_node("k8sh-soak-", "br-k8ssoak", "k8shost-soak", default_components) as (node, _):
        samples: list[Sample] = []
        churn = Churn(node)
        names_before = zone_names(node.endpoints)
        t0 = time.monotonic()
        problem = churn_for(node, churn, samples)
        took = time.monotonic() - t0
        churn.finish()
        drain = drained(node)
        time.sleep(3)  # OVN catches up with the deletes
        samples.append(take(node, time.monotonic() - t0))
        report(
            churn, samples, drain, leftovers(node) + dns_leftovers(node.endpoints, names_before, churn), took
        )
        if problem:
            print(f"  DAEMON FAILED: {problem}; evidence in {node.evidence}")


if __name__ == "__main__":
    main()
