"""The official (synchronous) `kubernetes` client's ApiClient, loaded from the `kube_api` fixture's
admin kubeconfig: the fixture `api` for the modules that call the double as that client does (the
directory's conftest.py has the asyncio client's under the same name). Import it into the module:

    from tests.integration.kubeapi.official_client import api

    __all__ = ["api"]
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client, config

from tests.kubeapi_fixture import KubeApiHandle


@pytest.fixture
def api(kube_api: KubeApiHandle) -> Iterator[client.ApiClient]:
    cfg = client.Configuration()
    config.load_kube_config(config_file=str(kube_api.kubeconfig), client_configuration=cfg)
    with client.ApiClient(cfg) as c:
        yield c
