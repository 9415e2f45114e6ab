"""The DaemonSet controller: one Pod on every Node the template's nodeSelector fits (bound to it),
labelled with the template's `controller-revision-hash` and `pod-template-generation`; the
template's ControllerRevision (revisions.py); a RollingUpdate replaces the Pods of an older
revision, the not-Ready ones at once and the others while fewer than maxUnavailable (a count or a
percentage of the desired Nodes, rounded up) are unavailable; with maxSurge (a count or percentage,
rounded up; Kubernetes 1.22+) the new Pod starts beside the old one instead, on at most maxSurge
Nodes at once (at once where the old one is not Ready), and the old one is deleted once the new one
is Ready; OnDelete waits for the admin to delete them. Pods on Nodes that no longer fit, and second
Pods on a Node (beyond an old and a new one while surging), are deleted.
Status as kube-controller-manager writes it: desiredNumberScheduled, currentNumberScheduled,
numberMisscheduled, numberReady, updatedNumberScheduled, numberAvailable, numberUnavailable,
observedGeneration."""

from __future__ import annotations

from nodeenv.kubelet.controllers import from_template
from nodeenv.kubelet.rollout.plan import APPS, PODS, Obj, Plan, active, ready, scaled
from nodeenv.kubelet.rollout.revisions import HASH_LABEL, ensure_revision, prune, template_hash
from nodeenv.kubelet.scheduler import fits

DAEMONSETS = (APPS, "daemonsets")


def _new_pod(ds: Obj, h: str, node: str) -> Obj:
    generation = str(ds["metadata"].get("generation", 1))
    pod = from_template(
        {**ds, "kind": "DaemonSet"}, "", {HASH_LABEL: h, "pod-template-generation": generation}
    )
    del pod["metadata"]["name"]
    pod["metadata"]["generateName"] = f"{ds['metadata']['name']}-"
    pod["spec"]["nodeName"] = node
    return pod


def _rolling(ds: Obj) -> Obj | None:
    strategy = ds["spec"].get("updateStrategy") or {}
    if strategy.get("type", "RollingUpdate") != "RollingUpdate":
        return None
    return dict(strategy.get("rollingUpdate") or {})


def _is_new(pod: Obj, h: str) -> bool:
    return bool(pod["metadata"].get("labels", {}).get(HASH_LABEL) == h)


def _replace_old(ds: Obj, h: str, placed: dict[str, Obj], desired: int, plan: Plan) -> None:
    rolling = _rolling(ds)
    if rolling is None:
        return
    budget = scaled(rolling.get("maxUnavailable", 1), desired, True) or 1
    unavailable = desired - sum(1 for p in placed.values() if ready(p))
    old = [p for p in placed.values() if not _is_new(p, h)]
    for pod in sorted(old, key=ready):  # the not-Ready old ones first, and those freely
        if ready(pod):
            if unavailable >= budget:
                break
            unavailable += 1
        plan.delete(PODS, pod)


def _surge(ds: Obj, h: str, on_node: dict[str, list[Obj]], surge: int, plan: Plan) -> None:
    """kube-controller-manager's surging update: a new Pod beside an old one (at once where the old
    one is not Ready, else while fewer than `surge` Nodes are surging), the old one deleted once the
    new one is Ready."""
    candidates, surging = [], 0
    for node, pods in sorted(on_node.items()):
        new = next((p for p in pods if _is_new(p, h)), None)
        old = next((p for p in pods if not _is_new(p, h)), None)
        if old is None:
            continue
        if new is None:
            if not ready(old):
                plan.creates.append((PODS, ds["metadata"]["namespace"], _new_pod(ds, h, node)))
            else:
                candidates.append(node)
        elif ready(new):
            plan.delete(PODS, old)
        else:
            surging += 1
    for node in candidates[: max(0, surge - surging)]:
        plan.creates.append((PODS, ds["metadata"]["namespace"], _new_pod(ds, h, node)))


def reconcile(ds: Obj, nodes: list[Obj], pods: list[Obj], revs: list[Obj], plan: Plan) -> None:
    """`pods` and `revs`: those the DaemonSet controls."""
    name, ns = ds["metadata"]["name"], ds["metadata"]["namespace"]
    h = template_hash(ds["spec"]["template"])
    ensure_revision(ds, "DaemonSet", revs, f"{name}-{h}", h, plan)
    wanted = [n["metadata"]["name"] for n in nodes if fits(ds["spec"]["template"]["spec"], n)]
    rolling = _rolling(ds)
    surge = scaled(rolling.get("maxSurge", 0), len(wanted), True) if rolling is not None else 0
    on_node: dict[str, list[Obj]] = {}
    misscheduled = 0
    for pod in (p for p in pods if active(p)):  # oldest first
        node = pod["spec"].get("nodeName", "")
        kept = on_node.setdefault(node, []) if node in wanted else None
        # one Pod per Node; while surging one old and one new
        if kept is None or (
            kept and not (surge and len(kept) == 1 and _is_new(pod, h) != _is_new(kept[0], h))
        ):
            misscheduled += node not in wanted
            plan.delete(PODS, pod)
        else:
            kept.append(pod)
    placed = {node: kept[0] for node, kept in on_node.items() if kept}  # the oldest, as kcm counts
    for node in wanted:
        if node not in placed:
            plan.creates.append((PODS, ns, _new_pod(ds, h, node)))
    if surge:
        _surge(ds, h, on_node, surge, plan)
    else:
        _replace_old(ds, h, placed, len(wanted), plan)
    in_use = {
        f"{name}-{p['metadata'].get('labels', {}).get(HASH_LABEL)}" for ps in on_node.values() for p in ps
    }
    prune(ds, revs, in_use | {f"{name}-{h}"}, plan)
    n_ready = sum(1 for p in placed.values() if ready(p))
    updated = sum(1 for p in placed.values() if _is_new(p, h))
    status = {
        "desiredNumberScheduled": len(wanted), "currentNumberScheduled": len(placed),
        "numberMisscheduled": misscheduled, "numberReady": n_ready, "numberAvailable": n_ready,
        "updatedNumberScheduled": updated, "numberUnavailable": (len(wanted) - n_ready) or None,
        "observedGeneration": ds["metadata"].get("generation", 1),
    }  # fmt: skip
    plan.status(DAEMONSETS, ds, status)
