"""kube-controller-manager's EndpointSlice controller, for the runner's cluster: each Service with a
selector gets the EndpointSlices of the Pods it selects (their podIP, Ready from the Pod's Ready
condition, nodeName, targetRef, and the Pod's hostname when the Service is its subdomain), one slice
per set of resolved target ports (a named targetPort is the Pod's container port of that name; a Pod
without it goes to a slice without that port), labelled `kubernetes.io/service-name` and
`endpointslice.kubernetes.io/managed-by`, owned by the Service. A Service selecting nothing ready
still gets its slice (no endpoints), as the controller's placeholder; slices of a deleted Service,
or no longer wanted, are deleted.

Only what FiberLB, kube-proxy and flashdns read is written; topology hints, dual stack and the
100-endpoints split are not done (one node, IPv4)."""

from __future__ import annotations

import json
from typing import Any

from nodeenv.kubelet.apiclient import KubeClient
from nodeenv.kubelet.controllers import short_hash

Obj = dict[str, Any]
CORE, DISCOVERY = "/api/v1", "/apis/discovery.k8s.io/v1"
SERVICE_NAME = "kubernetes.io/service-name"
MANAGED_BY = "endpointslice.kubernetes.io/managed-by"
CONTROLLER = "endpointslice-controller.k8s.io"
PortKey = tuple[tuple[str, int, str], ...]


def _ready(pod: Obj) -> bool:
    conds = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conds)


def _target(port: Obj, pod: Obj) -> int | None:
    """The Service port's targetPort for this Pod: a number, or its container port of that name."""
    target: int | str = port.get("targetPort") or port["port"]
    if isinstance(target, int) or str(target).isdigit():
        return int(target)
    for c in pod["spec"].get("containers", []):
        for p in c.get("ports") or []:
            if p.get("name") == target and p.get("protocol", "TCP") == port.get("protocol", "TCP"):
                return int(p["containerPort"])
    return None


def _selected(svc: Obj, pod: Obj) -> bool:
    """The Service selects the Pod and it has an address (not-ready ones too: their endpoint says so)."""
    sel = svc["spec"].get("selector") or {}
    meta = pod["metadata"]
    labels = meta.get("labels") or {}
    alive = (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
    return (
        meta.get("namespace") == svc["metadata"]["namespace"]
        and all(labels.get(k) == v for k, v in sel.items())
        and bool((pod.get("status") or {}).get("podIP"))
        and not meta.get("deletionTimestamp")
        and alive
    )


def _endpoint(svc: Obj, pod: Obj) -> Obj:
    meta, ready = pod["metadata"], _ready(pod)
    ref = {"kind": "Pod", "namespace": meta["namespace"], "name": meta["name"], "uid": meta["uid"]}
    ep = {
        "addresses": [pod["status"]["podIP"]],
        "conditions": {"ready": ready, "serving": ready, "terminating": False},
        "nodeName": pod["spec"].get("nodeName", ""),
        "targetRef": ref,
    }
    spec = pod["spec"]
    if spec.get("hostname") and spec.get("subdomain") == svc["metadata"]["name"]:
        ep["hostname"] = spec["hostname"]  # a StatefulSet member's DNS name under its headless Service
    return ep


def desired_slices(svc: Obj, pods: list[Obj]) -> list[Obj]:
    """The EndpointSlices the controller wants for `svc` (none without a selector)."""
    spec, meta = svc["spec"], svc["metadata"]
    if not spec.get("selector") or spec.get("type") == "ExternalName":
        return []
    groups: dict[PortKey, list[Obj]] = {}
    for pod in sorted((p for p in pods if _selected(svc, p)), key=lambda p: p["metadata"]["name"]):
        key: PortKey = tuple(
            (p.get("name", ""), t, p.get("protocol", "TCP"))
            for p in spec.get("ports") or []
            if (t := _target(p, pod)) is not None
        )
        groups.setdefault(key, []).append(_endpoint(svc, pod))
    groups = groups or {(): []}
    owner = {"apiVersion": "v1", "kind": "Service", "name": meta["name"], "uid": meta.get("uid", ""),
             "controller": True, "blockOwnerDeletion": True}  # fmt: skip
    out = []
    for key, endpoints in sorted(groups.items()):
        name = f"{meta['name'][:57]}-{short_hash(meta['name'], json.dumps(key), n=5)}"
        out.append({
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": name, "namespace": meta["namespace"], "ownerReferences": [owner],
                         "labels": {SERVICE_NAME: meta["name"], MANAGED_BY: CONTROLLER}},
            "addressType": "IPv4", "endpoints": endpoints,
            "ports": [{"name": n, "port": p, "protocol": proto} for n, p, proto in key],
        })  # fmt: skip
    return out


def _same(have: Obj, want: Obj) -> bool:
    fields = ("endpoints", "ports", "addressType")
    return all((have.get(f) or []) == (want.get(f) or []) for f in fields) and all(
        (have["metadata"].get("labels") or {}).get(k) == v for k, v in want["metadata"]["labels"].items()
    )


def sync(client: KubeClient) -> None:
    """One pass over every Service: create, replace or delete EndpointSlices to match the Pods."""
    pods = client.list(CORE, "pods")
    want = {
        (s["metadata"]["namespace"], s["metadata"]["name"]): s
        for svc in client.list(CORE, "services")
        for s in desired_slices(svc, pods)
    }
    have = {
        (s["metadata"]["namespace"], s["metadata"]["name"]): s
        for s in client.list(DISCOVERY, "endpointslices", selector=f"{MANAGED_BY}={CONTROLLER}")
    }
    for (ns, name), s in want.items():
        old = have.get((ns, name))
        if old is None:
            client.create(DISCOVERY, "endpointslices", ns, s)
        elif not _same(old, s):
            s["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
            client.request("PUT", f"{DISCOVERY}/namespaces/{ns}/endpointslices/{name}", s)
    for ns, name in have.keys() - want.keys():
        client.delete(DISCOVERY, "endpointslices", ns, name)
