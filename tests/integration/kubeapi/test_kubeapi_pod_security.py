"""PodSecurity admission in the API double, through the real kubectl (v1.32) and the official
`kubernetes` client: what a tenant sees in a namespace labelled as project-controller labels a
project's (enforce baseline, warn/audit restricted) and what the audit log records."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from controllers.projects.podsecurity import pod_security_labels
from nodeenv.kubeapi.auditlog import read_audit_log
from nodeenv.kubeapi.podsecurity.config import PodSecurityConfig
from nodeenv.kubeapi.state import ApiConfig
from tests.integration.kubeapi.test_kubeapi_kubectl import kubectl
from tests.kubeapi_fixture import KubeApiHandle

NS = "tenant-a"
EXEMPT_USER = "system:serviceaccount:kube-system:psa-exempt"
PROJECT_LABELS = pod_security_labels({"metadata": {"labels": {}}})  # what project-controller sets
PRIVILEGED_POD = """\
apiVersion: v1
kind: Pod
metadata: {name: root, namespace: tenant-a}
spec:
  containers:
  - name: c
    image: busybox
    securityContext: {privileged: true}
  volumes:
  - name: v
    hostPath: {path: /}
"""
DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: tenant-a}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: c
        image: busybox
        securityContext: {privileged: true}
"""
REFUSAL = (
    'Error from server (Forbidden): error when creating "STDIN": pods "root" is forbidden: '
    'violates PodSecurity "baseline:latest": hostPath volumes (volume "v"), '
    'privileged (container "c" must not set securityContext.privileged=true)'
)
RESTRICTED_WARNING = (
    'Warning: would violate PodSecurity "restricted:latest": privileged (container "c" must not set '
    'securityContext.privileged=true), allowPrivilegeEscalation != false (container "c" must set '
    'securityContext.allowPrivilegeEscalation=false), unrestricted capabilities (container "c" must set '
    'securityContext.capabilities.drop=["ALL"]), runAsNonRoot != true (pod or container "c" must set '
    'securityContext.runAsNonRoot=true), seccompProfile (pod or container "c" must set '
    'securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")'
)


@pytest.fixture
def kube_api_config(tmp_path: Path) -> ApiConfig:
    exemptions = PodSecurityConfig(usernames=frozenset({EXEMPT_USER}), runtime_classes=frozenset({"kata"}))
    return ApiConfig(audit_log_path=tmp_path / "audit.log", pod_security=exemptions)


@pytest.fixture
def tenant(kube_api: KubeApiHandle) -> KubeApiHandle:
    labels = [f"{k}={v}" for k, v in PROJECT_LABELS.items()]
    kubectl(kube_api, "create", "namespace", NS)
    kubectl(kube_api, "label", "namespace", NS, *labels)
    return kube_api


@pytest.fixture
def api(tenant: KubeApiHandle) -> Iterator[client.CoreV1Api]:
    cfg = client.Configuration()
    config.load_kube_config(config_file=str(tenant.kubeconfig), client_configuration=cfg)
    with client.ApiClient(cfg) as c:
        yield client.CoreV1Api(c)


def pod(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "busybox"}], **spec}}  # fmt: skip


def test_kubectl_refuses_a_privileged_hostpath_pod_naming_each_check(tenant: KubeApiHandle) -> None:
    out = kubectl(tenant, "apply", "-f", "-", stdin=PRIVILEGED_POD, check=False)
    assert out.strip() == REFUSAL
    assert tenant.get("pods", NS, "root") is None


def test_kubectl_warns_on_a_privileged_deployment_and_creates_it(tenant: KubeApiHandle) -> None:
    out = kubectl(tenant, "create", "-f", "-", stdin=DEPLOYMENT, check=False)
    assert out.splitlines() == ["deployment.apps/web created", RESTRICTED_WARNING]  # stdout, then stderr
    assert tenant.get("deployments", NS, "web") is not None


def test_the_official_client_sees_the_403_status(api: client.CoreV1Api) -> None:
    body = pod("hostnet", hostNetwork=True)
    with pytest.raises(ApiException) as e:
        api.create_namespaced_pod(NS, body)
    status = json.loads(e.value.body)
    assert e.value.status == 403
    assert status["reason"] == "Forbidden" and status["code"] == 403
    assert status["details"] == {"name": "hostnet", "kind": "pods"}
    assert status["message"] == (
        'pods "hostnet" is forbidden: violates PodSecurity "baseline:latest": '
        "host namespaces (hostNetwork=true)"
    )


def test_a_baseline_pod_is_admitted_with_the_restricted_warning(tenant: KubeApiHandle) -> None:
    out = kubectl(tenant, "-n", NS, "run", "plain", "--image=busybox", check=False)
    assert "pod/plain created" in out
    assert 'Warning: would violate PodSecurity "restricted:latest": allowPrivilegeEscalation != false' in out


def test_audit_log_records_the_policy_and_the_restricted_violations(
    tenant: KubeApiHandle, tmp_path: Path
) -> None:
    kubectl(tenant, "-n", NS, "run", "plain", "--image=busybox", check=False)
    kubectl(tenant, "apply", "-f", "-", stdin=PRIVILEGED_POD, check=False)
    events = [e for e in read_audit_log(tmp_path / "audit.log") if e.get("verb") == "create"
              and e.get("objectRef", {}).get("resource") == "pods"]  # fmt: skip
    created, refused = events[-2:]
    assert created["responseStatus"]["code"] == 201 and refused["responseStatus"]["code"] == 403
    notes = created["annotations"]
    assert notes["pod-security.kubernetes.io/enforce-policy"] == "baseline:latest"
    assert notes["pod-security.kubernetes.io/audit-violations"].startswith(
        'would violate PodSecurity "restricted:latest": allowPrivilegeEscalation != false (container "plain"'
    )
    assert refused["annotations"]["pod-security.kubernetes.io/audit-violations"].startswith(
        'would violate PodSecurity "restricted:latest": privileged (container "c"'
    )


def test_a_restricted_pod_passes_without_warning(tenant: KubeApiHandle) -> None:
    restricted = {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "good", "namespace": NS},
        "spec": {"securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
                 "containers": [{"name": "c", "image": "busybox", "securityContext": {
                     "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}}]},
    }  # fmt: skip
    out = kubectl(tenant, "create", "-f", "-", stdin=json.dumps(restricted), check=False)
    assert out.strip() == "pod/good created"


def test_an_invalid_level_label_is_refused_as_kube_apiserver_does(tenant: KubeApiHandle) -> None:
    out = kubectl(tenant, "label", "--overwrite", "namespace", NS, "pod-security.kubernetes.io/enforce=none",
                  check=False)  # fmt: skip
    assert out.strip() == (
        'The Namespace "tenant-a" is invalid: metadata.labels[pod-security.kubernetes.io/enforce]: '
        'Invalid value: "none": must be one of privileged, baseline, restricted'
    )
    ns = tenant.get("namespaces", "", NS)
    assert ns is not None and ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "baseline"


def test_a_stricter_enforce_label_warns_about_existing_pods(tenant: KubeApiHandle) -> None:
    kubectl(tenant, "-n", NS, "run", "plain", "--image=busybox", check=False)
    stricter = "pod-security.kubernetes.io/enforce=restricted"
    out = kubectl(tenant, "label", "--overwrite", "namespace", NS, stricter,
                  check=False)  # fmt: skip
    assert out.splitlines() == [
        "namespace/tenant-a labeled",
        'Warning: existing pods in namespace "tenant-a" violate the new PodSecurity enforce level '
        '"restricted:latest"',
        "Warning: plain: allowPrivilegeEscalation != false, unrestricted capabilities, runAsNonRoot != true, "
        "seccompProfile",
    ]


def test_exempt_user_and_runtime_class_are_admitted(tenant: KubeApiHandle, tmp_path: Path) -> None:
    kubeconfig = tenant.kubeconfig_for(EXEMPT_USER)
    out = kubectl(
        tenant, "--kubeconfig", str(kubeconfig), "apply", "-f", "-", stdin=PRIVILEGED_POD, check=False
    )
    assert out.strip() == "pod/root created"
    kata = {
        **pod("kata", hostPID=True, runtimeClassName="kata"),
        "metadata": {"name": "kata", "namespace": NS},
    }
    assert (
        kubectl(tenant, "create", "-f", "-", stdin=json.dumps(kata), check=False).strip()
        == "pod/kata created"
    )
    events: list[Any] = read_audit_log(tmp_path / "audit.log")
    mine = [
        e
        for e in events
        if e.get("verb") == "create" and e.get("objectRef", {}).get("name") in ("root", "kata")
    ]
    notes = [e.get("annotations", {}) for e in mine]
    assert {"pod-security.kubernetes.io/exempt": "user"} in notes
    assert {"pod-security.kubernetes.io/exempt": "runtimeClass"} in notes


def test_a_privileged_namespace_runs_what_the_suite_needs(tenant: KubeApiHandle) -> None:
    kubectl(tenant, "create", "namespace", "suite")
    kubectl(tenant, "label", "namespace", "suite", "pod-security.kubernetes.io/enforce=privileged")
    out = kubectl(tenant, "apply", "-f", "-", stdin=PRIVILEGED_POD.replace("tenant-a", "suite"), check=False)
    assert out.strip() == "pod/root created"
