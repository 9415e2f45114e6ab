"""A decoded Kubernetes protobuf message in the JSON form kube-apiserver would store and serve.

The message types are k8s.io/api's and k8s.io/apimachinery's published `generated.proto` (protos/k8s,
compiled to one descriptor set by scripts/gen-protos.sh); their field names are the JSON names. What
the JSON form needs beyond the names, as Go's types marshal it:
- Go's protobuf writes every non-pointer field, zero or not, and its JSON omits the zero ones tagged
  `omitempty` (protos/k8s/omitempty.json lists them per message); structs are never omitted.
- apimachinery's types with their own JSON form: Time (RFC 3339 seconds, null when zero), MicroTime
  (microseconds), Duration, Quantity and IntOrString (scalars), RawExtension and FieldsV1 (embedded
  JSON), and slices declared as messages (`ExtraValue`: a list).
"""

from __future__ import annotations

import base64
import datetime as dt
import json
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

import protos

K8S = Path(protos.__file__).resolve().parent / "k8s"
_META = "k8s.io.apimachinery.pkg.apis.meta.v1"
_FD = descriptor_pb2.FieldDescriptorProto


@cache
def pool() -> Any:  # google.protobuf is untyped
    files = descriptor_pb2.FileDescriptorSet.FromString((K8S / "descriptors.pb").read_bytes())
    p = descriptor_pool.DescriptorPool()
    for f in files.file:
        p.Add(f)
    return p


@cache
def _omitted() -> dict[str, frozenset[str]]:
    table = json.loads((K8S / "omitempty.json").read_text())["messages"]
    return {msg: frozenset(fields) for msg, fields in table.items()}


def message_class(full_name: str) -> Any | None:
    try:
        return message_factory.GetMessageClass(pool().FindMessageTypeByName(full_name))
    except KeyError:
        return None


def _time(m: Any) -> str | None:
    if not m.HasField("seconds"):
        return None  # Go's zero Time marshals to an empty message and to JSON null
    return dt.datetime.fromtimestamp(m.seconds, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _micro_time(m: Any) -> str | None:
    if not m.HasField("seconds"):
        return None
    t = dt.datetime.fromtimestamp(m.seconds, dt.UTC) + dt.timedelta(microseconds=m.nanos // 1000)
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def go_duration(ns: int) -> str:
    """Go's time.Duration.String(): 1h2m3.5s, 150ms, 0s."""
    if ns == 0:
        return "0s"
    sign, ns = ("-", -ns) if ns < 0 else ("", ns)
    if ns < 1_000_000_000:
        for unit, size in (("ms", 1_000_000), ("µs", 1_000), ("ns", 1)):
            if ns >= size:
                return sign + _frac(ns, size) + unit
    h, rem = divmod(ns, 3_600_000_000_000)
    m, rem = divmod(rem, 60_000_000_000)
    text = _frac(rem, 1_000_000_000) + "s"
    if h or m:
        text = f"{m}m{text}"
    if h:
        text = f"{h}h{text}"
    return sign + text


def _frac(value: int, size: int) -> str:
    whole, part = divmod(value, size)
    digits = str(part).rjust(len(str(size)) - 1, "0").rstrip("0") if part else ""
    return f"{whole}.{digits}" if digits else str(whole)


def _raw_json(m: Any) -> Any:
    raw = m.raw if hasattr(m, "raw") else m.Raw
    return json.loads(raw) if raw else None


_SPECIAL: dict[str, Callable[[Any], Any]] = {
    f"{_META}.Time": _time,
    f"{_META}.MicroTime": _micro_time,
    f"{_META}.Duration": lambda m: go_duration(m.duration),
    f"{_META}.FieldsV1": _raw_json,
    "k8s.io.apimachinery.pkg.runtime.RawExtension": _raw_json,
    "k8s.io.apimachinery.pkg.api.resource.Quantity": lambda m: m.string,
    "k8s.io.apimachinery.pkg.util.intstr.IntOrString": lambda m: m.strVal if m.type == 1 else m.intVal,
}


def to_json(message: Any) -> Any:
    """The JSON value of `message` (a dict for an ordinary message)."""
    desc = message.DESCRIPTOR
    special = _SPECIAL.get(desc.full_name)
    if special is not None:
        return special(message)
    if desc.name == "ExtraValue":  # `type ExtraValue []string`: a message only on the wire
        return list(message.items)
    omit = _omitted().get(desc.full_name, frozenset())
    out: dict[str, Any] = {}
    for fd, value in message.ListFields():
        if fd.message_type is not None and fd.message_type.GetOptions().map_entry:
            vfd = fd.message_type.fields_by_name["value"]
            out[fd.name] = {k: _value(vfd, v) for k, v in value.items()}
        elif fd.is_repeated:
            out[fd.name] = [_value(fd, v) for v in value]
        elif fd.type != _FD.TYPE_MESSAGE and fd.name in omit and not value:
            continue  # a zero non-pointer `omitempty` field: absent from Go's JSON
        else:
            out[fd.name] = _value(fd, value)
    return out


def _value(fd: Any, value: Any) -> Any:
    if fd.type == _FD.TYPE_MESSAGE:
        return to_json(value)
    if fd.type == _FD.TYPE_BYTES:
        return base64.b64encode(value).decode()
    return value
