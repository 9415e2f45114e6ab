"""kubectl's typed commands send built-in kinds as protobuf (`application/vnd.kubernetes.protobuf`):
each one against the double succeeds, and what it stores equals what the same object sent as JSON
(`--dry-run=client -o json | kubectl create -f -`) stores."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.integration.kubeapi.test_kubeapi_kubectl import kubectl
from tests.kubeapi_fixture import KubeApiHandle

IMAGE = "registry.k8s.io/pause:3.10"
CREATES: list[tuple[str, str, list[str]]] = [  # (resource, name, kubectl argv)
    ("deployments", "web", ["create", "deployment", "web", f"--image={IMAGE}", "--replicas=2", "--port=80"]),
    ("deployments", "zero", ["create", "deployment", "zero", f"--image={IMAGE}", "--replicas=0"]),
    ("services", "svc1", ["create", "service", "clusterip", "svc1", "--tcp=8080:80"]),
    ("services", "lb1", ["create", "service", "loadbalancer", "lb1", "--tcp=443:8443"]),
    ("pods", "pod1", ["run", "pod1", f"--image={IMAGE}", "--labels=app=pod1", "--env=A=1", "--port=80"]),
    ("jobs", "job1", ["create", "job", "job1", f"--image={IMAGE}", "--", "sleep", "1"]),
    ("cronjobs", "cj1", ["create", "cronjob", "cj1", f"--image={IMAGE}", "--schedule=*/5 * * * *"]),
    ("roles", "r1", ["create", "role", "r1", "--verb=get,list", "--resource=pods,deployments.apps"]),
    ("rolebindings", "rb1", ["create", "rolebinding", "rb1", "--role=r1", "--user=alice", "--group=g"]),
    ("configmaps", "cm1", ["create", "configmap", "cm1", "--from-literal=k=v"]),
    ("secrets", "s1", ["create", "secret", "generic", "s1", "--from-literal=k=v"]),
    ("resourcequotas", "q1", ["create", "quota", "q1", "--hard=pods=10,requests.cpu=2"]),
    ("serviceaccounts", "sa1", ["create", "serviceaccount", "sa1"]),
]
_SERVER_SET = ("uid", "resourceVersion", "creationTimestamp", "namespace", "managedFields")


def _comparable(obj: dict[str, Any]) -> dict[str, Any]:
    obj = json.loads(json.dumps(obj).replace(obj["metadata"]["uid"], "UID"))  # a Job's selector has it
    meta = {k: v for k, v in obj["metadata"].items() if k not in _SERVER_SET}
    out = {**obj, "metadata": meta}
    if obj["kind"] == "Service":  # allocated per object
        spec = {k: v for k, v in obj["spec"].items() if k not in ("clusterIP", "clusterIPs")}
        out["spec"] = spec
        spec["ports"] = [{k: v for k, v in p.items() if k != "nodePort"} for p in spec["ports"]]
    return out


@pytest.mark.parametrize(("resource", "name", "argv"), CREATES, ids=[c[1] for c in CREATES])
def test_typed_create_sent_as_protobuf_stores_the_json_form(
    kube_api: KubeApiHandle, resource: str, name: str, argv: list[str]
) -> None:
    kubectl(kube_api, "create", "namespace", "viapb")
    kubectl(kube_api, "create", "namespace", "viajson")
    kubectl(kube_api, "-n", "viapb", *argv)
    cut = argv.index("--") if "--" in argv else len(argv)
    dry = [*argv[:cut], "--dry-run=client", "-o", "json", *argv[cut:]]
    as_json = kubectl(kube_api, "-n", "viajson", *dry)
    kubectl(kube_api, "create", "-f", "-", stdin=as_json)
    via_pb, via_json = kube_api.get(resource, "viapb", name), kube_api.get(resource, "viajson", name)
    assert via_pb is not None and via_json is not None
    assert _comparable(via_pb) == _comparable(via_json)
    assert json.loads(as_json)["kind"] == via_pb["kind"]
