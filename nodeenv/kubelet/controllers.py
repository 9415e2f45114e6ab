"""What kube-controller-manager and the scheduler would do before kubelet sees a Pod, for one
machine's nodes: a DaemonSet's Pod per Node, a Deployment's `replicas` Pods, a StatefulSet's
`<name>-0..n-1`; each Pod from the template with the controller's ownerReference and labels
(pod-template-hash, controller-revision-hash, statefulset.kubernetes.io/pod-name); a DaemonSet's Pod
is bound to its Node here, the others by the scheduler (scheduler.py, from workloads.py).

The ServiceAccount admission plugin's part is here too (the API double does not run admission): a
Pod that does not opt out gets the `kube-api-access-<5>` projected volume (token, kube-root-ca.crt,
namespace) mounted at /var/run/secrets/kubernetes.io/serviceaccount in every container.
"""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass
from typing import Any

from nodeenv.kubelet.scheduler import fits

Obj = dict[str, Any]
SA_MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
WORKLOADS = ("DaemonSet", "Deployment", "StatefulSet")


def short_hash(*parts: str, n: int = 10) -> str:
    alphabet = "bcdfghjklmnpqrstvwxz2456789"  # the apiserver's SafeEncodeString alphabet
    digest = hashlib.sha256("/".join(parts).encode()).digest()
    return "".join(alphabet[b % len(alphabet)] for b in digest[:n])


@dataclass(frozen=True, slots=True)
class PodPlan:
    """One Pod a workload wants: its object (not yet created) and the Node it must run on, if the
    controller says so (DaemonSets); otherwise the scheduler picks."""

    pod: Obj
    node: str | None


def template_hash(workload: Obj) -> str:
    return short_hash(json.dumps(workload["spec"]["template"], sort_keys=True))


def _pod(workload: Obj, name: str, extra_labels: dict[str, str]) -> Obj:
    template = copy.deepcopy(workload["spec"]["template"])
    meta = template.get("metadata") or {}
    wmeta = workload["metadata"]
    labels = {**(meta.get("labels") or {}), **extra_labels}
    owner = {
        "apiVersion": workload.get("apiVersion", "apps/v1"), "kind": workload["kind"],
        "name": wmeta["name"], "uid": wmeta.get("uid", ""), "controller": True,
        "blockOwnerDeletion": True,
    }  # fmt: skip
    pod_meta = {
        "name": name, "namespace": wmeta.get("namespace", "default"), "labels": labels,
        "annotations": meta.get("annotations") or {}, "ownerReferences": [owner],
    }  # fmt: skip
    spec = template["spec"]
    admit_service_account(spec)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": spec}


def desired_pods(workload: Obj, nodes: list[Obj]) -> list[PodPlan]:
    name, kind, h = workload["metadata"]["name"], workload["kind"], template_hash(workload)
    if kind == "DaemonSet":
        rev = {"controller-revision-hash": h, "pod-template-generation": "1"}
        spec = workload["spec"]["template"]["spec"]
        names = [n["metadata"]["name"] for n in nodes if fits(spec, n)]
        return [PodPlan(_pod(workload, f"{name}-{short_hash(name, n, n=5)}", rev), n) for n in names]
    replicas = int(workload["spec"].get("replicas", 1))
    if kind == "StatefulSet":
        return [PodPlan(_member(workload, i, h), None) for i in range(replicas)]
    return [
        PodPlan(
            _pod(
                workload, f"{name}-{h[:10]}-{short_hash(name, h, str(i), n=5)}", {"pod-template-hash": h[:10]}
            ),
            None,
        )
        for i in range(replicas)
    ]


def _member(workload: Obj, i: int, h: str) -> Obj:
    """StatefulSet member i: its stable name, and as the StatefulSet controller sets them, the
    hostname and the governing Service as subdomain (`<name>-<i>.<serviceName>.<ns>.svc` in DNS)."""
    name = workload["metadata"]["name"]
    pod = _pod(workload, f"{name}-{i}", {"controller-revision-hash": f"{name}-{h}",
                                         "statefulset.kubernetes.io/pod-name": f"{name}-{i}",
                                         "apps.kubernetes.io/pod-index": str(i)})  # fmt: skip
    pod["spec"]["hostname"] = f"{name}-{i}"
    if workload["spec"].get("serviceName"):
        pod["spec"]["subdomain"] = workload["spec"]["serviceName"]
    return pod


def admit_service_account(spec: Obj) -> None:
    """The ServiceAccount admission plugin: serviceAccountName defaults to `default`, and unless the
    Pod opts out, the projected token volume and its mount in every (init) container."""
    spec.setdefault("serviceAccountName", spec.get("serviceAccount") or "default")
    if spec.get("automountServiceAccountToken") is False:
        return
    volumes = spec.setdefault("volumes", [])
    if any(v.get("name", "").startswith("kube-api-access-") for v in volumes):
        return
    vol = f"kube-api-access-{short_hash(spec['serviceAccountName'], n=5)}"
    volumes.append({"name": vol, "projected": {"defaultMode": 420, "sources": [
        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"path": "namespace",
                                    "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
    ]}})  # fmt: skip
    for c in spec.get("initContainers", []) + spec.get("containers", []):
        mounts = c.setdefault("volumeMounts", [])
        if not any(m.get("mountPath") == SA_MOUNT for m in mounts):
            mounts.append({"name": vol, "mountPath": SA_MOUNT, "readOnly": True})
