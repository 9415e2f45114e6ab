"""The project template: the spec's objects, group names from the webhook's mapping, overrides, drift."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from controllers.projects.template import ProjectTemplate, desired_objects, drifted
from webhook.mapping import ClaimMapper

LABELS = {"plasmacloud.io/org-id": "org-123", "plasmacloud.io/project-id": "proj-456"}
NS = {"metadata": {"name": "project-1", "uid": "u-1", "labels": LABELS}}


def by_name(objs: list[Any]) -> dict[str, dict[str, Any]]:
    return {o.name: o.body for o in objs}


def test_the_spec_objects_with_ownership() -> None:
    objs = by_name(desired_objects(NS, ProjectTemplate()))
    assert set(objs) == {
        "project-admin", "project-viewer", "org-admin", "project-admin-binding", "project-viewer-binding",
        "org-admin-binding", "project-compute-quota", "project-storage-quota", "project-object-quota",
        "project-limits", "default-deny-all", "allow-same-project",
    }  # fmt: skip
    for body in objs.values():
        assert body["metadata"]["labels"] == {
            "app.kubernetes.io/managed-by": "plasmacloud-project-controller"
        }
        assert body["metadata"]["ownerReferences"][0]["uid"] == "u-1"
    for role in ("org-admin", "project-admin", "project-viewer"):  # issue 31 item 2: every resource named
        rules = objs[role]["rules"]
        assert not any("*" in r[k] for r in rules for k in ("apiGroups", "resources", "verbs")), role
        granted = {
            (g, res, v) for r in rules for g in r["apiGroups"] for res in r["resources"] for v in r["verbs"]
        }
        for escape in (
            ("", "namespaces", "update"),
            ("", "namespaces", "patch"),
            ("", "resourcequotas", "delete"),
            ("", "resourcequotas", "update"),
            ("", "limitranges", "delete"),
            ("", "services/status", "patch"),
            ("rbac.authorization.k8s.io", "rolebindings", "create"),
        ):
            assert escape not in granted, (role, escape)  # fmt: skip
    assert objs["project-object-quota"]["spec"]["hard"]["services.loadbalancers"] == "5"
    assert objs["project-compute-quota"]["spec"]["hard"]["limits.memory"] == "40Gi"
    deny = objs["default-deny-all"]["spec"]
    assert deny["policyTypes"] == ["Ingress", "Egress"] and "ingress" not in deny
    assert {"protocol": "UDP", "port": 53} in deny["egress"][0]["ports"]
    assert {"ipBlock": {"cidr": "10.96.0.10/32"}} in deny["egress"][0]["to"]  # DNS not run as a pod
    same = objs["allow-same-project"]["spec"]["ingress"][0]["from"][0]["namespaceSelector"]["matchLabels"]
    assert same == {"plasmacloud.io/project-id": "proj-456"}


def test_group_names_are_the_webhooks() -> None:
    def groups(*roles: str) -> set[str]:
        claims = {"sub": "user-1", "org_id": "org-123", "project_id": "proj-456", "roles": list(roles)}
        return set(ClaimMapper().map(claims).groups)

    objs = by_name(desired_objects(NS, ProjectTemplate()))
    bound = {name: objs[f"{name}-binding"]["subjects"][0]["name"] for name in ("org-admin", "project-admin",
                                                                              "project-viewer")}  # fmt: skip
    assert {n for n, g in bound.items() if g in groups("org_admin")} == {"org-admin", "project-admin"}
    assert {n for n, g in bound.items() if g in groups()} == {"project-admin"}  # issue 31 item 1
    assert {n for n, g in bound.items() if g in groups("project_viewer")} == {"project-viewer"}


def test_no_project_label_no_objects_and_no_org_no_org_admin() -> None:
    assert desired_objects({"metadata": {"name": "x", "labels": {}}}, ProjectTemplate()) == []
    only = {"metadata": {"name": "x", "labels": {"plasmacloud.io/project-id": "p"}}}
    assert "org-admin" not in by_name(desired_objects(only, ProjectTemplate()))


def test_template_overrides_and_unknown_keys(tmp_path: Path) -> None:
    f = tmp_path / "t.yaml"
    f.write_text("object_quota: {pods: '10', services.loadbalancers: '1'}\ndns_port: 5353\n")
    t = ProjectTemplate.load(f)
    assert (
        t.object_quota == {"pods": "10", "services.loadbalancers": "1"}
        and t.storage_quota["requests.storage"]
    )
    f.write_text("quota: {}\n")
    with pytest.raises(ValueError, match="unknown template keys"):
        ProjectTemplate.load(f)


def test_drift_ignores_server_defaults_but_not_changes() -> None:
    want = by_name(desired_objects(NS, ProjectTemplate()))["default-deny-all"]
    have = {**want, "metadata": {**want["metadata"], "resourceVersion": "7", "uid": "x"}}
    assert not drifted(want, have)
    assert drifted(want, {**have, "spec": {**want["spec"], "egress": []}})
    assert drifted(want, {**have, "metadata": {"labels": {}}})
