"""Pod templates of the workload kinds (DaemonSet, Deployment, StatefulSet, ReplicaSet, Job, CronJob):
the defaults kube-apiserver's decoder sets (k8s.io/kubernetes/pkg/apis/core/v1/defaults.go, and the
v1 conversion that copies serviceAccountName to the deprecated serviceAccount) and the template
rules of ValidatePodTemplateSpec the double checks (422 causes).

Defaults: restartPolicy Always, dnsPolicy ClusterFirst, schedulerName default-scheduler,
terminationGracePeriodSeconds 30, securityContext {}; containers' terminationMessagePath/Policy,
imagePullPolicy, ports' protocol TCP (and hostPort = containerPort under hostNetwork); probes'
timeout/period/success/failure thresholds and httpGet path "/" and scheme HTTP; env fieldRef
apiVersion v1; secret/configMap/projected/downwardAPI volumes' defaultMode 420, hostPath type "",
a volume with no source an emptyDir.
Validated: containers present, each with a name (unique) and an image; restartPolicy one of the
kind's allowed values; template labels present. Simplified: the rest of ValidatePodSpec is not
modelled (resources, securityContext, volume sources' fields are stored as sent).
"""

from __future__ import annotations

from typing import Any

from nodeenv.kubeapi.defaults import container_defaults

Obj = dict[str, Any]
Cause = tuple[str, str, str]
_PROBE = {"timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3}
_SPEC = {"restartPolicy": "Always", "dnsPolicy": "ClusterFirst", "schedulerName": "default-scheduler",
         "terminationGracePeriodSeconds": 30}  # fmt: skip
_MODE_SOURCES = ("secret", "configMap", "projected", "downwardAPI")
_SOURCES = (*_MODE_SOURCES, "hostPath", "emptyDir", "persistentVolumeClaim", "csi", "ephemeral", "nfs",
            "iscsi", "image", "local")  # fmt: skip


def _probe(p: Any) -> None:
    if not isinstance(p, dict):
        return
    for k, v in _PROBE.items():
        p.setdefault(k, v)
    if isinstance(p.get("httpGet"), dict):
        p["httpGet"].setdefault("path", "/")
        p["httpGet"].setdefault("scheme", "HTTP")


def _container(c: Obj, host_network: bool) -> None:
    container_defaults(c)
    c.setdefault("terminationMessagePath", "/dev/termination-log")
    c.setdefault("terminationMessagePolicy", "File")
    for p in c.get("ports") or []:
        if host_network and isinstance(p, dict) and "containerPort" in p:
            p.setdefault("hostPort", p["containerPort"])
    for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
        _probe(c.get(probe))
    for e in c.get("env") or []:
        ref = (e.get("valueFrom") or {}).get("fieldRef") if isinstance(e, dict) else None
        if isinstance(ref, dict):
            ref.setdefault("apiVersion", "v1")


def _volume(v: Obj) -> None:
    if not any(s in v for s in _SOURCES):
        v["emptyDir"] = {}
    for source in _MODE_SOURCES:
        if isinstance(v.get(source), dict):
            v[source].setdefault("defaultMode", 420)
    if isinstance(v.get("hostPath"), dict):
        v["hostPath"].setdefault("type", "")


def template_defaults(template: Any, restart_policy: str = "Always") -> None:
    if not isinstance(template, dict) or not isinstance(template.get("spec"), dict):
        return
    spec = template["spec"]
    for key, value in {**_SPEC, "restartPolicy": restart_policy}.items():
        spec.setdefault(key, value)
    spec.setdefault("securityContext", {})
    if spec.get("serviceAccountName"):
        spec["serviceAccount"] = spec["serviceAccountName"]
    host_network = bool(spec.get("hostNetwork"))
    for c in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        if isinstance(c, dict):
            _container(c, host_network)
    for v in spec.get("volumes") or []:
        if isinstance(v, dict):
            _volume(v)


def _container_causes(path: str, containers: Any, seen: set[str]) -> list[Cause]:
    causes: list[Cause] = []
    for i, c in enumerate(containers if isinstance(containers, list) else []):
        at = f"{path}[{i}]"
        c = c if isinstance(c, dict) else {}
        name = c.get("name")
        if not name:
            causes.append(("FieldValueRequired", f"{at}.name", "Required value"))
        elif name in seen:
            causes.append(("FieldValueDuplicate", f"{at}.name", f'Duplicate value: "{name}"'))
        else:
            seen.add(name)
        if not c.get("image"):
            causes.append(("FieldValueRequired", f"{at}.image", "Required value"))
    return causes


def template_causes(template: Any, path: str, restart_policies: tuple[str, ...]) -> list[Cause]:
    if not isinstance(template, dict):
        return [("FieldValueRequired", path, "Required value")]
    spec = template.get("spec") if isinstance(template.get("spec"), dict) else {}
    assert isinstance(spec, dict)
    causes: list[Cause] = []
    seen: set[str] = set()
    if not spec.get("containers"):
        causes.append(("FieldValueRequired", f"{path}.spec.containers", "Required value"))
    causes += _container_causes(f"{path}.spec.containers", spec.get("containers"), seen)
    causes += _container_causes(f"{path}.spec.initContainers", spec.get("initContainers"), seen)
    policy = spec.get("restartPolicy")
    if policy not in restart_policies:
        supported = ", ".join(f'"{p}"' for p in restart_policies)
        what = (
            f"Required value: valid values: {supported}"
            if not policy
            else f'Unsupported value: "{policy}": supported values: {supported}'
        )
        reason = "FieldValueRequired" if not policy else "FieldValueNotSupported"
        causes.append((reason, f"{path}.spec.restartPolicy", what))
    return causes
