"""`make boot`'s Prometheus on the booted cluster (3 nodes, the package's shared boot, conftest.py):

- every container port named `metrics` of our Running pods is a target discovered through the API
  double, and every target is up, on hostNetwork pods (the node's address) and pod-network pods
  (reached through node1's management port) alike; `up` is in Prometheus for each;
- both servers listen on node1's loopback only;
- every panel of every dashboard (dashboards/catalogue.py) returns data from that Prometheus, once
  the cluster has done what the panels show: a LoadBalancer Service, a NetworkPolicy, DNS queries
  (pods were created by the boot itself).
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from dashboards.catalogue import DASHBOARDS
from nodeenv.promapi import NetnsPrometheusApi as PromApi
from nodeenv.prometheus import Target
from tests.integration.kubelet.boot_session import PREFIX, Booted
from tests.integration.kubelet.conftest import wait_for

ACTIVITY = """
apiVersion: v1
kind: Service
metadata: {name: panel-lb, namespace: default}
spec: {type: LoadBalancer, selector: {app: panel-none}, ports: [{port: 80, targetPort: 8080}]}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: panel-deny, namespace: default}
spec: {podSelector: {matchLabels: {app: panel-none}}, policyTypes: [Ingress]}
"""


def apis(b: Booted) -> tuple[PromApi, PromApi]:
    where = b.run_dir / "monitoring.json"
    return PromApi.from_file(where), PromApi.from_file(where, "vmagent")


def expected_targets(b: Booted) -> set[tuple[str, int]]:
    """(pod, port) of every `metrics` container port of our Running pods, from the API."""
    out = set()
    for p in b.get("pods", "-A", "-l", "app.kubernetes.io/part-of=k8shost")["items"]:
        if p["status"].get("phase") != "Running":
            continue
        for c in p["spec"]["containers"]:
            out |= {(p["metadata"]["name"], int(x["containerPort"])) for x in c.get("ports", [])
                    if x.get("name") == "metrics"}  # fmt: skip
    return out


def test_every_metrics_port_is_a_target_and_up(booted: Booted) -> None:
    prom, agent = apis(booted)
    assert json.loads((booted.run_dir / "monitoring.json").read_text())["netns"] == f"{PREFIX}-node1"
    want = expected_targets(booted)
    jobs = {"prismnet-agent", "iam-webhook", "ovn-central", "fiberlb-controller", "netpol-controller",
            "node-controller", "flashdns-controller", "project-controller", "lightningstor-csi-controller",
            "lightningstor-csi-node"}  # fmt: skip
    seen: list[Target] = []

    def all_up() -> bool:
        seen[:] = agent.targets()
        got = {(t.labels["pod"], int(t.scrape_url.split(":")[2].split("/")[0])) for t in seen}
        return got == want and all(t.health == "up" for t in seen)

    wait_for(all_up, 90, "every target up", lambda: str([(t.scrape_url, t.health) for t in seen]))
    assert {t.job for t in seen} == jobs
    assert any(t.scrape_url.startswith("http://10.244.") for t in seen), "no pod-network target"
    pods = {pod for pod, _ in want}
    wait_for(lambda: {s.labels["pod"] for s in prom.query("up == 1")} == pods, 30, "up == 1 in Prometheus")
    assert re.search(r"^Prometheus: (\d+)/\1 targets up; ip netns exec ", booted.out, re.M), booted.out


def test_servers_listen_on_node1_loopback_only(booted: Booted) -> None:
    prom, agent = apis(booted)
    for api in (prom, agent):
        port = api.url.rsplit(":", 1)[1]
        argv = ["ip", "netns", "exec", f"{PREFIX}-node1", "ss", "-Htln", "sport", "=", f":{port}"]
        lines = subprocess.run(argv, capture_output=True, text=True).stdout.splitlines()
        assert lines and all(line.split()[3] == f"127.0.0.1:{port}" for line in lines), lines


def test_every_panel_returns_data(booted: Booted, tmp_path: Path) -> None:
    prom, _ = apis(booted)
    booted.kubectl("apply", "-f", "-", stdin=ACTIVITY)
    dig = ["ip", "netns", "exec", f"{PREFIX}-node1", "dig", "+short", "+time=2", "+tries=2", "@10.96.0.10"]
    for name in ("cluster-dns.kube-system.svc.cluster.local", "nothing-here.default.svc.cluster.local"):
        subprocess.run([*dig, name], capture_output=True, timeout=30)
        subprocess.run([*dig, "+tcp", name], capture_output=True, timeout=30)
    panels = [(d.uid, p) for d in DASHBOARDS for p in d.panels]
    empty: list[str] = []

    def all_data() -> bool:
        empty[:] = [f"{uid}: {p.title} ({p.expr})" for uid, p in panels if not prom.query(p.expr)]
        return not empty

    deadline = time.monotonic() + 90  # a few scrapes after the activity
    while time.monotonic() < deadline and not all_data():
        time.sleep(5)
    assert not empty, "panels with no data:\n" + "\n".join(empty)
    print(f"{len(panels)} panels of {len(DASHBOARDS)} dashboards, every one with data")


@pytest.fixture(autouse=True, scope="module")
def _cleanup(booted: Booted) -> Any:
    yield
    booted.kubectl("delete", "-f", "-", "--ignore-not-found", stdin=ACTIVITY)
