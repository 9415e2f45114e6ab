"""The runner's controller-manager and scheduler pass (nodeenv/kubelet/workloads.py) against the API
double: a Deployment's anti-affine replicas spread over the Nodes, one left Unschedulable with the
scheduler's message while a Node is missing and bound (pods/binding) once it registers; an
OrderedReady StatefulSet's next member created only once the one before is Running and Ready."""

from __future__ import annotations

from typing import Any

from nodeenv.kubelet import workloads
from nodeenv.kubelet.apiclient import KubeClient, register_node
from tests.kubeapi_fixture import KubeApiHandle

CORE, APPS, NS = "/api/v1", "/apis/apps/v1", "kube-system"


def _spec(app: str) -> dict[str, Any]:
    term = {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": "kubernetes.io/hostname"}
    return {
        "selector": {"matchLabels": {"app": app}},
        "template": {"metadata": {"labels": {"app": app}}, "spec": {
            "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}},
            "containers": [{"name": "c", "image": "k8shost:0.1.0"}]}},
    }  # fmt: skip


def _pods(c: KubeClient, app: str) -> dict[str, dict[str, Any]]:
    return {
        p["metadata"]["name"]: p for p in c.list(CORE, "pods") if p["metadata"]["labels"].get("app") == app
    }


def test_replicas_spread_and_a_pending_one_is_bound_when_a_node_comes(kube_api: KubeApiHandle) -> None:
    c = KubeClient.from_kubeconfig(kube_api.kubeconfig)
    register_node(c, "node1", "10.250.0.11", {})
    deploy = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "lb"},
              "spec": {"replicas": 2, **_spec("lb")}}  # fmt: skip
    c.create(APPS, "deployments", NS, deploy)
    workloads.sync(c)
    pods = _pods(c, "lb")
    nodes = sorted(p["spec"].get("nodeName", "") for p in pods.values())
    assert nodes == ["", "node1"], pods
    [pending] = [p for p in pods.values() if not p["spec"].get("nodeName")]
    [cond] = [x for x in pending["status"]["conditions"] if x["type"] == "PodScheduled"]
    assert (cond["status"], cond["reason"]) == ("False", "Unschedulable")
    assert cond["message"] == "0/1 nodes are available: 1 node(s) didn't match pod anti-affinity rules."
    register_node(c, "node2", "10.250.0.12", {})
    workloads.sync(c)
    assert sorted(p["spec"].get("nodeName") for p in _pods(c, "lb").values()) == ["node1", "node2"]


def test_ordered_ready_statefulset_waits_for_each_member(kube_api: KubeApiHandle) -> None:
    c = KubeClient.from_kubeconfig(kube_api.kubeconfig)
    for i in (1, 2, 3):
        register_node(c, f"node{i}", f"10.250.0.1{i}", {})
    sts = {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db"},
           "spec": {"replicas": 3, "serviceName": "db", **_spec("db")}}  # fmt: skip
    c.create(APPS, "statefulsets", NS, sts)
    workloads.sync(c)
    workloads.sync(c)
    assert sorted(_pods(c, "db")) == ["db-0"]  # db-0 is not Running and Ready yet
    ready = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    c.patch_status(CORE, "pods", NS, "db-0", ready)
    workloads.sync(c)
    pods = _pods(c, "db")
    assert sorted(pods) == ["db-0", "db-1"]
    assert pods["db-1"]["spec"]["hostname"] == "db-1" and pods["db-1"]["spec"]["subdomain"] == "db"
    c.patch_status(CORE, "pods", NS, "db-1", ready)
    workloads.sync(c)
    assert sorted(p["spec"]["nodeName"] for p in _pods(c, "db").values()) == ["node1", "node2", "node3"]
