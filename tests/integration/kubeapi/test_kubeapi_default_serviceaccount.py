"""The `default` ServiceAccount of every namespace (kube-controller-manager's serviceaccount
controller), through the official `kubernetes` client and kubectl: a Pod without serviceAccountName
is created and its token requested, as kubelet does for the projected kube-api-access volume."""

from __future__ import annotations

import pytest
from kubernetes import client

from tests.integration.kubeapi.official_client import api
from tests.integration.kubeapi.test_kubeapi_kubectl import kubectl
from tests.kubeapi_fixture import KubeApiHandle

__all__ = ["api"]  # the official client's fixture (official_client.py)


@pytest.fixture
def core(api: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api)


def test_every_namespace_has_default(core: client.CoreV1Api) -> None:
    for ns in ("default", "kube-system", "kube-public", "kube-node-lease"):
        assert core.read_namespaced_service_account("default", ns).metadata.name == "default"
    core.create_namespace({"metadata": {"name": "team-a"}})
    names = [sa.metadata.name for sa in core.list_namespaced_service_account("team-a").items]
    assert names == ["default"]


def test_pod_without_service_account_and_its_token(core: client.CoreV1Api) -> None:
    core.create_namespace({"metadata": {"name": "team-b"}})
    spec = {"containers": [{"name": "c", "image": "busybox"}]}
    pod = core.create_namespaced_pod("team-b", {"metadata": {"name": "p"}, "spec": spec})
    assert pod.spec.service_account_name == "default"
    req = {"spec": {"audiences": ["https://kubernetes.default.svc"], "expirationSeconds": 3607}}
    token = core.create_namespaced_service_account_token("default", "team-b", req)
    assert token.status.token


def test_default_comes_back_after_delete_but_not_in_a_terminating_namespace(
    core: client.CoreV1Api, kube_api: KubeApiHandle
) -> None:
    core.create_namespace({"metadata": {"name": "team-c"}})
    uid = core.read_namespaced_service_account("default", "team-c").metadata.uid
    core.delete_namespaced_service_account("default", "team-c")
    again = core.read_namespaced_service_account("default", "team-c")
    assert again.metadata.uid != uid
    core.delete_namespace("team-c")
    assert kube_api.get("namespaces", "", "team-c") is None
    assert kube_api.objects("serviceaccounts", "team-c") == []


def test_kubectl_create_token_for_default(kube_api: KubeApiHandle) -> None:
    """`kubectl create token` POSTs a TokenRequest as protobuf."""
    kubectl(kube_api, "create", "namespace", "team-d")
    token = kubectl(kube_api, "-n", "team-d", "create", "token", "default").strip()
    user = kube_api.state.tokens.authenticate(f"Bearer {token}")
    assert user is not None and user.name == "system:serviceaccount:team-d:default"
