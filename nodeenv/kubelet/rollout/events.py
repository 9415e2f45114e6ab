"""The workload controllers' Events (core/v1, client-go's record.EventRecorder), so `kubectl describe
deployment|replicaset|daemonset|statefulset` and `kubectl get events` show what they did:
ScalingReplicaSet (`Scaled up replica set web-x from 0 to 2`, deployment-controller),
SuccessfulCreate / SuccessfulDelete (`Created pod: web-x-abcde`, replicaset- and daemonset-controller;
`create Pod db-0 in StatefulSet db successful`, statefulset-controller) and FailedCreate (`Error
creating: <the API's message>`). Best effort, as in client-go: a refused Event is dropped. Not
correlated (each is its own Event with count 1)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime

from nodeenv.kubelet.apiclient import ApiError, KubeClient
from nodeenv.kubelet.events import NORMAL, WARNING, event_name
from nodeenv.kubelet.rollout.plan import Obj

log = logging.getLogger(__name__)
COMPONENT = {"Deployment": "deployment-controller", "ReplicaSet": "replicaset-controller",
             "DaemonSet": "daemonset-controller", "StatefulSet": "statefulset-controller"}  # fmt: skip


@dataclass(frozen=True, slots=True)
class Event:
    regarding: Obj
    """The object's reference: kind, namespace, name, uid, apiVersion."""
    type: str
    reason: str
    message: str


def reference(obj: Obj, kind: str) -> Obj:
    m = obj["metadata"]
    return {"kind": kind, "namespace": m["namespace"], "name": m["name"], "uid": m.get("uid", ""),
            "apiVersion": "apps/v1", "resourceVersion": m.get("resourceVersion", "")}  # fmt: skip


def owner_reference(pod: Obj) -> Obj | None:
    """The Pod's controller, as an event's involvedObject."""
    ref = next((r for r in pod["metadata"].get("ownerReferences") or [] if r.get("controller")), None)
    if ref is None or ref.get("kind") not in COMPONENT:
        return None
    return {"kind": ref["kind"], "namespace": pod["metadata"]["namespace"], "name": ref.get("name", ""),
            "uid": ref.get("uid", ""), "apiVersion": ref.get("apiVersion", "apps/v1")}  # fmt: skip


def pod_event(pod: Obj, created: bool, error: str = "") -> Event | None:
    """SuccessfulCreate/SuccessfulDelete/FailedCreate of a controller's Pod, in its controller's words."""
    owner = owner_reference(pod)
    if owner is None:
        return None
    if error:
        return Event(owner, WARNING, "FailedCreate", f"Error creating: {error}")
    name, verb = pod["metadata"].get("name", ""), "create" if created else "delete"
    reason = "SuccessfulCreate" if created else "SuccessfulDelete"
    if owner["kind"] == "StatefulSet":
        return Event(owner, NORMAL, reason, f"{verb} Pod {name} in StatefulSet {owner['name']} successful")
    return Event(owner, NORMAL, reason, f"{'Created' if created else 'Deleted'} pod: {name}")


def record(client: KubeClient, event: Event) -> None:
    ref, ns = event.regarding, event.regarding["namespace"]
    at = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    component = COMPONENT.get(ref["kind"], "kube-controller-manager")
    meta = {"name": event_name(ref["name"]), "namespace": ns}
    body = {"apiVersion": "v1", "kind": "Event", "metadata": meta,
            "involvedObject": ref, "reason": event.reason, "message": event.message, "type": event.type,
            "source": {"component": component}, "firstTimestamp": at, "lastTimestamp": at, "count": 1,
            "eventTime": None, "reportingComponent": component, "reportingInstance": ""}  # fmt: skip
    try:
        client.create("/api/v1", "events", ns, body)
    except (ApiError, OSError) as e:
        log.debug("event %s %s on %s/%s not recorded: %s", event.type, event.reason, ns, ref["name"], e)
