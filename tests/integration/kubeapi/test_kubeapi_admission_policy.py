"""ValidatingAdmissionPolicies in the API double, as kube-apiserver evaluates them (CEL through
cel-python): matched by resource rule, operation and namespaceSelector, skipped by a false
matchCondition, refused with the validation's reason and kube-apiserver's message, subresources
matched separately, failurePolicy on an expression that fails. Driven by kubectl."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from nodeenv.kubeapi.state import ApiConfig
from tests.integration.kubeapi.test_kubeapi_kubectl import kubectl, kubectl_bin
from tests.kubeapi_fixture import KubeApiHandle

POLICY = """\
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: cm-guard}
spec:
  failurePolicy: %(failure)s
  matchConstraints:
    namespaceSelector: {matchLabels: {guarded: "yes"}}
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], resources: [configmaps], operations: [CREATE, UPDATE, DELETE]}
  matchConditions:
  - {name: not-the-robot, expression: "request.userInfo.username != 'robot'"}
  variables:
  - {name: keep, expression: "'keep' in object.data ? object.data.keep : ''"}
  validations:
  - {expression: "%(expression)s", message: "keep must stay 'yes'", reason: %(reason)s}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: cm-guard-binding}
spec: {policyName: cm-guard, validationActions: [Deny]}
"""
GOOD = "request.operation == 'DELETE' ? false : variables.keep == 'yes'"


@pytest.fixture
def kube_api_config() -> ApiConfig:
    return ApiConfig(bookmark_interval=1.0)


def apply(api: KubeApiHandle, tmp_path: Path, *, expression: str = GOOD, reason: str = "Forbidden",
          failure: str = "Fail") -> None:  # fmt: skip
    for ns, labels in (("guarded", {"guarded": "yes"}), ("open", {})):
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": labels}}
        kubectl(api, "apply", "-f", "-", stdin=json.dumps(body))
    (tmp_path / "p.yaml").write_text(
        POLICY % {"expression": expression, "reason": reason, "failure": failure}
    )
    kubectl(api, "apply", "-f", str(tmp_path / "p.yaml"))


def as_admin(api: KubeApiHandle, *args: str, user: str = "") -> subprocess.CompletedProcess[str]:
    cfg = api.kubeconfig_for(user) if user else api.kubeconfig
    return subprocess.run([kubectl_bin(), "--kubeconfig", str(cfg), *args], capture_output=True, text=True,
                          timeout=60)  # fmt: skip


def cm(ns: str, keep: str) -> list[str]:
    return ["create", "configmap", "c", "-n", ns, f"--from-literal=keep={keep}"]


def test_a_denied_write_gets_the_policys_reason_and_message(kube_api: KubeApiHandle, tmp_path: Path) -> None:
    apply(kube_api, tmp_path)
    bad = as_admin(kube_api, *cm("guarded", "no"))
    assert bad.returncode != 0
    assert ('configmaps "c" is forbidden: ValidatingAdmissionPolicy \'cm-guard\' with binding '
            "'cm-guard-binding' denied request: keep must stay 'yes'") in bad.stderr  # fmt: skip
    assert as_admin(kube_api, *cm("guarded", "yes")).returncode == 0
    assert "denied request" in as_admin(kube_api, "delete", "cm", "c", "-n", "guarded").stderr
    patch = ["patch", "cm", "c", "-n", "guarded", "--type=merge", "-p", '{"data":{"keep":"no"}}']
    assert "denied request" in as_admin(kube_api, *patch).stderr
    assert kube_api.get("configmaps", "guarded", "c")["data"]["keep"] == "yes"  # type: ignore[index]


def test_the_namespace_selector_and_match_conditions_limit_it(
    kube_api: KubeApiHandle, tmp_path: Path
) -> None:
    apply(kube_api, tmp_path)
    assert as_admin(kube_api, *cm("open", "no")).returncode == 0  # namespace not selected
    assert as_admin(kube_api, *cm("guarded", "no"), user="robot").returncode == 0  # matchCondition false


def test_invalid_is_422_and_a_failing_expression_follows_the_failure_policy(
    kube_api: KubeApiHandle, tmp_path: Path
) -> None:
    apply(kube_api, tmp_path, reason="Invalid")
    out = as_admin(kube_api, *cm("guarded", "no"), "-v=6")
    assert "422" in out.stderr and 'ConfigMap "c" is invalid' in out.stderr
    apply(kube_api, tmp_path, expression="object.data.missing == 'x'", failure="Ignore")
    assert as_admin(kube_api, *cm("guarded", "no")).returncode == 0
    apply(kube_api, tmp_path, expression="object.data.missing == 'x'", failure="Fail")
    assert (
        "denied request: expression error" in as_admin(kube_api, "create", "cm", "d", "-n", "guarded").stderr
    )


def test_internal_writes_and_unbound_policies_are_not_checked(
    kube_api: KubeApiHandle, tmp_path: Path
) -> None:
    apply(kube_api, tmp_path)
    kubectl(kube_api, "delete", "validatingadmissionpolicybinding", "cm-guard-binding")
    assert as_admin(kube_api, *cm("guarded", "no")).returncode == 0
