"""Upgrades in the sandbox (docs/upgrade.md): a PodDisruptionBudget served by the API double
(policy/v1, read back with `kubectl get pdb`), and the overlay's update strategies and budgets
as `kubectl kustomize` renders them (every DaemonSet one node at a time without surge, every
Deployment surging one, ovn-central member by member with a budget keeping its quorum). The rollout
under traffic needs `make boot`: `make bench BENCH=upgrade`, tests/integration/kubelet/test_boot_upgrade.py;
the DaemonSet maxSurge pass: tests/unit/kubelet/test_rollout.py."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import yaml  # type: ignore[import-untyped]  # PyYAML ships no stubs

from nodeenv.scenario import Scenario
from nodeenv.scenarios.kubeapi import _kubectl

NAME, NS = "sbx-budget", "sbx-upgrade"
OVERLAY = Path(__file__).resolve().parents[2] / "daemonsets" / "overlays" / "k3s"
BUDGET = f"""\
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {{name: {NAME}, namespace: {NS}}}
spec: {{maxUnavailable: 1, selector: {{matchLabels: {{app: {NAME}}}}}}}
"""


def strategies(docs: list[dict[str, Any]]) -> dict[str, str]:
    """kind/name -> its update strategy in short ("RollingUpdate maxUnavailable=1 maxSurge=0")."""
    out = {}
    for d in docs:
        spec = d.get("spec") or {}
        s = spec.get("updateStrategy") or spec.get("strategy")
        if d["kind"] in ("DaemonSet", "Deployment", "StatefulSet") and s is not None:
            params = " ".join(f"{k}={v}" for k, v in (s.get("rollingUpdate") or {}).items())
            out[f"{d['kind'].lower()}/{d['metadata']['name']}"] = f"{s.get('type')} {params}".strip()
    return out


def run(scn: Scenario) -> None:
    with scn.step("upgrade: a PodDisruptionBudget is served (policy/v1, kubectl apply and get pdb)") as r:
        _kubectl(scn, "create", "namespace", NS)
        scn.defer(lambda: _kubectl(scn, "delete", "namespace", NS, "--ignore-not-found", "--wait=false"))
        _kubectl(scn, "apply", "-f", "-", stdin=BUDGET)
        read = _kubectl(scn, "-n", NS, "get", "pdb", NAME, "-o", "jsonpath={.kind} {.spec.maxUnavailable}")
        if read != "PodDisruptionBudget 1":
            raise RuntimeError(f"kubectl get pdb: {read!r}")
        r.detail = read
    with scn.step(
        "upgrade: every workload of ours has its update strategy, ovn-central a quorum budget"
    ) as r:
        out = subprocess.run(
            ["kubectl", "kustomize", str(OVERLAY)], capture_output=True, text=True, timeout=60
        )
        docs = [d for d in yaml.safe_load_all(out.stdout) if d]
        got = strategies(docs)
        budgets = {d["metadata"]["name"]: d["spec"] for d in docs if d["kind"] == "PodDisruptionBudget"}
        if len(got) != 11 or budgets.get("ovn-central") != {
            **budgets.get("ovn-central", {}),
            "maxUnavailable": 1,
        }:
            raise RuntimeError(f"strategies {got}; budgets {budgets}")
        r.detail = f"{len(got)} workloads, {len(budgets)} PDBs; {got['statefulset/ovn-central']}"
