"""core/v1 Events as client-go's event recorder posts them: one Event per (object, type, reason,
message), its `count` and `lastTimestamp` bumped when it happens again (at most once per
`REPEAT_AFTER` seconds: the correlator's spam filter); cluster-scoped objects' Events in `default`.
Best effort, as client-go's: a failed post is logged, never raised."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from nodeenv.kubelet.apiclient import ApiError, KubeClient

log = logging.getLogger(__name__)
Obj = dict[str, Any]
NORMAL, WARNING = "Normal", "Warning"
REPEAT_AFTER = 10.0


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def involved(obj: Obj) -> Obj:
    m = obj["metadata"]
    ref = {
        "kind": obj.get("kind", ""),
        "apiVersion": obj.get("apiVersion", "v1"),
        "name": m["name"],
        "uid": m.get("uid", ""),
        "resourceVersion": m.get("resourceVersion", ""),
    }
    if m.get("namespace"):
        ref["namespace"] = m["namespace"]
    return ref


class EventRecorder:
    def __init__(self, client: Callable[[], KubeClient], component: str, host: str = "") -> None:
        self._client, self.component, self.host = client, component, host
        self._seen: dict[tuple[str, str, str, str], tuple[str, str, int]] = {}
        self._last: dict[tuple[str, str, str, str], float] = {}

    def emit(self, obj: Obj, kind: str, reason: str, message: str) -> None:
        ref = involved(obj)
        ns = ref.get("namespace", "default")
        key = (ref["uid"], kind, reason, message)
        if time.monotonic() - self._last.get(key, -REPEAT_AFTER) < REPEAT_AFTER:
            return
        self._last[key] = time.monotonic()
        try:
            if key in self._seen:
                name, ens, count = self._seen[key]
                self._client().request(
                    "PATCH",
                    f"/api/v1/namespaces/{ens}/events/{name}",
                    {"count": count + 1, "lastTimestamp": now()},
                    "application/merge-patch+json",
                )
                self._seen[key] = (name, ens, count + 1)
                return
            name = f"{ref['name']}.{time.time_ns():x}"
            t = now()
            body = {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": name, "namespace": ns},
                "involvedObject": ref,
                "reason": reason,
                "message": message,
                "type": kind,
                "source": {"component": self.component, **({"host": self.host} if self.host else {})},
                "firstTimestamp": t,
                "lastTimestamp": t,
                "count": 1,
                "reportingComponent": self.component,
                "reportingInstance": self.host,
            }
            self._client().request("POST", f"/api/v1/namespaces/{ns}/events", body)
            self._seen[key] = (name, ns, 1)
        except (ApiError, OSError) as e:
            log.warning("event %s %s on %s/%s not recorded: %s", kind, reason, ns, ref["name"], e)
