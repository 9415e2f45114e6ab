"""The Restricted checks of the Pod Security Standards (on top of Baseline), one pure function per
check and version (k8s.io/pod-security-admission/policy/check_*.go; messages word for word)."""

from __future__ import annotations

from nodeenv.kubeapi.podsecurity.baseline import proc_mount_1_0, seccomp_explicit
from nodeenv.kubeapi.podsecurity.spec import (
    Obj,
    Violation,
    containers,
    containers_phrase,
    containers_violation,
    dig,
    items,
    join_quote,
    name,
    sc,
    setters,
    user_namespace,
    uses,
    windows,
)

ALLOWED_VOLUMES = (
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "image",
    "persistentVolumeClaim",
    "projected",
    "secret",
)
NAMED_VOLUMES = (
    "hostPath",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "gitRepo",
    "nfs",
    "iscsi",
    "glusterfs",
    "rbd",
    "flexVolume",
    "cinder",
    "cephfs",
    "flocker",
    "fc",
    "azureFile",
    "vsphereVolume",
    "quobyte",
    "azureDisk",
    "photonPersistentDisk",
    "portworxVolume",
    "scaleIO",
    "storageos",
)
"""The volume sources restrictedVolumes names, in its order (the first one set is the type named)."""


def volumes(meta: Obj, spec: Obj) -> Violation | None:
    bad, kinds = [], set()
    for v in items(spec, "volumes"):
        if any(v.get(k) is not None for k in ALLOWED_VOLUMES):
            continue
        bad.append(str(v.get("name") or ""))
        kinds.add(next((k for k in NAMED_VOLUMES if v.get(k) is not None), "unknown"))
    if not bad:
        return None
    detail = uses("volume", bad, "restricted volume type", len(kinds), join_quote(sorted(kinds)))
    return Violation("restricted volume types", detail)


def privilege_escalation_1_8(meta: Obj, spec: Obj) -> Violation | None:
    bad = [name(c) for c in containers(spec) if sc(c).get("allowPrivilegeEscalation") is not False]
    return containers_violation(
        "allowPrivilegeEscalation != false", bad, "must set securityContext.allowPrivilegeEscalation=false"
    )


def privilege_escalation_1_25(meta: Obj, spec: Obj) -> Violation | None:
    return None if windows(spec) else privilege_escalation_1_8(meta, spec)


def capabilities_1_22(meta: Obj, spec: Obj) -> Violation | None:
    no_drop, adding, caps = [], [], set()
    for c in containers(spec):
        cap = sc(c).get("capabilities")
        if not isinstance(cap, dict):
            no_drop.append(name(c))
            continue
        if "ALL" not in (cap.get("drop") or ()):
            no_drop.append(name(c))
        added = {str(x) for x in cap.get("add") or () if x != "NET_BIND_SERVICE"}
        if added:
            adding.append(name(c))
            caps |= added
    details = (
        [f'{containers_phrase(no_drop)} must set securityContext.capabilities.drop=["ALL"]']
        if no_drop
        else []
    )
    if adding:
        details.append(
            f"{containers_phrase(adding)} must not include {join_quote(sorted(caps))} "
            "in securityContext.capabilities.add"
        )
    return Violation("unrestricted capabilities", "; ".join(details)) if details else None


def capabilities_1_25(meta: Obj, spec: Obj) -> Violation | None:
    return None if windows(spec) else capabilities_1_22(meta, spec)


def run_as_non_root_1_0(meta: Obj, spec: Obj) -> Violation | None:
    pod = dig(spec, "securityContext", "runAsNonRoot")
    explicit, implicit = [], []
    for c in containers(spec):
        value = sc(c).get("runAsNonRoot")
        if value is False:
            explicit.append(name(c))
        elif value is None and pod is not True:
            implicit.append(name(c))
    who = setters(pod is False, explicit)
    if who:
        return Violation(
            "runAsNonRoot != true", f"{' and '.join(who)} must not set securityContext.runAsNonRoot=false"
        )
    if implicit:
        return Violation(
            "runAsNonRoot != true",
            f"pod or {containers_phrase(implicit)} must set securityContext.runAsNonRoot=true",
        )
    return None


def run_as_non_root_1_35(meta: Obj, spec: Obj) -> Violation | None:
    return None if user_namespace(spec) else run_as_non_root_1_0(meta, spec)


def run_as_user_1_23(meta: Obj, spec: Obj) -> Violation | None:
    root = [name(c) for c in containers(spec) if _is_zero(sc(c).get("runAsUser"))]
    who = setters(_is_zero(dig(spec, "securityContext", "runAsUser")), root)
    return Violation("runAsUser=0", f"{' and '.join(who)} must not set runAsUser=0") if who else None


def _is_zero(value: object) -> bool:
    return value is not None and not isinstance(value, bool) and value == 0


def run_as_user_1_35(meta: Obj, spec: Obj) -> Violation | None:
    return None if user_namespace(spec) else run_as_user_1_23(meta, spec)


def seccomp_1_19(meta: Obj, spec: Obj) -> Violation | None:
    who, values, pod_set = seccomp_explicit(spec)
    if who:
        return Violation(
            "seccompProfile",
            f"{' and '.join(who)} must not set securityContext.seccompProfile.type "
            f"to {join_quote(sorted(values))}",
        )
    unset = [name(c) for c in containers(spec) if sc(c).get("seccompProfile") is None]
    if unset and not pod_set:
        return Violation(
            "seccompProfile",
            f"pod or {containers_phrase(unset)} must set "
            'securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost"',
        )
    return None


def seccomp_1_25(meta: Obj, spec: Obj) -> Violation | None:
    return None if windows(spec) else seccomp_1_19(meta, spec)


proc_mount = proc_mount_1_0
"""procMount_restricted (1.35+): the unconditional Baseline check, user namespaces or not."""
