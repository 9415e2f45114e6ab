"""One pass of kube-controller-manager's workload controllers and the scheduler over the cluster:
every DaemonSet, Deployment and StatefulSet's missing Pods created (controllers.py), a DaemonSet's
bound to its Node, the others bound by the scheduler (scheduler.py) or left Pending and
Unschedulable with its message; a StatefulSet with `podManagementPolicy: OrderedReady` (the
default) gets member i only once members 0..i-1 are Running and Ready, as the StatefulSet
controller does. Before a namespace's first Pod: its `default` ServiceAccount and
`kube-root-ca.crt` (the serviceaccount and root-ca-cert-publisher controllers).

One runner of a cluster plays these (RunnerSettings.controllers): with a runner per node, one pass
per sync, not one per node."""

from __future__ import annotations

import logging
from typing import Any

from nodeenv.kubelet import controllers
from nodeenv.kubelet.apiclient import KubeClient
from nodeenv.kubelet.events import SchedulerEvents
from nodeenv.kubelet.scheduler import Cluster
from nodeenv.kubelet.status import unschedulable
from nodeenv.kubelet.storage.volumebinding import claims_of

log = logging.getLogger(__name__)
Obj = dict[str, Any]
CORE, APPS = "/api/v1", "/apis/apps/v1"
PLURAL = {"DaemonSet": "daemonsets", "Deployment": "deployments", "StatefulSet": "statefulsets"}


def _running_ready(pod: Obj | None) -> bool:
    status = (pod or {}).get("status") or {}
    conds = status.get("conditions") or []
    return status.get("phase") == "Running" and any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in conds
    )


def publish_root_ca(client: KubeClient, namespace: str) -> None:
    """The `default` ServiceAccount and the `kube-root-ca.crt` ConfigMap of the namespace."""
    if client.get(CORE, "serviceaccounts", namespace, "default") is None:
        sa = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}}
        client.create(CORE, "serviceaccounts", namespace, sa)
    if client.get(CORE, "configmaps", namespace, "kube-root-ca.crt") is None:
        cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kube-root-ca.crt"},
              "data": {"ca.crt": client.ca_file.read_text()}}  # fmt: skip
        client.create(CORE, "configmaps", namespace, cm)


def _ordered(workload: Obj) -> bool:
    policy: str = workload["spec"].get("podManagementPolicy", "OrderedReady")
    return workload["kind"] == "StatefulSet" and policy == "OrderedReady"


def sync(client: KubeClient) -> None:
    """Create the missing Pods of every workload, then schedule every Pod not bound yet."""
    nodes: list[Obj] = client.request("GET", f"{CORE}/nodes")["items"]
    pods = {(p["metadata"]["namespace"], p["metadata"]["name"]): p for p in client.list(CORE, "pods")}
    for kind, plural in PLURAL.items():
        for w in client.list(APPS, plural):
            w.setdefault("kind", kind)
            for plan in controllers.desired_pods(w, nodes):
                meta = plan.pod["metadata"]
                key = (meta["namespace"], meta["name"])
                if key in pods:
                    if _ordered(w) and not _running_ready(pods[key]):
                        break  # OrderedReady: the next member waits for this one
                    continue
                publish_root_ca(client, meta["namespace"])
                if plan.node:
                    plan.pod["spec"]["nodeName"] = plan.node
                pods[key] = client.create(CORE, "pods", meta["namespace"], plan.pod)
                if plan.node:  # a DaemonSet's pod: kube-scheduler binds it to its node, and says so
                    SchedulerEvents(client).scheduled(pods[key], plan.node)
                if _ordered(w):
                    break
    schedule(client, nodes, list(pods.values()))


def schedule(client: KubeClient, nodes: list[Obj], pods: list[Obj]) -> None:
    """kube-scheduler's pass: each Pod without a Node (oldest first) bound through the `binding`
    subresource, or its PodScheduled condition set to Unschedulable with the reason."""
    cluster, events = Cluster.of(nodes, pods), SchedulerEvents(client)
    pending = [  # Pods using claims are the volume binding's (nodeenv/kubelet/storage/volumebinding.py)
        p for p in pods
        if not p["spec"].get("nodeName") and not p["metadata"].get("deletionTimestamp") and not claims_of(p)
    ]  # fmt: skip
    pending.sort(key=lambda p: (p["metadata"].get("creationTimestamp", ""), p["metadata"]["name"]))
    for pod in pending:
        ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        node, why = cluster.schedule(pod)
        if node:
            body = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name, "namespace": ns},
                    "target": {"apiVersion": "v1", "kind": "Node", "name": node}}  # fmt: skip
            client.request("POST", f"{CORE}/namespaces/{ns}/pods/{name}/binding", body)
            log.info("pod %s/%s: Scheduled: assigned to %s", ns, name, node)
            events.scheduled(pod, node)
            continue
        conds = (pod.get("status") or {}).get("conditions") or []
        if not any(c.get("type") == "PodScheduled" and c.get("message") == why for c in conds):
            log.warning("pod %s/%s: Unschedulable: %s", ns, name, why)
            events.failed(pod, why)
            client.patch_status(CORE, "pods", ns, name, unschedulable(why))
