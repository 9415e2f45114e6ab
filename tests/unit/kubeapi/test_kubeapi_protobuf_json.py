"""Protobuf bodies (k8s.io/api generated.proto) decoded to the JSON form: Go's omitempty for zero
non-pointer fields, apimachinery's own JSON types, and the refusals (400 bad bytes, 415 kinds with no
protobuf form)."""

from __future__ import annotations

from typing import Any

import pytest

from nodeenv.kubeapi import protobuf
from nodeenv.kubeapi.errors import BadRequest, UnsupportedMediaType
from nodeenv.kubeapi.protobuf_json import go_duration, message_class


def _cls(name: str) -> Any:
    cls = message_class(name)
    assert cls is not None
    return cls


def _wire(api_version: str, kind: str, raw: bytes) -> bytes:
    env = _cls("k8s.io.apimachinery.pkg.runtime.Unknown")()
    env.typeMeta.apiVersion, env.typeMeta.kind, env.raw = api_version, kind, raw
    return protobuf.MAGIC + bytes(env.SerializeToString())


def test_zero_fields_as_go_json_writes_them() -> None:
    d = _cls("k8s.io.api.apps.v1.Deployment")()
    d.metadata.name, d.metadata.generateName = "web", ""  # omitempty: dropped when empty
    d.metadata.creationTimestamp.SetInParent()  # Go's zero Time: null
    d.spec.replicas = 0  # *int32: kept
    d.spec.minReadySeconds = 0  # int32 omitempty: dropped
    d.spec.strategy.SetInParent()  # a struct: never omitted
    c = d.spec.template.spec.containers.add()
    c.name, c.image, c.stdin = "c", "nginx", False
    p = c.ports.add()
    p.containerPort, p.protocol = 80, "TCP"
    obj = protobuf.decode(_wire("apps/v1", "Deployment", d.SerializeToString()))
    assert obj == {
        "kind": "Deployment", "apiVersion": "apps/v1",
        "metadata": {"name": "web", "creationTimestamp": None},
        "spec": {"replicas": 0, "template": {"spec": {"containers": [
            {"name": "c", "image": "nginx", "ports": [{"containerPort": 80, "protocol": "TCP"}]}]}},
            "strategy": {}},
    }  # fmt: skip


def test_apimachinery_json_types() -> None:
    s = _cls("k8s.io.api.core.v1.Service")()
    s.metadata.name = "s"
    s.metadata.creationTimestamp.seconds = 1700000000
    port = s.spec.ports.add()
    port.port, port.targetPort.type, port.targetPort.strVal = 80, 1, "http"
    secret = _cls("k8s.io.api.core.v1.Secret")()
    secret.data["k"] = b"\x00v"
    quota = _cls("k8s.io.api.core.v1.ResourceQuota")()
    quota.spec.hard["cpu"].string = "500m"
    svc = protobuf.decode(_wire("v1", "Service", s.SerializeToString()))
    assert svc["metadata"]["creationTimestamp"] == "2023-11-14T22:13:20Z"
    assert svc["spec"]["ports"] == [{"port": 80, "targetPort": "http"}]
    assert protobuf.decode(_wire("v1", "Secret", secret.SerializeToString()))["data"] == {"k": "AHY="}
    assert protobuf.decode(_wire("v1", "ResourceQuota", quota.SerializeToString()))["spec"] == {
        "hard": {"cpu": "500m"}
    }
    assert [go_duration(n) for n in (0, 1_500_000_000, 3_600 * 10**9, 150 * 10**6, 61_500_000_000)] == [
        "0s", "1.5s", "1h0m0s", "150ms", "1m1.5s"]  # fmt: skip


def test_refusals() -> None:
    with pytest.raises(BadRequest):
        protobuf.decode(b"{}")  # no k8s\0 magic
    with pytest.raises(BadRequest):
        protobuf.decode(protobuf.MAGIC + b"\x0a\xff")  # truncated
    for api_version, kind in (("stable.example.com/v1", "CronTab"), ("apps/v1", "NoSuchKind")):
        with pytest.raises(UnsupportedMediaType, match=f"does not decode protobuf {kind}"):
            protobuf.decode(_wire(api_version, kind, b""))
