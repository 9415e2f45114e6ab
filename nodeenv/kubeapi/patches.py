"""The three PATCH bodies kube-apiserver accepts besides apply (see `apply.py`).

- `application/merge-patch+json`: RFC 7386 (objects merge, null deletes, arrays replace).
- `application/json-patch+json`: RFC 6902, by the `jsonpatch` library.
- `application/strategic-merge-patch+json`: the Kubernetes strategic merge: lists named in
  `patchmeta` merge by key; directives `$patch: replace|delete|merge` (maps and list items),
  `$deleteFromPrimitiveList/<f>`, `$setElementOrder/<f>` and `$retainKeys`, as kubectl sends them.
"""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch  # type: ignore[import-untyped,unused-ignore]

from nodeenv.kubeapi.errors import BadRequest, Invalid, UnsupportedMediaType
from nodeenv.kubeapi.kinds import Kind
from nodeenv.kubeapi.patchmeta import Field, Schema, schema_for

MERGE = "application/merge-patch+json"
JSON = "application/json-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
APPLY = "application/apply-patch+yaml"
PATCH_TYPES = (JSON, MERGE, STRATEGIC, APPLY)
CUSTOM_PATCH_TYPES = (JSON, MERGE, APPLY)

_DELETE = object()


def merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


def json_patch(target: dict[str, Any], ops: Any) -> dict[str, Any]:
    if not isinstance(ops, list):
        raise BadRequest("json: cannot unmarshal object into Go value of type jsonpatch.Patch")
    try:
        result = jsonpatch.JsonPatch(ops).apply(target)
    except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException, TypeError, KeyError) as e:
        why = str(e).split(" in {", 1)[0][:200]  # the library quotes the whole document
        raise Invalid(f"the server rejected our request due to an error in our request: {why}") from e
    if not isinstance(result, dict):
        raise BadRequest("json patch result is not an object")
    return result


def strategic_merge_patch(target: dict[str, Any], patch: Any, kind: str) -> dict[str, Any]:
    if not isinstance(patch, dict):
        raise BadRequest("strategic merge patch must be a JSON object")
    result = _merge_map(target, patch, schema_for(kind))
    if result is _DELETE:
        raise BadRequest("a strategic merge patch cannot delete the whole object")
    assert isinstance(result, dict)
    return result


def _strip(patch: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in patch.items() if not k.startswith("$")}


def _merge_map(orig: Any, patch: dict[str, Any], schema: Schema) -> Any:
    directive = patch.get("$patch")
    if directive == "delete":
        return _DELETE
    if directive == "replace":
        return copy.deepcopy(_strip(patch))
    if directive not in (None, "merge"):
        raise BadRequest(f"Unknown patch type: {directive}")
    out = dict(orig) if isinstance(orig, dict) else {}
    for k, v in patch.items():
        if k.startswith("$"):
            continue
        f = schema.get(k, Field())
        if v is None:
            out.pop(k, None)
        elif isinstance(v, list) and f.key is not None:
            out[k] = _merge_list(out.get(k), v, f)
        elif isinstance(v, dict):
            merged = _merge_map(out.get(k), v, f.children)
            if merged is _DELETE:
                out.pop(k, None)
            else:
                out[k] = merged
        else:
            out[k] = copy.deepcopy(v)
    _directives(out, patch, schema)
    return out


def _directives(out: dict[str, Any], patch: dict[str, Any], schema: Schema) -> None:
    for k, v in patch.items():
        if k.startswith("$deleteFromPrimitiveList/"):
            name = k.split("/", 1)[1]
            if isinstance(out.get(name), list):
                out[name] = [x for x in out[name] if x not in v]
        elif k.startswith("$setElementOrder/"):
            name = k.split("/", 1)[1]
            if isinstance(out.get(name), list):
                out[name] = _ordered(out[name], v, schema.get(name, Field()).key or "")
    retain = patch.get("$retainKeys")
    if isinstance(retain, list):
        for k in [k for k in out if k not in retain]:
            del out[k]


def _ident(item: Any, key: str) -> Any:
    return item.get(key) if key and isinstance(item, dict) else item


def _ordered(items: list[Any], order: list[Any], key: str) -> list[Any]:
    wanted = [_ident(o, key) for o in order]
    rank = {w: i for i, w in enumerate(wanted) if isinstance(w, (str, int, float, bool))}
    listed = sorted((x for x in items if _ident(x, key) in rank), key=lambda x: rank[_ident(x, key)])
    return listed + [x for x in items if _ident(x, key) not in rank]


def _merge_list(orig: Any, patch: list[Any], f: Field) -> list[Any]:
    current = list(orig) if isinstance(orig, list) else []
    if any(isinstance(p, dict) and p.get("$patch") == "replace" for p in patch):
        return [copy.deepcopy(_strip(p)) for p in patch if not (isinstance(p, dict) and "$patch" in p)]
    if not f.key:  # primitive set
        return current + [copy.deepcopy(p) for p in patch if p not in current]
    for item in patch:
        if not isinstance(item, dict):
            raise BadRequest(f"strategic merge: list item {item!r} is not an object")
        ident = item.get(f.key)
        at = next((i for i, c in enumerate(current) if _ident(c, f.key) == ident), None)
        if item.get("$patch") == "delete":
            current = [c for c in current if _ident(c, f.key) != ident]
        elif at is None:
            current.append(_merge_map({}, item, f.children))
        else:
            current[at] = _merge_map(current[at], item, f.children)
    return current


def check_patch_type(ctype: str, kind: Kind) -> None:
    """415 before the body is read, as the apiserver's patch handler does: a missing Content-Type is
    not taken as JSON here (unlike create/update), and custom resources have no strategic merge."""
    accepted = CUSTOM_PATCH_TYPES if kind.schema is not None else PATCH_TYPES
    if ctype not in accepted:
        raise UnsupportedMediaType(
            f"the body of the request was in an unknown format - accepted media types include: "
            f"{', '.join(accepted)}"
        )


def apply_patch(content_type: str, target: dict[str, Any], body: Any, kind: str) -> dict[str, Any]:
    ctype = content_type.split(";")[0].strip()
    if ctype == MERGE:
        result = merge_patch(target, body)
        if not isinstance(result, dict):
            raise BadRequest("merge patch result is not an object")
        return result
    if ctype == JSON:
        return json_patch(target, body)
    if ctype == STRATEGIC:
        return strategic_merge_patch(target, body, kind)
    raise UnsupportedMediaType(
        "the body of the request was in an unknown format - "
        f"accepted media types include: {', '.join(PATCH_TYPES)}"
    )
