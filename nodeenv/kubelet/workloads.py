"""One pass of kube-controller-manager's workload controllers and the scheduler over the cluster:
the Deployment, ReplicaSet, DaemonSet and StatefulSet controllers (rollout/: Pods, ReplicaSets,
ControllerRevisions, rollouts and status), a DaemonSet's Pods bound to their Node, the others bound
by the scheduler (scheduler.py) or left Pending and Unschedulable with its message. Before a
namespace's first Pod: its `default` ServiceAccount and `kube-root-ca.crt` (the serviceaccount
and root-ca-cert-publisher controllers).

One runner of a cluster plays these (RunnerSettings.controllers): with a runner per node, one pass
per sync, not one per node."""

from __future__ import annotations

import logging
from typing import Any

from nodeenv.kubelet.apiclient import KubeClient
from nodeenv.kubelet.events import SchedulerEvents
from nodeenv.kubelet.rollout import sync as rollout
from nodeenv.kubelet.scheduler import Cluster
from nodeenv.kubelet.status import unschedulable
from nodeenv.kubelet.storage.volumebinding import claims_of

log = logging.getLogger(__name__)
Obj = dict[str, Any]
CORE = "/api/v1"


def publish_root_ca(client: KubeClient, namespace: str) -> None:
    """The `default` ServiceAccount and the `kube-root-ca.crt` ConfigMap of the namespace."""
    if client.get(CORE, "serviceaccounts", namespace, "default") is None:
        sa = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}}
        client.create(CORE, "serviceaccounts", namespace, sa)
    if client.get(CORE, "configmaps", namespace, "kube-root-ca.crt") is None:
        cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kube-root-ca.crt"},
              "data": {"ca.crt": client.ca_file.read_text()}}  # fmt: skip
        client.create(CORE, "configmaps", namespace, cm)


def sync(client: KubeClient) -> None:
    """The workload controllers' pass (rollout/sync.py), then every Pod not bound yet scheduled."""
    nodes: list[Obj] = client.request("GET", f"{CORE}/nodes")["items"]
    rollout.sync(client, nodes, lambda ns: publish_root_ca(client, ns))
    schedule(client, nodes, client.list(CORE, "pods"))


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
