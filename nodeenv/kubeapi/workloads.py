"""The workload kinds of apps/v1 and batch/v1: defaults, create-time status and validation, as the
apiserver's apps and batch strategies do them (k8s.io/kubernetes/pkg/apis/{apps,batch}/v1/defaults.go,
pkg/registry/{apps,batch}/*/strategy.go, pkg/apis/{apps,batch}/validation).

Defaults: DaemonSet updateStrategy RollingUpdate (maxUnavailable 1, maxSurge 0), revisionHistoryLimit
10; Deployment replicas 1, strategy RollingUpdate (25%/25%), revisionHistoryLimit 10,
progressDeadlineSeconds 600; StatefulSet replicas 1, podManagementPolicy OrderedReady, updateStrategy
RollingUpdate (partition 0), persistentVolumeClaimRetentionPolicy Retain/Retain, revisionHistoryLimit
10; ReplicaSet replicas 1; Job parallelism/completions 1, backoffLimit 6, completionMode NonIndexed,
suspend false, podReplacementPolicy TerminatingOrFailed and its generated selector
(batch.kubernetes.io/controller-uid) and template labels; CronJob concurrencyPolicy Allow, suspend
false, history limits 3/1. Pod templates: podtemplate.py. Status is reset on create.
Validated (422): selector required and matching the template's labels, immutable after create
(apps/v1); replicas >= 0; the template (podtemplate.py) with its kind's restartPolicy (Always for
apps, OnFailure/Never for Jobs); a CronJob's schedule.
Simplified: no controller acts on them (no Pods, ReplicaSets or status counts are written by the
double; see DESIGN: a runner does that), and scale subresources are not served.
"""

from __future__ import annotations

import copy
from typing import Any

from nodeenv.kubeapi.podtemplate import template_causes, template_defaults
from nodeenv.kubeapi.selectors import Requirement

Obj = dict[str, Any]
Cause = tuple[str, str, str]
_ROLLING = "RollingUpdate"
_CREATE_STATUS: dict[str, Obj] = {
    "DaemonSet": {"currentNumberScheduled": 0, "numberMisscheduled": 0, "desiredNumberScheduled": 0,
                  "numberReady": 0},
    "StatefulSet": {"replicas": 0, "availableReplicas": 0},
    "ReplicaSet": {"replicas": 0},
}  # fmt: skip
_OPS = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}


def _spec(obj: Obj) -> Obj:
    spec = obj.setdefault("spec", {})
    if not isinstance(spec, dict):
        obj["spec"] = spec = {}
    return spec


def _rolling(strategy: Obj, defaults: Obj) -> None:
    strategy.setdefault("type", _ROLLING)
    if strategy["type"] == _ROLLING:
        rolling = strategy.setdefault("rollingUpdate", {})
        for k, v in defaults.items():
            rolling.setdefault(k, v)


def _daemonset(spec: Obj) -> None:
    _rolling(spec.setdefault("updateStrategy", {}), {"maxUnavailable": 1, "maxSurge": 0})
    spec.setdefault("revisionHistoryLimit", 10)
    template_defaults(spec.get("template"))


def _deployment(spec: Obj) -> None:
    spec.setdefault("replicas", 1)
    _rolling(spec.setdefault("strategy", {}), {"maxUnavailable": "25%", "maxSurge": "25%"})
    spec.setdefault("revisionHistoryLimit", 10)
    spec.setdefault("progressDeadlineSeconds", 600)
    template_defaults(spec.get("template"))


def _statefulset(spec: Obj) -> None:
    spec.setdefault("replicas", 1)
    spec.setdefault("podManagementPolicy", "OrderedReady")
    _rolling(spec.setdefault("updateStrategy", {}), {"partition": 0})
    retention = spec.setdefault("persistentVolumeClaimRetentionPolicy", {})
    retention.setdefault("whenDeleted", "Retain")
    retention.setdefault("whenScaled", "Retain")
    spec.setdefault("revisionHistoryLimit", 10)
    template_defaults(spec.get("template"))


def _replicaset(spec: Obj) -> None:
    spec.setdefault("replicas", 1)
    template_defaults(spec.get("template"))


def _job_spec(spec: Obj) -> None:
    if "completions" not in spec and "parallelism" not in spec:
        spec["completions"] = 1
    spec.setdefault("parallelism", 1)
    spec.setdefault("backoffLimit", 6)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    spec.setdefault(
        "podReplacementPolicy", "Failed" if spec.get("podFailurePolicy") else "TerminatingOrFailed"
    )
    template_defaults(spec.get("template"), restart_policy="")


def _cronjob(spec: Obj) -> None:
    for k, v in (("concurrencyPolicy", "Allow"), ("suspend", False), ("successfulJobsHistoryLimit", 3),
                 ("failedJobsHistoryLimit", 1)):  # fmt: skip
        spec.setdefault(k, v)
    job = spec.get("jobTemplate")
    if isinstance(job, dict) and isinstance(job.get("spec"), dict):
        _job_spec(job["spec"])


_DEFAULTS = {
    "DaemonSet": _daemonset,
    "Deployment": _deployment,
    "StatefulSet": _statefulset,
    "ReplicaSet": _replicaset,
    "Job": _job_spec,
    "CronJob": _cronjob,
}


def apply_defaults(kind: str, obj: Obj) -> None:
    _DEFAULTS[kind](_spec(obj))


def prepare_create(kind: str, obj: Obj) -> None:
    """Status starts empty; a Job without manualSelector gets its generated selector and labels."""
    obj["status"] = copy.deepcopy(_CREATE_STATUS.get(kind, {}))
    spec = _spec(obj)
    if kind == "Job" and not spec.get("manualSelector"):
        meta = obj["metadata"]
        uid, name = meta["uid"], meta["name"]
        spec["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
        template = spec.get("template")
        if isinstance(template, dict):
            labels = template.setdefault("metadata", {}).setdefault("labels", {})
            labels.update({"batch.kubernetes.io/controller-uid": uid, "batch.kubernetes.io/job-name": name,
                           "controller-uid": uid, "job-name": name})  # fmt: skip


def selector_matches(selector: Obj, labels: dict[str, str]) -> bool:
    """A metav1.LabelSelector (matchLabels and matchExpressions) against a label map."""
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for e in selector.get("matchExpressions") or []:
        op = _OPS.get(e.get("operator", ""), "")
        if not Requirement(e.get("key", ""), op, frozenset(e.get("values") or [])).matches(labels):
            return False
    return True


def go_map(m: dict[str, Any]) -> str:
    """How Go's %#v prints a map[string]string in validation messages."""
    return "map[string]string{" + ", ".join(f'"{k}":"{v}"' for k, v in sorted(m.items())) + "}"


def _selector_causes(kind: str, spec: Obj, old_spec: Obj | None) -> list[Cause]:
    """A missing selector matches nothing (so the template's labels do not match it either); only
    DaemonSet's validation does not also call it required."""
    selector = spec.get("selector")
    causes: list[Cause] = []
    if not isinstance(selector, dict):
        selector = None
        if kind != "DaemonSet":
            causes.append(("FieldValueRequired", "spec.selector", "Required value"))
    elif not selector.get("matchLabels") and not selector.get("matchExpressions"):
        why = f"empty selector is invalid for {kind.lower()}"
        return [("FieldValueInvalid", "spec.selector", f"Invalid value: {_go_selector(selector)}: {why}")]
    template = spec.get("template") if isinstance(spec.get("template"), dict) else {}
    labels = ((template or {}).get("metadata") or {}).get("labels") or {}
    if selector is None or not selector_matches(selector, labels):
        why = "`selector` does not match template `labels`"
        causes.append(
            ("FieldValueInvalid", "spec.template.metadata.labels", f"Invalid value: {go_map(labels)}: {why}")
        )
    if selector is not None and old_spec is not None and old_spec.get("selector") != selector:
        causes.append(("FieldValueInvalid", "spec.selector", "Invalid value: " + _go_selector(selector)
                       + ": field is immutable"))  # fmt: skip
    return causes


def _go_selector(selector: Obj) -> str:
    return f"v1.LabelSelector{{MatchLabels:{go_map(selector.get('matchLabels') or {})}}}"


def causes(kind: str, obj: Obj, old: Obj | None) -> list[Cause]:
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
    assert isinstance(spec, dict)
    old_spec = (old or {}).get("spec") if old is not None else None
    out: list[Cause] = []
    replicas = spec.get("replicas")
    if isinstance(replicas, int) and replicas < 0:
        out.append(("FieldValueInvalid", "spec.replicas",
                    f"Invalid value: {replicas}: must be greater than or equal to 0"))  # fmt: skip
    if kind == "CronJob":
        if not spec.get("schedule"):
            out.append(("FieldValueRequired", "spec.schedule", "Required value"))
        job = ((spec.get("jobTemplate") or {}).get("spec")) or {}
        return out + template_causes(job.get("template"), "spec.jobTemplate.spec.template",
                                     ("OnFailure", "Never"))  # fmt: skip
    out += _selector_causes(kind, spec, old_spec if isinstance(old_spec, dict) else None)
    policies = ("OnFailure", "Never") if kind == "Job" else ("Always",)
    return out + template_causes(spec.get("template"), "spec.template", policies)
