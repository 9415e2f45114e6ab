"""Pod Security in the sandbox: a project namespace gets its level from project-controller (enforce
Baseline, warn and audit Restricted), the API double's PodSecurity admission refuses a privileged
tenant pod with kube-apiserver's 403 naming each violated check, and a Deployment with such a pod
template is stored with kubectl's `Warning:` (enforce never rejects workloads), all through kubectl.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

from nodeenv.daemons import run_checked
from nodeenv.scenario import Scenario
from nodeenv.scenarios.tenancy import _apply, _deleter, _eventually

NS = "tenant-psa"
LABELS = {"plasmacloud.io/org-id": "org-sbx", "plasmacloud.io/project-id": "proj-psa"}
PRIVILEGED = {"containers": [{"name": "root", "image": "busybox", "securityContext": {"privileged": True}}],
              "volumes": [{"name": "host", "hostPath": {"path": "/"}}]}  # fmt: skip
REFUSED = (
    'pods "root" is forbidden: violates PodSecurity "baseline:latest": hostPath volumes (volume "host"), '
    'privileged (container "root" must not set securityContext.privileged=true)'
)
WARNED = 'Warning: would violate PodSecurity "restricted:latest": privileged (container "root"'


def run(scn: Scenario) -> None:
    kubectl = ["kubectl", f"--kubeconfig={scn.env['KUBECONFIG']}", "--request-timeout=10s"]
    with scn.step("pod security: a project namespace enforces Baseline (project-controller's labels)"):
        _apply(kubectl, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS, "labels": LABELS}})
        scn.defer(_deleter(kubectl, NS))
        _eventually(lambda: _enforced(kubectl) == "baseline", "pod-security.kubernetes.io/enforce=baseline")
    with scn.step("pod security: a privileged hostPath tenant pod is refused (403)"):
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "root", "namespace": NS},
            "spec": PRIVILEGED,
        }
        proc = _kubectl_apply(kubectl, pod)
        if proc.returncode == 0 or REFUSED not in proc.stderr:
            raise RuntimeError(
                f"the privileged pod was not refused as kube-apiserver refuses it: {proc.stderr}"
            )
    with scn.step("pod security: a Deployment with that pod is stored with kubectl's Warning"):
        template = {"metadata": {"labels": {"app": "root"}}, "spec": PRIVILEGED}
        meta = {"name": "root", "namespace": NS}
        deploy = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta,
                  "spec": {"selector": {"matchLabels": {"app": "root"}}, "template": template}}  # fmt: skip
        proc = _kubectl_apply(kubectl, deploy)
        if proc.returncode or WARNED not in proc.stderr:
            raise RuntimeError(f"kubectl apply deployment: exit {proc.returncode}, stderr {proc.stderr!r}")


def _enforced(kubectl: list[str]) -> str:
    ns: dict[str, Any] = json.loads(run_checked([*kubectl, "get", "namespace", NS, "-o", "json"]))
    return str((ns["metadata"].get("labels") or {}).get("pod-security.kubernetes.io/enforce", ""))


def _kubectl_apply(kubectl: list[str], obj: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*kubectl, "apply", "-f", "-"], input=json.dumps(obj), capture_output=True, text=True
    )
