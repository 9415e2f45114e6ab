"""The asyncio client of the official kubernetes_asyncio package, from the fixture's kubeconfig."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from kubernetes_asyncio import client, config

from tests.kubeapi_fixture import KubeApiHandle


@pytest.fixture
async def api(kube_api: KubeApiHandle) -> AsyncIterator[client.ApiClient]:
    cfg = client.Configuration()
    await config.load_kube_config(config_file=str(kube_api.kubeconfig), client_configuration=cfg)
    async with client.ApiClient(cfg) as c:
        yield c
