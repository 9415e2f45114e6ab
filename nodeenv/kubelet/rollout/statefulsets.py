"""The StatefulSet controller: members `<name>-0..replicas-1` (controllers.member: stable hostname,
the governing Service as subdomain), each labelled with its revision (`controller-revision-hash:
<name>-<hash>`); the template's ControllerRevision (revisions.py).

OrderedReady (the default): member i is created only once 0..i-1 are Running and Ready, the
surplus ones deleted from the highest ordinal, one at a time, only while all others are Running and
Ready; Parallel: all at once. RollingUpdate: once every member is Running and Ready, the highest
ordinal (>= partition) not at the update revision is deleted and comes back at it; members below the
partition come back at the current revision. OnDelete: nothing is replaced.
Status: replicas, readyReplicas, availableReplicas, currentReplicas, updatedReplicas,
currentRevision, updateRevision (currentRevision becomes updateRevision once every member is
updated and Ready), collisionCount, observedGeneration."""

from __future__ import annotations

from nodeenv.kubelet.controllers import member
from nodeenv.kubelet.rollout.plan import APPS, PODS, Obj, Plan, active, ready, running_ready
from nodeenv.kubelet.rollout.revisions import HASH_LABEL, ensure_revision, prune, template_hash

STATEFULSETS = (APPS, "statefulsets")


def _ordinal(sts: Obj, pod: Obj) -> int | None:
    prefix, name = f"{sts['metadata']['name']}-", pod["metadata"]["name"]
    tail = name[len(prefix) :]
    return int(tail) if name.startswith(prefix) and tail.isdigit() else None


def _revision_of(pod: Obj) -> str:
    return str(pod["metadata"].get("labels", {}).get(HASH_LABEL, ""))


def _template_of(rev: Obj) -> Obj:
    return {k: v for k, v in rev["data"]["spec"]["template"].items() if k != "$patch"}


def _partition(sts: Obj) -> int:
    strategy = sts["spec"].get("updateStrategy") or {}
    return int((strategy.get("rollingUpdate") or {}).get("partition", 0))


def _create(sts: Obj, i: int, current: Obj | None, plan: Plan) -> None:
    """Member i at the update revision, or at the current one below the partition."""
    spec = sts["spec"]
    if current is not None and i < _partition(sts):
        spec = {**spec, "template": _template_of(current)}
    pod = member({**sts, "kind": "StatefulSet", "spec": spec}, i, template_hash(spec["template"]))
    plan.creates.append((PODS, sts["metadata"]["namespace"], pod))


def _members(sts: Obj, pods: list[Obj], plan: Plan) -> dict[int, Obj]:
    out: dict[int, Obj] = {}
    for pod in (p for p in pods if active(p)):
        i = _ordinal(sts, pod)
        if i is None or i in out:
            plan.delete(PODS, pod)
        else:
            out[i] = pod
    return out


def _manage(sts: Obj, members: dict[int, Obj], update: str, current: Obj | None, plan: Plan) -> None:
    replicas = int(sts["spec"].get("replicas", 1))
    ordered = sts["spec"].get("podManagementPolicy", "OrderedReady") == "OrderedReady"
    for i in range(replicas):
        if i not in members:
            _create(sts, i, current, plan)
            if ordered:
                return
        elif ordered and not running_ready(members[i]):
            return
    surplus = sorted((i for i in members if i >= replicas), reverse=True)
    if surplus:
        for i in surplus[:1] if ordered else surplus:
            plan.delete(PODS, members[i])
        return
    strategy = (sts["spec"].get("updateStrategy") or {}).get("type", "RollingUpdate")
    if strategy != "RollingUpdate" or not all(running_ready(members.get(i)) for i in range(replicas)):
        return
    stale = [i for i in range(_partition(sts), replicas) if _revision_of(members[i]) != update]
    if stale:
        plan.delete(PODS, members[max(stale)])


def reconcile(sts: Obj, pods: list[Obj], revs: list[Obj], plan: Plan) -> None:
    """`pods` and `revs`: those the StatefulSet controls."""
    name = sts["metadata"]["name"]
    update = f"{name}-{template_hash(sts['spec']['template'])}"
    ensure_revision(sts, "StatefulSet", revs, update, update, plan)
    old = sts.get("status") or {}
    current_name = old.get("currentRevision") or update
    current = next((r for r in revs if r["metadata"]["name"] == current_name), None)
    members = _members(sts, pods, plan)
    _manage(sts, members, update, current, plan)
    replicas = int(sts["spec"].get("replicas", 1))
    n_ready = sum(1 for p in members.values() if ready(p))
    updated = sum(1 for p in members.values() if _revision_of(p) == update)
    if updated == replicas == len(members) == n_ready:
        current_name = update
    status = {
        "observedGeneration": sts["metadata"].get("generation", 1), "replicas": len(members),
        "readyReplicas": n_ready, "availableReplicas": n_ready, "updatedReplicas": updated,
        "currentReplicas": sum(1 for p in members.values() if _revision_of(p) == current_name),
        "currentRevision": current_name, "updateRevision": update, "collisionCount": 0,
    }  # fmt: skip
    prune(sts, revs, {_revision_of(p) for p in members.values()} | {update, current_name}, plan)
    plan.status(STATEFULSETS, sts, status)
