"""A CRD's CEL validation rules (`x-kubernetes-validations`) against a custom resource, as
apiextensions-apiserver evaluates them: each rule with `self` bound to the value at its schema node,
a rule that is not true is a 422 cause `<path>: Invalid value: "<type>": <message>` (`<nil>` as the
path at the root), evaluated with cel-python plus the Kubernetes CEL library functions the CRDs in
daemonsets/ use (`isCIDR`, `isIP`, `cidr(...)` is not provided).

Simplified: transition rules (`oldSelf`) are skipped (no update-time rules), no `messageExpression`,
`fieldPath` or `reason`, no cost budget; a rule that fails to compile or evaluate is a cause with the
evaluation error as its message (the apiserver refuses such CRDs at creation instead).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from functools import cache
from typing import Any

import celpy
from celpy import celtypes

from nodeenv.kubeapi.crschema import _type_of

Schema = Mapping[str, Any]
Cause = tuple[str, str, str]


def _is_cidr(value: Any) -> celtypes.BoolType:
    try:
        ipaddress.ip_network(str(value), strict=False)
    except ValueError:
        return celtypes.BoolType(False)
    return celtypes.BoolType("/" in str(value))


def _is_ip(value: Any) -> celtypes.BoolType:
    try:
        ipaddress.ip_address(str(value))
    except ValueError:
        return celtypes.BoolType(False)
    return celtypes.BoolType(True)


_FUNCTIONS = {"isCIDR": _is_cidr, "isIP": _is_ip}
_ENV = celpy.Environment()


@cache
def _program(rule: str) -> Any:
    return _ENV.program(_ENV.compile(rule), functions=_FUNCTIONS)


def _check(rule: Mapping[str, Any], value: Any, path: str) -> Cause | None:
    expression = str(rule.get("rule", ""))
    if "oldSelf" in expression:
        return None
    try:
        result = _program(expression).evaluate({"self": celpy.json_to_cel(value)})
        ok = not isinstance(result, celpy.CELEvalError) and bool(result) is True
        message = str(rule.get("message") or f"failed rule: {expression}")
    except (celpy.CELParseError, celpy.CELEvalError, TypeError, ValueError) as e:
        ok, message = False, f"rule compile/evaluation error: {e}"
    if ok:
        return None
    return ("FieldValueInvalid", path or "<nil>", f'Invalid value: "{_type_of(value)}": {message}')


def cel_causes(schema: Schema, value: Any, path: str = "") -> list[Cause]:
    """The causes of every CEL rule at and under `schema` that `value` does not satisfy."""
    out = [c for r in schema.get("x-kubernetes-validations") or () if (c := _check(r, value, path))]
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        for k, v in value.items():
            sub = props.get(k) or (extra if isinstance(extra, Mapping) else None)
            if sub:
                out += cel_causes(sub, v, f"{path}.{k}" if path else k)
    elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for i, v in enumerate(value):
            out += cel_causes(schema["items"], v, f"{path}[{i}]")
    return out
