"""The double's pods/exec and pods/log in front of a real kubelet API (the runner's server, here
with no pods): RBAC as kube-apiserver 1.32 checks a WebSocket upgrade (a GET, so `get`, and
`create` on the subresource too), the node's kubelet reached at its Node's address and published
port with the double's client certificate (the kubelet's answer proves it got through), and the
kubelet's refusals passed on with their code."""

from __future__ import annotations

import socket
import ssl
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest

from nodeenv.kubeapi.kubeletclient import KubeletClientConfig
from nodeenv.kubeapi.state import ApiConfig
from nodeenv.kubelet.apiclient import KubeClient, register_node
from nodeenv.kubelet.kubeletapi.pki import KubeletPki, make_kubelet_pki
from nodeenv.kubelet.kubeletapi.server import KubeletApiServer, KubeletApiSettings
from tests.integration.kubeapi.test_kubeapi_kubectl import kubectl
from tests.kubeapi_fixture import KubeApiHandle

RBAC = """\
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: execer, namespace: default}
rules:
- {apiGroups: [""], resources: [pods, pods/log], verbs: [get]}
- {apiGroups: [""], resources: [pods/exec], verbs: [%s]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: alice-execer, namespace: default}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: execer}
subjects: [{kind: User, name: alice, apiGroup: rbac.authorization.k8s.io}]
"""
POD = """{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
 "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "img"}]}}"""


class NoPods:
    def find_pod(self, namespace: str, name: str) -> None:
        return None

    def resource_metrics(self) -> bytes:
        return b"# no containers\n"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> KubeletPki:
    return make_kubelet_pki(tmp_path_factory.mktemp("kubelet-pki"), [("n1", "127.0.0.1")])


@pytest.fixture
def kube_api_config(pki: KubeletPki) -> ApiConfig:
    kubelet = KubeletClientConfig(cert=pki.client_cert, key=pki.client_key, ca=pki.server_ca)
    return ApiConfig(enforce_rbac=True, kubelet=kubelet)


@pytest.fixture
def kubelet(pki: KubeletPki, kube_api: KubeApiHandle) -> Iterator[KubeletApiServer]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cert, key = pki.serving("n1")
    settings = KubeletApiSettings(address="127.0.0.1", port=port, cert=cert, key=key, client_ca=pki.client_ca,
                                  podman_env={})  # fmt: skip
    server = KubeletApiServer(NoPods(), settings)
    server.start()
    register_node(KubeClient.from_kubeconfig(kube_api.kubeconfig), "n1", "127.0.0.1", {}, port)
    kubectl(kube_api, "apply", "-f", "-", stdin=POD)
    yield server
    server.stop()


UPGRADE = {"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
           "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
           "Sec-WebSocket-Protocol": "v5.channel.k8s.io"}  # fmt: skip


async def _exec(api: KubeApiHandle, user: str) -> tuple[int, str]:
    """kubectl's WebSocket upgrade to pods/exec as `user`: 101, or the refusal's code and body."""
    ctx = ssl.create_default_context(cafile=str(api.ca))
    headers = {"Authorization": f"Bearer {api.state.tokens.token_for(user)}"}
    url = f"{api.url}/api/v1/namespaces/default/pods/p/exec?command=id&container=c&stdout=true"
    async with aiohttp.ClientSession() as session:
        try:
            async with session.ws_connect(url, ssl=ctx, protocols=("v5.channel.k8s.io",), headers=headers):
                return 101, ""
        except aiohttp.WSServerHandshakeError:
            async with session.get(url, ssl=ctx, headers={**headers, **UPGRADE}) as r:  # the refusal's body
                return r.status, await r.text()


async def test_websocket_exec_needs_create_too(kube_api: KubeApiHandle, kubelet: KubeletApiServer) -> None:
    kubectl(kube_api, "apply", "-f", "-", stdin=RBAC % "get")
    status, body = await _exec(kube_api, "alice")
    assert status == 403
    assert 'User \\"alice\\" cannot create resource \\"pods/exec\\" in API group \\"\\"' in body
    kubectl(kube_api, "apply", "-f", "-", stdin=RBAC % "get, create")
    status, body = await _exec(kube_api, "alice")  # through RBAC, to the kubelet, which has no such pod
    assert (status, body) == (404, "pod does not exist")


async def test_log_reaches_the_kubelet_with_the_client_certificate(
    kube_api: KubeApiHandle, kubelet: KubeletApiServer, tmp_path: Path
) -> None:
    out = kubectl(kube_api, "logs", "p", check=False)  # the kubelet's 404, as a Status
    assert out.strip() == "Error from server (NotFound): pod does not exist"
