"""The controllers' manifests: 2 leader-elected replicas, the entry points, least-privilege RBAC."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).parents[4]


def docs(path: str) -> dict[str, dict[str, Any]]:
    return {d["kind"]: d for d in yaml.safe_load_all((ROOT / path).read_text())}


DEPLOYMENTS = [
    ("daemonsets/controllers/netpol.yaml", "netpol-controller"),
    ("daemonsets/controllers/projects.yaml", "project-controller"),
]


@pytest.mark.parametrize(("path", "program"), DEPLOYMENTS)
def test_deployment_is_leader_elected_and_runs_an_entry_point(path: str, program: str) -> None:
    d = docs(path)["Deployment"]
    assert d["spec"]["replicas"] == 2
    (c,) = d["spec"]["template"]["spec"]["containers"]
    assert c["command"] == [program] and "--leader-elect=true" in c["args"]
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert program in scripts
    assert (
        d["spec"]["template"]["spec"]["serviceAccountName"]
        == docs(path)["ServiceAccount"]["metadata"]["name"]
    )


def test_netpol_controller_only_reads_what_it_translates() -> None:
    rules = docs("daemonsets/controllers/netpol.yaml")["ClusterRole"]["rules"]
    writes = {(g, r) for rule in rules for g in rule["apiGroups"] for r in rule["resources"]
              if set(rule["verbs"]) & {"create", "update", "patch", "delete"}}  # fmt: skip
    anp = "policy.networking.k8s.io"  # only the status of the admin policies (their Ready condition)
    assert writes == {("events.k8s.io", "events"), (anp, "adminnetworkpolicies/status"),
                      (anp, "baselineadminnetworkpolicies/status")}  # fmt: skip
    reads = {r for rule in rules for r in rule["resources"] if "watch" in rule["verbs"]}
    assert reads == {"networkpolicies", "pods", "namespaces", "nodes", "adminnetworkpolicies",
                     "baselineadminnetworkpolicies"}  # fmt: skip


def test_cluster_admin_role_is_the_specs() -> None:
    d = docs("daemonsets/rbac/plasmacloud-cluster-admin.yaml")
    assert d["ClusterRole"]["metadata"]["name"] == "plasmacloud-cluster-admin"
    assert d["ClusterRoleBinding"]["subjects"] == [
        {"kind": "Group", "name": "system:plasmacloud-admins", "apiGroup": "rbac.authorization.k8s.io"}
    ]
