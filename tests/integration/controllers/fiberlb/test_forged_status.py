"""A tenant who can patch services/status (defence in depth: the tenant roles no longer grant it)
writes another tenant's or the platform's address into its Service's status, through the official
Kubernetes client, while fiberlb-controller runs and while it is down: the controller rewrites the
status to its own allocation and OVN never answers the forged VIP for the tenant's Service. A guessed
allow-shared-ip key in another namespace gets its own IP."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from controllers.fiberlb.ovn_backend import OvnBackend
from nodeenv.node import Node
from tests.integration.controllers.fiberlb.controller_harness import (
    Admin,
    RunningController,
    ingress,
    service,
    until,
)

pytestmark = [pytest.mark.root, pytest.mark.ovn]
POOL = "192.168.243.0/29"
PLATFORM_IP = "10.43.0.10"
"""An address of the platform, outside every pool."""
SHARE = {"fiberlb.plasmacloud.io/allow-shared-ip": "team-a"}


@pytest.fixture
def core(kube_api: Any) -> Iterator[client.CoreV1Api]:
    cfg = client.Configuration()
    config.load_kube_config(config_file=str(kube_api.kubeconfig), client_configuration=cfg)
    with client.ApiClient(cfg) as c:
        api = client.CoreV1Api(c)
        try:
            api.create_namespace({"metadata": {"name": "tenant-b"}})
        except ApiException as e:
            assert e.status == 409
        yield api


def forge(core: client.CoreV1Api, ip: str) -> None:
    body = {"status": {"loadBalancer": {"ingress": [{"ip": ip}]}}}
    core.patch_namespaced_service_status("forger", "tenant-b", body)


def vips(nb: OvnBackend, key: str) -> set[str]:
    return {v.rsplit(":", 1)[0] for row in nb.rows(key).values() for v in row["vips"]}


async def test_a_forged_status_is_rewritten_and_never_programmed(
    kube_api: Any, admin: Admin, ovn_node: Node, nb: OvnBackend, core: client.CoreV1Api
) -> None:
    flags = ["--leader-elect=false", "--ovn-nb-db", ovn_node.endpoints["OVN_NB_DB"],
             "--external-ip-pool", POOL, "--debounce", "0.05"]  # fmt: skip
    ctrl = await RunningController(kube_api, flags).start()
    try:
        await admin.create(service("victim", annotations=SHARE))
        tls = [{"name": "https", "port": 443, "targetPort": 8443, "protocol": "TCP"}]
        await admin.create(service("forger", "tenant-b", annotations=SHARE, ports=tls))
        victim = ingress(await until(lambda: admin.get("victim"), lambda s: bool(ingress(s))))[0]
        own = ingress(await until(lambda: admin.get("forger", "tenant-b"), lambda s: bool(ingress(s))))[0]
        assert own != victim  # the same key, disjoint ports, another namespace: not shared
        for forged in (victim, PLATFORM_IP):
            await asyncio.to_thread(forge, core, forged)
            got = await until(lambda: admin.get("forger", "tenant-b"), lambda s: ingress(s) == [own])
            assert ingress(got) == [own]
            assert forged not in vips(nb, "tenant-b/forger") and own in vips(nb, "tenant-b/forger")
    finally:
        await ctrl.stop()
    # forged while no controller runs (a restart or a leader change): the new term reads OVN, not status
    await asyncio.to_thread(forge, core, victim)
    await admin.delete("victim")  # its finalizer keeps it (and its IP) until the controller cleans up
    ctrl = await RunningController(kube_api, flags).start()
    try:
        got = await until(lambda: admin.get("forger", "tenant-b"), lambda s: ingress(s) == [own])
        assert ingress(got) == [own]
        assert await until(lambda: admin.gone("victim"), bool)
        await asyncio.sleep(0.3)
        assert vips(nb, "tenant-b/forger") & {victim, PLATFORM_IP} == set()
    finally:
        await ctrl.stop()
