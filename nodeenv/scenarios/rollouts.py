"""Workload rollouts as kube-controller-manager writes them, in the sandbox: the runner's controller
pass (nodeenv/kubelet/rollout/) against the sandbox's API double turns a Deployment
into a ReplicaSet with `deployment.kubernetes.io/revision: 1`, `kubectl rollout restart` into
revision 2 and `kubectl rollout history` lists both; the Metrics API (metrics.k8s.io) is served.

The pass is scoped to the step's own namespace (the other scenarios' workloads are left alone). The
sandbox runs no kubelet, so nothing runs those Pods: `kubectl rollout status` honestly waits
(0 of 2 updated replicas available) and the Metrics API lists no node. READY columns, finished
rollouts and `kubectl top` are shown on `make boot` (tests/integration/kubelet/test_admin_kubectl.py)."""

from __future__ import annotations

import json
from pathlib import Path

from nodeenv.kubelet.apiclient import KubeClient
from nodeenv.kubelet.rollout import sync as rollout
from nodeenv.scenario import Scenario
from nodeenv.scenarios.kubeapi import _kubectl

NAME, NS = "sbx-rollout", "sbx-rollouts"
DEPLOYMENT = f"""\
apiVersion: apps/v1
kind: Deployment
metadata: {{name: {NAME}, namespace: {NS}}}
spec:
  replicas: 2
  selector: {{matchLabels: {{app: {NAME}}}}}
  template:
    metadata: {{labels: {{app: {NAME}}}}}
    spec: {{containers: [{{name: web, image: registry.plasmacloud.io/k8shost:0.1.0}}]}}
"""


def _revisions(scn: Scenario) -> list[str]:
    rss = json.loads(_kubectl(scn, "-n", NS, "get", "rs", "-l", f"app={NAME}", "-o", "json"))["items"]
    return sorted(rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"] for rs in rss)


def run(scn: Scenario) -> None:
    client = KubeClient.from_kubeconfig(Path(scn.env["KUBECONFIG"]))
    with scn.step("rollouts: a Deployment gets its ReplicaSet, revision 1 (kube-controller-manager's pass)"):
        _kubectl(scn, "create", "namespace", NS)
        scn.defer(lambda: _remove(scn, client))
        _kubectl(scn, "apply", "-f", "-", stdin=DEPLOYMENT)
        _controllers(client)
        if _revisions(scn) != ["1"]:
            raise RuntimeError(f"ReplicaSet revisions {_revisions(scn)}, not ['1']")
        waiting = _kubectl(scn, "-n", NS, "rollout", "status", f"deployment/{NAME}", "--watch=false")
        if (
            "updated replicas are available" not in waiting
            and "new replicas have been updated" not in waiting
        ):
            raise RuntimeError(f"rollout status with no kubelet running the Pods: {waiting!r}")
    with scn.step("rollouts: rollout restart makes revision 2, rollout history lists 1 and 2"):
        _kubectl(scn, "-n", NS, "rollout", "restart", f"deployment/{NAME}")
        _controllers(client)
        history = _kubectl(scn, "-n", NS, "rollout", "history", f"deployment/{NAME}").split()
        if _revisions(scn) != ["1", "2"] or history[-4::2] != ["1", "2"]:
            raise RuntimeError(f"revisions {_revisions(scn)}; history {history}")
    with scn.step("rollouts: the Metrics API (metrics.k8s.io/v1beta1) is served"):
        nodes = json.loads(_kubectl(scn, "get", "--raw", "/apis/metrics.k8s.io/v1beta1/nodes"))
        if nodes.get("kind") != "NodeMetricsList":
            raise RuntimeError(f"metrics.k8s.io answered {nodes}")


def _controllers(client: KubeClient) -> None:
    """kube-controller-manager's workload pass, over this step's namespace only."""
    nodes = client.request("GET", "/api/v1/nodes")["items"]
    rollout.sync(client, nodes, lambda ns: None, namespace=NS)


def _remove(scn: Scenario, client: KubeClient) -> None:
    """The Deployment deleted, the pass removes its ReplicaSets and Pods (the cascade); the namespace."""
    _kubectl(scn, "-n", NS, "delete", "deployment", NAME, "--ignore-not-found")
    _controllers(client)
    _kubectl(scn, "delete", "namespace", NS, "--ignore-not-found", "--wait=false")
