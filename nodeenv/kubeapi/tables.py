"""`meta.k8s.io/v1` Tables for `kubectl get`: the columns of kube-apiserver's printers for the kinds
kubectl users look at (Namespaces, Pods, Services, Endpoints, EndpointSlices, Nodes, ConfigMaps,
Secrets, Leases, the workloads, StorageClasses, VolumeAttributesClasses, CRDs), a custom resource's
additionalPrinterColumns, Name/Age for the rest. Rows carry the object as `PartialObjectMetadata` unless the
client asks `includeObject=Object` (or `None`). Age uses the apiserver's HumanDuration buckets.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from typing import Any

from nodeenv.kubeapi.kinds import Kind

Obj = dict[str, Any]
Column = tuple[str, str, Callable[[Obj], Any]]  # name, type, cell


def wants_table(accept: str) -> bool:
    return "as=Table" in accept


def human_duration(seconds: float) -> str:
    s = int(seconds)
    if s < 0:
        return "<invalid>"
    if s < 120:
        return f"{s}s"
    m = s // 60
    if m < 10:
        return f"{m}m{s % 60}s" if s % 60 else f"{m}m"
    if m < 180:
        return f"{m}m"
    h = s // 3600
    if h < 8:
        return f"{h}h{m % 60}m" if m % 60 else f"{h}h"
    if h < 48:
        return f"{h}h"
    d = h // 24
    if h < 24 * 8:
        return f"{d}d{h % 24}h" if h % 24 else f"{d}d"
    return f"{d}d" if d < 365 * 2 else f"{d // 365}y"


def _age(o: Obj) -> str:
    ts = o["metadata"].get("creationTimestamp")
    if not ts:
        return "<unknown>"
    created = dt.datetime.strptime(ts, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC)
    return human_duration((dt.datetime.now(dt.UTC) - created).total_seconds())


def _get(o: Obj, *path: str) -> Any:
    cur: Any = o
    for p in path:
        cur = cur.get(p) if isinstance(cur, dict) else None
    return cur


def _svc_ports(o: Obj) -> str:
    out = []
    for p in _get(o, "spec", "ports") or []:
        node = f":{p['nodePort']}" if p.get("nodePort") else ""
        out.append(f"{p.get('port')}{node}/{p.get('protocol', 'TCP')}")
    return ",".join(out) or "<none>"


def _external_ip(o: Obj) -> str:
    ips = [i.get("ip") or i.get("hostname") for i in _get(o, "status", "loadBalancer", "ingress") or []]
    ips += _get(o, "spec", "externalIPs") or []
    if ips:
        return ",".join(str(i) for i in ips)
    if _get(o, "spec", "type") == "LoadBalancer":
        return "<pending>"
    return _get(o, "spec", "externalName") or "<none>"


def _pod_ready(o: Obj) -> str:
    statuses = _get(o, "status", "containerStatuses") or []
    total = len(_get(o, "spec", "containers") or [])
    return f"{sum(1 for s in statuses if s.get('ready'))}/{total}"


def _endpoints(o: Obj) -> str:
    addrs = [
        f"{a.get('ip')}:{p.get('port')}"
        for s in o.get("subsets") or []
        for a in s.get("addresses") or []
        for p in s.get("ports") or [{}]
    ]
    return ",".join(addrs[:3]) + (f" + {len(addrs) - 3} more..." if len(addrs) > 3 else "") or "<none>"


def _slice_endpoints(o: Obj) -> str:
    ips = [a for e in o.get("endpoints") or [] for a in e.get("addresses") or []]
    return ",".join(ips[:3]) + (f" + {len(ips) - 3} more..." if len(ips) > 3 else "") or "<none>"


def _restarts(o: Obj) -> str:
    return str(sum(s.get("restartCount", 0) for s in _get(o, "status", "containerStatuses") or []))


def _slice_ports(o: Obj) -> str:
    return ",".join(str(p.get("port")) for p in o.get("ports") or []) or "<unset>"


def _node_status(o: Obj) -> str:
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in _get(o, "status", "conditions") or []
    )
    return "Ready" if ready else "NotReady"


def _node_roles(o: Obj) -> str:
    """The printer's findNodeRoles: `node-role.kubernetes.io/<role>` keys and `kubernetes.io/role`."""
    roles = set()
    for k, v in (_get(o, "metadata", "labels") or {}).items():
        if k.startswith("node-role.kubernetes.io/") and k[len("node-role.kubernetes.io/") :]:
            roles.add(k[len("node-role.kubernetes.io/") :])
        elif k == "kubernetes.io/role" and v:
            roles.add(v)
    return ",".join(sorted(roles)) or "<none>"


def _apiservice_service(o: Obj) -> str:
    svc = _get(o, "spec", "service")
    return f"{svc.get('namespace')}/{svc.get('name')}" if isinstance(svc, dict) else "Local"


def _apiservice_available(o: Obj) -> str:
    for c in _get(o, "status", "conditions") or []:
        if c.get("type") == "Available":
            return "True" if c.get("status") == "True" else f"{c.get('status')} ({c.get('reason')})"
    return "Unknown"


def _data_count(o: Obj) -> int:
    return len(o.get("data") or {}) + len(o.get("binaryData") or {})


def _event_object(o: Obj) -> str:
    ref = o.get("involvedObject") or o.get("regarding") or {}
    return f"{str(ref.get('kind', '')).lower()}/{ref.get('name', '')}"


def _last_seen(o: Obj) -> str:
    ts = o.get("lastTimestamp") or o.get("deprecatedLastTimestamp") or o.get("eventTime")
    if not ts:
        return _age(o)
    seen = dt.datetime.strptime(str(ts)[:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=dt.UTC)
    return human_duration((dt.datetime.now(dt.UTC) - seen).total_seconds())


def _selector(o: Obj) -> str:
    sel = _get(o, "spec", "selector") or {}
    return ",".join(f"{k}={v}" for k, v in sorted(sel.items())) or "<none>"


_WIDE = ("IP", "Node", "Selector", "Containers", "Images")


def _int(*status_path: str) -> Callable[[Obj], int]:
    return lambda o: int(_get(o, "status", *status_path) or 0)


def _ready_of_replicas(o: Obj) -> str:
    return f"{_get(o, 'status', 'readyReplicas') or 0}/{_get(o, 'spec', 'replicas') or 0}"


def _template_containers(o: Obj) -> list[Obj]:
    return list(_get(o, "spec", "template", "spec", "containers") or [])


def _containers(o: Obj) -> str:
    return ",".join(str(c.get("name")) for c in _template_containers(o))


def _images(o: Obj) -> str:
    return ",".join(str(c.get("image")) for c in _template_containers(o))


def _completions(o: Obj) -> str:
    return f"{_int('succeeded')(o)}/{_get(o, 'spec', 'completions') or 1}"


def _node_selector(o: Obj) -> str:
    sel = _get(o, "spec", "template", "spec", "nodeSelector") or {}
    return ",".join(f"{k}={v}" for k, v in sorted(sel.items())) or "<none>"


def _custom_columns(kind: Kind) -> list[Column]:
    """A custom resource's additionalPrinterColumns (simple `.a.b` JSON paths); dates shown as ages."""
    cols: list[Column] = [_NAME]
    for c in kind.columns:
        path = tuple(p for p in str(c.get("jsonPath", "")).split(".") if p)
        date = c.get("type") == "date"
        cols.append((str(c["name"]), "string" if date else str(c.get("type", "string")), _cell(path, date)))
    return cols if kind.columns else [_NAME, _AGE]


def _cell(path: tuple[str, ...], date: bool) -> Callable[[Obj], Any]:
    if date:
        return lambda o: _age_at(_get(o, *path))
    return lambda o: _get(o, *path)


def _age_at(ts: Any) -> str:
    return _age({"metadata": {"creationTimestamp": ts}}) if ts else "<unknown>"


def _str(*path: str, default: str = "") -> Callable[[Obj], str]:
    return lambda o: str(_get(o, *path) or default)


def _controller(o: Obj) -> str:
    """A ControllerRevision's owner as kubectl prints it: `daemonset.apps/tick`."""
    ref = next((r for r in o["metadata"].get("ownerReferences") or [] if r.get("controller")), None)
    if ref is None:
        return "<none>"
    group = str(ref.get("apiVersion", "")).rpartition("/")[0]
    return f"{str(ref.get('kind', '')).lower()}{'.' + group if group else ''}/{ref.get('name', '')}"


_NAME: Column = ("Name", "string", lambda o: o["metadata"]["name"])
_AGE: Column = ("Age", "string", _age)
COLUMNS: dict[str, list[Column]] = {
    "Namespace": [_NAME, ("Status", "string", _str("status", "phase")), _AGE],
    "Pod": [_NAME, ("Ready", "string", _pod_ready),
            ("Status", "string", _str("status", "phase", default="Pending")),
            ("Restarts", "string", _restarts), _AGE,
            ("IP", "string", _str("status", "podIP", default="<none>")),
            ("Node", "string", _str("spec", "nodeName", default="<none>"))],
    "Service": [_NAME, ("Type", "string", _str("spec", "type")),
                ("Cluster-IP", "string", _str("spec", "clusterIP", default="<none>")),
                ("External-IP", "string", _external_ip), ("Port(s)", "string", _svc_ports), _AGE,
                ("Selector", "string", _selector)],
    "Endpoints": [_NAME, ("Endpoints", "string", _endpoints), _AGE],
    "EndpointSlice": [_NAME, ("AddressType", "string", _str("addressType")),
                      ("Ports", "string", _slice_ports), ("Endpoints", "string", _slice_endpoints), _AGE],
    "Node": [_NAME, ("Status", "string", _node_status), ("Roles", "string", _node_roles), _AGE,
             ("Version", "string", _str("status", "nodeInfo", "kubeletVersion"))],
    "ConfigMap": [_NAME, ("Data", "integer", _data_count), _AGE],
    "Secret": [_NAME, ("Type", "string", _str("type", default="Opaque")),
               ("Data", "integer", _data_count), _AGE],
    "Event": [("Last Seen", "string", _last_seen), ("Type", "string", _str("type")),
              ("Reason", "string", _str("reason")), ("Object", "string", _event_object),
              ("Message", "string", lambda o: str(o.get("message") or o.get("note") or "")), _NAME],
    "Lease": [_NAME, ("Holder", "string", _str("spec", "holderIdentity")), _AGE],
    "ControllerRevision": [_NAME, ("Controller", "string", _controller),
                           ("Revision", "integer", lambda o: int(o.get("revision") or 0)), _AGE],
    "DaemonSet": [_NAME, ("Desired", "integer", _int("desiredNumberScheduled")),
                  ("Current", "integer", _int("currentNumberScheduled")),
                  ("Ready", "integer", _int("numberReady")),
                  ("Up-to-date", "integer", _int("updatedNumberScheduled")),
                  ("Available", "integer", _int("numberAvailable")),
                  ("Node Selector", "string", _node_selector),
                  _AGE, ("Containers", "string", _containers), ("Images", "string", _images)],
    "Deployment": [_NAME, ("Ready", "string", _ready_of_replicas),
                   ("Up-to-date", "integer", _int("updatedReplicas")),
                   ("Available", "integer", _int("availableReplicas")), _AGE,
                   ("Containers", "string", _containers), ("Images", "string", _images)],
    "StatefulSet": [_NAME, ("Ready", "string", _ready_of_replicas), _AGE,
                    ("Containers", "string", _containers), ("Images", "string", _images)],
    "ReplicaSet": [_NAME, ("Desired", "integer", lambda o: _get(o, "spec", "replicas") or 0),
                   ("Current", "integer", _int("replicas")), ("Ready", "integer", _int("readyReplicas")),
                   _AGE],
    "ReplicationController": [_NAME, ("Desired", "integer", lambda o: _get(o, "spec", "replicas") or 0),
                              ("Current", "integer", _int("replicas")),
                              ("Ready", "integer", _int("readyReplicas")), _AGE],
    "APIService": [_NAME, ("Service", "string", _apiservice_service),
                   ("Available", "string", _apiservice_available), _AGE],
    "Job": [_NAME, ("Completions", "string", _completions), _AGE],
    "StorageClass": [_NAME, ("Provisioner", "string", _str("provisioner")),
                     ("ReclaimPolicy", "string", _str("reclaimPolicy")),
                     ("VolumeBindingMode", "string", _str("volumeBindingMode")),
                     ("AllowVolumeExpansion", "string", lambda o: str(bool(o.get("allowVolumeExpansion")))
                      .lower()),
                     _AGE],
    "VolumeAttributesClass": [_NAME, ("DriverName", "string", _str("driverName")), _AGE],
    "CustomResourceDefinition": [_NAME, ("Created At", "date", _str("metadata", "creationTimestamp"))],
}  # fmt: skip


def _row_object(o: Obj, include: str) -> Obj | None:
    if include == "None":
        return None
    if include == "Object":
        return o
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": o["metadata"]}


def table(kind: Kind, items: list[Obj], rv: str, query: Mapping[str, str], cont: str | None = None) -> Obj:
    cols = _custom_columns(kind) if kind.schema is not None else COLUMNS.get(kind.kind, [_NAME, _AGE])
    include = query.get("includeObject", "Metadata")
    rows = []
    for o in items:
        row: Obj = {"cells": [cell(o) for _, _, cell in cols]}
        if (ro := _row_object(o, include)) is not None:
            row["object"] = ro
        rows.append(row)
    meta: Obj = {"resourceVersion": rv}
    if cont:
        meta["continue"] = cont
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": meta,
        "columnDefinitions": [
            {
                "name": n,
                "type": t,
                "format": "name" if n == "Name" else "",
                "description": n,
                "priority": 1 if n in _WIDE or (n == "Name" and i) else 0,
            }  # these show only with -o wide
            for i, (n, t, _) in enumerate(cols)
        ],
        "rows": rows,
    }
