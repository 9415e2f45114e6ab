"""The AdminNetworkPolicy / BaselineAdminNetworkPolicy CRDs of daemonsets/policy/ served by the API double
as kube-apiserver serves them, through kubectl: the schema's limits and the CRDs' CEL rules
(x-kubernetes-validations, crcel.py) refuse bad objects with 422 and the rule's message; the printer
column; the status subresource."""

from __future__ import annotations

import json
from typing import Any

from nodeenv.kubeapi_component import install_policy_crds
from tests.integration.kubeapi.test_kubeapi_kubectl import kubectl
from tests.kubeapi_fixture import KubeApiHandle

ALL: list[dict[str, Any]] = [{"namespaces": {}}]


def anp(name: str, **spec: Any) -> str:
    body = {"priority": 10, "subject": {"namespaces": {}}, **spec}
    return json.dumps(
        {
            "apiVersion": "policy.networking.k8s.io/v1alpha1",
            "kind": "AdminNetworkPolicy",
            "metadata": {"name": name},
            "spec": body,
        }
    )


def banp(name: str) -> str:
    return json.dumps(
        {
            "apiVersion": "policy.networking.k8s.io/v1alpha1",
            "kind": "BaselineAdminNetworkPolicy",
            "metadata": {"name": name},
            "spec": {"subject": {"namespaces": {}}, "ingress": [{"action": "Deny", "from": ALL}]},
        }
    )


def refused(api: KubeApiHandle, body: str) -> str:
    out = kubectl(api, "create", "-f", "-", stdin=body, check=False)
    assert "is invalid" in out, out
    return out


def test_admin_policies_validated_by_schema_and_cel(kube_api: KubeApiHandle) -> None:
    install_policy_crds(kube_api.kubeconfig)
    kubectl(
        kube_api, "create", "-f", "-", stdin=anp("ok", ingress=[{"name": "r", "action": "Deny", "from": ALL}])
    )
    assert "ok     10" in kubectl(kube_api, "get", "anp")  # the Priority printer column
    assert 'metadata.name="default"' in refused(kube_api, banp("other"))  # CEL on the root
    kubectl(kube_api, "create", "-f", "-", stdin=banp("default"))
    bad_cidr = [{"action": "Deny", "to": [{"networks": ["10.0.0.1"]}]}]
    assert "Invalid CIDR format provided" in refused(kube_api, anp("cidr", egress=bad_cidr))  # isCIDR()
    named = [{"action": "Allow", "to": [{"networks": ["10.0.0.0/8"]}], "ports": [{"namedPort": "http"}]}]
    assert "cannot be set with namedPorts" in refused(kube_api, anp("named", egress=named))
    assert "less than or equal to 1000" in refused(kube_api, anp("prio", priority=1001))  # schema maximum
    assert 'Unsupported value: "Drop"' in refused(
        kube_api, anp("act", ingress=[{"action": "Drop", "from": ALL}])
    )
    patch = json.dumps(
        {
            "status": {
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True",
                        "reason": "SetupSucceeded",
                        "message": "m",
                        "lastTransitionTime": "2026-01-01T00:00:00Z",
                    }
                ]
            }
        }
    )
    kubectl(kube_api, "patch", "anp", "ok", "--subresource=status", "--type=merge", "-p", patch)
    got = json.loads(kubectl(kube_api, "get", "anp", "ok", "-o", "json"))
    assert got["status"]["conditions"][0]["reason"] == "SetupSucceeded"
