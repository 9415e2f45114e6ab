"""The DaemonSet controller: one Pod on every Node the template's nodeSelector fits (bound to it),
labelled with the template's `controller-revision-hash` and `pod-template-generation`; the
template's ControllerRevision (revisions.py); a RollingUpdate replaces the Pods of an older
revision, the not-Ready ones at once and the others while fewer than maxUnavailable (a count or a
percentage of the desired Nodes, rounded up) are unavailable; OnDelete waits for the admin to delete
them. Pods on Nodes that no longer fit, and second Pods on a Node, are deleted.
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


def _replace_old(ds: Obj, h: str, placed: dict[str, Obj], desired: int, plan: Plan) -> None:
    strategy = ds["spec"].get("updateStrategy") or {}
    if strategy.get("type", "RollingUpdate") != "RollingUpdate":
        return
    rolling = strategy.get("rollingUpdate") or {}
    budget = scaled(rolling.get("maxUnavailable", 1), desired, True) or 1
    unavailable = desired - sum(1 for p in placed.values() if ready(p))
    old = [p for p in placed.values() if p["metadata"].get("labels", {}).get(HASH_LABEL) != h]
    for pod in sorted(old, key=ready):  # the not-Ready old ones first, and those freely
        if ready(pod):
            if unavailable >= budget:
                break
            unavailable += 1
        plan.delete(PODS, pod)


def reconcile(ds: Obj, nodes: list[Obj], pods: list[Obj], revs: list[Obj], plan: Plan) -> None:
    """`pods` and `revs`: those the DaemonSet controls."""
    name, ns = ds["metadata"]["name"], ds["metadata"]["namespace"]
    h = template_hash(ds["spec"]["template"])
    ensure_revision(ds, "DaemonSet", revs, f"{name}-{h}", h, plan)
    wanted = [n["metadata"]["name"] for n in nodes if fits(ds["spec"]["template"]["spec"], n)]
    placed: dict[str, Obj] = {}
    misscheduled = 0
    for pod in (p for p in pods if active(p)):
        node = pod["spec"].get("nodeName", "")
        if node not in wanted or node in placed:
            misscheduled += node not in wanted
            plan.delete(PODS, pod)
        else:
            placed[node] = pod
    for node in wanted:
        if node not in placed:
            plan.creates.append((PODS, ns, _new_pod(ds, h, node)))
    _replace_old(ds, h, placed, len(wanted), plan)
    in_use = {f"{name}-{p['metadata'].get('labels', {}).get(HASH_LABEL)}" for p in placed.values()}
    prune(ds, revs, in_use | {f"{name}-{h}"}, plan)
    n_ready = sum(1 for p in placed.values() if ready(p))
    updated = sum(1 for p in placed.values() if p["metadata"].get("labels", {}).get(HASH_LABEL) == h)
    status = {
        "desiredNumberScheduled": len(wanted), "currentNumberScheduled": len(placed),
        "numberMisscheduled": misscheduled, "numberReady": n_ready, "numberAvailable": n_ready,
        "updatedNumberScheduled": updated, "numberUnavailable": (len(wanted) - n_ready) or None,
        "observedGeneration": ds["metadata"].get("generation", 1),
    }  # fmt: skip
    plan.status(DAEMONSETS, ds, status)
