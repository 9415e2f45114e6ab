"""The Deployment controller: a Deployment's Pods through ReplicaSets, one per template it has had.

- The new ReplicaSet is the one whose template, without its `pod-template-hash` label, is the
  Deployment's; it is created as `<deployment>-<hash>` (the hash also labels its selector and Pods).
  Its `deployment.kubernetes.io/revision` is one more than any old one's (a ReplicaSet brought back by
  `rollout undo` is renumbered), with the desired-replicas and max-replicas annotations and the
  Deployment's own (change-cause); the Deployment carries the revision too.
- RollingUpdate: the new ReplicaSet grows while all of them stay within replicas + maxSurge (rounded
  up), the old ones shrink (unavailable Pods first, oldest ReplicaSet first) while at least replicas
  - maxUnavailable (rounded down) stay available; Recreate: the old ones go to 0, and once their Pods
  are gone the new one gets every replica.
- Once the rollout is complete, old ReplicaSets at 0 beyond revisionHistoryLimit are deleted.
- Status: replicas, updatedReplicas, readyReplicas, availableReplicas, unavailableReplicas,
  observedGeneration, and the conditions `kubectl rollout status` reads: Available
  (MinimumReplicasAvailable / MinimumReplicasUnavailable), Progressing (NewReplicaSetCreated,
  ReplicaSetUpdated, NewReplicaSetAvailable; ProgressDeadlineExceeded after progressDeadlineSeconds
  without progress).
Not done: spec.paused, proportional scaling of several live ReplicaSets, minReadySeconds."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from nodeenv.kubelet.rollout.events import reference
from nodeenv.kubelet.rollout.plan import APPS, REPLICASETS, Obj, Plan, condition, now, owner_ref, scaled
from nodeenv.kubelet.rollout.revisions import semantic, template_hash

DEPLOYMENTS = (APPS, "deployments")
HASH = "pod-template-hash"
REVISION = "deployment.kubernetes.io/revision"
DESIRED, MAX = "deployment.kubernetes.io/desired-replicas", "deployment.kubernetes.io/max-replicas"
_NOT_COPIED = {REVISION, DESIRED, MAX, "kubectl.kubernetes.io/last-applied-configuration",
               "deployment.kubernetes.io/revision-history"}  # fmt: skip


def revision(rs: Obj) -> int:
    return int((rs["metadata"].get("annotations") or {}).get(REVISION, "0") or 0)


def without_hash(template: Obj) -> Obj:
    t = copy.deepcopy(template)
    labels = (t.get("metadata") or {}).get("labels")
    if labels:
        labels.pop(HASH, None)
    return t


def _spec_replicas(rs: Obj) -> int:
    return int(rs["spec"].get("replicas", 0))


def _st(rs: Obj, key: str) -> int:
    return int((rs.get("status") or {}).get(key, 0))


@dataclass
class Rollout:
    """One pass over a Deployment: its new ReplicaSet (None until created) and the old ones."""

    d: Obj
    new: Obj | None
    old: list[Obj]
    plan: Plan
    created: bool = False
    scaled_new: bool = False

    @property
    def replicas(self) -> int:
        return int(self.d["spec"].get("replicas", 1))

    def bounds(self) -> tuple[int, int]:
        """(maxSurge, maxUnavailable) as counts; Recreate: (0, 0)."""
        strategy = self.d["spec"].get("strategy") or {}
        if strategy.get("type", "RollingUpdate") != "RollingUpdate":
            return 0, 0
        rolling = strategy.get("rollingUpdate") or {}
        surge = scaled(rolling.get("maxSurge", "25%"), self.replicas, True)
        unavailable = scaled(rolling.get("maxUnavailable", "25%"), self.replicas, False)
        return surge, (1 if surge == 0 and unavailable == 0 else unavailable)

    def annotations(self, rev: int) -> dict[str, str]:
        own = {k: v for k, v in (self.d["metadata"].get("annotations") or {}).items() if k not in _NOT_COPIED}
        return {**own, REVISION: str(rev), DESIRED: str(self.replicas),
                MAX: str(self.replicas + self.bounds()[0])}  # fmt: skip

    def scale(self, rs: Obj, to: int) -> None:
        if to != _spec_replicas(rs):
            meta, was = rs["metadata"], _spec_replicas(rs)
            how = "up" if to > was else "down"
            message = f"Scaled {how} replica set {meta['name']} from {was} to {to}"
            self.plan.events.append((reference(self.d, "Deployment"), "Normal", "ScalingReplicaSet", message))
            self.plan.patches.append(
                (REPLICASETS, meta["namespace"], meta["name"], {"spec": {"replicas": to}})
            )
            rs["spec"]["replicas"] = to


def new_replicaset(d: Obj, rev: int, replicas: int, annotations: dict[str, str]) -> Obj:
    h = template_hash(d["spec"]["template"])
    template = copy.deepcopy(d["spec"]["template"])
    template.setdefault("metadata", {}).setdefault("labels", {})[HASH] = h
    selector = copy.deepcopy(d["spec"]["selector"])
    selector.setdefault("matchLabels", {})[HASH] = h
    meta = {"name": f"{d['metadata']['name']}-{h}", "namespace": d["metadata"]["namespace"],
            "labels": template["metadata"]["labels"], "annotations": annotations,
            "ownerReferences": [owner_ref(d, "Deployment")]}  # fmt: skip
    spec = {"replicas": replicas, "selector": selector, "template": template}
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": meta, "spec": spec}


def _ensure_new(r: Rollout) -> None:
    """The new ReplicaSet's revision and annotations; creating it (at 0 replicas) if missing."""
    rev = max((revision(rs) for rs in r.old), default=0) + 1
    if r.new is not None and revision(r.new) > rev - 1:
        rev = revision(r.new)
    want = r.annotations(rev)
    if r.new is None:
        r.new = new_replicaset(r.d, rev, 0, want)
        r.plan.creates.append((REPLICASETS, r.d["metadata"]["namespace"], r.new))
        r.created = True
    elif {**(r.new["metadata"].get("annotations") or {}), **want} != r.new["metadata"].get("annotations"):
        meta = r.new["metadata"]
        r.plan.patches.append(
            (REPLICASETS, meta["namespace"], meta["name"], {"metadata": {"annotations": want}})
        )
    if (r.d["metadata"].get("annotations") or {}).get(REVISION) != str(rev):
        meta = r.d["metadata"]
        patch = {"metadata": {"annotations": {REVISION: str(rev)}}}
        r.plan.patches.append((DEPLOYMENTS, meta["namespace"], meta["name"], patch))


def _rolling(r: Rollout) -> None:
    assert r.new is not None
    surge, unavailable = r.bounds()
    total = sum(_spec_replicas(rs) for rs in [r.new, *r.old])
    current = _spec_replicas(r.new)
    target = (
        r.replicas
        if current > r.replicas
        else current + max(0, min(r.replicas + surge - total, r.replicas - current))
    )
    if target != current:
        r.scale(r.new, target)
        r.scaled_new = True
        return
    min_available = r.replicas - unavailable
    new_unavailable = current - _st(r.new, "availableReplicas")
    budget = total - min_available - new_unavailable
    for rs in r.old:  # unhealthy old replicas first
        cut = min(budget, _spec_replicas(rs) - _st(rs, "availableReplicas"))
        if cut > 0:
            r.scale(rs, _spec_replicas(rs) - cut)
            budget -= cut
    budget = sum(_st(rs, "availableReplicas") for rs in [r.new, *r.old]) - min_available
    for rs in r.old:
        cut = min(budget, _spec_replicas(rs))
        if cut > 0:
            r.scale(rs, _spec_replicas(rs) - cut)
            budget -= cut


def _recreate(r: Rollout) -> None:
    assert r.new is not None
    for rs in r.old:
        r.scale(rs, 0)
    if not any(_st(rs, "replicas") for rs in r.old):
        r.scaled_new = _spec_replicas(r.new) != r.replicas
        r.scale(r.new, r.replicas)


def _complete(r: Rollout, status: Obj) -> bool:
    n = r.replicas
    return bool(
        status["updatedReplicas"] == n and status["replicas"] == n and status["availableReplicas"] == n
    )


def _status(r: Rollout, at: str) -> Obj:
    assert r.new is not None
    every = [r.new, *r.old]
    status: Obj = {
        "observedGeneration": r.d["metadata"].get("generation", 1),
        "replicas": sum(_st(rs, "replicas") for rs in every),
        "updatedReplicas": 0 if r.created else _st(r.new, "replicas"),
        "readyReplicas": sum(_st(rs, "readyReplicas") for rs in every),
        "availableReplicas": sum(_st(rs, "availableReplicas") for rs in every),
    }
    status["unavailableReplicas"] = max(0, r.replicas - status["availableReplicas"])
    old = (r.d.get("status") or {}).get("conditions") or []
    enough = status["availableReplicas"] >= r.replicas - r.bounds()[1]
    available = (
        condition("Available", True, "MinimumReplicasAvailable",
                  "Deployment has minimum availability.", old, at)
        if enough
        else condition("Available", False, "MinimumReplicasUnavailable",
                       "Deployment does not have minimum availability.", old, at)
    )  # fmt: skip
    conds = [available, _progressing(r, status, old, at)]
    status["conditions"] = [_keep_update_time(c, old) for c in conds]
    return status


def _progressing(r: Rollout, status: Obj, old: list[Obj], at: str) -> Obj:
    assert r.new is not None
    name = r.new["metadata"]["name"]
    prev = next((c for c in old if c.get("type") == "Progressing"), None)
    if _complete(r, status):
        return condition("Progressing", True, "NewReplicaSetAvailable",
                         f'ReplicaSet "{name}" has successfully progressed.', old, at)  # fmt: skip
    if r.created:
        return condition(
            "Progressing", True, "NewReplicaSetCreated", f'Created new replica set "{name}"', old, at
        )
    counts = ("replicas", "updatedReplicas", "readyReplicas", "availableReplicas")
    before = r.d.get("status") or {}
    moved = r.scaled_new or any(before.get(k, 0) != status[k] for k in counts)
    if moved or prev is None or prev.get("reason") == "NewReplicaSetAvailable":
        return condition(
            "Progressing", True, "ReplicaSetUpdated", f'ReplicaSet "{name}" is progressing.', old, at
        )
    deadline = int(r.d["spec"].get("progressDeadlineSeconds", 600))
    if _age(prev.get("lastUpdateTime", at), at) > deadline:
        return condition("Progressing", False, "ProgressDeadlineExceeded",
                         f'ReplicaSet "{name}" has timed out progressing.', old, at)  # fmt: skip
    return prev


def _keep_update_time(cond: Obj, old: list[Obj]) -> Obj:
    """An unchanged condition keeps its lastUpdateTime (the status write is then a no-op)."""
    prev = next((c for c in old if c.get("type") == cond["type"]), None)
    same = prev is not None and all(prev.get(k) == cond.get(k) for k in ("status", "reason", "message"))
    if prev is not None and same and cond["reason"] != "ReplicaSetUpdated":
        return prev
    return cond


def _age(stamp: str, at: str) -> float:
    fmt = "%Y-%m-%dT%H:%M:%SZ"
    return (datetime.strptime(at, fmt) - datetime.strptime(stamp, fmt)).total_seconds()


def reconcile(d: Obj, replicasets: list[Obj], plan: Plan, at: str | None = None) -> None:
    """`replicasets`: those the Deployment controls."""
    template = d["spec"]["template"]
    rss: list[Any] = [copy.deepcopy(rs) for rs in replicasets]
    new = next(
        (rs for rs in rss if semantic(without_hash(rs["spec"]["template"])) == semantic(template)), None
    )
    r = Rollout(d, new, [rs for rs in rss if rs is not new], plan)
    r.old.sort(key=revision)
    _ensure_new(r)
    if (d["spec"].get("strategy") or {}).get("type") == "Recreate":
        _recreate(r)
    else:
        _rolling(r)
    status = _status(r, at or now())
    if _complete(r, status):
        _prune(r)
    plan.status(DEPLOYMENTS, d, status)


def _prune(r: Rollout) -> None:
    limit = int(r.d["spec"].get("revisionHistoryLimit", 10))
    idle = [rs for rs in r.old if not _spec_replicas(rs) and not _st(rs, "replicas")]
    for rs in idle[: max(0, len(idle) - limit)]:
        r.plan.delete(REPLICASETS, rs)
