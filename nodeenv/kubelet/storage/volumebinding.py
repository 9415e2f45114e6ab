"""The scheduler's VolumeBinding plugin, for Pods that use PersistentVolumeClaims and are not yet
bound to a node (a user's Pod created with kubectl): a missing claim keeps the Pod Pending and
Unschedulable (`persistentvolumeclaim "<name>" not found`); an unbound claim of an Immediate class
makes it wait (`pod has unbound immediate PersistentVolumeClaims`); the node is the first that fits
the Pod's nodeSelector and every bound claim's PV nodeAffinity; an unbound WaitForFirstConsumer
claim gets `volume.kubernetes.io/selected-node: <node>` (the provisioner provisions there), and once
every claim is bound the Pod is bound to the node (the pods/binding subresource).

Not done: other scheduler filters and scoring for such Pods (resources, affinity, taints), pre-bound
PVs matched by size.
"""

from __future__ import annotations

from typing import Any

from nodeenv.kubelet.apiclient import ApiError, KubeClient
from nodeenv.kubelet.scheduler import fits
from nodeenv.kubelet.status import unschedulable
from nodeenv.kubelet.storage.pvcontroller import ANN_SELECTED_NODE, MERGE, claim_path

Obj = dict[str, Any]


def claims_of(pod: Obj) -> list[str]:
    return [
        v["persistentVolumeClaim"]["claimName"]
        for v in pod["spec"].get("volumes") or []
        if "persistentVolumeClaim" in v
    ]


def affinity_allows(pv: Obj, node: Obj) -> bool:
    """The PV's required nodeAffinity (In/NotIn/Exists on the Node's labels) admits the Node."""
    terms = ((pv["spec"].get("nodeAffinity") or {}).get("required") or {}).get("nodeSelectorTerms") or []
    labels = node["metadata"].get("labels") or {}

    def matches(e: Obj) -> bool:
        op, key, values = e["operator"], e["key"], e.get("values") or []
        return {
            "In": labels.get(key) in values,
            "NotIn": labels.get(key) not in values,
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
        }.get(op, False)

    return not terms or any(all(matches(e) for e in t.get("matchExpressions") or []) for t in terms)


class VolumeBinding:
    def __init__(self, client: KubeClient) -> None:
        self.client = client
        self._said: dict[str, str] = {}

    def sync(self) -> None:
        pods = [
            p
            for p in self.client.request("GET", "/api/v1/pods")["items"]
            if not p["spec"].get("nodeName") and claims_of(p) and not p["metadata"].get("deletionTimestamp")
        ]
        if not pods:
            return
        nodes = self.client.request("GET", "/api/v1/nodes")["items"]
        classes = {
            c["metadata"]["name"]: c
            for c in self.client.request("GET", "/apis/storage.k8s.io/v1/storageclasses")["items"]
        }
        for pod in pods:
            why = self.schedule(pod, nodes, classes)
            key = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
            if why and self._said.get(key) != why:
                self._said[key] = why
                msg = f"0/{len(nodes)} nodes are available: {why}."
                m = pod["metadata"]
                self.client.request(
                    "PATCH",
                    f"/api/v1/namespaces/{m['namespace']}/pods/{m['name']}/status",
                    {"status": unschedulable(msg)},
                    MERGE,
                )

    def schedule(self, pod: Obj, nodes: list[Obj], classes: dict[str, Obj]) -> str:
        """Bind the Pod if it can be; otherwise why not (the Unschedulable message)."""
        ns = pod["metadata"]["namespace"]
        claims = []
        for name in claims_of(pod):
            try:
                claims.append(
                    self.client.request("GET", f"/api/v1/namespaces/{ns}/persistentvolumeclaims/{name}")
                )
            except ApiError as e:
                if e.code == 404:
                    return f'persistentvolumeclaim "{name}" not found'
                raise
        pvs = [
            self.client.request("GET", f"/api/v1/persistentvolumes/{c['spec']['volumeName']}")
            for c in claims
            if c["spec"].get("volumeName")
        ]
        candidates = [n for n in nodes if fits(pod["spec"], n) and all(affinity_allows(pv, n) for pv in pvs)]
        if not candidates:
            return "node(s) didn't match PersistentVolume's node affinity"
        node = candidates[0]["metadata"]["name"]
        waiting = False
        for c in claims:
            if c["spec"].get("volumeName"):
                continue
            sc = classes.get(c["spec"].get("storageClassName") or "")
            if sc is None or sc.get("volumeBindingMode") != "WaitForFirstConsumer":
                return "pod has unbound immediate PersistentVolumeClaims"
            waiting = True
            if not (c["metadata"].get("annotations") or {}).get(ANN_SELECTED_NODE):
                self.client.request(
                    "PATCH", claim_path(c), {"metadata": {"annotations": {ANN_SELECTED_NODE: node}}}, MERGE
                )
        if waiting:
            return ""
        m = pod["metadata"]
        binding = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": m["name"], "namespace": m["namespace"]},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        self.client.request("POST", f"/api/v1/namespaces/{m['namespace']}/pods/{m['name']}/binding", binding)
        return ""
