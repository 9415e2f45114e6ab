"""Server-side apply (`application/apply-patch+yaml`), with a simplified ownership model.

Kept from the real one: `fieldManager` is required; applying a missing object creates it (201);
each apply manager's field set is recorded in `metadata.managedFields` as FieldsV1
(`f:<field>`, `k:{<merge key>}` for keyed list items, `v:<value>` for set items); fields a manager
applied before and omits now are removed unless another apply manager owns them; a field another
apply manager owns with a different value is a 409 Conflict (`Apply failed with N conflict(s)`)
unless `force=true`, which takes it over; the applied config is merged into the live object with the
list-map keys of `patchmeta` (port+protocol for Service and container ports); status is applied only
through `/status`. Simplified (not modelled): ownership by non-apply writers (Update operations) —
their fields never conflict with an apply and are not tracked; `v:` set ownership is per value;
managedFields timestamps are the apply's.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator, Mapping
from typing import Any

from nodeenv.kubeapi.crud import Resources
from nodeenv.kubeapi.errors import BadRequest, Conflict
from nodeenv.kubeapi.kinds import Kind
from nodeenv.kubeapi.objects import Obj, now_rfc3339
from nodeenv.kubeapi.patchmeta import KEY_DEFAULTS, Field, Schema, schema_for
from nodeenv.kubeapi.routing import RequestInfo

Path = tuple[str, ...]
_TOP_SKIP = ("apiVersion", "kind")
_META_KEEP = ("labels", "annotations", "finalizers", "ownerReferences")


def _ident(item: Mapping[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    return {k: item.get(k, KEY_DEFAULTS.get(k)) for k in keys}


def _matches(item: Any, key: Mapping[str, Any]) -> bool:
    return isinstance(item, dict) and all(item.get(k, KEY_DEFAULTS.get(k)) == v for k, v in key.items())


def field_paths(value: Any, schema: Schema, prefix: Path = ()) -> Iterator[Path]:
    if not isinstance(value, dict) or not value:
        yield prefix
        return
    for k, v in value.items():
        if k.startswith("$"):
            continue
        f = schema.get(k, Field())
        p = (*prefix, f"f:{k}")
        if isinstance(v, list) and f.key is not None:
            for item in v:
                if f.ssa_keys and isinstance(item, dict):
                    seg = "k:" + json.dumps(_ident(item, f.ssa_keys), separators=(",", ":"))
                    yield (*p, seg)
                    yield from field_paths(item, f.children, (*p, seg))
                else:
                    yield (*p, "v:" + json.dumps(item, separators=(",", ":")))
        elif isinstance(v, dict) and v:
            yield from field_paths(v, f.children, p)
        else:
            yield p


def merge(live: Any, config: Any, schema: Schema) -> Any:
    """The applied configuration merged into the live object: maps recursively, keyed lists by their
    list-map keys, set lists as sets, everything else replaced; null removes."""
    if not isinstance(config, dict):
        return copy.deepcopy(config)
    out = dict(live) if isinstance(live, dict) else {}
    for k, v in config.items():
        f = schema.get(k, Field())
        if v is None:
            out.pop(k, None)
        elif isinstance(v, list) and f.key is not None:
            out[k] = _merge_list(out.get(k), v, f)
        else:
            out[k] = merge(out.get(k), v, f.children) if isinstance(v, dict) else copy.deepcopy(v)
    return out


def _merge_list(live: Any, config: list[Any], f: Field) -> list[Any]:
    current = list(live) if isinstance(live, list) else []
    if not f.ssa_keys:
        return current + [copy.deepcopy(x) for x in config if x not in current]
    for item in config:
        key = _ident(item, f.ssa_keys) if isinstance(item, dict) else {}
        at = next((i for i, c in enumerate(current) if _matches(c, key)), None)
        if at is None:
            current.append(merge({}, item, f.children))
        else:
            current[at] = merge(current[at], item, f.children)
    return current


def applied_paths(body: Obj, kind: Kind, subresource: str) -> set[Path]:
    schema = schema_for(kind.kind)
    meta = {k: v for k, v in (body.get("metadata") or {}).items() if k in _META_KEEP}
    parts: Obj = {"metadata": meta} if meta else {}
    for k, v in body.items():
        if k not in (*_TOP_SKIP, "metadata") and (k == "status") == (subresource == "status"):
            parts[k] = v
    return set(field_paths(parts, schema)) - {()}


def to_fields_v1(paths: set[Path]) -> Obj:
    root: Obj = {}
    for path in sorted(paths):
        node = root
        for seg in path:
            node = node.setdefault(seg, {})
        if path and path[-1][:2] in ("k:",):
            node.setdefault(".", {})
    return root


def from_fields_v1(tree: Mapping[str, Any], prefix: Path = ()) -> Iterator[Path]:
    if not tree:
        yield prefix
        return
    for seg, sub in tree.items():
        if seg == ".":
            yield prefix
        else:
            yield from from_fields_v1(sub or {}, (*prefix, seg))


def _lookup(obj: Any, path: Path) -> tuple[bool, Any]:
    cur = obj
    for seg in path:
        kind, _, rest = seg.partition(":")
        if kind == "f" and isinstance(cur, dict) and rest in cur:
            cur = cur[rest]
        elif kind == "k" and isinstance(cur, list):
            key = json.loads(rest)
            cur = next((i for i in cur if _matches(i, key)), None)
            if cur is None:
                return False, None
        elif kind == "v" and isinstance(cur, list):
            return json.loads(rest) in cur, json.loads(rest)
        else:
            return False, None
    return True, cur


def _remove(obj: Any, path: Path) -> None:
    if not path:
        return
    found, parent = _lookup(obj, path[:-1])
    if not found:
        return
    kind, _, rest = path[-1].partition(":")
    if kind == "f" and isinstance(parent, dict):
        parent.pop(rest, None)
    elif kind == "k" and isinstance(parent, list):
        key = json.loads(rest)
        parent[:] = [i for i in parent if not _matches(i, key)]
    elif kind == "v" and isinstance(parent, list):
        value = json.loads(rest)
        parent[:] = [i for i in parent if i != value]


def _managers(obj: Obj) -> dict[str, set[Path]]:
    out: dict[str, set[Path]] = {}
    for entry in obj["metadata"].get("managedFields") or []:
        if entry.get("operation") == "Apply":
            out[entry["manager"]] = set(from_fields_v1(entry.get("fieldsV1") or {})) - {()}
    return out


def _conflicts(live: Obj, body: Obj, mine: set[Path], others: dict[str, set[Path]]) -> list[tuple[str, Path]]:
    found = []
    for manager, paths in others.items():
        for p in sorted(mine & paths):
            if _lookup(live, p) != _lookup(body, p):
                found.append((manager, p))
    return found


def _conflict_error(kind: Kind, name: str, found: list[tuple[str, Path]]) -> Conflict:
    def dotted(p: Path) -> str:
        return "".join(f".{s[2:]}" if s.startswith("f:") else f"[{s[2:]}]" for s in p)

    causes = [{"reason": "FieldManagerConflict", "message": f'conflict with "{m}" using {kind.api_version}',
               "field": dotted(p)} for m, p in found]  # fmt: skip
    n = len(found)
    lines = "\n".join(f'- conflict with "{m}" using {kind.api_version}: {dotted(p)}' for m, p in found)
    msg = f"Apply failed with {n} conflict{'s' if n > 1 else ''}: {lines[2:] if n == 1 else chr(10) + lines}"
    details = {"name": name, "group": kind.group, "kind": kind.plural, "causes": causes}
    return Conflict(msg, details)


def _entry(manager: str, kind: Kind, paths: set[Path], subresource: str) -> Obj:
    e: Obj = {"manager": manager, "operation": "Apply", "apiVersion": kind.api_version, "time": now_rfc3339(),
              "fieldsType": "FieldsV1", "fieldsV1": to_fields_v1(paths)}  # fmt: skip
    if subresource:
        e["subresource"] = subresource
    return e


def _check(kind: Kind, info: RequestInfo, body: Any, query: Mapping[str, str]) -> str:
    manager = query.get("fieldManager") or ""
    if not manager:
        raise BadRequest("PATCH, fieldManager: Required value: is required for apply patch")
    if not isinstance(body, dict) or not isinstance(body.get("metadata"), dict):
        raise BadRequest("error decoding YAML: the applied configuration is not an object with metadata")
    if body.get("apiVersion") != kind.api_version or body.get("kind") != kind.kind:
        raise BadRequest(f"invalid object type: /{body.get('apiVersion')}, Kind={body.get('kind')}")
    if body["metadata"].get("name", info.name) != info.name:
        raise BadRequest(
            f"the name of the object ({body['metadata'].get('name')}) "
            f"does not match the name on the URL ({info.name})"
        )
    return manager


def server_side_apply(
    res: Resources, kind: Kind, info: RequestInfo, body: Any, query: Mapping[str, str]
) -> tuple[Obj, bool]:
    manager = _check(kind, info, body, query)
    force = query.get("force", "").lower() == "true"
    dry = query.get("dryRun") == "All"
    mine = applied_paths(body, kind, info.subresource)
    live = res.store.get(kind, info.namespace, info.name)
    if live is None:
        if info.subresource:
            res.get(kind, info.namespace, info.name)  # 404 as the real server
        created = copy.deepcopy(body)
        created["metadata"]["managedFields"] = [_entry(manager, kind, mine, "")]
        return res.create(kind, info.namespace, created, dry_run=dry), True
    managers = _managers(live)
    others = {m: p for m, p in managers.items() if m != manager}
    found = _conflicts(live, body, mine, others)
    if found and not force:
        raise _conflict_error(kind, info.name, found)
    for m, p in found:
        others[m].discard(p)
    owned_elsewhere = set().union(*others.values()) if others else set()
    patch = {k: v for k, v in body.items() if k not in _TOP_SKIP}
    patch["metadata"] = {k: v for k, v in body["metadata"].items() if k in _META_KEEP}
    merged = merge(copy.deepcopy(live), patch, schema_for(kind.kind))
    for p in sorted(
        managers.get(manager, set()) - mine - owned_elsewhere, key=len
    ):  # items before their fields
        _remove(merged, p)
    entries = [
        e for e in live["metadata"].get("managedFields") or [] if e.get("manager") not in (manager, *others)
    ]
    entries += [_entry(m, kind, p, "") for m, p in others.items()] + [
        _entry(manager, kind, mine, info.subresource)
    ]
    merged["metadata"]["managedFields"] = entries
    merged["metadata"]["resourceVersion"] = (
        body["metadata"].get("resourceVersion") or live["metadata"]["resourceVersion"]
    )
    obj = res.update(kind, info.namespace, info.name, merged, subresource=info.subresource, dry_run=dry)
    return obj, False
