"""The `/scale` subresource of Deployments, StatefulSets, ReplicaSets and ReplicationControllers
(autoscaling/v1 Scale).

What `kubectl scale` and the clients' `*_scale` calls use: GET answers the Scale view of the
object (spec.replicas; status.replicas and the selector as a string, as the apiserver renders
them), PUT and every PATCH type change `spec.replicas` of the object itself (its generation moves,
watchers see the update) and answer the new Scale. A negative or non-integer replicas is 422
Invalid on `Scale.autoscaling`; a stale resourceVersion in a PUT is 409 Conflict.
"""

from __future__ import annotations

import copy
from typing import Any

from aiohttp import web

from nodeenv.kubeapi.errors import STALE, conflict, invalid
from nodeenv.kubeapi.kinds import Kind
from nodeenv.kubeapi.patches import APPLY, MERGE, apply_patch, check_patch_type
from nodeenv.kubeapi.routing import RequestInfo
from nodeenv.kubeapi.state import ApiState
from nodeenv.kubeapi.wire import dry_run, parse_body, respond

Obj = dict[str, Any]
_SCALE_META = ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
SCALE_KIND = Kind(group="autoscaling", version="v1", kind="Scale", plural="scale", namespaced=True)
"""How errors name the Scale (`Scale.autoscaling "web" is invalid: ...`)."""


def scale_of(obj: Obj) -> Obj:
    meta = obj["metadata"]
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {k: meta[k] for k in _SCALE_META if k in meta},
        "spec": {"replicas": spec.get("replicas", 1)},
        "status": {"replicas": status.get("replicas", 0), "selector": selector_string(_selector(obj))},
    }


def _selector(obj: Obj) -> Any:
    sel = (obj.get("spec") or {}).get("selector")
    if obj.get("kind") == "ReplicationController":  # a plain label map
        return {"matchLabels": sel} if isinstance(sel, dict) else None
    return sel


def selector_string(sel: Any) -> str:
    """A LabelSelector as metav1.FormatLabelSelector writes it: `a=b,c in (d,e),!f`."""
    if not isinstance(sel, dict):
        return ""
    parts = [f"{k}={v}" for k, v in sorted((sel.get("matchLabels") or {}).items())]
    for e in sel.get("matchExpressions") or []:
        key, op, values = e.get("key", ""), e.get("operator", ""), sorted(e.get("values") or [])
        if op == "In":
            parts.append(f"{key} in ({','.join(values)})")
        elif op == "NotIn":
            parts.append(f"{key} notin ({','.join(values)})")
        elif op == "Exists":
            parts.append(key)
        elif op == "DoesNotExist":
            parts.append(f"!{key}")
    return ",".join(parts)


def _replicas(scale: Any, name: str) -> int:
    value = ((scale or {}).get("spec") or {}).get("replicas", 0) if isinstance(scale, dict) else None
    if isinstance(value, bool) or not isinstance(value, int):
        problem = f"Invalid value: {value!r}: must be an integer"
    elif value < 0:
        problem = f"Invalid value: {value}: must be greater than or equal to 0"
    else:
        return value
    raise invalid(SCALE_KIND, name, [("FieldValueInvalid", "spec.replicas", problem)])


def _store(st: ApiState, kind: Kind, info: RequestInfo, current: Obj, scale: Any, dry_run: bool) -> Obj:
    rv = ((scale or {}).get("metadata") or {}).get("resourceVersion") if isinstance(scale, dict) else None
    if rv not in (None, "") and rv != current["metadata"]["resourceVersion"]:
        raise conflict(kind, info.name, STALE)
    new = copy.deepcopy(current)
    new.setdefault("spec", {})["replicas"] = _replicas(scale, info.name)
    stored = st.resources.update(kind, info.namespace, info.name, new, dry_run=dry_run)
    return scale_of(stored)


async def get(request: web.Request, st: ApiState, info: RequestInfo, kind: Kind) -> web.StreamResponse:
    return respond(scale_of(st.resources.get(kind, info.namespace, info.name)))


async def update(request: web.Request, st: ApiState, info: RequestInfo, kind: Kind) -> web.StreamResponse:
    body = parse_body(await request.read(), request.headers.get("Content-Type", ""))
    current = st.resources.get(kind, info.namespace, info.name)
    return respond(_store(st, kind, info, current, body, dry_run(request.query)))


async def patch(request: web.Request, st: ApiState, info: RequestInfo, kind: Kind) -> web.StreamResponse:
    ctype = request.headers.get("Content-Type", "").split(";")[0].strip().lower()
    check_patch_type(ctype, kind)
    body = parse_body(await request.read(), ctype)
    current = st.resources.get(kind, info.namespace, info.name)
    view = scale_of(current)
    # server-side apply of a Scale sets what it names, as a merge would (no field ownership here)
    patched = apply_patch(MERGE if ctype == APPLY else ctype, view, body, "Scale")
    patched.setdefault("metadata", {})["resourceVersion"] = current["metadata"]["resourceVersion"]
    return respond(_store(st, kind, info, current, patched, dry_run(request.query)))


VERBS = {"get": get, "update": update, "patch": patch}
