"""core/v1 ReplicationControllers, as kube-apiserver's strategy keeps them (pkg/apis/core/v1/defaults.go
SetDefaults_ReplicationController, pkg/apis/core/validation ValidateReplicationController).

Defaults: spec.replicas 1; an empty selector and empty labels take the template's labels; the pod
template's defaults (podtemplate.py). Status starts as {replicas: 0}. Validated (422): replicas >= 0,
a non-empty selector (a plain label map) matching the template's labels, the template with
restartPolicy Always. Scale subresource: scale.py. Simplified: no controller makes their Pods.
"""

from __future__ import annotations

from typing import Any

from nodeenv.kubeapi.podtemplate import template_causes, template_defaults
from nodeenv.kubeapi.workloads import go_map

Obj = dict[str, Any]
Cause = tuple[str, str, str]
KIND = ("", "ReplicationController")


def _template_labels(spec: Obj) -> dict[str, str]:
    template = spec.get("template") if isinstance(spec.get("template"), dict) else {}
    labels = ((template or {}).get("metadata") or {}).get("labels") or {}
    return dict(labels) if isinstance(labels, dict) else {}


def apply_defaults(obj: Obj) -> None:
    spec = obj.setdefault("spec", {})
    if not isinstance(spec, dict):
        return
    spec.setdefault("replicas", 1)
    labels = _template_labels(spec)
    if labels:
        if not spec.get("selector"):
            spec["selector"] = dict(labels)
        if not obj["metadata"].get("labels"):
            obj["metadata"]["labels"] = dict(labels)
    template_defaults(spec.get("template"))


def prepare_create(obj: Obj) -> None:
    obj["status"] = {"replicas": 0}


def causes(obj: Obj) -> list[Cause]:
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
    assert isinstance(spec, dict)
    out: list[Cause] = []
    replicas = spec.get("replicas")
    if isinstance(replicas, int) and replicas < 0:
        out.append(("FieldValueInvalid", "spec.replicas",
                    f"Invalid value: {replicas}: must be greater than or equal to 0"))  # fmt: skip
    selector = spec.get("selector") if isinstance(spec.get("selector"), dict) else {}
    assert isinstance(selector, dict)
    labels = _template_labels(spec)
    if not selector:
        out.append(("FieldValueRequired", "spec.selector", "Required value"))
    elif isinstance(spec.get("template"), dict) and any(labels.get(k) != v for k, v in selector.items()):
        why = "`selector` does not match template `labels`"
        out.append(
            ("FieldValueInvalid", "spec.template.metadata.labels", f"Invalid value: {go_map(labels)}: {why}")
        )
    return out + template_causes(spec.get("template"), "spec.template", ("Always",))
