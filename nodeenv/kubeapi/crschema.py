"""Custom resources against their CRD's structural schema (openAPIV3Schema), as apiextensions-apiserver
treats every write: defaults (`default`) filled in, unknown fields pruned (reported as unknown fields,
so `fieldValidation=Strict` refuses them and Warn warns, see strict.py), then validated (422).

Pruning keeps what `properties` names, everything under `x-kubernetes-preserve-unknown-fields: true`
or an `additionalProperties` schema, and apiVersion/kind/metadata at the root and in
`x-kubernetes-embedded-resource` objects. Validation: type (with `nullable` and
`x-kubernetes-int-or-string`), required, enum, minimum/maximum, minLength/maxLength, minItems/maxItems,
pattern, with the apiserver's messages (`driver: Required value`, `spec.replicas: Invalid value:
"string": spec.replicas in body must be of type integer: "string"`, `Unsupported value`).
CEL rules (x-kubernetes-validations) are crcel.py's, run when these checks pass.
Simplified: no formats or list-type uniqueness checks.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any

Schema = Mapping[str, Any]
Cause = tuple[str, str, str]
_ROOT = ("apiVersion", "kind", "metadata")


def _type_of(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    return "array" if isinstance(v, list) else "object"


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def apply_defaults(schema: Schema, value: Any) -> Any:
    """`value` with the schema's defaults filled in where fields are absent (a new object)."""
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        out = {k: apply_defaults(props.get(k) or _additional(schema), v) for k, v in value.items()}
        for k, sub in props.items():
            if k not in out and "default" in sub:
                out[k] = apply_defaults(sub, copy.deepcopy(sub["default"]))
        return out
    if isinstance(value, list):
        return [apply_defaults(schema.get("items") or {}, v) for v in value]
    return value


def _additional(schema: Schema) -> Schema:
    extra = schema.get("additionalProperties")
    return extra if isinstance(extra, dict) else {}


def _keeps_unknown(schema: Schema) -> bool:
    return bool(schema.get("x-kubernetes-preserve-unknown-fields")) or bool(
        schema.get("additionalProperties")
    )


def prune(schema: Schema, value: Any, path: str = "", root: bool = True) -> tuple[Any, list[str]]:
    """(the value without unknown fields, their paths)."""
    if isinstance(value, list):
        items, in_items = [], []
        for i, v in enumerate(value):
            item, u = prune(schema.get("items") or {}, v, f"{path}[{i}]", False)
            items.append(item)
            in_items += u
        return items, in_items
    if not isinstance(value, dict) or schema.get("type") not in ("object", None):
        return value, []
    props = schema.get("properties") or {}
    keep_meta = root or schema.get("x-kubernetes-embedded-resource")
    out: dict[str, Any] = {}
    unknown: list[str] = []
    for k, v in value.items():
        if keep_meta and k in _ROOT:  # ObjectMeta is the apiserver's, whatever the schema says
            out[k] = v
        elif k in props:
            out[k], u = prune(props[k], v, _join(path, k), False)
            unknown += u
        elif _keeps_unknown(schema):
            out[k], u = (
                prune(_additional(schema), v, _join(path, k), False) if _additional(schema) else (v, [])
            )
            unknown += u
        else:
            unknown.append(_join(path, k))
    return out, unknown


def _type_causes(schema: Schema, value: Any, path: str) -> list[Cause]:
    want, got = schema.get("type"), _type_of(value)
    if value is None and schema.get("nullable"):
        return []
    if schema.get("x-kubernetes-int-or-string"):
        ok = got in ("integer", "string")
        want = "integer,string"
    else:
        ok = want is None or got == want or (want == "number" and got == "integer")
    if ok:
        return []
    return [("FieldValueTypeInvalid", path,
             f'Invalid value: "{got}": {path} in body must be of type {want}: "{got}"')]  # fmt: skip


def _bounds_causes(schema: Schema, value: Any, path: str) -> list[Cause]:
    out: list[Cause] = []
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            why = f"should be greater than or equal to {schema['minimum']}"
            out.append(("FieldValueInvalid", path, f"Invalid value: {value}: {path} in body {why}"))
        if "maximum" in schema and value > schema["maximum"]:
            why = f"should be less than or equal to {schema['maximum']}"
            out.append(("FieldValueInvalid", path, f"Invalid value: {value}: {path} in body {why}"))
    if isinstance(value, str):
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            out.append(
                ("FieldValueTooLong", path, f"Too long: may not be more than {schema['maxLength']} bytes")
            )
        if "minLength" in schema and len(value) < schema["minLength"]:
            out.append(("FieldValueInvalid", path, f'Invalid value: "{value}": {path} in body should be at '
                        f"least {schema['minLength']} chars long"))  # fmt: skip
        if "pattern" in schema and not re.search(schema["pattern"], value):
            out.append(("FieldValueInvalid", path, f'Invalid value: "{value}": {path} in body should match '
                        f"'{schema['pattern']}'"))  # fmt: skip
    if isinstance(value, list):
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            out.append(("FieldValueTooMany", path, f"Too many: {len(value)}: must have at most "
                        f"{schema['maxItems']} items"))  # fmt: skip
        if "minItems" in schema and len(value) < schema["minItems"]:
            out.append(("FieldValueInvalid", path, f"Invalid value: {len(value)}: {path} in body should have "
                        f"at least {schema['minItems']} items"))  # fmt: skip
    return out


def causes(schema: Schema, value: Any, path: str = "") -> list[Cause]:
    """422 causes of a pruned, defaulted value."""
    if type_errors := _type_causes(schema, value, path):
        return type_errors
    out: list[Cause] = []
    if "enum" in schema and value not in schema["enum"]:
        values = ", ".join(f'"{v}"' for v in schema["enum"])
        out.append(
            ("FieldValueNotSupported", path, f'Unsupported value: "{value}": supported values: {values}')
        )
    out += _bounds_causes(schema, value, path)
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        out += [("FieldValueRequired", _join(path, r), "Required value")
                for r in schema.get("required") or [] if r not in value]  # fmt: skip
        for k, v in value.items():
            sub = props.get(k) or _additional(schema)
            if sub and not (path == "" and k == "metadata"):
                out += causes(sub, v, _join(path, k))
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, v in enumerate(value):
            out += causes(schema["items"], v, f"{path}[{i}]")
    return out
