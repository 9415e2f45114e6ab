"""Kinds served in two API groups from one storage, as kube-apiserver does for Events: core/v1 Event
and events.k8s.io/v1 Event are the same stored objects (stored in the core form here), converted on
the way in and out with the field mapping of k8s.io/kubernetes/pkg/apis/events/v1/conversion.go:
regarding <-> involvedObject, note <-> message, reportingController <-> reportingComponent,
deprecatedSource/FirstTimestamp/LastTimestamp/Count <-> source/firstTimestamp/lastTimestamp/count.
So `kubectl get events` and `kubectl describe` show what a controller recorded through
events.k8s.io/v1, and both groups' watches see every change.
"""

from __future__ import annotations

from typing import Any

from nodeenv.kubeapi.kinds import Kind, Registry

Obj = dict[str, Any]
_EVENTS_V1_TO_CORE = {
    "regarding": "involvedObject",
    "note": "message",
    "reportingController": "reportingComponent",
    "deprecatedSource": "source",
    "deprecatedFirstTimestamp": "firstTimestamp",
    "deprecatedLastTimestamp": "lastTimestamp",
    "deprecatedCount": "count",
}
_CORE_TO_EVENTS_V1 = {v: k for k, v in _EVENTS_V1_TO_CORE.items()}


def _rename(obj: Obj, names: dict[str, str], kind: Kind) -> Obj:
    out = {names.get(k, k): v for k, v in obj.items()}
    out["apiVersion"], out["kind"] = kind.api_version, kind.kind
    return out


class Views:
    """Maps a served kind to the kind it is stored as, and objects between the two forms."""

    def __init__(self, registry: Registry) -> None:
        self._storage: dict[str, Kind] = {}
        core_events = registry.lookup("", "v1", "events")
        v1_events = registry.lookup("events.k8s.io", "v1", "events")
        if core_events is not None and v1_events is not None:
            self._storage[v1_events.api_version + "/events"] = core_events

    def storage(self, kind: Kind) -> Kind:
        return self._storage.get(f"{kind.api_version}/{kind.plural}", kind)

    def converted(self, kind: Kind) -> bool:
        return self.storage(kind) is not kind

    def to_storage(self, kind: Kind, obj: Any) -> Any:
        if not self.converted(kind) or not isinstance(obj, dict):
            return obj
        return _rename(obj, _EVENTS_V1_TO_CORE, self.storage(kind))

    def present(self, kind: Kind, obj: Obj) -> Obj:
        if not self.converted(kind):
            return obj
        return _rename(obj, _CORE_TO_EVENTS_V1, kind)
