"""Events as kubelet and kube-scheduler record them, so `kubectl get events` and `kubectl describe pod`
show a Pod's history.

kubelet (client-go's record.EventRecorder, core/v1): source {component: kubelet, host: node},
reportingComponent kubelet, reportingInstance the node; involvedObject the Pod, with fieldPath
`spec.containers{name}` (or initContainers) for container events; a repeat of the same event (same
object, fieldPath, type, reason and message) within the correlator's memory is one Event whose count
and lastTimestamp grow (a strategic-merge PATCH), as client-go's EventCorrelator does.
Reasons and messages are kubelet's (pkg/kubelet/events): Pulled, Created, Started, Killing, BackOff,
Unhealthy, FailedMount, Failed.
kube-scheduler (the events.k8s.io/v1 recorder): reportingController default-scheduler, action Binding,
reason Scheduled, note `Successfully assigned ns/pod to node`; FailedScheduling (action Scheduling).
Event names are `<object name>.<hex of UnixNano>`, as client-go makes them.
Simplified: written synchronously (client-go queues them); no spam filter or similar-message folding.
"""

from __future__ import annotations

import datetime as dt
import logging
import socket
import threading
import time
from typing import Any

from nodeenv.kubelet.apiclient import ApiError, KubeClient

log = logging.getLogger(__name__)
Obj = dict[str, Any]
NORMAL, WARNING = "Normal", "Warning"
_CORE, _EVENTS = "/api/v1", "/apis/events.k8s.io/v1"


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _seconds(t: dt.datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def _micro(t: dt.datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def event_name(obj_name: str) -> str:
    return f"{obj_name}.{time.time_ns():x}"


def pod_reference(pod: Obj, field_path: str = "") -> Obj:
    m = pod["metadata"]
    ref = {"kind": "Pod", "namespace": m["namespace"], "name": m["name"], "uid": m.get("uid", ""),
           "apiVersion": "v1", "resourceVersion": m.get("resourceVersion", "")}  # fmt: skip
    if field_path:
        ref["fieldPath"] = field_path
    return ref


def container_path(pod: Obj, container: str) -> str:
    init = any(c.get("name") == container for c in pod["spec"].get("initContainers") or [])
    return f"spec.{'initContainers' if init else 'containers'}{{{container}}}"


class KubeletEvents:
    """kubelet's recorder for one node (thread-safe: the runner boots pods on a pool)."""

    def __init__(self, client: KubeClient, node: str) -> None:
        self.client, self.node = client, node
        self._lock = threading.Lock()
        self._seen: dict[tuple[str, ...], tuple[str, int]] = {}
        """(uid, fieldPath, type, reason, message) -> (the Event's name, its count)"""

    def pod(self, pod: Obj, type_: str, reason: str, message: str, container: str = "") -> None:
        path = container_path(pod, container) if container else ""
        ns, uid = pod["metadata"]["namespace"], pod["metadata"].get("uid", "")
        key = (uid, path, type_, reason, message)
        t = _now()
        with self._lock:
            seen = self._seen.get(key)
            count = seen[1] + 1 if seen else 1
            name = seen[0] if seen else event_name(pod["metadata"]["name"])
            self._seen[key] = (name, count)
        try:
            if seen is None:
                self.client.create(_CORE, "events", ns, {
                    "apiVersion": "v1", "kind": "Event", "metadata": {"name": name, "namespace": ns},
                    "involvedObject": pod_reference(pod, path), "reason": reason, "message": message,
                    "source": {"component": "kubelet", "host": self.node},
                    "firstTimestamp": _seconds(t), "lastTimestamp": _seconds(t), "count": 1, "type": type_,
                    "eventTime": None, "reportingComponent": "kubelet", "reportingInstance": self.node,
                })  # fmt: skip
            else:
                patch = {"count": count, "lastTimestamp": _seconds(t), "message": message}
                self.client.request("PATCH", f"{_CORE}/namespaces/{ns}/events/{name}", patch,
                                    "application/strategic-merge-patch+json")  # fmt: skip
        except (ApiError, OSError) as e:  # an event is best effort, as in client-go
            log.debug(
                "event %s %s for pod %s/%s not recorded: %s", type_, reason, ns, pod["metadata"]["name"], e
            )
            if seen is None or (isinstance(e, ApiError) and e.code == 404):
                with self._lock:
                    self._seen.pop(key, None)

    def forget(self, uid: str) -> None:
        """A Pod gone: its events are no longer correlated."""
        with self._lock:
            for key in [k for k in self._seen if k[0] == uid]:
                del self._seen[key]


class SchedulerEvents:
    """kube-scheduler's events.k8s.io/v1 recorder."""

    def __init__(self, client: KubeClient) -> None:
        self.client = client
        self.instance = f"default-scheduler-{socket.gethostname()}"

    def _record(self, pod: Obj, type_: str, action: str, reason: str, note: str) -> None:
        ns = pod["metadata"]["namespace"]
        body = {
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": event_name(pod["metadata"]["name"]), "namespace": ns},
            "eventTime": _micro(_now()), "reportingController": "default-scheduler",
            "reportingInstance": self.instance, "action": action, "reason": reason,
            "regarding": pod_reference(pod), "note": note, "type": type_,
        }  # fmt: skip
        try:
            self.client.create(_EVENTS, "events", ns, body)
        except (ApiError, OSError) as e:
            log.debug("event %s for pod %s/%s not recorded: %s", reason, ns, pod["metadata"]["name"], e)

    def scheduled(self, pod: Obj, node: str) -> None:
        m = pod["metadata"]
        self._record(
            pod,
            NORMAL,
            "Binding",
            "Scheduled",
            f"Successfully assigned {m['namespace']}/{m['name']} to {node}",
        )

    def failed(self, pod: Obj, why: str) -> None:
        self._record(pod, WARNING, "Scheduling", "FailedScheduling", why)
