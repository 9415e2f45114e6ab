"""The `kube_api` fixture: a fresh Kubernetes API double per test (nodeenv/kubeapi), HTTPS on loopback,
on its own event loop in a background thread, so both sync tests (kubectl) and async tests
(kubernetes_asyncio on the test's loop) can use it.

    def test_x(kube_api):
        kube_api.url                      # https://127.0.0.1:PORT
        kube_api.kubeconfig               # admin kubeconfig (kubectl --kubeconfig, load_kube_config)
        kube_api.kubeconfig_for("system:serviceaccount:kube-system:fiberlb-controller")
        kube_api.requests                 # RequestRecord(user, verb, group, version, resource,
                                          #   subresource, namespace, name, status, path, query)
        kube_api.not_allowed_by(user, rules)  # that user's requests the RBAC rules would refuse
        kube_api.compact()                # older resourceVersions now get 410 Expired
        kube_api.drop_watches()           # server closes every open watch stream
        kube_api.set_fault(verb="update", resource="services", code=409, times=1)
        kube_api.set_fault(verb="list", resource="pods", code=0, delay=2.0)   # slow, not failing
        kube_api.clear_faults()
        kube_api.get("services", "default", "kubernetes")   # a stored object (dict) or None
        kube_api.objects("services", namespace=None)         # stored objects, sorted
        kube_api.resource_version                             # the current resourceVersion (int)

Override the `kube_api_config` fixture to change settings (e.g. `ApiConfig(enforce_rbac=True)`).
Bookmarks come every second here (the daemon's default is a minute).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nodeenv.kubeapi.auth import RequestRecord
from nodeenv.kubeapi.kinds import Kind
from nodeenv.kubeapi.rbac import not_covered
from nodeenv.kubeapi.selectors import Selector
from nodeenv.kubeapi.server import ThreadedKubeApi
from nodeenv.kubeapi.state import ApiConfig, Fault


class KubeApiHandle:
    def __init__(self, threaded: ThreadedKubeApi) -> None:
        self._t = threaded
        self.server = threaded.server
        self.state = threaded.server.state

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def kubeconfig(self) -> Path:
        return self.server.kubeconfig

    @property
    def ca(self) -> Path:
        assert self.server.pki is not None
        return self.server.pki.ca

    def kubeconfig_for(self, username: str) -> Path:
        return self.server.kubeconfig_for(username)

    @property
    def requests(self) -> list[RequestRecord]:
        return list(self.state.recorder.requests)

    def requests_by(self, user: str) -> list[RequestRecord]:
        return [r for r in self.requests if r.user == user]

    def not_allowed_by(self, user: str, rules: list[dict[str, Any]]) -> list[RequestRecord]:
        """`user`'s recorded requests that the given RBAC rules (e.g. from a manifest) would refuse."""
        return not_covered(rules, self.requests_by(user))

    def compact(self) -> int:
        return self._t.call(self.state.store.compact)

    def drop_watches(self) -> int:
        return self._t.call(self.state.store.drop_watches)

    def set_fault(self, **kw: Any) -> Fault:
        fault = Fault(**kw)
        with self.state.fault_lock:
            self.state.faults.append(fault)
        return fault

    def clear_faults(self) -> None:
        with self.state.fault_lock:
            self.state.faults.clear()

    def _kind(self, resource: str) -> Kind:
        for k in self.state.registry.kinds:
            if resource in (k.plural, f"{k.plural}.{k.group}"):
                return self.state.views.storage(k)  # events.k8s.io Events are stored as core/v1 Events
        raise KeyError(resource)

    def get(self, resource: str, namespace: str, name: str) -> dict[str, Any] | None:
        kind = self._kind(resource)
        return self._t.call(lambda: self.state.store.get(kind, namespace if kind.namespaced else "", name))

    def objects(self, resource: str, namespace: str | None = None) -> list[dict[str, Any]]:
        kind = self._kind(resource)
        return self._t.call(lambda: self.state.store.list(kind, namespace, Selector()))

    @property
    def resource_version(self) -> int:
        return self._t.call(lambda: self.state.store.rv)


@pytest.fixture
def kube_api_config() -> ApiConfig:
    return ApiConfig(bookmark_interval=1.0)


@pytest.fixture
def kube_api(tmp_path_factory: pytest.TempPathFactory, kube_api_config: ApiConfig) -> Iterator[KubeApiHandle]:
    threaded = ThreadedKubeApi(tmp_path_factory.mktemp("kubeapi"), kube_api_config)
    threaded.start()
    try:
        yield KubeApiHandle(threaded)
    finally:
        threaded.stop()
