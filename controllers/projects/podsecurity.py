"""The Pod Security level of a project namespace (pure), and the patch that sets it.

Every project namespace enforces the Baseline profile, or Restricted when the project asks for it
with the namespace label `plasmacloud.io/pod-security=restricted` (set by whoever creates the
project's namespace; any other value means Baseline: a label can only make a project stricter). Warn
and audit are always Restricted, so a tenant sees what Restricted would refuse, and every version is
`latest`. The six `pod-security.kubernetes.io/` labels are the controller's: changed or removed by
anyone, they are put back at the next reconcile (the API double, like kube-apiserver, enforces them
through its PodSecurity admission).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controllers.machinery import NAMESPACES, KubeClient

LEVEL_REQUEST = "plasmacloud.io/pod-security"
"""The namespace label a project sets to `restricted` to enforce the Restricted profile."""
PREFIX = "pod-security.kubernetes.io/"


def pod_security_labels(ns: Mapping[str, Any]) -> dict[str, str]:
    """The pod-security.kubernetes.io labels the project namespace `ns` must carry."""
    asked = (ns["metadata"].get("labels") or {}).get(LEVEL_REQUEST)
    enforce = "restricted" if asked == "restricted" else "baseline"
    levels = {"enforce": enforce, "warn": "restricted", "audit": "restricted"}
    return {
        **{PREFIX + mode: level for mode, level in levels.items()},
        **{f"{PREFIX}{mode}-version": "latest" for mode in levels},
    }


def labels_patch(ns: Mapping[str, Any]) -> dict[str, Any] | None:
    """A merge patch setting the labels that differ (None when all are right)."""
    have = ns["metadata"].get("labels") or {}
    diff = {k: v for k, v in pod_security_labels(ns).items() if have.get(k) != v}
    return {"metadata": {"labels": diff}} if diff else None


async def ensure_pod_security(client: KubeClient, ns: Mapping[str, Any]) -> bool:
    """Patch the namespace's Pod Security labels when they differ; True when it patched."""
    patch = labels_patch(ns)
    if patch is None:
        return False
    await client.patch(NAMESPACES, None, ns["metadata"]["name"], patch)
    return True
