"""A workload's Pod as its controller makes it (rollout/ decides which): from the template, with the
controller's ownerReference and labels; a StatefulSet's member `<name>-<i>` with its revision,
pod-name and pod-index labels, hostname and subdomain.

The ServiceAccount admission plugin's part is here too (the API double does not run admission): a
Pod that does not opt out gets the `kube-api-access-<5>` projected volume (token, kube-root-ca.crt,
namespace) mounted at /var/run/secrets/kubernetes.io/serviceaccount in every container.
"""

from __future__ import annotations

import copy
import hashlib
from typing import Any

Obj = dict[str, Any]
SA_MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
WORKLOADS = ("DaemonSet", "Deployment", "StatefulSet")


def short_hash(*parts: str, n: int = 10) -> str:
    alphabet = "bcdfghjklmnpqrstvwxz2456789"  # the apiserver's SafeEncodeString alphabet
    digest = hashlib.sha256("/".join(parts).encode()).digest()
    return "".join(alphabet[b % len(alphabet)] for b in digest[:n])


def from_template(workload: Obj, name: str, extra_labels: dict[str, str]) -> Obj:
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


def member(workload: Obj, i: int, h: str) -> Obj:
    """StatefulSet member i: its stable name, and as the StatefulSet controller sets them, the
    hostname and the governing Service as subdomain (`<name>-<i>.<serviceName>.<ns>.svc` in DNS)."""
    name = workload["metadata"]["name"]
    pod = from_template(workload, f"{name}-{i}", {"controller-revision-hash": f"{name}-{h}",
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
