"""The Pod Security labels project-controller gives a project namespace (pure)."""

from __future__ import annotations

from typing import Any

from controllers.projects.podsecurity import LEVEL_REQUEST, labels_patch, pod_security_labels

P = "pod-security.kubernetes.io/"


def ns(**labels: str) -> dict[str, Any]:
    return {"metadata": {"name": "p", "labels": {"plasmacloud.io/project-id": "x", **labels}}}


def test_baseline_enforced_restricted_warned_and_audited_at_latest() -> None:
    assert pod_security_labels(ns()) == {
        P + "enforce": "baseline", P + "warn": "restricted", P + "audit": "restricted",
        P + "enforce-version": "latest", P + "warn-version": "latest", P + "audit-version": "latest",
    }  # fmt: skip


def test_a_project_can_only_ask_for_stricter() -> None:
    assert pod_security_labels(ns(**{LEVEL_REQUEST: "restricted"}))[P + "enforce"] == "restricted"
    for asked in ("privileged", "baseline", "none"):
        assert pod_security_labels(ns(**{LEVEL_REQUEST: asked}))[P + "enforce"] == "baseline"


def test_the_patch_names_only_what_differs() -> None:
    right = ns(**pod_security_labels(ns()))
    assert labels_patch(right) is None
    lowered = ns(**{**pod_security_labels(ns()), P + "enforce": "privileged"})
    assert labels_patch(lowered) == {"metadata": {"labels": {P + "enforce": "baseline"}}}
