"""The `binding` subresource of Pods, as kube-scheduler binds a Pod (client-go's
`pods/<name>/binding`; here sent with `kubectl create --raw`, the Pod read back with the official
client): the Binding's target becomes spec.nodeName and the answer is a Success Status; binding a
Pod that has a Node is 409 Conflict naming that Node, a Binding without a target 422, an unknown
Pod 404."""

from __future__ import annotations

import json
from pathlib import Path

from kubernetes import client

from tests.integration.kubeapi.official_client import api
from tests.integration.kubeapi.test_kubeapi_kubectl import kubectl
from tests.kubeapi_fixture import KubeApiHandle

NS = "default"
__all__ = ["api"]  # the official client's fixture


def _pod(name: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "main", "image": "k8shost:0.1.0"}]}}  # fmt: skip


def bind(kube_api: KubeApiHandle, tmp_path: Path, pod: str, target: dict[str, str]) -> str:
    body = tmp_path / "binding.json"
    body.write_text(json.dumps({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": pod},
                                "target": target}))  # fmt: skip
    path = f"/api/v1/namespaces/{NS}/pods/{pod}/binding"
    return kubectl(kube_api, "create", "--raw", path, "-f", str(body), check=False)


def test_a_pod_is_bound_once(kube_api: KubeApiHandle, api: client.ApiClient, tmp_path: Path) -> None:
    core = client.CoreV1Api(api)
    core.create_namespaced_pod(NS, _pod("web"))
    out = bind(kube_api, tmp_path, "web", {"apiVersion": "v1", "kind": "Node", "name": "node2"})
    assert json.loads(out)["status"] == "Success", out
    assert core.read_namespaced_pod("web", NS).spec.node_name == "node2"
    out = bind(kube_api, tmp_path, "web", {"apiVersion": "v1", "kind": "Node", "name": "node3"})
    assert 'pod web is already assigned to node "node2"' in out, out
    assert core.read_namespaced_pod("web", NS).spec.node_name == "node2"


def test_bad_bindings_are_refused(kube_api: KubeApiHandle, api: client.ApiClient, tmp_path: Path) -> None:
    core = client.CoreV1Api(api)
    core.create_namespaced_pod(NS, _pod("db"))
    out = bind(kube_api, tmp_path, "db", {"kind": "Node"})
    assert "is invalid: target.name: Required value" in out, out
    out = bind(kube_api, tmp_path, "nosuch", {"kind": "Node", "name": "node1"})
    assert 'pods "nosuch" not found' in out, out
    assert core.read_namespaced_pod("db", NS).spec.node_name is None
