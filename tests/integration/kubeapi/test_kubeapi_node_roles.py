"""`kubectl get nodes` ROLES from the node-role labels k3s sets (the printer's findNodeRoles:
`node-role.kubernetes.io/<role>` keys, any value, and `kubernetes.io/role=<role>`)."""

from __future__ import annotations

from nodeenv.kubelet.bootnodes import SERVER_LABELS
from tests.integration.kubeapi.test_kubeapi_kubectl import kubectl
from tests.kubeapi_fixture import KubeApiHandle

NODE = "apiVersion: v1\nkind: Node\nmetadata: {{name: {name}, labels: {{{labels}}}}}\n"


def test_roles_column(kube_api: KubeApiHandle) -> None:
    server = ", ".join(f'"{k}": "{v}"' for k, v in (kv.split("=") for kv in SERVER_LABELS.split(",")))
    for name, labels in (("server1", server), ("agent1", ""), ("legacy", "kubernetes.io/role: worker")):
        kubectl(kube_api, "create", "-f", "-", stdin=NODE.format(name=name, labels=labels))
    rows = [r.split() for r in kubectl(kube_api, "get", "nodes").splitlines()]
    assert rows[0][:3] == ["NAME", "STATUS", "ROLES"]
    roles = {r[0]: r[2] for r in rows[1:]}
    assert roles == {"server1": "control-plane,etcd,master", "agent1": "<none>", "legacy": "worker"}
