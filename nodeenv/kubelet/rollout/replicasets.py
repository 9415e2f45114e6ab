"""The ReplicaSet controller: `spec.replicas` Pods from the template (generateName `<rs>-`, the
ReplicaSet as their controller), the excess deleted (unscheduled first, then not Ready, then the
newest), and the status kube-controller-manager writes: replicas, fullyLabeledReplicas,
readyReplicas, availableReplicas (minReadySeconds is not waited for: Ready counts as available),
observedGeneration."""

from __future__ import annotations

from nodeenv.kubelet.controllers import from_template
from nodeenv.kubelet.rollout.plan import PODS, REPLICASETS, Obj, Plan, active, ready


def _deletion_rank(pod: Obj) -> tuple[bool, bool, str]:
    meta = pod["metadata"]
    return (bool(pod["spec"].get("nodeName")), ready(pod), _inverted(meta.get("creationTimestamp", "")))


def _inverted(stamp: str) -> str:
    """Sorts the newest first."""
    return "".join(chr(0x10FFFF - ord(ch)) for ch in stamp)


def reconcile(rs: Obj, pods: list[Obj], plan: Plan) -> None:
    """`pods`: those the ReplicaSet controls."""
    live = [p for p in pods if active(p)]
    want = int(rs["spec"].get("replicas", 1))
    ns = rs["metadata"]["namespace"]
    for _ in range(want - len(live)):
        pod = from_template({**rs, "kind": "ReplicaSet"}, "", {})
        del pod["metadata"]["name"]
        pod["metadata"]["generateName"] = f"{rs['metadata']['name']}-"
        plan.creates.append((PODS, ns, pod))
    for pod in sorted(live, key=_deletion_rank)[: max(0, len(live) - want)]:
        plan.delete(PODS, pod)
    plan.status(REPLICASETS, rs, status_of(rs, pods))


def status_of(rs: Obj, pods: list[Obj]) -> Obj:
    """The status the ReplicaSet's Pods (those it controls) make."""
    live = [p for p in pods if active(p)]
    n_ready = sum(1 for p in live if ready(p))
    generation = rs["metadata"].get("generation", 1)
    return {"replicas": len(live), "fullyLabeledReplicas": len(live), "readyReplicas": n_ready,
            "availableReplicas": n_ready, "observedGeneration": generation}  # fmt: skip
