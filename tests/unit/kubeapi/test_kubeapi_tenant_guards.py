"""daemonsets/rbac/tenant-guards.yaml evaluated by the API double's admission (in-process, as the
HTTP edge would call it): who may change a project label, a project's quotas, and where
project-controller may write RBAC. The integration tests drive the same through kubectl."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml  # type: ignore[import-untyped]

from nodeenv.kubeapi.admissionpolicy import CALLER, Caller
from nodeenv.kubeapi.auth import User
from nodeenv.kubeapi.crud import DeleteOptions
from nodeenv.kubeapi.errors import Forbidden
from nodeenv.kubeapi.routing import RequestInfo
from nodeenv.kubeapi.state import ApiConfig, ApiState

GUARDS = Path(__file__).parents[3] / "daemonsets" / "rbac" / "tenant-guards.yaml"
LABELS = {"plasmacloud.io/project-id": "p-1", "plasmacloud.io/org-id": "o-1"}
TENANT = User("dev@example.com", ("project:p-1", "system:authenticated"))
MASTER = User("kubernetes-admin", ("system:masters", "system:authenticated"))
CONTROLLER = User("system:serviceaccount:kube-system:project-controller", ("system:serviceaccounts",))


@pytest.fixture
def st() -> ApiState:
    CALLER.set(None)  # the double's own writes
    st = ApiState(ApiConfig())
    plurals = {"ValidatingAdmissionPolicy": "validatingadmissionpolicies",
               "ValidatingAdmissionPolicyBinding": "validatingadmissionpolicybindings"}  # fmt: skip
    for doc in yaml.safe_load_all(GUARDS.read_text()):
        kind = st.registry.lookup("admissionregistration.k8s.io", "v1", plurals[doc["kind"]])
        assert kind is not None
        st.resources.create(kind, "", doc)
    ns = st.registry.lookup("", "v1", "namespaces")
    assert ns is not None
    st.resources.create(ns, "", {"metadata": {"name": "proj", "labels": LABELS}})
    return st


def as_user(user: User, resource: str) -> None:
    CALLER.set(Caller(user, RequestInfo(verb="update", group="", version="v1", resource=resource)))


def relabel(st: ApiState, labels: dict[str, str]) -> None:
    ns = st.registry.lookup("", "v1", "namespaces")
    assert ns is not None
    st.resources.update(ns, "", "proj", {"metadata": {"name": "proj", "labels": labels}})


def test_only_cluster_admins_change_the_project_labels(st: ApiState) -> None:
    as_user(TENANT, "namespaces")
    for labels in ({**LABELS, "plasmacloud.io/project-id": "p-2"}, {"plasmacloud.io/org-id": "o-1"}):
        with pytest.raises(Forbidden, match="ValidatingAdmissionPolicy 'plasmacloud-project-label'"):
            relabel(st, labels)
    relabel(st, {**LABELS, "team": "web"})  # its other labels are the tenant's
    as_user(MASTER, "namespaces")
    relabel(st, {**LABELS, "plasmacloud.io/project-id": "p-2"})


def test_a_project_quota_is_project_controllers(st: ApiState) -> None:
    quotas = st.registry.lookup("", "v1", "resourcequotas")
    assert quotas is not None
    body = {"metadata": {"name": "q"}, "spec": {"hard": {"pods": "5"}}}
    as_user(TENANT, "resourcequotas")
    with pytest.raises(Forbidden, match="plasmacloud-project-quota"):
        st.resources.create(quotas, "proj", body)
    as_user(CONTROLLER, "resourcequotas")
    st.resources.create(quotas, "proj", body)
    as_user(TENANT, "resourcequotas")
    with pytest.raises(Forbidden, match="plasmacloud-project-quota"):
        st.resources.delete(quotas, "proj", "q", DeleteOptions())
    st.resources.create(quotas, "default", {**body})  # not a project namespace


def test_project_controller_writes_roles_only_in_project_namespaces(st: ApiState) -> None:
    roles = st.registry.lookup("rbac.authorization.k8s.io", "v1", "roles")
    assert roles is not None
    as_user(CONTROLLER, "roles")
    with pytest.raises(Forbidden, match="plasmacloud-project-controller-scope"):
        st.resources.create(roles, "kube-system", {"metadata": {"name": "org-admin"}, "rules": []})
    st.resources.create(roles, "proj", {"metadata": {"name": "org-admin"}, "rules": []})
    as_user(MASTER, "roles")
    st.resources.create(roles, "kube-system", {"metadata": {"name": "x"}, "rules": []})
