"""Dropped packets as Kubernetes Events in the namespace whose policy dropped them, so a tenant (who
has no node access) sees them: `kubectl get events -n <ns> --field-selector reason=PolicyDenied`.

One Event per (policy, node), regarding the NetworkPolicy for a tenant's allow-list miss (`np`) or the
Namespace for its default deny (`np-deny`) and for an admin policy's drop in that namespace (`anp`,
`banp`, namespace resolved from the judged pod); repeats become the Event's series count (the
machinery's EventRecorder: at most one PATCH per minute per series, new Events per regarding object
token-bucketed), so a flood costs a few writes. Only drops and rejects: allowed traffic stays in the
node's JSON log and counters (admins). The note is the first packet's 5-tuple and direction; both ends
are the tenant's own pod and the peer it talked to, nothing of another tenant it could not see.
"""

from __future__ import annotations

import logging
from pathlib import Path

from cni.acl_log import Verdict
from controllers.machinery.events import EventRecorder
from controllers.machinery.kubeconfig import load_api_client
from controllers.machinery.rest import KubeClient
from controllers.machinery.store import KubeObject

log = logging.getLogger(__name__)
REASON, ACTION = "PolicyDenied", "Drop"
CONTROLLER = "prismnet-agent.plasmacloud.io"
IN_CLUSTER = "in-cluster"


def regarding(v: Verdict) -> KubeObject | None:
    """The object the Event is about (namespaced, so the Event lands in the tenant's namespace)."""
    if v.verdict not in ("drop", "reject") or not v.namespace:
        return None
    if v.kind == "np":
        return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
                "metadata": {"name": v.policy, "namespace": v.namespace}}  # fmt: skip
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": v.namespace, "namespace": v.namespace},
    }


def note(v: Verdict) -> str:
    ports = (f":{v.sport}", f":{v.dport}") if v.dport is not None else ("", "")
    return (f"{v.protocol} {v.src}{ports[0]} -> {v.dst}{ports[1]} ({v.direction}) dropped by "
            f"{v.acl or v.policy}; repeats are counted in this Event's series")  # fmt: skip


class DropEvents:
    def __init__(self, recorder: EventRecorder, closer: object = None) -> None:
        self.recorder, self._closer = recorder, closer

    @classmethod
    async def connect(cls, kubeconfig: str, node: str) -> DropEvents:
        """`kubeconfig` a path, or IN_CLUSTER for the pod's service account."""
        path = None if kubeconfig == IN_CLUSTER else Path(kubeconfig)
        api = await load_api_client(path, in_cluster=path is None, program="prismnet-agent")
        return cls(EventRecorder(KubeClient(api), controller=CONTROLLER, instance=node), api)

    async def record(self, v: Verdict) -> None:
        obj = regarding(v)
        if obj is not None:
            await self.recorder.record(obj, "Warning", REASON, ACTION, note(v))

    async def close(self) -> None:
        await self.recorder.flush()
        close = getattr(self._closer, "close", None)
        if close is not None:
            await close()
