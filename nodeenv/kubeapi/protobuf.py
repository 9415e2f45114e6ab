"""Kubernetes protobuf request bodies (`application/vnd.kubernetes.protobuf`), which kubectl's typed
clients send for built-in kinds: `kubectl create deployment|job|service|role|...`, `run`, `expose`,
`debug node/...`, `auth whoami|can-i`.

The wire form is the 4-byte magic `k8s\\0` and a runtime.Unknown {typeMeta{apiVersion, kind}, raw}
whose `raw` is the object message of k8s.io/api's generated.proto (protos/k8s, the release kubectl
1.32 speaks); protobuf_json.py turns it into the JSON form the JSON path stores. A kind outside the
groups in protos/k8s (custom resources have no protobuf form) is refused with 415, as kube-apiserver
refuses protobuf for CRDs. The small descriptor helpers below serve openapiv2pb.py.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError

from nodeenv.kubeapi import protobuf_json
from nodeenv.kubeapi.errors import BadRequest, UnsupportedMediaType

CONTENT_TYPE = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"
_F = descriptor_pb2.FieldDescriptorProto
Fields = dict[str, list[tuple[str, int, int, str, bool]]]


def message_pool(name: str, package: str, messages: Fields, maps: tuple[str, ...] = ()) -> Any:
    """A descriptor pool of `messages` (message -> [(field, number, type, message type or "",
    repeated)]), proto2 wire form."""
    f = descriptor_pb2.FileDescriptorProto(name=name, package=package, syntax="proto2")
    for mname, fields in messages.items():
        m = f.message_type.add(name=mname)
        if mname in maps:
            m.options.map_entry = True
        for fname, number, ftype, ref, repeated in fields:
            fd = m.field.add(name=fname, number=number, type=ftype, json_name=fname)
            fd.label = _F.LABEL_REPEATED if repeated else _F.LABEL_OPTIONAL
            if ref:
                fd.type_name = f".{package}.{ref}"
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    return pool


def message_class(pool: Any, package: str, name: str) -> Any:  # google.protobuf is untyped here
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{package}.{name}"))


def decode(raw: bytes) -> dict[str, Any]:
    """The JSON form of a protobuf-encoded object, or 415 for a kind the double does not decode."""
    if not raw.startswith(MAGIC):
        raise BadRequest("protobuf body without the k8s\\0 magic prefix")
    unknown = protobuf_json.message_class("k8s.io.apimachinery.pkg.runtime.Unknown")
    assert unknown is not None
    try:
        env = unknown.FromString(raw[len(MAGIC) :])
        api_version, kind = env.typeMeta.apiVersion, env.typeMeta.kind
        cls = _object_class(api_version, kind)
        if cls is None:
            raise UnsupportedMediaType(f"the API double does not decode protobuf {kind}; send JSON")
        obj = protobuf_json.to_json(cls.FromString(env.raw))
    except DecodeError as e:
        raise BadRequest(f"the body of the request could not be decoded: {e}") from e
    return {"kind": kind, "apiVersion": api_version, **obj}


def _object_class(api_version: str, kind: str) -> Any | None:
    """k8s.io/api's message for a built-in kind: package k8s.io.api.<group's first label>.<version>."""
    group, _, version = api_version.rpartition("/")
    package = f"k8s.io.api.{group.split('.')[0] or 'core'}.{version}"
    if group and not (group.endswith(".k8s.io") or "." not in group):
        return None  # a custom resource's group
    return protobuf_json.message_class(f"{package}.{kind}")
