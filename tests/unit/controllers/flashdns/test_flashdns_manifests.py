"""flashdns manifests: 2 leader-elected replicas, the cluster DNS Service on 10.96.0.10, least privilege."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import yaml

from controllers.flashdns.settings import FlashDnsSettings

ROOT = Path(__file__).parents[4]
PATH = ROOT / "daemonsets/controllers/flashdns.yaml"


def docs() -> dict[str, dict[str, Any]]:
    return {d["kind"]: d for d in yaml.safe_load_all(PATH.read_text())}


def test_deployment_runs_the_entry_point_with_known_flags() -> None:
    d = docs()["Deployment"]
    assert d["spec"]["replicas"] == 2
    (c,) = d["spec"]["template"]["spec"]["containers"]
    assert c["command"] == ["flashdns-controller"] and "--leader-elect=true" in c["args"]
    assert "flashdns-controller" in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    own = {f"--{n.replace('_', '-')}" for n in FlashDnsSettings.__dataclass_fields__}
    common = {"--leader-elect", "--metrics-address"}
    assert {a.split("=")[0] for a in c["args"]} <= own | common
    assert c["securityContext"]["capabilities"] == {"drop": ["ALL"]} and c["securityContext"]["runAsNonRoot"]
    sysctls = d["spec"]["template"]["spec"]["securityContext"]["sysctls"]
    assert {"name": "net.ipv4.ip_unprivileged_port_start", "value": "0"} in sysctls  # :53 as nobody


def test_cluster_dns_service_is_on_the_spec_ip_and_selects_the_pods() -> None:
    d = docs()
    svc, dep = d["Service"], d["Deployment"]
    assert svc["spec"]["clusterIP"] == "10.96.0.10"
    assert svc["spec"]["selector"].items() <= dep["spec"]["template"]["metadata"]["labels"].items()
    ports = {(p["protocol"], p["port"]) for p in svc["spec"]["ports"]}
    assert ports == {("UDP", 53), ("TCP", 53)}
    assert "--cluster-dns-ip=10.96.0.10" in dep["spec"]["template"]["spec"]["containers"][0]["args"]


def test_rbac_only_reads_what_it_serves() -> None:
    rules = docs()["ClusterRole"]["rules"]
    writes = {(g, r) for rule in rules for g in rule["apiGroups"] for r in rule["resources"]
              if set(rule["verbs"]) - {"get", "list", "watch"}}  # fmt: skip
    assert writes == {("events.k8s.io", "events")}
    reads = {r for rule in rules for r in rule["resources"] if "watch" in rule["verbs"]}
    assert reads == {"services", "pods", "endpointslices"}
    lease = docs()["Role"]["rules"]
    assert {tuple(r.get("resourceNames", [])) for r in lease} == {(), ("flashdns-controller",)}
