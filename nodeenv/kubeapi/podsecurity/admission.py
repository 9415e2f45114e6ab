"""The PodSecurity admission decisions (k8s.io/pod-security-admission/admission/admission.go).

Pods (create, and updates that change a container's image or the containers): exempt namespace,
user or runtimeClass → allowed, noted as `exempt` in the audit annotations; otherwise evaluated
at the namespace's enforce level (a violation is 403 `pods "x" is forbidden: violates PodSecurity
"baseline:latest": <check> (<detail>), ...`), audit level (the `audit-violations` audit annotation)
and warn level (a `would violate PodSecurity ...` warning, only when the request is allowed).
Workloads (Deployments, DaemonSets, StatefulSets, ReplicaSets, Jobs, CronJobs, ReplicationControllers,
PodTemplates): their pod template at the audit and warn levels only; enforce never rejects them.
Namespaces: invalid pod-security labels are 422 on create, and on update when they changed; a
stricter enforce level on update warns about the existing pods that violate it.
Subresources are not evaluated (pods/ephemeralcontainers aside, which the double does not serve).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from nodeenv.kubeapi.errors import ApiError, Forbidden, invalid
from nodeenv.kubeapi.kinds import Kind
from nodeenv.kubeapi.podsecurity import registry
from nodeenv.kubeapi.podsecurity.config import PodSecurityConfig
from nodeenv.kubeapi.podsecurity.levels import (
    PREFIX,
    FieldError,
    LevelVersion,
    Policy,
    compare_levels,
    policy_to_evaluate,
)
from nodeenv.kubeapi.podsecurity.spec import Obj, dig

TEMPLATE_KINDS = {("", "ReplicationController"), ("", "PodTemplate"), ("apps", "ReplicaSet"),
                  ("apps", "Deployment"), ("apps", "StatefulSet"), ("apps", "DaemonSet"), ("batch", "Job"),
                  ("batch", "CronJob")}  # fmt: skip
MAX_PODS_CHECKED = 3000


@dataclass(slots=True)
class Outcome:
    """An AdmissionResponse: the refusal (None: allowed), the warnings, the audit annotations (keys
    without the `pod-security.kubernetes.io/` prefix kube-apiserver adds)."""

    error: ApiError | None = None
    warnings: list[str] = field(default_factory=list)
    annotations: dict[str, str] = field(default_factory=dict)


ALLOWED = Outcome()


class PodSecurityAdmission:
    def __init__(
        self,
        config: PodSecurityConfig,
        namespace: Callable[[str], Obj | None],
        pods: Callable[[str], list[Obj]],
    ) -> None:
        """`namespace(name)`: the stored Namespace; `pods(namespace)`: the pods in it."""
        self.config, self._namespace, self._pods = config, namespace, pods

    def policy(self, labels: Mapping[str, str] | None) -> tuple[Policy, list[FieldError]]:
        return policy_to_evaluate(labels, self.config.defaults)

    def validate(
        self, kind: Kind, namespace: str, obj: Obj, old: Obj | None, user: str, subresource: str
    ) -> Outcome:
        if subresource:
            return ALLOWED
        if (kind.group, kind.kind) == ("", "Namespace"):
            return self._namespace_update(kind, obj, old)
        if (kind.group, kind.kind) == ("", "Pod"):
            if old is not None and not significant_pod_update(obj, old):
                return ALLOWED
            return self._evaluate(namespace, obj.get("metadata") or {}, obj.get("spec") or {}, user, obj)
        if (kind.group, kind.kind) in TEMPLATE_KINDS:
            template = pod_template(kind.kind, obj)
            if template is None:
                return ALLOWED
            return self._evaluate(
                namespace, template.get("metadata") or {}, template.get("spec") or {}, user, None
            )
        return ALLOWED

    def _evaluate(self, namespace: str, meta: Obj, spec: Obj, user: str, pod: Obj | None) -> Outcome:
        """EvaluatePod; `pod` is the Pod when enforce applies (None for a workload's template)."""
        c = self.config
        if namespace in c.namespaces:
            return Outcome(annotations={"exempt": "namespace"})
        if user and user in c.usernames:
            return Outcome(annotations={"exempt": "user"})
        ns = self._namespace(namespace)
        policy, errors = self.policy(dig(ns, "metadata", "labels"))
        if not errors and (policy.fully_privileged() if pod is not None else _quiet(policy)):
            return Outcome(annotations={"enforce-policy": "privileged:latest"} if pod is not None else {})
        if spec.get("runtimeClassName") and spec["runtimeClassName"] in c.runtime_classes:
            return Outcome(annotations={"exempt": "runtimeClass"})
        out, cache = Outcome(), {}
        if errors:
            out.annotations["error"] = "Failed to parse policy: " + _aggregate(errors)
        if pod is not None:
            out.annotations["enforce-policy"] = str(policy.enforce)
            cache[policy.enforce] = found = registry.evaluate(policy.enforce, meta, spec)
            if found:
                name = str(dig(pod, "metadata", "name") or "")
                message = f'violates PodSecurity "{policy.enforce}": {registry.forbidden_detail(found)}'
                out.error = Forbidden(
                    f'pods "{name}" is forbidden: {message}', {"name": name, "kind": "pods"}
                )
        for mode, lv in (("audit", policy.audit), ("warn", policy.warn)):
            if mode == "warn" and out.error is not None:
                break  # no warnings on a request refused anyway
            if lv not in cache:
                cache[lv] = registry.evaluate(lv, meta, spec)
            if cache[lv]:
                text = f'would violate PodSecurity "{lv}": {registry.forbidden_detail(cache[lv])}'
                if mode == "audit":
                    out.annotations["audit-violations"] = text
                else:
                    out.warnings.append(text)
        return out

    def _namespace_update(self, kind: Kind, ns: Obj, old: Obj | None) -> Outcome:
        name = str(dig(ns, "metadata", "name") or "")
        policy, errors = self.policy(dig(ns, "metadata", "labels"))
        old_policy, old_errors = (
            self.policy(dig(old, "metadata", "labels")) if old is not None else (policy, [])
        )
        if errors and (old is None or not old_errors or errors != old_errors):
            causes = [("FieldValueInvalid", f, f'Invalid value: "{v}": {msg}') for f, v, msg in errors]
            return Outcome(error=invalid(kind, name, causes))
        if old is not None:
            new_lv, old_lv = policy.enforce, old_policy.enforce
            if new_lv == old_lv or new_lv.level == "privileged":
                return ALLOWED
            if new_lv.version == old_lv.version and compare_levels(new_lv.level, old_lv.level) < 1:
                return ALLOWED
        if name in self.config.namespaces:
            warning = self._exempt_warning(name, policy, dig(ns, "metadata", "labels") or {})
            return Outcome(warnings=[warning] if warning else [])
        if old is None:
            return ALLOWED
        return Outcome(warnings=self._existing_pods(name, policy.enforce))

    def _exempt_warning(self, name: str, policy: Policy, labels: Mapping[str, str]) -> str:
        if policy.fully_privileged() or policy.equivalent(self.config.defaults):
            return ""
        parts = [
            f"{mode}={lv}"
            for mode, lv in (("enforce", policy.enforce), ("audit", policy.audit), ("warn", policy.warn))
            if lv.level != "privileged" and (PREFIX + mode in labels or f"{PREFIX}{mode}-version" in labels)
        ]
        policy_text = ", ".join(parts)
        return (
            f'namespace "{name}" is exempt from Pod Security, and the policy ({policy_text}) will be ignored'
        )

    def _existing_pods(self, namespace: str, enforce: LevelVersion) -> list[str]:
        """EvaluatePodsInNamespace: one warning per distinct set of violated checks, naming the
        lexically first pod with it and how many others; one pod per controller first."""
        pods = [p for p in prioritized(self._pods(namespace)) if not self._exempt_class(p)]
        checked = pods[:MAX_PODS_CHECKED]
        first: dict[str, tuple[str, int]] = {}
        for p in checked:
            found = registry.evaluate(enforce, p.get("metadata") or {}, p.get("spec") or {})
            if found:
                reason, pod_name = registry.forbidden_reason(found), str(dig(p, "metadata", "name"))
                name, count = first.get(reason, (pod_name, 0))
                first[reason] = (min(name, pod_name), count + 1)
        out = []
        if len(checked) < len(pods):
            n, total = len(checked), len(pods)
            out.append(
                f"new PodSecurity enforce level only checked against the first {n} of {total} existing pods"
            )
        if first:
            what = f'the new PodSecurity enforce level "{enforce}"'
            out.append(f'existing pods in namespace "{namespace}" violate {what}')
        return out + sorted(_decorated(name, count, reason) for reason, (name, count) in first.items())

    def _exempt_class(self, pod: Obj) -> bool:
        rc = dig(pod, "spec", "runtimeClassName")
        return bool(rc) and rc in self.config.runtime_classes


def _quiet(policy: Policy) -> bool:
    """Nothing to evaluate for a workload: audit and warn both privileged."""
    return policy.audit.level == policy.warn.level == "privileged"


def _aggregate(errors: list[FieldError]) -> str:
    texts = [f'{f}: Invalid value: "{v}": {msg}' for f, v, msg in errors]
    return texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"


def _decorated(name: str, count: int, reason: str) -> str:
    if count == 1:
        return f"{name}: {reason}"
    if count == 2:
        return f"{name} (and 1 other pod): {reason}"
    return f"{name} (and {count - 1} other pods): {reason}"


def pod_template(kind: str, obj: Obj) -> Obj | None:
    """The pod template a workload embeds (None when it has none)."""
    path = {"PodTemplate": ("template",), "CronJob": ("spec", "jobTemplate", "spec", "template")}.get(
        kind, ("spec", "template")
    )
    template = dig(obj, *path)
    return template if isinstance(template, Mapping) else None


def significant_pod_update(pod: Obj, old: Obj) -> bool:
    """isSignificantPodUpdate: containers or init containers added/removed, an image changed, an
    ephemeral container added or its image changed."""
    new_spec, old_spec = pod.get("spec") or {}, old.get("spec") or {}
    for key in ("containers", "initContainers"):
        new_c, old_c = new_spec.get(key) or [], old_spec.get(key) or []
        if len(new_c) != len(old_c) or any(
            _image(a) != _image(b) for a, b in zip(new_c, old_c, strict=False)
        ):
            return True
    before = {
        c.get("name"): _image(c) for c in old_spec.get("ephemeralContainers") or [] if isinstance(c, Mapping)
    }
    return any(
        c.get("name") not in before or before[c.get("name")] != _image(c)
        for c in new_spec.get("ephemeralContainers") or []
        if isinstance(c, Mapping)
    )


def _image(c: Any) -> Any:
    return c.get("image") if isinstance(c, Mapping) else None


def prioritized(pods: list[Obj]) -> list[Obj]:
    """The first pod of each controller (and every uncontrolled pod), then the other replicas."""
    seen: set[str] = set()
    first, rest = [], []
    for p in pods:
        ctrl = next(
            (r.get("uid") for r in dig(p, "metadata", "ownerReferences") or [] if r.get("controller")), None
        )
        if ctrl is None or ctrl not in seen:
            first.append(p)
            if ctrl is not None:
                seen.add(str(ctrl))
        else:
            rest.append(p)
    return first + rest
