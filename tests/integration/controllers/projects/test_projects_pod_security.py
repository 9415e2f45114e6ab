"""project-controller's Pod Security labels, with only its manifest's RBAC (the API double enforcing
RBAC), and what they do: a privileged pod into a project namespace is refused by the double's
PodSecurity admission, a Restricted project refuses what Baseline allows."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import yaml

from controllers.machinery import NAMESPACES, PODS, ApiException, KubeClient
from controllers.machinery.settings import parse
from controllers.projects.main import PREFIX, add_arguments, make_app
from controllers.projects.podsecurity import LEVEL_REQUEST
from nodeenv.kubeapi.state import ApiConfig
from tests.integration.controllers.machinery_kit import client_for, eventually
from tests.integration.controllers.projects.test_projects_rbac import MANIFEST, RBAC_KINDS, SA

PROJECT = {"plasmacloud.io/org-id": "o", "plasmacloud.io/project-id": "p"}
WANT = {
    "pod-security.kubernetes.io/enforce": "baseline",
    "pod-security.kubernetes.io/enforce-version": "latest",
    "pod-security.kubernetes.io/warn": "restricted",
    "pod-security.kubernetes.io/warn-version": "latest",
    "pod-security.kubernetes.io/audit": "restricted",
    "pod-security.kubernetes.io/audit-version": "latest",
}


@pytest.fixture
def kube_api_config() -> ApiConfig:
    return ApiConfig(bookmark_interval=1.0, enforce_rbac=True)


@pytest.fixture
async def admin(kube_api: Any) -> AsyncIterator[KubeClient]:
    async with client_for(kube_api.kubeconfig) as admin:
        for doc in yaml.safe_load_all(MANIFEST.read_text()):
            if doc["kind"] in RBAC_KINDS:
                await admin.create(RBAC_KINDS[doc["kind"]], doc)
        argv = [
            "--kubeconfig",
            str(kube_api.kubeconfig_for(SA)),
            "--metrics-address=off",
            "--leader-elect=false",
        ]
        settings = parse("project-controller", "", argv, {}, prefix=PREFIX, add_arguments=add_arguments)
        stop = asyncio.Event()
        task = asyncio.create_task(make_app().run(settings, stop))
        yield admin
        stop.set()
        assert await asyncio.wait_for(task, 30) == 0


def labels(kube_api: Any, ns: str) -> dict[str, str]:
    obj = kube_api.get("namespaces", "", ns)
    return {k: v for k, v in (obj["metadata"].get("labels") or {}).items() if k.startswith("pod-security")}


def pod(name: str, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "busybox"}], **spec}}


async def test_project_namespaces_enforce_baseline_and_a_privileged_pod_is_refused(
    kube_api: Any, admin: KubeClient
) -> None:
    await admin.create(NAMESPACES, {"metadata": {"name": "project-p", "labels": PROJECT}})
    await eventually(lambda: labels(kube_api, "project-p") == WANT, what="the Pod Security labels")
    patches = [r for r in kube_api.requests_by(SA) if r.verb == "patch" and r.resource == "namespaces"]
    assert [p.status for p in patches] == [200]
    privileged = pod("root")
    privileged["spec"]["containers"][0]["securityContext"] = {"privileged": True}
    with pytest.raises(ApiException) as e:
        await admin.create(PODS, privileged, "project-p")
    assert e.value.status == 403
    assert json.loads(e.value.body)["message"] == (
        'pods "root" is forbidden: violates PodSecurity "baseline:latest": '
        'privileged (container "c" must not set securityContext.privileged=true)'
    )
    await admin.create(PODS, pod("plain"), "project-p")  # Baseline allows it (with a Restricted warning)

    # someone lowers the level: put back
    lowered = {"pod-security.kubernetes.io/enforce": "privileged", "pod-security.kubernetes.io/warn": None}
    await admin.patch(NAMESPACES, None, "project-p", {"metadata": {"labels": lowered}})
    await eventually(lambda: labels(kube_api, "project-p") == WANT, what="the labels repaired")


async def test_a_project_asking_for_restricted_gets_it(kube_api: Any, admin: KubeClient) -> None:
    asked = {**PROJECT, LEVEL_REQUEST: "restricted"}
    await admin.create(NAMESPACES, {"metadata": {"name": "project-r", "labels": asked}})
    want = {**WANT, "pod-security.kubernetes.io/enforce": "restricted"}
    await eventually(lambda: labels(kube_api, "project-r") == want, what="enforce restricted")
    with pytest.raises(ApiException) as e:
        await admin.create(PODS, pod("plain"), "project-r")
    assert (
        e.value.status == 403
        and 'violates PodSecurity "restricted:latest"' in json.loads(e.value.body)["message"]
    )


async def test_a_namespace_without_the_project_label_is_left_alone(kube_api: Any, admin: KubeClient) -> None:
    await admin.create(NAMESPACES, {"metadata": {"name": "plain", "labels": {LEVEL_REQUEST: "restricted"}}})
    await admin.create(NAMESPACES, {"metadata": {"name": "project-q", "labels": PROJECT}})
    await eventually(lambda: labels(kube_api, "project-q") == WANT, what="the project's labels")
    assert labels(kube_api, "plain") == {}
