"""fiberlb-controller with only the RBAC its manifest grants (the API double enforcing RBAC), with leader
election: a whole lifecycle (finalizer, status, annotation, Events, endpoint change, deletion) and no
request refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from controllers.machinery import CLUSTER_ROLE_BINDINGS, CLUSTER_ROLES, NAMESPACES, ROLE_BINDINGS, ROLES, Kind
from nodeenv.kubeapi.state import ApiConfig
from tests.integration.controllers.fiberlb.controller_harness import (
    SA_USER,
    Admin,
    RunningController,
    endpoint_slice,
    ingress,
    service,
    until,
)
from tests.integration.controllers.fiberlb.fake_fiberlb import FakeServer

MANIFEST = Path(__file__).parents[4] / "daemonsets" / "controllers" / "fiberlb.yaml"
RBAC: dict[str, Kind] = {"ClusterRole": CLUSTER_ROLES, "ClusterRoleBinding": CLUSTER_ROLE_BINDINGS,
                         "Role": ROLES, "RoleBinding": ROLE_BINDINGS}  # fmt: skip


@pytest.fixture
def kube_api_config() -> ApiConfig:
    return ApiConfig(bookmark_interval=1.0, enforce_rbac=True)


async def test_the_manifests_rbac_is_enough(kube_api: Any, fiberlb: FakeServer) -> None:
    admin = await Admin.connect(kube_api)
    try:
        if kube_api.get("namespaces", "", "kube-system") is None:
            await admin.client.create(NAMESPACES, {"metadata": {"name": "kube-system"}})
        for doc in yaml.safe_load_all(MANIFEST.read_text()):
            if doc["kind"] in RBAC:
                await admin.client.create(RBAC[doc["kind"]], doc)
        flags = ["--leader-elect=true", "--leader-elect-lease-namespace=kube-system", "--backend=fiberlb",
                 *fiberlb.flags, "--external-ip-pool=192.168.100.10/32",
                 "--debounce=0.05"]  # fmt: skip
        ctrl = await RunningController(kube_api, flags).start()
        try:
            await admin.create(endpoint_slice("web", ["10.244.1.2"]))
            await admin.create(service("web"))
            assert ingress(await until(lambda: admin.get("web"), lambda s: bool(ingress(s)), timeout=20))
            await admin.create(service("waiting"))  # pool of one: an Event and a condition
            assert await until(lambda: admin.events("waiting", "IPPoolExhausted"), bool)
            await admin.replace_slice(endpoint_slice("web", ["10.244.1.3"]))
            await admin.delete("web")
            assert await until(lambda: admin.gone("web"), bool)
            assert ingress(await until(lambda: admin.get("waiting"), lambda s: bool(ingress(s))))
        finally:
            assert await ctrl.stop() == 0
    finally:
        await admin.close()
    mine = kube_api.requests_by(SA_USER)
    denied = [(r.verb, r.resource, r.subresource) for r in mine if r.status == 403]
    assert denied == []
    used = {(r.verb, r.resource, r.subresource) for r in mine}
    assert {("patch", "services", ""), ("patch", "services", "status"), ("create", "events", "")} <= used
    assert kube_api.get("leases", "kube-system", "fiberlb-controller") is not None
