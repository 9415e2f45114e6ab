"""Request and response bodies: JSON (and YAML where the apiserver takes it), query parameters.
A create/update body without Content-Type is JSON (the apiserver's first media type).

Protobuf request bodies (`application/vnd.kubernetes.protobuf`, which kubectl's typed commands
send) are decoded for the built-in kinds (protobuf.py); custom resources get 415. Responses are
always JSON, as Go's json.Encoder writes it (byte-equal Status bodies, ending in a newline).
Not modelled: schema validation below the top level and metadata — unknown or mistyped fields
there are stored as sent (strict.py checks the top level and metadata).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import yaml  # type: ignore[import-untyped,unused-ignore]
from aiohttp import web

from nodeenv.kubeapi import protobuf
from nodeenv.kubeapi.crud import DeleteOptions
from nodeenv.kubeapi.errors import ApiError, BadRequest, UnsupportedMediaType
from nodeenv.kubeapi.kinds import Kind
from nodeenv.kubeapi.selectors import Selector, parse_fields, parse_labels

ACCEPTED = "application/json, application/yaml"
_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


_GO_ESCAPES = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026",
                             "\u2028": "\\u2028", "\u2029": "\\u2029"})  # fmt: skip


def encode(obj: Any) -> bytes:
    """kube-apiserver's JSON: Go's json.Encoder, compact, HTML-safe escapes, ending in a newline."""
    return (_dumps(obj).translate(_GO_ESCAPES) + "\n").encode()


def respond(obj: Any, status: int = 200) -> web.Response:
    return web.Response(body=encode(obj), status=status, content_type="application/json")


def error_response(err: ApiError) -> web.Response:
    return respond(err.status(), err.code)


def parse_body(raw: bytes, content_type: str) -> Any:
    if not raw.strip():
        raise BadRequest("the body of the request is empty")
    ctype = content_type.split(";")[0].strip().lower() or "application/json"  # the first media type,
    # as the apiserver's input negotiation takes a request without Content-Type (the official
    # Python client sends its create/update bodies so)
    if ctype == protobuf.CONTENT_TYPE:
        return protobuf.decode(raw)
    if "json" not in ctype and "yaml" not in ctype:  # protobuf and CBOR are not decoded here
        raise UnsupportedMediaType(
            f"the body of the request was in an unknown format - accepted media types include: {ACCEPTED}"
        )
    try:
        if "yaml" in ctype:
            return yaml.safe_load(raw)
        return json.loads(raw)
    except (ValueError, yaml.YAMLError) as e:
        raise BadRequest(f"the body of the request could not be decoded: {e}") from e


def selector(query: Mapping[str, str], kind: Kind, name: str = "") -> Selector:
    fields = parse_fields(query.get("fieldSelector"), kind)
    if name:
        fields += parse_fields(f"metadata.name={name}", kind)
    return Selector(parse_labels(query.get("labelSelector")), fields)


def int_param(query: Mapping[str, str], key: str, default: int | None = None) -> int | None:
    raw = query.get(key)
    if raw in (None, ""):
        return default
    try:
        return int(raw)
    except ValueError as e:
        raise BadRequest(f"invalid value for {key}: {raw!r}") from e


def dry_run(query: Mapping[str, str], body: Any = None) -> bool:
    getall = getattr(query, "getall", None)  # aiohttp's MultiDict: dryRun may repeat
    values = list(getall("dryRun", [])) if getall else [query[k] for k in ("dryRun",) if k in query]
    if isinstance(body, dict):
        values += list(body.get("dryRun") or [])
    for v in values:
        if v != "All":
            raise BadRequest(f"Invalid dry run value: {v}")
    return bool(values)


def delete_options(query: Mapping[str, str], body: Any) -> DeleteOptions:
    body = body if isinstance(body, dict) else {}
    pre = body.get("preconditions") or {}
    grace = int_param(query, "gracePeriodSeconds", body.get("gracePeriodSeconds"))
    return DeleteOptions(
        grace_period=grace,
        propagation=query.get("propagationPolicy") or body.get("propagationPolicy"),
        uid=pre.get("uid"),
        resource_version=pre.get("resourceVersion"),
        dry_run=dry_run(query, body),
    )


def list_body(
    kind: Kind, items: list[Any], rv: str, cont: str | None, remaining: int | None
) -> dict[str, Any]:
    meta: dict[str, Any] = {"resourceVersion": rv}
    if cont:
        meta["continue"] = cont
    if remaining is not None:
        meta["remainingItemCount"] = remaining
    return {"kind": f"{kind.kind}List", "apiVersion": kind.api_version, "metadata": meta, "items": items}


def success_status(kind: Kind, obj: Mapping[str, Any]) -> dict[str, Any]:
    details: dict[str, Any] = {"name": obj["metadata"]["name"]}
    if kind.group:
        details["group"] = kind.group
    details.update(kind=kind.plural, uid=obj["metadata"].get("uid"))
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details}
