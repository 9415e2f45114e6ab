"""Kubernetes protobuf request bodies (`application/vnd.kubernetes.protobuf`) for the few kinds that
kubectl's typed clients POST: `kubectl create namespace|configmap|secret|serviceaccount`,
`kubectl auth whoami` (SelfSubjectReview) and `kubectl auth can-i` (SelfSubjectAccessReview).

The wire form is the 4-byte magic `k8s\\0` and a runtime.Unknown {typeMeta{apiVersion, kind}, raw}
whose `raw` is the object message (k8s.io/api .../generated.proto, proto2, field names = JSON
names). The message types below are declared with the protobuf library's descriptors, carrying only
the fields the double reads (others are skipped as unknown fields) and decoded to the JSON form with
`json_format.MessageToDict` (bytes become base64, as in JSON). Other kinds are refused with 415.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory
from google.protobuf.message import DecodeError

from nodeenv.kubeapi.errors import BadRequest, UnsupportedMediaType

CONTENT_TYPE = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"
_F = descriptor_pb2.FieldDescriptorProto
_STR, _BYTES, _BOOL, _INT64, _MSG = (
    _F.TYPE_STRING,
    _F.TYPE_BYTES,
    _F.TYPE_BOOL,
    _F.TYPE_INT64,
    _F.TYPE_MESSAGE,
)
_PKG = "k8shost.kubeapi.wire"

# message -> [(field, number, type, message type or "", repeated)]; "map:<K>" types become map entries
_MESSAGES: dict[str, list[tuple[str, int, int, str, bool]]] = {
    "TypeMeta": [("apiVersion", 1, _STR, "", False), ("kind", 2, _STR, "", False)],
    "Unknown": [("typeMeta", 1, _MSG, "TypeMeta", False), ("raw", 2, _BYTES, "", False)],
    "ObjectMeta": [
        ("name", 1, _STR, "", False), ("generateName", 2, _STR, "", False), ("namespace", 3, _STR, "", False),
        ("resourceVersion", 6, _STR, "", False), ("generation", 7, _INT64, "", False),
        ("labels", 11, _MSG, "StringMap", True), ("annotations", 12, _MSG, "StringMap", True),
        ("finalizers", 14, _STR, "", True),
    ],
    "StringMap": [("key", 1, _STR, "", False), ("value", 2, _STR, "", False)],
    "BytesMap": [("key", 1, _STR, "", False), ("value", 2, _BYTES, "", False)],
    "NamespaceSpec": [("finalizers", 1, _STR, "", True)],
    "Namespace": [("metadata", 1, _MSG, "ObjectMeta", False), ("spec", 2, _MSG, "NamespaceSpec", False)],
    "ConfigMap": [
        ("metadata", 1, _MSG, "ObjectMeta", False), ("data", 2, _MSG, "StringMap", True),
        ("binaryData", 3, _MSG, "BytesMap", True), ("immutable", 4, _BOOL, "", False),
    ],
    "Secret": [
        ("metadata", 1, _MSG, "ObjectMeta", False), ("data", 2, _MSG, "BytesMap", True),
        ("type", 3, _STR, "", False), ("stringData", 4, _MSG, "StringMap", True),
        ("immutable", 5, _BOOL, "", False),
    ],
    "ServiceAccount": [("metadata", 1, _MSG, "ObjectMeta", False),
                       ("automountServiceAccountToken", 4, _BOOL, "", False)],
    "SelfSubjectReview": [("metadata", 1, _MSG, "ObjectMeta", False)],
    "ResourceAttributes": [
        ("namespace", 1, _STR, "", False), ("verb", 2, _STR, "", False), ("group", 3, _STR, "", False),
        ("version", 4, _STR, "", False), ("resource", 5, _STR, "", False),
        ("subresource", 6, _STR, "", False), ("name", 7, _STR, "", False),
    ],
    "NonResourceAttributes": [("path", 1, _STR, "", False), ("verb", 2, _STR, "", False)],
    "SelfSubjectAccessReviewSpec": [
        ("resourceAttributes", 1, _MSG, "ResourceAttributes", False),
        ("nonResourceAttributes", 2, _MSG, "NonResourceAttributes", False),
    ],
    "SelfSubjectAccessReview": [("metadata", 1, _MSG, "ObjectMeta", False),
                                ("spec", 2, _MSG, "SelfSubjectAccessReviewSpec", False)],
}  # fmt: skip
_MAPS = ("StringMap", "BytesMap")


Fields = dict[str, list[tuple[str, int, int, str, bool]]]


def message_pool(name: str, package: str, messages: Fields, maps: tuple[str, ...] = ()) -> Any:
    """A descriptor pool holding `messages` (field tables as in `_MESSAGES`), proto2 wire form."""
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


_POOL = message_pool("k8shost_kubeapi_wire.proto", _PKG, _MESSAGES, _MAPS)


def _cls(name: str) -> Any:
    return message_class(_POOL, _PKG, name)


def decode(raw: bytes) -> dict[str, Any]:
    """The JSON form of a protobuf-encoded object, or 415 for a kind the double does not decode."""
    if not raw.startswith(MAGIC):
        raise BadRequest("protobuf body without the k8s\\0 magic prefix")
    try:
        env = _cls("Unknown").FromString(raw[len(MAGIC) :])
        type_meta = env.typeMeta
        kind = type_meta.kind
        if kind not in _MESSAGES or kind in _MAPS:
            raise UnsupportedMediaType(f"the API double does not decode protobuf {kind}; send JSON")
        message = _cls(kind).FromString(env.raw)
        obj: dict[str, Any] = _omit_empty(
            json_format.MessageToDict(message, preserving_proto_field_name=True)
        )
    except DecodeError as e:
        raise BadRequest(f"the body of the request could not be decoded: {e}") from e
    obj["apiVersion"], obj["kind"] = type_meta.apiVersion, kind
    if "generation" in obj.get("metadata", {}):
        obj["metadata"]["generation"] = int(obj["metadata"]["generation"])
    return obj


def _omit_empty(value: Any) -> Any:
    """Go encodes empty strings of non-pointer fields; its JSON form omits them (`omitempty`)."""
    if isinstance(value, dict):
        return {k: _omit_empty(v) for k, v in value.items() if v != ""}
    return value
