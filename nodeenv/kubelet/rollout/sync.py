"""One pass of the workload controllers over the cluster: the Deployments (ReplicaSets), the
ReplicaSets (Pods), the DaemonSets and StatefulSets (Pods, ControllerRevisions), each plan applied
through the API; and the garbage collector's part for these kinds: Pods, ReplicaSets and
ControllerRevisions whose controller (a ReplicaSet, Deployment, DaemonSet or StatefulSet) is gone
are deleted, as the background cascade does (the API double has no garbage collector).

A write refused with 404 or 409 (the object changed or went meanwhile) is left to the next pass,
as a controller requeues; one admission refuses (403, 422: a Pod PodSecurity or a quota forbids)
is logged and left, as the controllers record FailedCreate (no ReplicaFailure condition here).
Before a namespace's first Pod: its `default` ServiceAccount and `kube-root-ca.crt` (`on_pod`)."""

from __future__ import annotations

import logging
from collections.abc import Callable

from nodeenv.kubelet.apiclient import ApiError, KubeClient
from nodeenv.kubelet.events import SchedulerEvents
from nodeenv.kubelet.rollout import daemonsets, deployments, events, replicasets, statefulsets
from nodeenv.kubelet.rollout.plan import (
    APPS,
    CORE,
    PODS,
    REPLICASETS,
    REVISIONS,
    Obj,
    Plan,
    owned,
)

log = logging.getLogger(__name__)
OWNER_KINDS = ("ReplicaSet", "Deployment", "DaemonSet", "StatefulSet")


def _path(res: tuple[str, str], ns: str, name: str = "") -> str:
    return f"{res[0]}/namespaces/{ns}/{res[1]}" + (f"/{name}" if name else "")


def apply(client: KubeClient, plan: Plan, on_pod: Callable[[str], None]) -> None:
    """The plan's writes, and the controllers' events on what they did."""
    for res, ns, obj in plan.creates:
        if res == PODS:
            on_pod(ns)
        made, error = _write(client, "POST", _path(res, ns), obj, "application/json")
        if res == PODS and (made is not None or error):
            _event(client, events.pod_event(made or obj, created=True, error=error))
        node = obj["spec"].get("nodeName", "") if res == PODS else ""
        if made is not None and node:  # a DaemonSet's pod, bound at creation: kube-scheduler says so
            SchedulerEvents(client).scheduled(made, node)
    for res, ns, name, patch in plan.patches:
        _write(client, "PATCH", _path(res, ns, name), patch, "application/merge-patch+json")
    for res, ns, name in plan.deletes:
        gone, _ = _write(client, "DELETE", _path(res, ns, name), None, "application/json")
        if res == PODS and gone is not None:
            _event(client, events.pod_event(plan.deleted[(res, ns, name)], created=False))
    for res, ns, name, status in plan.statuses:
        _write(
            client,
            "PATCH",
            _path(res, ns, name) + "/status",
            {"status": status},
            "application/merge-patch+json",
        )
    for ref, type_, reason, message in plan.events:
        _event(client, events.Event(ref, type_, reason, message))


def _event(client: KubeClient, event: events.Event | None) -> None:
    if event is not None:
        events.record(client, event)


def _write(
    client: KubeClient, method: str, path: str, body: Obj | None, ctype: str
) -> tuple[Obj | None, str]:
    """(the reply, "") or (None, the API's message when admission refused it)."""
    try:
        return client.request(method, path, body, ctype), ""
    except ApiError as e:
        if e.code not in (403, 404, 409, 422):
            raise
        log.log(logging.INFO if e.code in (404, 409) else logging.WARNING, "%s %s: %s", method, path, e)
        return None, str(e.status.get("message", "")) if e.code in (403, 422) else ""


def _orphans(objs: list[Obj], owners: set[str]) -> list[Obj]:
    out = []
    for o in objs:
        refs = [r for r in o["metadata"].get("ownerReferences") or [] if r.get("controller")]
        if refs and refs[0].get("kind") in OWNER_KINDS and refs[0].get("uid") not in owners:
            out.append(o)
    return out


def sync(client: KubeClient, nodes: list[Obj], on_pod: Callable[[str], None], namespace: str = "") -> None:
    """One pass over every namespace, or over `namespace` only."""
    # dependents before their owners: an owner made between the two lists is not missed
    pods = client.list(CORE, "pods", namespace)
    revs = client.list(*REVISIONS, namespace)
    rss = client.list(*REPLICASETS, namespace)
    deploys = client.list(APPS, "deployments", namespace)
    dss, stss = client.list(APPS, "daemonsets", namespace), client.list(APPS, "statefulsets", namespace)
    plan = Plan()
    for rs in rss:  # the Deployments see their ReplicaSets' Pods as they are now (an informer would)
        rs["status"] = {**(rs.get("status") or {}), **replicasets.status_of(rs, owned(pods, rs))}
    for d in deploys:
        deployments.reconcile(d, owned(rss, d), plan)
    apply(client, plan, on_pod)
    rss = client.list(*REPLICASETS, namespace)
    plan = Plan()
    for rs in rss:
        replicasets.reconcile(rs, owned(pods, rs), plan)
    for ds in dss:
        daemonsets.reconcile(ds, nodes, owned(pods, ds), owned(revs, ds), plan)
    for sts in stss:
        statefulsets.reconcile(sts, owned(pods, sts), owned(revs, sts), plan)
    owners = {o["metadata"]["uid"] for o in rss + deploys + dss + stss}
    for res, objs in ((PODS, pods), (REPLICASETS, rss), (REVISIONS, revs)):
        for o in _orphans(objs, owners):
            log.info("%s %s/%s: its controller is gone: deleting it", res[1], o["metadata"]["namespace"],
                     o["metadata"]["name"])  # fmt: skip
            plan.delete(res, o)
    apply(client, plan, on_pod)
