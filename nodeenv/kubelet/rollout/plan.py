"""What the workload controllers share: the Plan they return (applied by sync.py), controller
ownership (ownerReferences with controller: true), Pod readiness as the controllers count it, and
IntOrString scaling (maxSurge/maxUnavailable: "25%" or 1)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

Obj = dict[str, Any]
CORE, APPS = "/api/v1", "/apis/apps/v1"
Resource = tuple[str, str]
"""(API base path, plural): ("/apis/apps/v1", "replicasets")."""
PODS: Resource = (CORE, "pods")
REPLICASETS: Resource = (APPS, "replicasets")
REVISIONS: Resource = (APPS, "controllerrevisions")


@dataclass
class Plan:
    """The writes one controller pass wants, in order: creates, patches (merge), deletes, status."""

    creates: list[tuple[Resource, str, Obj]] = field(default_factory=list)
    patches: list[tuple[Resource, str, str, Obj]] = field(default_factory=list)
    deletes: list[tuple[Resource, str, str]] = field(default_factory=list)
    statuses: list[tuple[Resource, str, str, Obj]] = field(default_factory=list)
    events: list[tuple[Obj, str, str, str]] = field(default_factory=list)
    """(involvedObject reference, type, reason, message): events.py records them."""
    deleted: dict[tuple[Resource, str, str], Obj] = field(default_factory=dict)
    """What each delete removes (a Pod's controller names its SuccessfulDelete event)."""

    def status(self, res: Resource, obj: Obj, status: Obj) -> None:
        """A status write (merge patch: None removes a field), only if it changes what is stored
        (watchers see no empty updates)."""
        old = obj.get("status") or {}
        if {k: v for k, v in {**old, **status}.items() if v is not None} != old:
            meta = obj["metadata"]
            self.statuses.append((res, meta["namespace"], meta["name"], status))

    def delete(self, res: Resource, obj: Obj) -> None:
        self.deletes.append((res, obj["metadata"]["namespace"], obj["metadata"]["name"]))
        self.deleted[(res, obj["metadata"]["namespace"], obj["metadata"]["name"])] = obj


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def owner_ref(owner: Obj, kind: str) -> Obj:
    meta = owner["metadata"]
    return {"apiVersion": "apps/v1", "kind": kind, "name": meta["name"], "uid": meta["uid"],
            "controller": True, "blockOwnerDeletion": True}  # fmt: skip


def controller_uid(obj: Obj) -> str:
    refs = obj["metadata"].get("ownerReferences") or []
    return next((str(r.get("uid", "")) for r in refs if r.get("controller")), "")


def owned(objs: list[Obj], owner: Obj) -> list[Obj]:
    """The objects `owner` controls (its uid in a controller ownerReference), oldest first."""
    uid = owner["metadata"]["uid"]
    mine = [o for o in objs if controller_uid(o) == uid]
    return sorted(mine, key=lambda o: (o["metadata"].get("creationTimestamp", ""), o["metadata"]["name"]))


def active(pod: Obj) -> bool:
    """Counted by the controllers: not being deleted, not Succeeded or Failed."""
    phase = (pod.get("status") or {}).get("phase")
    return not pod["metadata"].get("deletionTimestamp") and phase not in ("Succeeded", "Failed")


def ready(pod: Obj) -> bool:
    conds = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conds)


def running_ready(pod: Obj | None) -> bool:
    return pod is not None and (pod.get("status") or {}).get("phase") == "Running" and ready(pod)


def scaled(value: Any, total: int, round_up: bool) -> int:
    """An IntOrString against `total`: an int as is, "25%" of total rounded up or down."""
    if isinstance(value, str) and value.endswith("%"):
        exact = int(value[:-1]) * total / 100
        return math.ceil(exact) if round_up else math.floor(exact)
    return int(value or 0)


def condition(kind: str, ok: bool, reason: str, message: str, old: list[Obj], at: str) -> Obj:
    """A workload condition; lastTransitionTime kept while its status does not change."""
    status = "True" if ok else "False"
    prev = next((c for c in old if c.get("type") == kind), None)
    since = prev["lastTransitionTime"] if prev and prev.get("status") == status else at
    return {"type": kind, "status": status, "lastUpdateTime": at, "lastTransitionTime": since,
            "reason": reason, "message": message}  # fmt: skip
