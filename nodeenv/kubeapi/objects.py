"""Object metadata rules of the generic registry (k8s.io/apiserver's `rest.BeforeCreate/BeforeUpdate`).

Faithful: uid, creationTimestamp (RFC 3339, seconds), generation for the kinds whose strategy keeps
it (EndpointSlice, NetworkPolicy: 1 on create, +1 when anything outside metadata and status
changes; absent on the others, as on Services and Pods in 1.32), generateName (+5 random
[bcdfghjklmnpqrstvwxz2456789]),
name validation (DNS-1123 subdomain; DNS-1123 label for namespaces; DNS-1035 label for services),
immutable uid/creationTimestamp/name/namespace, status ignored on the main resource of kinds with a
/status subresource and everything but status ignored on /status, no new finalizers on an object
being deleted. Simplified: managedFields are written only by server-side apply (see apply.py);
those sent on create/update are kept as sent.
"""

from __future__ import annotations

import copy
import datetime as dt
import random
import re
import uuid
from typing import Any

from nodeenv.kubeapi import strategies
from nodeenv.kubeapi.errors import BadRequest, invalid
from nodeenv.kubeapi.kinds import Kind

Obj = dict[str, Any]

_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_IMMUTABLE = ("uid", "creationTimestamp", "name", "namespace")


def now_rfc3339() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _name_problem(kind: Kind, name: str) -> str | None:
    if (kind.group, kind.kind) == ("apiregistration.k8s.io", "APIService"):
        return None  # `<version>.<group>`, the core group's `v1.` with its trailing dot
    if kind.kind == "Namespace" or kind.kind == "Service":
        rx, limit = (_LABEL, 63) if kind.kind == "Namespace" else (_DNS1035, 63)
        what = "RFC 1123 label" if kind.kind == "Namespace" else "RFC 1035 label"
    else:
        rx, limit, what = _SUBDOMAIN, 253, "RFC 1123 subdomain"
    if len(name) > limit:
        return f"must be no more than {limit} characters"
    if not rx.match(name):
        return f"a lowercase {what} must consist of lower case alphanumeric characters or '-'"
    return None


def prepare_create(kind: Kind, obj: Obj, namespace: str) -> Obj:
    """A fresh stored copy of a create body with server-set metadata (resourceVersion by the store)."""
    if not isinstance(obj, dict) or not isinstance(obj.get("metadata", {}), dict):
        raise BadRequest("Object 'metadata' is missing or not an object")
    obj = strategies.normalize(kind, copy.deepcopy(obj))
    meta = obj.setdefault("metadata", {})
    if not meta.get("name") and meta.get("generateName"):
        suffix = "".join(random.choices(_ALPHABET, k=5))
        meta["name"] = f"{meta['generateName']}{suffix}"
    name = meta.get("name") or ""
    if not name:
        raise invalid(
            kind,
            "",
            [("FieldValueRequired", "metadata.name", "Required value: name or generateName is required")],
        )
    if problem := _name_problem(kind, name):
        raise invalid(
            kind, name, [("FieldValueInvalid", "metadata.name", f'Invalid value: "{name}": {problem}')]
        )
    if kind.namespaced:
        if meta.get("namespace") not in (None, "", namespace):
            raise BadRequest(
                "the namespace of the provided object does not match the namespace sent on the request"
            )
        meta["namespace"] = namespace
    else:
        meta.pop("namespace", None)
    for k in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"):
        meta.pop(k, None)
    meta["uid"] = str(uuid.uuid4())
    meta["creationTimestamp"] = now_rfc3339()
    if kind.generation:
        meta["generation"] = 1
    else:
        meta.pop("generation", None)
    obj["apiVersion"], obj["kind"] = kind.api_version, kind.kind
    strategies.prepare_create(kind, obj)
    if causes := kind_causes(kind, obj, None):
        raise invalid(kind, name, causes)
    return obj


def _outside_meta_status(obj: Obj) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "apiVersion", "kind")}


def kind_causes(kind: Kind, obj: Obj, old: Obj | None) -> list[tuple[str, str, str]]:
    return strategies.causes(kind, obj, old)


def _status_update(old: Obj, new: Obj) -> Obj:
    """A /status write changes status only."""
    stored = copy.deepcopy(old)
    if "status" in new:
        stored["status"] = new["status"]
    else:
        stored.pop("status", None)
    return stored


def prepare_update(kind: Kind, old: Obj, new: Obj, *, subresource: str = "") -> Obj:
    """The object to store for an update of `old` with body `new` (a fresh dict)."""
    if not isinstance(new.get("metadata"), dict):
        raise BadRequest("Object 'metadata' is missing or not an object")
    new = strategies.normalize(kind, copy.deepcopy(new))
    if subresource == "status":
        return _status_update(old, new)
    old_meta, meta = old["metadata"], new["metadata"]
    causes: list[tuple[str, str, str]] = []
    meta["creationTimestamp"] = old_meta.get("creationTimestamp")  # compared as instants by the real one
    for k in _IMMUTABLE:
        if k == "uid" and not meta.get(k):
            meta[k] = old_meta.get(k)
        elif meta.get(k, old_meta.get(k)) != old_meta.get(k):
            causes.append(("FieldValueInvalid", f"metadata.{k}", "field is immutable"))
    added = set(meta.get("finalizers") or []) - set(old_meta.get("finalizers") or [])
    if old_meta.get("deletionTimestamp") and added:
        why = "Forbidden: no new finalizers can be added if the object is being deleted"
        causes.append(("FieldValueForbidden", "metadata.finalizers", why))
    causes += kind_causes(kind, new, old)
    if causes:
        raise invalid(kind, old_meta["name"], causes)
    for k in ("deletionTimestamp", "deletionGracePeriodSeconds", "generation", "namespace"):
        if k in old_meta:
            meta[k] = old_meta[k]
        else:
            meta.pop(k, None)
    meta.pop("selfLink", None)
    if "managedFields" not in meta and "managedFields" in old_meta:
        meta["managedFields"] = old_meta["managedFields"]
    if kind.status:
        if "status" in old:
            new["status"] = old["status"]
        else:
            new.pop("status", None)
    if kind.generation and _outside_meta_status(new) != _outside_meta_status(old):
        meta["generation"] = int(old_meta.get("generation", 1)) + 1
    new["apiVersion"], new["kind"] = kind.api_version, kind.kind
    return new
