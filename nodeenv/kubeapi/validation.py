"""Validation every write goes through (k8s.io/apimachinery's ValidateObjectMeta and per-kind rules),
with the apiserver's 422 messages.

Metadata: label keys and annotation keys are qualified names (optional DNS-subdomain prefix + "/" +
a name of at most 63 characters), label values at most 63 characters of [-A-Za-z0-9_.] starting and
ending alphanumeric, annotations at most 256 KiB in total, finalizers qualified names.
EndpointSlice: addressType IPv4, IPv6 or FQDN (immutable), 1..100 addresses per endpoint, at most
1000 endpoints and 100 ports. Other kinds' field rules are not modelled (see wire.py).
"""

from __future__ import annotations

import re
from typing import Any

Cause = tuple[str, str, str]  # reason, field, message after the field
_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_PREFIX = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_NAME_RULE = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
    "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
_VALUE_RULE = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and "
    "must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex "
    "used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)
_PREFIX_RULE = (
    "prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "
    "or '.', and must start and end with an alphanumeric character"
)
_ANNOTATIONS_MAX = 256 * 1024


def _qualified_name(field: str, key: Any) -> list[Cause]:
    text = str(key)
    prefix, _, name = text.rpartition("/")
    bad = f'Invalid value: "{text}": '
    if not isinstance(key, str) or not name:
        return [("FieldValueInvalid", field, bad + "name part must be non-empty")]
    if len(name) > 63:
        return [("FieldValueInvalid", field, bad + "name part must be no more than 63 characters")]
    if not _NAME.match(name):
        return [("FieldValueInvalid", field, bad + _NAME_RULE)]
    if "/" in text and (not prefix or len(prefix) > 253 or not _PREFIX.match(prefix)):
        return [("FieldValueInvalid", field, bad + _PREFIX_RULE)]
    return []


def metadata_causes(meta: dict[str, Any]) -> list[Cause]:
    causes: list[Cause] = []
    labels = meta.get("labels") or {}
    for k, v in labels.items() if isinstance(labels, dict) else ():
        causes += _qualified_name("metadata.labels", k)
        if not isinstance(v, str) or len(v) > 63 or not _VALUE.match(v):
            rule = "must be no more than 63 characters" if isinstance(v, str) and len(v) > 63 else _VALUE_RULE
            causes.append(("FieldValueInvalid", "metadata.labels", f'Invalid value: "{v}": {rule}'))
    annotations = meta.get("annotations") or {}
    if isinstance(annotations, dict):
        for k in annotations:
            causes += _qualified_name("metadata.annotations", k)
        size = sum(len(str(k)) + len(str(v)) for k, v in annotations.items())
        if size > _ANNOTATIONS_MAX:
            causes.append(("FieldValueTooLong", "metadata.annotations",
                           f"Too long: must have at most {_ANNOTATIONS_MAX} bytes"))  # fmt: skip
    for i, f in enumerate(meta.get("finalizers") or []):
        causes += _qualified_name(f"metadata.finalizers[{i}]", f)
    return causes


def endpoint_slice_causes(obj: dict[str, Any], old: dict[str, Any] | None) -> list[Cause]:
    causes: list[Cause] = []
    at = obj.get("addressType")
    if at not in ("IPv4", "IPv6", "FQDN"):
        what = (
            "Required value"
            if not at
            else f'Unsupported value: "{at}": supported values: "FQDN", "IPv4", "IPv6"'
        )
        causes.append(("FieldValueRequired" if not at else "FieldValueNotSupported", "addressType", what))
    elif old is not None and old.get("addressType") != at:
        causes.append(("FieldValueInvalid", "addressType", f'Invalid value: "{at}": field is immutable'))
    endpoints = obj.get("endpoints") or []
    if len(endpoints) > 1000:
        causes.append(
            ("FieldValueTooMany", "endpoints", f"Too many: {len(endpoints)}: must have at most 1000 items")
        )
    for i, ep in enumerate(endpoints):
        n = len((ep or {}).get("addresses") or [])
        if not 1 <= n <= 100:
            msg = (
                "Required value: must contain at least 1 address"
                if n == 0
                else f"Too many: {n}: must have at most 100 items"
            )
            causes.append(
                ("FieldValueRequired" if n == 0 else "FieldValueTooMany", f"endpoints[{i}].addresses", msg)
            )
    if len(obj.get("ports") or []) > 100:
        causes.append(("FieldValueTooMany", "ports", "Too many: must have at most 100 items"))
    return causes
