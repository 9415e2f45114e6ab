"""The double with `--data-dir` (nodeenv/kubeapi/durable.py) killed with SIGKILL, as by a power
loss, and started again on the same directory and port: read and written through the official
`kubernetes` client with the kubeconfig written before the kill."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

from nodeenv.daemons import free_port

CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {
        "group": "example.com",
        "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
        "versions": [{"name": "v1", "served": True, "storage": True,
                      "schema": {"openAPIV3Schema": {"type": "object",
                                                     "x-kubernetes-preserve-unknown-fields": True}}}],
    },
}  # fmt: skip


class Daemon:
    def __init__(self, tmp: Path) -> None:
        self.dir, self.data, self.port = tmp / "api", tmp / "data", free_port()
        self.port_file = tmp / "ports.json"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> dict[str, str]:
        self.port_file.unlink(missing_ok=True)
        argv = [sys.executable, "-m", "nodeenv.kubeapi", "--dir", str(self.dir), "--port", str(self.port),
                "--port-file", str(self.port_file)]  # fmt: skip
        env = {**os.environ, "KUBEAPI_DATA_DIR": str(self.data)}  # the env fallback
        self.proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while not self.port_file.exists():
            assert self.proc.poll() is None and time.monotonic() < deadline, "the double did not start"
            time.sleep(0.05)
        info: dict[str, str] = json.loads(self.port_file.read_text())
        return info

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[Daemon]:
    d = Daemon(tmp_path)
    yield d
    if d.proc is not None and d.proc.poll() is None:
        d.kill()


def _clients(kubeconfig: str) -> tuple[client.CoreV1Api, client.CustomObjectsApi, client.ApiClient]:
    api = config.new_client_from_config(config_file=kubeconfig)
    return client.CoreV1Api(api), client.CustomObjectsApi(api), api


def _node_port(name: str) -> dict[str, object]:
    return {"metadata": {"name": name}, "spec": {"type": "NodePort", "ports": [{"port": 80}]}}


def test_objects_versions_and_addresses_survive_a_sigkill(daemon: Daemon) -> None:
    kubeconfig = daemon.start()["kubeconfig"]
    core, custom, api = _clients(kubeconfig)
    client.ApiextensionsV1Api(api).create_custom_resource_definition(CRD)
    core.create_namespace({"metadata": {"name": "keep"}})
    cm = core.create_namespaced_config_map("keep", {"metadata": {"name": "conf"}, "data": {"k": "v"}})
    core.create_namespaced_secret("keep", {"metadata": {"name": "s"}, "stringData": {"password": "p"}})
    svc = core.create_namespaced_service("keep", _node_port("web"))
    custom.create_namespaced_custom_object("example.com", "v1", "keep", "widgets",
                                           {"apiVersion": "example.com/v1", "kind": "Widget",
                                            "metadata": {"name": "w1"}, "size": 3})  # fmt: skip
    core.delete_namespaced_secret("s", "keep")
    before = core.list_namespaced_config_map("keep").metadata.resource_version
    old_rv = cm.metadata.resource_version

    daemon.kill()
    t0 = time.monotonic()
    daemon.start()
    print(f"\nthe double answered again {time.monotonic() - t0:.2f} s after it was started on its data dir")
    core, custom, api = _clients(kubeconfig)  # the kubeconfig from before: same CA, same token

    got = core.read_namespaced_config_map("conf", "keep")
    assert (got.data, got.metadata.uid, got.metadata.resource_version) == (
        {"k": "v"}, cm.metadata.uid, cm.metadata.resource_version)  # fmt: skip
    with pytest.raises(ApiException) as gone:
        core.read_namespaced_secret("s", "keep")
    assert gone.value.status == 404, "a delete answered before the kill came back"
    kept = core.read_namespaced_service("web", "keep")
    assert kept.spec.cluster_ip == svc.spec.cluster_ip
    assert kept.spec.ports[0].node_port == svc.spec.ports[0].node_port
    widget = custom.get_namespaced_custom_object("example.com", "v1", "keep", "widgets", "w1")
    assert widget["size"] == 3, "the CRD's kind is not served again"
    assert {ns.metadata.name for ns in core.list_namespace().items} >= {"default", "kube-system", "keep"}

    other = core.create_namespaced_service("keep", _node_port("other"))
    assert other.spec.cluster_ip != svc.spec.cluster_ip, "a ClusterIP handed out twice"
    assert other.spec.ports[0].node_port != svc.spec.ports[0].node_port, "a nodePort handed out twice"
    assert int(other.metadata.resource_version) > int(before), "resourceVersions went back"

    with pytest.raises(ApiException) as expired:  # a reflector's watch from before the restart
        for _ in watch.Watch().stream(core.list_namespaced_config_map, "keep", resource_version=old_rv,
                                      timeout_seconds=2):  # fmt: skip
            pass
    assert expired.value.status == 410
    relist = core.list_namespaced_config_map("keep")  # what it does on 410 Gone: list, then watch from it
    w = watch.Watch()
    core.create_namespaced_config_map("keep", {"metadata": {"name": "after"}})
    since = relist.metadata.resource_version
    events = w.stream(core.list_namespaced_config_map, "keep", resource_version=since, timeout_seconds=2)
    seen = [(e["type"], e["object"].metadata.name) for e in events]
    assert ("ADDED", "after") in seen

    assert stat.S_IMODE(daemon.data.stat().st_mode) == 0o700
    assert {p.name: stat.S_IMODE(p.stat().st_mode) for p in daemon.data.iterdir()} == {
        "journal.jsonl": 0o600, "tokens.json": 0o600}  # fmt: skip
