"""Update strategies and PodDisruptionBudgets (docs/upgrade.md): every DaemonSet one node at a time
without surge (each holds a node's one socket or host port), every two-replica Deployment surging one
before removing one (a standby always there for the leader's Lease) with a budget keeping one, and
ovn-central replaced member by member, its budget never taking the quorum, its Ready meaning caught up."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.daemonsets.rendered import find, objects

Obj = dict[str, Any]
DAEMONSETS = [o for o in objects() if o["kind"] == "DaemonSet"]
DEPLOYMENTS = [o for o in objects() if o["kind"] == "Deployment"]
BUDGETS = [o for o in objects() if o["kind"] == "PodDisruptionBudget"]


def _budget_for(workload: Obj) -> Obj | None:
    labels = workload["spec"]["template"]["metadata"]["labels"]
    ns = workload["metadata"]["namespace"]
    return next((b for b in BUDGETS if b["metadata"]["namespace"] == ns and all(
        labels.get(k) == v for k, v in b["spec"]["selector"]["matchLabels"].items())), None)  # fmt: skip


@pytest.mark.parametrize("ds", DAEMONSETS, ids=lambda d: d["metadata"]["name"])
def test_daemonsets_roll_one_node_at_a_time_without_surge(ds: Obj) -> None:
    strategy = ds["spec"].get("updateStrategy") or {}
    assert strategy.get("type") == "RollingUpdate", f"{ds['metadata']['name']}: {strategy}"
    assert strategy["rollingUpdate"] == {"maxUnavailable": 1, "maxSurge": 0}


@pytest.mark.parametrize("deploy", DEPLOYMENTS, ids=lambda d: d["metadata"]["name"])
def test_deployments_surge_one_and_keep_one_through_a_budget(deploy: Obj) -> None:
    name = deploy["metadata"]["name"]
    assert deploy["spec"]["replicas"] == 2, name
    assert deploy["spec"]["strategy"] == {
        "type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}  # fmt: skip
    budget = _budget_for(deploy)
    assert budget is not None, f"{name}: no PodDisruptionBudget selects its pods"
    assert budget["spec"] == {**budget["spec"], "minAvailable": 1}, budget["spec"]


def test_ovn_central_keeps_its_quorum_member_by_member() -> None:
    sts = find("StatefulSet", "ovn-central")
    assert sts["spec"]["updateStrategy"] == {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}
    assert sts["spec"]["podManagementPolicy"] == "OrderedReady"
    budget = _budget_for(sts)
    assert budget is not None and budget["spec"]["maxUnavailable"] == 1
    quorum = sts["spec"]["replicas"] // 2 + 1
    assert sts["spec"]["replicas"] - budget["spec"]["maxUnavailable"] >= quorum
    for c in sts["spec"]["template"]["spec"]["containers"]:
        if c["name"] in ("nb", "sb"):
            probe = " ".join(c["readinessProbe"]["exec"]["command"])
            for line in ("'Status: cluster member'", "! echo \"$s\" | grep -qx 'Leader: unknown'",
                         "'Entries not yet applied: 0'"):  # fmt: skip
                assert line in probe, f"{c['name']}: Ready does not mean caught up ({line})"


def test_every_budget_selects_one_of_our_workloads() -> None:
    workloads = [o for o in objects() if o["kind"] in ("Deployment", "StatefulSet", "DaemonSet")]
    for budget in BUDGETS:
        assert any(_budget_for(w) is budget for w in workloads), budget["metadata"]["name"]
    assert len(BUDGETS) == len(DEPLOYMENTS) + 1  # one per Deployment, one for ovn-central
