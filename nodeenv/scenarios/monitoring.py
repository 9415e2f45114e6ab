"""The cluster's Prometheus (nodeenv/cluster/monitoring.py; a cluster only): every scrape target up,
then one alert fired by a fault and resolved by its repair. The fault: the last node's FlashDNS frozen
(SIGSTOP), so its scrapes time out as a wedged process's do; FlashdnsDown (daemonsets/monitoring/
rules.yml, `for: 1m`) fires; the process resumed (SIGCONT), the alert resolves. The seconds to fire
and to resolve are the steps' figures (the cluster's scrape interval: K8SHOST_SCRAPE_INTERVAL, 15 s)."""

from __future__ import annotations

import contextlib
import os
import signal

from nodeenv.cluster import faults
from nodeenv.prometheus import PrometheusApi
from nodeenv.scenario import Scenario

ALERT = "FlashdnsDown"
DAEMON = "flashdns-controller"


def run(scn: Scenario) -> None:
    cluster = scn.cluster
    if cluster is None:
        return  # one node: no Prometheus runs there
    api = PrometheusApi(scn.env["PROMETHEUS_URL"])
    with scn.step("monitoring: every Prometheus target up") as r:
        targets = api.wait_targets_up(timeout=90)
        jobs = sorted({t.job for t in targets})
        r.detail = f"{len(targets)} targets up: {', '.join(jobs)}"
        print(f"  prometheus {scn.env['PROMETHEUS_URL']}: {r.detail}")
    node = cluster.nodes[-1]
    pid = faults.record(node.node, DAEMON).pid

    def resume() -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)

    with scn.step(f"monitoring: {DAEMON} frozen (SIGSTOP) fires {ALERT}", on=node.name) as r:
        os.kill(pid, signal.SIGSTOP)
        scn.defer(resume)
        firing = lambda: any(a.labels.get("node") == node.name for a in api.firing(ALERT))  # noqa: E731
        r.detail = f"firing after {api.wait(firing, f'{ALERT} on {node.name}', timeout=180):.0f} s"
        print(f"  {ALERT} on {node.name}: {r.detail}")
    with scn.step(f"monitoring: {DAEMON} resumed (SIGCONT), {ALERT} resolves", on=node.name) as r:
        resume()
        r.detail = f"resolved after {api.wait_resolved(ALERT, timeout=120):.0f} s"
        print(f"  {ALERT}: {r.detail}")
