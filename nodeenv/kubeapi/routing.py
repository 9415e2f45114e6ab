"""Request paths to RequestInfo, as k8s.io/apiserver's RequestInfoFactory resolves them.

/api/v1/<plural>[/<name>[/<sub>]]                              cluster-scoped, or a namespaced
/api/v1/namespaces/<ns>/<plural>[/<name>[/<sub>]]              kind across all namespaces
/apis/<group>/<version>/...                                    the same for named groups
/api/v1/watch/...                                              the deprecated watch prefix
/api/v1/namespaces/<ns>/serviceaccounts/<name>/token           TokenRequest (POST only)
/api/v1/namespaces/<ns>/pods/<name>/binding                    Binding, the scheduler's (POST only)
/api/v1/namespaces/<ns>/pods/<name>/log|exec|attach|portforward  the kubelet's streams (podstreams.py)
The verb comes from the method: GET get/list/watch, POST create, PUT update, PATCH patch,
DELETE delete/deletecollection.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from nodeenv.kubeapi.errors import NotFound, method_not_allowed
from nodeenv.kubeapi.kinds import Kind, Registry

_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch"}
STREAMS = ("log", "exec", "attach", "portforward")
"""Pods' subresources served by the node's kubelet (podstreams.py)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestInfo:
    verb: str
    group: str
    version: str
    resource: str
    subresource: str = ""
    namespace: str = ""
    name: str = ""
    kind: Kind | None = None


def _truthy(v: str | None) -> bool:
    return (v or "").lower() in ("1", "true", "t", "yes")


def _not_found() -> NotFound:
    return NotFound("the server could not find the requested resource")


def _split(path: str) -> tuple[str, str, list[str]] | None:
    parts = [p for p in path.split("/") if p]
    if parts[:1] == ["api"] and len(parts) >= 2:
        return "", parts[1], parts[2:]
    if parts[:1] == ["apis"] and len(parts) >= 3:
        return parts[1], parts[2], parts[3:]
    return None


def resolve(registry: Registry, method: str, path: str, query: Mapping[str, str]) -> RequestInfo | None:
    """None for non-resource paths (discovery and the like); NotFound for unknown resources."""
    split = _split(path)
    if split is None:
        return None
    group, version, rest = split
    if not rest:
        return None
    watch_prefix = rest[0] == "watch"
    if watch_prefix:
        rest = rest[1:]
    namespace = ""
    if len(rest) >= 3 and rest[0] == "namespaces":
        cand = registry.lookup(group, version, rest[2])
        if cand is not None and cand.namespaced:
            namespace, rest = rest[1], rest[2:]
    if not rest or len(rest) > 3:
        raise _not_found()
    kind = registry.lookup(group, version, rest[0])
    if kind is None:
        raise _not_found()
    name = rest[1] if len(rest) > 1 else ""
    sub = rest[2] if len(rest) > 2 else ""
    token = (sub == "token" and kind.plural == "serviceaccounts" and kind.group == "") or (
        sub == "binding" and kind.plural == "pods" and kind.group == ""
    )  # create-only subresources: a TokenRequest, the scheduler's Binding
    stream = sub in STREAMS and kind.plural == "pods" and kind.group == ""
    if (
        sub
        and not (token or stream)
        and not (sub == "status" and kind.status)
        and not (sub == "scale" and kind.scale)
    ):
        raise _not_found()
    if stream:
        return _stream(method, group, version, kind, sub, namespace, name)
    if token and method == "POST":
        verb = "create"
    else:
        verb = _verb(method, bool(name), watch_prefix or _truthy(query.get("watch")))
    allowed = ("create",) if token else ("get", "update", "patch")
    if (sub and verb not in allowed) or (kind.virtual and verb != "create"):
        raise method_not_allowed()
    return RequestInfo(
        verb=verb, group=group, version=version, resource=kind.plural, subresource=sub,
        namespace=namespace, name=name, kind=kind,
    )  # fmt: skip


def _stream(
    method: str, group: str, version: str, kind: Kind, sub: str, namespace: str, name: str
) -> RequestInfo:
    """pods/log (GET: get), pods/exec|attach|portforward (POST: create; GET: get, the WebSocket
    upgrade, which podstreams.py also authorizes as create)."""
    if method not in ("GET", "POST") or (sub == "log" and method != "GET"):
        raise method_not_allowed()
    verb = "get" if method == "GET" else "create"
    return RequestInfo(verb=verb, group=group, version=version, resource=kind.plural, subresource=sub,
                       namespace=namespace, name=name, kind=kind)  # fmt: skip


def _verb(method: str, has_name: bool, watch: bool) -> str:
    if method == "GET":
        if watch:
            return "watch"
        return "get" if has_name else "list"
    if method == "DELETE":
        return "delete" if has_name else "deletecollection"
    if method == "POST" and not has_name:
        return "create"
    if method in ("PUT", "PATCH") and has_name:
        return _VERBS[method]
    raise method_not_allowed()
