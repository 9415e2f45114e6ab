"""Create-time defaulting of the core kinds besides Services (see services.py), as the apiserver's
defaulters and PrepareForCreate strategies do it.

Namespace: spec.finalizers [kubernetes], status.phase Active, label kubernetes.io/metadata.name.
Secret: type Opaque. Pod: status {phase: Pending} (status sent on create is dropped), restartPolicy
Always, dnsPolicy ClusterFirst, schedulerName default-scheduler, terminationGracePeriodSeconds 30,
serviceAccountName default, containers' ports protocol TCP and imagePullPolicy (Always for :latest
or no tag, else IfNotPresent). Simplified: no other per-field defaults.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Obj = dict[str, Any]


def _namespace(obj: Obj) -> None:
    obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
    obj["status"] = {"phase": "Active"}
    obj["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = obj["metadata"]["name"]


def _secret(obj: Obj) -> None:
    obj["type"] = obj.get("type") or "Opaque"


def container_defaults(c: Obj) -> None:
    image = str(c.get("image", ""))
    latest = ":" not in image.rsplit("/", 1)[-1] or image.endswith(":latest")
    c.setdefault("imagePullPolicy", "Always" if latest else "IfNotPresent")
    for p in c.get("ports") or []:
        if isinstance(p, dict):
            p.setdefault("protocol", "TCP")


def _pod(obj: Obj) -> None:
    spec = obj.setdefault("spec", {})
    for key, value in (("restartPolicy", "Always"), ("dnsPolicy", "ClusterFirst"),
                       ("schedulerName", "default-scheduler"), ("terminationGracePeriodSeconds", 30),
                       ("serviceAccountName", "default")):  # fmt: skip
        spec.setdefault(key, value)
    for c in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        if isinstance(c, dict):
            container_defaults(c)
    obj["status"] = {"phase": "Pending"}


BY_KIND: dict[tuple[str, str], Callable[[Obj], None]] = {
    ("", "Namespace"): _namespace,
    ("", "Secret"): _secret,
    ("", "Pod"): _pod,
}


def apply_defaults(group: str, kind: str, obj: Obj) -> None:
    fn = BY_KIND.get((group, kind))
    if fn is not None:
        fn(obj)
